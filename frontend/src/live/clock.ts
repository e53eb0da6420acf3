// The server clock. Every countdown and relative time is computed from
// server time, not the browser's: the offset is learned from snapshot and
// heartbeat frames, and raised by the times of events the page has seen.
//
// Why relative times went backwards (issue 35 item 8): each heartbeat set
// the offset to server_time minus the browser's time at arrival, and that
// sample is short by the frame's latency, which varies from frame to frame.
// A later, slower heartbeat pulled the clock back by the difference, so the
// rounded second went back ("12 s ago", "11 s ago") and a countdown went up.
// A sample can only be short, never long (the server stamps the frame before
// sending it), so the best estimate is the largest one: the offset rises
// with every better sample and falls only when it falls by more than any
// latency can explain (a clock really changed).
import { observable } from "./observable";

/**
 * CLOCK_STEP_MS: a learned offset this much below the one held is a clock
 * that changed (the server's or this browser's was set), not latency; it
 * is taken, and the ticker takes the step back with it.
 */
export const CLOCK_STEP_MS = 5_000;

const offset = observable(0);
let learned = false;

function set(next: number): number {
  learned = true;
  offset.set(next);
  return offset.get();
}

/** Records the server's time as of now; returns the offset in ms. */
export function learnServerTime(serverTimeIso: string, localNow: number = Date.now()): number {
  const server = Date.parse(serverTimeIso);
  if (Number.isNaN(server)) return offset.get();
  const sample = server - localNow;
  const held = offset.get();
  if (!learned || sample > held || held - sample > CLOCK_STEP_MS) return set(sample);
  return held;
}

/**
 * noteServerInstant records that the server's clock has reached at least
 * iso (an event the page holds happened then): the server time is never
 * shown before an event the page already shows, so a step that just started
 * never reads "in 1 s" or a negative running time. It only ever raises the
 * offset; an old event says nothing new.
 */
export function noteServerInstant(iso: string | undefined, localNow: number = Date.now()): void {
  if (!iso) return;
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return;
  const sample = at - localNow;
  // The first snapshot or heartbeat still sets the offset outright (an
  // event seen before it is a lower bound, not the clock).
  if (sample > offset.get()) offset.set(sample);
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
  learned = false;
  offset.set(0);
}
