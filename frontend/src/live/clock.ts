// The server clock. Every countdown is computed from server time, not the
// browser's: the offset is learned from snapshot and heartbeat frames.
import { observable } from "./observable";

const offset = observable(0);

/** Records the server's time as of now; returns the new offset in ms. */
export function learnServerTime(serverTimeIso: string, localNow: number = Date.now()): number {
  const server = Date.parse(serverTimeIso);
  if (Number.isNaN(server)) return offset.get();
  offset.set(server - localNow);
  return offset.get();
}

/** The current server time in ms since the epoch. */
export function serverNow(): number {
  return Date.now() + offset.get();
}

/** The offset (server minus browser) in ms. */
export function serverOffset(): number {
  return offset.get();
}

/** subscribeClock is told when the offset changes (the ticker re-renders at once). */
export function subscribeClock(listener: () => void): () => void {
  return offset.subscribe(listener);
}

/** resetClock is for tests. */
export function resetClock(): void {
  offset.set(0);
}
