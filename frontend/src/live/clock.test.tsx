// Issue 35 item 8: relative times went backwards. Each test drives the
// browser clock with Vitest's fake timers and reads what the page says
// every second.
import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Countdown } from "../components/Countdown";
import { When } from "../components/When";
import { setLang } from "../i18n";
import { applyChange, applySnapshot } from "./store";
import { CLOCK_STEP_MS, learnServerTime, noteServerInstant, serverNow, serverOffset } from "./clock";

const T0 = Date.parse("2026-06-01T12:00:00Z");

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(T0);
  setLang("en");
});

/** agoSeconds reads "12 seconds ago", "3 minutes ago", "now" as seconds in the past (negative: in the future). */
function agoSeconds(text: string): number {
  if (text === "now") return 0;
  const m = /^(?:in )?(\d+) (second|minute|hour|day)s?(?: ago)?$/.exec(text);
  if (!m) throw new Error(`not a relative time: ${text}`);
  const n = Number(m[1]) * { second: 1, minute: 60, hour: 3600, day: 86400 }[m[2] as "second"];
  return text.startsWith("in ") ? -n : n;
}

/** leftSeconds reads a countdown ("4m 59s left", "overdue by 1s") as seconds left. */
function leftSeconds(text: string): number {
  const over = text.startsWith("overdue");
  let s = 0;
  for (const [, n, u] of text.matchAll(/(\d+)([hms])/g)) s += Number(n) * { h: 3600, m: 60, s: 1 }[u as "s"];
  return over ? -s : s;
}

describe("relative times never go backwards (issue 35 item 8)", () => {
  it("reads an event's age in whole steps that only grow, across the minute and hour boundaries", () => {
    // Events 0 s, 50 s, 70 s and 59 min old: the second ones used to be
    // re-rendered with the time rounded down to the minute, so a 70 s old
    // event read "40 seconds ago" and one at 59 s went back to "40 s ago".
    const isos = [0, 50_000, 70_000, 59 * 60_000].map((ago) => new Date(T0 - ago).toISOString());
    render(
      <>
        {isos.map((iso) => (
          <span key={iso} data-testid="when">
            <When iso={iso} />
          </span>
        ))}
      </>,
    );
    const read = () => screen.getAllByTestId("when").map((e) => agoSeconds(e.textContent ?? ""));
    let prev = read();
    expect(prev[2]).toBe(60); // 70 s is "1 minute ago", never "10 seconds ago"
    // Every second for ten minutes, then in 13 s steps to two hours.
    for (let s = 0; s < 600 + (2 * 3600 - 600) / 13; s++) {
      act(() => {
        vi.advanceTimersByTime(s < 600 ? 1000 : 13_000);
      });
      const got = read();
      got.forEach((v, i) => expect(v, `event ${i} after ${s + 1}s`).toBeGreaterThanOrEqual(prev[i]));
      // Each reads as the true age to its unit's rounding (no minute-late or early).
      got.forEach((v, i) => {
        const age = (Date.now() - Date.parse(isos[i])) / 1000;
        expect(Math.abs(v - age), `event ${i} at ${age}s`).toBeLessThanOrEqual(age < 60 ? 1 : age < 3600 ? 30 : 1800);
      });
      prev = got;
    }
  }, 60_000);

  it("keeps a countdown and a relative time monotonic while heartbeats arrive with varying latency", () => {
    // The server's clock is 10 minutes ahead; each heartbeat is stamped
    // when sent and arrives 0–900 ms later, in no order.
    const ahead = 10 * 60_000;
    learnServerTime(new Date(Date.now() + ahead).toISOString());
    const lat = [0, 900, 120, 850, 30, 600, 10, 899, 450, 5];
    render(
      <>
        <span data-testid="due"><Countdown until={new Date(T0 + ahead + 5 * 60_000).toISOString()} /></span>
        <span data-testid="when"><When iso={new Date(T0 + ahead - 5_000).toISOString()} /></span>
      </>,
    );
    let left = leftSeconds(screen.getByTestId("due").textContent ?? "");
    let ago = agoSeconds(screen.getByTestId("when").textContent ?? "");
    for (let i = 0; i < 400; i++) {
      act(() => {
        vi.advanceTimersByTime(250);
        if (i % 3 === 0) learnServerTime(new Date(Date.now() + ahead - lat[i % lat.length]).toISOString());
      });
      const l = leftSeconds(screen.getByTestId("due").textContent ?? "");
      const a = agoSeconds(screen.getByTestId("when").textContent ?? "");
      expect(l, `countdown at step ${i}`).toBeLessThanOrEqual(left);
      expect(a, `relative time at step ${i}`).toBeGreaterThanOrEqual(ago);
      left = l;
      ago = a;
    }
    // The offset is the best (least late) sample: the server's clock, to the ms.
    expect(serverOffset()).toBe(ahead);
  });

  it("never shows an event the page holds as in the future", () => {
    // The snapshot was 800 ms on its way: the server clock learned is 800 ms
    // late, and a job that changes at once carries a time ahead of it.
    applySnapshot({ position: 1, server_time: new Date(T0 - 800).toISOString(), slots: [] });
    expect(serverOffset()).toBe(-800);
    const changed = new Date(T0 - 100).toISOString();
    render(<span data-testid="when"><When iso={changed} /></span>);
    act(() => {
      applyChange({ position: 2, job: { id: "j1", slot: "s1", kind: "reset", state: "running", revision: 3, queued_at: changed, updated_at: changed } as never });
    });
    expect(serverNow()).toBeGreaterThanOrEqual(Date.parse(changed));
    expect(screen.getByTestId("when").textContent).toBe("now");
    // An old event says nothing new about the clock.
    noteServerInstant(new Date(T0 - 3_600_000).toISOString());
    expect(serverOffset()).toBe(-100);
  });

  it("takes a real clock step back (beyond any latency) at once", () => {
    learnServerTime(new Date(T0).toISOString());
    render(<span data-testid="when"><When iso={new Date(T0 - 30_000).toISOString()} /></span>);
    expect(screen.getByTestId("when").textContent).toBe("30 seconds ago");
    // A jitter-sized drop is ignored …
    act(() => {
      learnServerTime(new Date(T0 - 2_000).toISOString());
    });
    expect(serverOffset()).toBe(0);
    expect(screen.getByTestId("when").textContent).toBe("30 seconds ago");
    // … the server's clock set back by a minute is not.
    act(() => {
      learnServerTime(new Date(T0 - 60_000).toISOString());
    });
    expect(serverOffset()).toBe(-60_000);
    expect(CLOCK_STEP_MS).toBeLessThan(60_000);
    expect(screen.getByTestId("when").textContent).toBe("in 30 seconds");
  });
});
