// The one SSE connection of a tab (GET /api/stream). It feeds the live
// store, learns the server clock from heartbeats, and reports its health.
//
// Failure handling (DESIGN.md "Browsers"):
//   - error with readyState CONNECTING: the browser retries by itself (it
//     sends Last-Event-ID); we only report the stream as disconnected.
//   - error with readyState CLOSED (a non-200 answer): the browser gave up
//     for good; we reopen with exponential backoff and jitter, passing the
//     last applied position as ?last_event_id=.
//   - a snapshot older than the applied position (a server process whose
//     projection is behind; DESIGN.md invariant 8): not applied; we close
//     and reopen with backoff from our own position.
//   - a malformed frame (not JSON, or not of the frame's type): dropped,
//     counted (droppedFrames) and logged, never cast into the store; the
//     stream stays open.
//   - silence: a half-open connection never fires error. The watchdog (run
//     by the global ticker, no timer of its own) marks the stream stale
//     after two missed heartbeats and reopens it.
import { frames } from "../services/stream";
import type { Decode } from "../services/wire";
import { learnServerTime } from "./clock";
import { reportFailure, reportRecovery } from "./health";
import { observable } from "./observable";
import { applyChange, applySnapshot, getLiveState, noteDeliveries } from "./store";
import { onTick } from "./ticker";
import { useSyncExternalStore } from "react";

/** The health source id of the SSE stream. */
export const STREAM_SOURCE = "stream";

export type StreamStatus = "stopped" | "connecting" | "live" | "reconnecting" | "stale";

/** The part of EventSource the stream uses (tests pass a fake). */
export interface EventSourceLike {
  readonly readyState: number;
  onopen: ((ev: Event) => unknown) | null;
  onerror: ((ev: Event) => unknown) | null;
  addEventListener(type: string, listener: (ev: MessageEvent<string>) => void): void;
  close(): void;
}

export type EventSourceFactory = (url: string) => EventSourceLike;

export interface StreamOptions {
  url?: string;
  heartbeatMs: number;
  /** First reconnect delay; doubles per failed attempt up to maxBackoffMs. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  random?: () => number;
  create?: EventSourceFactory;
  /**
   * onRefused is called when the browser gives up on a connection (a
   * non-200 answer, e.g. 401 after the session expired), before the
   * backoff reopen: the session module checks whether the tab is still
   * signed in and, if not, stops the stream.
   */
  onRefused?: () => void;
}

const CLOSED = 2;

const status = observable<StreamStatus>("stopped");

export function getStreamStatus(): StreamStatus {
  return status.get();
}

export function useStreamStatus(): StreamStatus {
  return useSyncExternalStore(status.subscribe, status.get, status.get);
}

let dropped = 0;

/** droppedFrames is how many malformed frames this tab dropped (the console says which). */
export function droppedFrames(): number {
  return dropped;
}

/** readFrame parses and checks one frame; undefined (counted, logged) when it is malformed. */
function readFrame<T>(type: string, data: string, decode: Decode<T>): T | undefined {
  try {
    return decode(JSON.parse(data));
  } catch (e) {
    dropped++;
    console.warn(`stream: dropped a malformed ${type} frame: ${e instanceof Error ? e.message : String(e)}`);
    return undefined;
  }
}

/** backoffDelay is the wait before reopen number attempt (0-based): "equal jitter". */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** attempt);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}

/**
 * startStream opens the tab's stream and keeps it open until the returned
 * function is called. Calling it twice without stopping is a programming
 * error: there is one stream per tab.
 */
export function startStream(opts: StreamOptions): () => void {
  if (status.get() !== "stopped") throw new Error("stream already started");
  const url = opts.url ?? "/api/stream";
  const base = opts.baseBackoffMs ?? 1000;
  const max = opts.maxBackoffMs ?? 30_000;
  const random = opts.random ?? Math.random;
  const create: EventSourceFactory = opts.create ?? ((u) => new EventSource(u));

  let es: EventSourceLike | undefined;
  let lastAlive = Date.now();
  let attempt = 0;
  let reopenTimer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  // The watchdog's interval: configured, or announced by the server's own
  // heartbeats when they carry interval_ms (so a server started with a
  // longer --heartbeat is not declared stale between two beats).
  let heartbeatMs = opts.heartbeatMs;

  // progress: a frame was taken, so the backoff starts over. An open
  // connection alone is not progress: a server that answers 200 with a
  // snapshot older than ours (which we refuse) must not reset the backoff.
  const alive = (progress = true): void => {
    lastAlive = Date.now();
    if (progress) attempt = 0;
    if (status.get() !== "live") {
      status.set("live");
      reportRecovery(STREAM_SOURCE);
    }
  };

  const fail = (s: StreamStatus): void => {
    status.set(s);
    reportFailure(STREAM_SOURCE, s === "stale" ? "stale" : "disconnected");
  };

  const scheduleReopen = (): void => {
    es?.close();
    es = undefined;
    if (stopped || reopenTimer !== undefined) return;
    const delay = backoffDelay(attempt, base, max, random);
    attempt++;
    reopenTimer = setTimeout(() => {
      reopenTimer = undefined;
      open();
    }, delay);
  };

  const open = (): void => {
    if (stopped) return;
    const pos = getLiveState().position;
    const src = create(pos > 0 ? `${url}?last_event_id=${pos}` : url);
    es = src;
    lastAlive = Date.now();
    if (status.get() === "stopped") status.set("connecting");
    src.onopen = () => {
      if (es === src) alive(false);
    };
    src.onerror = () => {
      if (es !== src) return;
      if (src.readyState === CLOSED) {
        fail("reconnecting");
        scheduleReopen();
        opts.onRefused?.();
      } else if (status.get() !== "stale") {
        fail("reconnecting");
      }
    };
    src.addEventListener("snapshot", (ev) => {
      if (es !== src) return;
      const snap = readFrame("snapshot", ev.data, frames.snapshot);
      if (snap === undefined) return;
      if (!applySnapshot(snap)) {
        // Older than what the tab shows (a server process behind the one
        // we followed). Keep the board, and reconnect from our own position:
        // the browser's own retry would send the refused snapshot's id.
        fail("reconnecting");
        scheduleReopen();
        return;
      }
      alive();
      if (typeof performance !== "undefined") performance.mark("sk:snapshot");
    });
    src.addEventListener("change", (ev) => {
      if (es !== src) return;
      const change = readFrame("change", ev.data, frames.change);
      if (change === undefined) return;
      alive();
      applyChange(change);
    });
    src.addEventListener("deliveries", (ev) => {
      if (es !== src) return;
      const d = readFrame("deliveries", ev.data, frames.deliveries);
      if (d === undefined) return;
      alive();
      noteDeliveries();
    });
    src.addEventListener("heartbeat", (ev) => {
      if (es !== src) return;
      const hb = readFrame("heartbeat", ev.data, frames.heartbeat);
      if (hb === undefined) return;
      alive();
      if (hb.server_time) learnServerTime(hb.server_time);
      if (typeof hb.interval_ms === "number" && hb.interval_ms > 0) heartbeatMs = hb.interval_ms;
    });
  };

  const stopWatchdog = onTick((now) => {
    if (stopped || es === undefined) return;
    if (now - lastAlive > 2 * heartbeatMs) {
      fail("stale");
      scheduleReopen();
    }
  });

  open();

  return () => {
    stopped = true;
    stopWatchdog();
    if (reopenTimer !== undefined) clearTimeout(reopenTimer);
    es?.close();
    es = undefined;
    status.set("stopped");
    reportRecovery(STREAM_SOURCE);
  };
}
