// The one global ticker of the app (seed row 8: one interval per countdown
// leaked ~2,880 timers an hour). A single setInterval, started on first use
// and never duplicated, publishes the server-adjusted time rounded to the
// second; every countdown and the stream watchdog read it.
import { useSyncExternalStore } from "react";
import { CLOCK_STEP_MS, serverNow, subscribeClock } from "./clock";

/** The tick period. Countdowns show whole seconds. */
export const TICK_MS = 1000;

let intervalId: ReturnType<typeof setInterval> | undefined;
let now = roundDown(serverNow());
const listeners = new Set<() => void>();
const hooks = new Set<(now: number) => void>();

function roundDown(ms: number): number {
  return Math.floor(ms / TICK_MS) * TICK_MS;
}

/**
 * tick publishes the time; exported so tests and the clock can force one.
 * The published time never goes back by less than a clock step: a browser
 * clock slewed back by a few hundred ms, or a rounding edge, would turn "12 s
 * ago" into "11 s ago" and a countdown up by a second (issue 35 item 8). A
 * real step (the clock was set) is taken.
 */
export function tick(): void {
  const next = roundDown(serverNow());
  for (const h of [...hooks]) h(Date.now());
  if (next === now || (next < now && now - next <= CLOCK_STEP_MS)) return;
  now = next;
  for (const l of [...listeners]) l();
}

/** ensureTicker starts the one interval if it is not running. */
export function ensureTicker(): void {
  if (intervalId !== undefined) return;
  now = roundDown(serverNow());
  intervalId = setInterval(tick, TICK_MS);
}

// A new server clock offset shows at once, not at the next tick.
subscribeClock(() => {
  if (intervalId !== undefined) tick();
});

/** onTick registers a non-React hook (the watchdog) run on every tick. */
export function onTick(hook: (localNow: number) => void): () => void {
  hooks.add(hook);
  ensureTicker();
  return () => {
    hooks.delete(hook);
  };
}

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  ensureTicker();
  return () => {
    listeners.delete(listener);
  };
}

const getNow = (): number => now;

/** useNow is the server time (ms), updated once a second by the one ticker. */
export function useNow(): number {
  return useSyncExternalStore(subscribe, getNow, getNow);
}

/** stopTicker is for tests: clears the interval and every subscriber. */
export function stopTicker(): void {
  if (intervalId !== undefined) clearInterval(intervalId);
  intervalId = undefined;
  listeners.clear();
  hooks.clear();
  now = roundDown(serverNow());
}

const getMinute = (): number => Math.floor(now / 60_000) * 60_000;

/**
 * useMinute is the server time rounded down to the minute: for views that
 * change with the minute (the board's "deadline within the hour") and
 * should not re-render every second.
 */
export function useMinute(): number {
  return useSyncExternalStore(subscribe, getMinute, getMinute);
}

/**
 * useTicking is a value derived from the server time, re-rendering its
 * component only when the value changes: a relative time ("12 s ago",
 * "3 min ago") is derived from the exact time and changes when its words
 * do, so a list of old rows does not re-render every second. (It used to
 * re-render old rows with the time rounded down to the minute, which read
 * "40 s ago" for an event 70 s old and went back from "59 s ago" to "40 s
 * ago": issue 35 item 8.) derive must return a primitive.
 */
export function useTicking<T extends string | number | boolean>(derive: (now: number) => T): T {
  const get = (): T => derive(now);
  return useSyncExternalStore(subscribe, get, get);
}
