// useCommand runs one user command (a POST) and keeps its pending state and
// error for the button that started it. A failed command shows its reason
// (409 names the blocking job) instead of being swallowed.
import { useCallback, useRef, useState } from "react";
import { ApiError } from "../services/http";

export interface Command {
  pending: boolean;
  error: ApiError | undefined;
  run: <T>(fn: () => Promise<T>) => Promise<T | undefined>;
}

export function useCommand(): Command {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const busy = useRef(false);
  const run = useCallback(async <T,>(fn: () => Promise<T>): Promise<T | undefined> => {
    if (busy.current) return undefined;
    busy.current = true;
    setPending(true);
    setError(undefined);
    try {
      return await fn();
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "network", String(e)));
      return undefined;
    } finally {
      busy.current = false;
      setPending(false);
    }
  }, []);
  return { pending, error, run };
}
