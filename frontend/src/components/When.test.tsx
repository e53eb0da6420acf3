import { act, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { When } from "./When";

beforeEach(() => {
  vi.useFakeTimers();
  vi.setSystemTime(new Date("2026-06-01T12:00:00Z"));
  setLang("en");
});

describe("When (issue 27 item 8)", () => {
  it("says how long ago, keeps it current with the one ticker, and gives the absolute time on hover, in en and ko", () => {
    const spy = vi.spyOn(globalThis, "setInterval");
    let renders = 0;
    function Counted({ iso }: { iso: string }) {
      renders++;
      return <When iso={iso} />;
    }
    render(
      <>
        <span data-testid="recent"><When iso="2026-06-01T11:59:50Z" /></span>
        <span data-testid="old"><Counted iso="2026-06-01T11:57:00Z" /></span>
      </>,
    );
    const recent = () => screen.getByTestId("recent").querySelector("time") as HTMLTimeElement;
    const old = () => screen.getByTestId("old").querySelector("time") as HTMLTimeElement;
    expect(recent().textContent).toBe("10 seconds ago");
    expect(old().textContent).toBe("3 minutes ago");
    expect(old().dateTime).toBe("2026-06-01T11:57:00Z");
    expect(old().title).toMatch(/^Jun 1, \d+:57:00 [AP]M$/);
    const before = renders;
    act(() => {
      vi.advanceTimersByTime(5_000);
    });
    expect(recent().textContent).toBe("15 seconds ago");
    expect(renders).toBe(before); // a minutes-old time does not re-render every second
    act(() => {
      vi.advanceTimersByTime(60_000);
    });
    expect(old().textContent).toBe("4 minutes ago");
    expect(spy.mock.calls.length).toBeLessThanOrEqual(1); // the one global ticker
    act(() => setLang("ko"));
    expect(old().textContent).toBe("4분 전");
    expect(old().title).toMatch(/^6월 1일 오[전후] \d+:57:00$/);
  });
});
