import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { resetClock } from "../live/clock";
import { stopTicker } from "../live/ticker";
import { step } from "../test/fakes";
import { Steps } from "./Steps";

const NOW = new Date("2026-01-01T00:10:00Z");

beforeEach(() => {
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(NOW);
  setLang("en");
});

afterEach(() => {
  cleanup();
  stopTicker();
  resetClock();
  vi.useRealTimers();
});

describe("steps", () => {
  it("a waiting step shows its elapsed time live, from the one global ticker (issue 14)", async () => {
    const setInterval = vi.spyOn(globalThis, "setInterval");
    render(
      <Steps
        steps={[
          step("delete_db", "done", { started_at: "2026-01-01T00:08:00Z", ended_at: "2026-01-01T00:08:01Z" }),
          step("delete_app", "running", { started_at: "2026-01-01T00:08:55Z", attempt: 2 }),
          step("delete_repo", "running", { started_at: "2026-01-01T00:09:00Z" }),
        ]}
      />,
    );
    const elapsed = () => screen.getAllByTestId("step-elapsed").map((e) => e.textContent);
    expect(elapsed()).toEqual(["running for 1m 5s", "running for 1m 0s"]);
    await act(async () => {
      await vi.advanceTimersByTimeAsync(2_000);
    });
    expect(elapsed()).toEqual(["running for 1m 7s", "running for 1m 2s"]);
    expect(setInterval.mock.calls.length).toBeLessThanOrEqual(1);
    expect(document.querySelector('[data-step="delete_db"] [data-testid=step-elapsed]')).toBeNull();
  });
});
