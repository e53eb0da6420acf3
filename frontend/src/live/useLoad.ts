// useLoad runs one REST load for a page and reports it to the connection
// health registry under its own source id, so the banner stays up until this
// very load succeeds again (or the page closes). A definitive answer
// (4xx: "not found", "invalid") is data, not a connection failure.
import { useCallback, useEffect, useState } from "react";
import { ApiError } from "../services/http";
import { forgetSource, reportFailure, reportRecovery } from "./health";

export interface Load<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  reload: () => void;
}

function isConnectionFailure(e: ApiError): boolean {
  return e.status === 0 || e.status >= 500;
}

/**
 * useLoad calls fn whenever key changes (or reload is called), aborting the
 * previous call. source is the health id; pass a key that includes every
 * input of fn.
 */
export function useLoad<T>(source: string, key: string, fn: (signal: AbortSignal) => Promise<T>): Load<T> {
  const [nonce, setNonce] = useState(0);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  const want = `${source}\u0000${key}\u0000${nonce}`;
  // The last answer and the request it answered; loading is "the newest
  // request has not answered yet". The previous data stays on screen meanwhile.
  const [result, setResult] = useState<{ for: string; data?: T; error?: ApiError }>({ for: "" });

  useEffect(() => {
    const ctl = new AbortController();
    fn(ctl.signal).then(
      (v) => {
        if (ctl.signal.aborted) return;
        setResult({ for: want, data: v });
        reportRecovery(source);
      },
      (e: unknown) => {
        if (ctl.signal.aborted) return;
        const err = e instanceof ApiError ? e : new ApiError(0, "network", String(e));
        setResult((prev) => ({ for: want, data: prev.data, error: err }));
        if (isConnectionFailure(err)) reportFailure(source, "request_failed");
        else reportRecovery(source);
      },
    );
    return () => ctl.abort();
    // fn is recreated every render; want names all of its inputs.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [want]);

  useEffect(() => () => forgetSource(source), [source]);

  return { data: result.data, error: result.error, loading: result.for !== want, reload };
}
