// The one global ticker of the app (seed row 8: one interval per countdown
// leaked ~2,880 timers an hour). A single setInterval, started on first use
// and never duplicated, publishes the server-adjusted time rounded to the
// second; every countdown and the stream watchdog read it.
import { useSyncExternalStore } from "react";
import { serverNow, subscribeClock } from "./clock";

/** The tick period. Countdowns show whole seconds. */
export const TICK_MS = 1000;

let intervalId: ReturnType<typeof setInterval> | undefined;
let now = roundDown(serverNow());
const listeners = new Set<() => void>();
const hooks = new Set<(now: number) => void>();

function roundDown(ms: number): number {
  return Math.floor(ms / TICK_MS) * TICK_MS;
}

/** tick publishes the time; exported so tests and the clock can force one. */
export function tick(): void {
  const next = roundDown(serverNow());
  for (const h of [...hooks]) h(Date.now());
  if (next === now) return;
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
 * useNowFor is the server time as finely as a relative time to at needs
 * ("12 s ago" changes each second, "3 min ago" each minute): to the
 * second within a minute of at, else to the minute, so a list of old rows
 * does not re-render every second.
 */
export function useNowFor(at: number): number {
  const get = (): number => (Math.abs(now - at) < 60_000 ? now : getMinute());
  return useSyncExternalStore(subscribe, get, get);
}
