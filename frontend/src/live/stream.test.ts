import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FakeEventSource, fakeFactory, slot } from "../test/fakes";
import { serverOffset } from "./clock";
import { getHealth } from "./health";
import { getLiveState } from "./store";
import { STREAM_SOURCE, backoffDelay, droppedFrames, getStreamStatus, startStream } from "./stream";

const HB = 1000;
let stop: (() => void) | undefined;

beforeEach(() => {
  vi.useFakeTimers();
  FakeEventSource.opened = [];
});

afterEach(() => {
  stop?.();
  stop = undefined;
});

function start(random = () => 0.5): FakeEventSource {
  stop = startStream({ heartbeatMs: HB, baseBackoffMs: 100, maxBackoffMs: 1600, random, create: fakeFactory });
  return FakeEventSource.last();
}

describe("stream", () => {
  it("feeds the store: snapshot, then changes; goes live on open", () => {
    const es = start();
    expect(es.url).toBe("/api/stream");
    expect(getStreamStatus()).toBe("connecting");
    es.open();
    expect(getStreamStatus()).toBe("live");
    es.emit("snapshot", { position: 3, server_time: new Date().toISOString(), slots: [slot()] }, "3");
    es.emit("change", { position: 4, slot: slot({ revision: 2, lifecycle: "vacant" }) }, "4");
    expect(getLiveState().position).toBe(4);
    expect(getLiveState().slots.get("s1")?.lifecycle).toBe("vacant");
  });

  it("follows a pull request's change and counts the server's deliveries frames (no id, position unchanged)", () => {
    const es = start();
    es.open();
    es.emit("snapshot", { position: 3, server_time: "", slots: [] }, "3");
    const pr = { stream: "pr-DEMO-web-1", repo: { project: "DEMO", slug: "web" }, id: 1, branch: "f", head: "a".repeat(40), state: "OPEN", waiting_since: "2026-12-07T10:00:00Z", waiting_position: 4, opened_at: "2026-12-07T10:00:00Z", updated_at: "2026-12-07T10:00:00Z", position: 4 };
    es.emit("change", { position: 4, pull_request: pr }, "4");
    expect(getLiveState().prs.get("pr-DEMO-web-1")?.waiting_position).toBe(4);
    es.emit("deliveries", { received: 7 });
    es.emit("deliveries", { received: 8 });
    expect(getLiveState().deliveries).toBe(2);
    expect(getLiveState().position).toBe(4);
    es.emitRaw("deliveries", "{\"received\":\"x\"}");
    expect(getLiveState().deliveries).toBe(2);
  });

  it("drops, counts and logs a malformed frame instead of casting it into the store (issue 26)", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const es = start();
    es.open();
    es.emit("snapshot", { position: 3, server_time: "", slots: [slot()] }, "3");
    const before = droppedFrames();
    // A slot view whose lifecycle is not a string, a change without a position, and no JSON at all.
    es.emit("change", { position: 4, slot: { ...slot({ revision: 2 }), lifecycle: 7 } }, "4");
    es.emit("change", { slot: slot({ revision: 3, lifecycle: "vacant" }) });
    es.emitRaw("heartbeat", "{not json");
    expect(droppedFrames() - before).toBe(3);
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^stream: dropped a malformed change frame: malformed change frame at slot\.lifecycle: /));
    expect(getLiveState().position).toBe(3);
    expect(getLiveState().slots.get("s1")?.lifecycle).toBe("occupied");
    // The stream goes on: the next good frame is applied.
    es.emit("change", { position: 5, slot: slot({ revision: 4, lifecycle: "vacant" }) }, "5");
    expect(getLiveState().position).toBe(5);
    expect(getLiveState().slots.get("s1")?.lifecycle).toBe("vacant");
    expect(getStreamStatus()).toBe("live");
    warn.mockRestore();
  });

  it("reopens with backoff and last_event_id when the browser gives up (CLOSED)", () => {
    const es = start();
    es.open();
    es.emit("snapshot", { position: 7, server_time: "", slots: [] }, "7");
    es.fail(true);
    expect(getStreamStatus()).toBe("reconnecting");
    expect(getHealth().failing.get(STREAM_SOURCE)).toBe("disconnected");
    expect(es.closed).toBe(true);
    expect(FakeEventSource.opened).toHaveLength(1);
    vi.advanceTimersByTime(backoffDelay(0, 100, 1600, () => 0.5));
    expect(FakeEventSource.opened).toHaveLength(2);
    const again = FakeEventSource.last();
    expect(again.url).toBe("/api/stream?last_event_id=7");
    // A second refusal waits longer (exponential).
    again.fail(true);
    vi.advanceTimersByTime(backoffDelay(0, 100, 1600, () => 0.5));
    expect(FakeEventSource.opened).toHaveLength(2);
    vi.advanceTimersByTime(backoffDelay(1, 100, 1600, () => 0.5));
    expect(FakeEventSource.opened).toHaveLength(3);
    FakeEventSource.last().open();
    expect(getStreamStatus()).toBe("live");
    expect(getHealth().failing.size).toBe(0);
  });

  it("lets the browser retry by itself while CONNECTING, and reports it", () => {
    const es = start();
    es.open();
    es.fail(false);
    expect(getStreamStatus()).toBe("reconnecting");
    expect(es.closed).toBe(false);
    expect(FakeEventSource.opened).toHaveLength(1);
    es.open();
    expect(getStreamStatus()).toBe("live");
  });

  it("marks the stream stale after two missed heartbeats, then reopens from the last position", () => {
    const es = start();
    es.open();
    es.emit("snapshot", { position: 12, server_time: "", slots: [] }, "12");
    vi.advanceTimersByTime(HB);
    es.emit("heartbeat", { server_time: new Date().toISOString(), position: 12 });
    vi.advanceTimersByTime(2 * HB);
    expect(getStreamStatus()).toBe("live");
    vi.advanceTimersByTime(HB);
    expect(getStreamStatus()).toBe("stale");
    expect(getHealth().failing.get(STREAM_SOURCE)).toBe("stale");
    expect(es.closed).toBe(true);
    vi.advanceTimersByTime(1600);
    const again = FakeEventSource.last();
    expect(again).not.toBe(es);
    expect(again.url).toBe("/api/stream?last_event_id=12");
    again.open();
    expect(getStreamStatus()).toBe("live");
    expect(getHealth().failing.size).toBe(0);
  });

  it("refuses a snapshot older than its position and reconnects from its own position, backing off", () => {
    const es = start();
    es.open();
    es.emit("snapshot", { position: 20, server_time: "", slots: [slot({ revision: 5, lifecycle: "vacant" })] }, "20");
    // The browser's own reconnect lands on a process whose projection is at 10.
    es.fail(false);
    es.open();
    es.emit("snapshot", { position: 10, server_time: "", slots: [slot({ revision: 2 })] }, "10");
    expect(getLiveState().position).toBe(20);
    expect(getLiveState().slots.get("s1")?.lifecycle).toBe("vacant");
    expect(es.closed).toBe(true);
    expect(getStreamStatus()).toBe("reconnecting");
    expect(getHealth().failing.get(STREAM_SOURCE)).toBe("disconnected");
    vi.advanceTimersByTime(backoffDelay(0, 100, 1600, () => 0.5));
    const again = FakeEventSource.last();
    expect(again).not.toBe(es);
    // Not from the refused snapshot's id (which EventSource would send).
    expect(again.url).toBe("/api/stream?last_event_id=20");
    // Still behind: an open connection is not progress, the wait grows.
    again.open();
    again.emit("snapshot", { position: 11, server_time: "", slots: [] }, "11");
    expect(again.closed).toBe(true);
    vi.advanceTimersByTime(backoffDelay(0, 100, 1600, () => 0.5));
    expect(FakeEventSource.last()).toBe(again);
    vi.advanceTimersByTime(backoffDelay(1, 100, 1600, () => 0.5));
    const third = FakeEventSource.last();
    expect(third).not.toBe(again);
    expect(third.url).toBe("/api/stream?last_event_id=20");
    third.open();
    third.emit("change", { position: 21, slot: slot({ revision: 6, lifecycle: "resetting" }) }, "21");
    expect(getStreamStatus()).toBe("live");
    expect(getLiveState().slots.get("s1")?.lifecycle).toBe("resetting");
    expect(getHealth().failing.size).toBe(0);
  });

  it("ignores frames from a connection it replaced", () => {
    const es = start();
    es.open();
    es.emit("snapshot", { position: 1, server_time: "", slots: [] }, "1");
    es.fail(true);
    vi.advanceTimersByTime(1600);
    es.emit("change", { position: 2, slot: slot() }, "2");
    expect(getLiveState().slots.size).toBe(0);
  });

  it("adopts the heartbeat interval the server announces", () => {
    const es = start();
    es.open();
    es.emit("heartbeat", { server_time: new Date().toISOString(), position: 0, interval_ms: 5 * HB });
    vi.advanceTimersByTime(9 * HB);
    expect(getStreamStatus()).toBe("live");
    vi.advanceTimersByTime(2 * HB);
    expect(getStreamStatus()).toBe("stale");
  });

  it("learns the server clock from heartbeats", () => {
    const es = start();
    es.open();
    es.emit("heartbeat", { server_time: new Date(Date.now() - 30_000).toISOString(), position: 0 });
    expect(serverOffset()).toBe(-30_000);
  });

  it("allows one stream per tab", () => {
    start();
    expect(() => startStream({ heartbeatMs: HB, create: fakeFactory })).toThrow(/already/);
  });

  it("jitters reconnects between half and all of the exponential ceiling", () => {
    expect(backoffDelay(0, 1000, 30_000, () => 0)).toBe(500);
    expect(backoffDelay(0, 1000, 30_000, () => 1)).toBe(1000);
    expect(backoffDelay(3, 1000, 30_000, () => 0)).toBe(4000);
    expect(backoffDelay(10, 1000, 30_000, () => 1)).toBe(30_000);
  });
});
