// Connection health: one entry per live source (the SSE stream, and each
// load a mounted page depends on). The banner shows while ANY source is
// failing and clears only when every failing source has recovered itself —
// one source's success never clears another's failure (seed row 7).
import { useSyncExternalStore } from "react";
import { observable } from "./observable";

/** Why a source is failing; the banner names it. */
export type FailureReason = "stale" | "disconnected" | "request_failed";

export interface Health {
  /** Failing sources by id, in the order they started failing. */
  failing: ReadonlyMap<string, FailureReason>;
}

const health = observable<Health>({ failing: new Map() });

/** Marks source as failing (idempotent). */
export function reportFailure(source: string, reason: FailureReason): void {
  health.update((prev) => {
    if (prev.failing.get(source) === reason) return prev;
    return { failing: new Map(prev.failing).set(source, reason) };
  });
}

/** Marks source as healthy. Only the source itself can clear its failure. */
export function reportRecovery(source: string): void {
  health.update((prev) => {
    if (!prev.failing.has(source)) return prev;
    const failing = new Map(prev.failing);
    failing.delete(source);
    return { failing };
  });
}

/**
 * Forgets a source that no longer exists (a page that was closed). Its data
 * is no longer on screen, so its failure no longer needs a warning.
 */
export const forgetSource = reportRecovery;

export function getHealth(): Health {
  return health.get();
}

export function subscribeHealth(listener: () => void): () => void {
  return health.subscribe(listener);
}

/** resetHealth is for tests. */
export function resetHealth(): void {
  health.set({ failing: new Map() });
}

export function useHealth(): Health {
  return useSyncExternalStore(health.subscribe, health.get, health.get);
}
