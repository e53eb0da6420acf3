import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Countdown } from "../components/Countdown";
import { setLang } from "../i18n";
import { learnServerTime } from "./clock";

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date("2026-01-01T00:00:00Z"));
  setLang("en");
});

function Many({ n, until }: { n: number; until: string }) {
  return (
    <>
      {Array.from({ length: n }, (_, i) => (
        <Countdown key={i} until={until} />
      ))}
    </>
  );
}

describe("global ticker", () => {
  it("keeps one interval however many countdowns mount, re-render and unmount", () => {
    const spy = vi.spyOn(globalThis, "setInterval");
    const until = "2026-01-01T01:00:00Z";
    for (let round = 0; round < 5; round++) {
      const { unmount, rerender } = render(<Many n={50} until={until} />);
      rerender(<Many n={80} until={until} />);
      act(() => {
        vi.advanceTimersByTime(5_000);
      });
      unmount();
    }
    expect(spy).toHaveBeenCalledTimes(1);
  });

  it("renders every countdown from one tick, in server time", () => {
    // The server is 10 minutes ahead of this browser.
    learnServerTime("2026-01-01T00:10:00Z");
    render(<Countdown until="2026-01-01T00:15:00Z" />);
    act(() => {
      vi.advanceTimersByTime(1000);
    });
    expect(screen.getByText("4m 59s left")).toBeTruthy();
    act(() => {
      vi.advanceTimersByTime(5 * 60_000);
    });
    expect(screen.getByText(/overdue by 1s/)).toBeTruthy();
  });
});
