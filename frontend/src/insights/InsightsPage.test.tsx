import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { resetHealth } from "../live/health";
import { resetLiveStore } from "../live/store";
import { stopTicker } from "../live/ticker";
import { jsonResponse } from "../test/fakes";
import { InsightsPage, type Series } from "./InsightsPage";

const series = (range: string): Series => ({
  range,
  bucket: "6h0m0s",
  from: "2026-01-01T00:00:00Z",
  to: "2026-01-01T18:00:00Z",
  position: 10,
  buckets: [
    { t: "2026-01-01T00:00:00Z", occupied: 2, vacant: 1, resetting: 0, waiting: 0, time_to_slot_s: null },
    { t: "2026-01-01T06:00:00Z", occupied: 3, vacant: 0, resetting: 0, waiting: 2, time_to_slot_s: null },
    { t: "2026-01-01T12:00:00Z", occupied: 2, vacant: 0, resetting: 1, waiting: 1, time_to_slot_s: 1800 },
  ],
  steps: [
    { kind: "reset", step: "job", count: 4, median_s: 60, p90_s: 90 },
    { kind: "reset", step: "delete_db", count: 4, median_s: 0.25, p90_s: 5 },
  ],
});

let fetchMock: ReturnType<typeof vi.fn>;

beforeEach(() => {
  setLang("en");
  fetchMock = vi.fn(async (url: string) =>
    url === "/api/auth/me"
      ? jsonResponse({ subject: { id: "user:v", name: "v", role: "viewer" }, csrf: "c" })
      : jsonResponse(series(new URL(url, "http://x").searchParams.get("range") ?? "")),
  );
  vi.stubGlobal("fetch", fetchMock);
});

afterEach(() => {
  cleanup();
  stopTicker();
  resetLiveStore();
  resetHealth();
  vi.unstubAllGlobals();
});

describe("insights page", () => {
  it("draws the slot states, the waitlist and the step durations, and switches range", async () => {
    render(<InsightsPage />);
    await act(async () => {});
    const insightCalls = () => fetchMock.mock.calls.map((c) => c[0] as string).filter((u) => u.startsWith("/api/insights"));
    expect(insightCalls()).toEqual(["/api/insights?range=7d"]);
    const layers = screen.getByTestId("chart-slots").querySelectorAll("path");
    expect([...layers].map((p) => p.getAttribute("data-layer"))).toEqual(["occupied", "resetting", "vacant"]);
    expect(screen.getByTestId("chart-waitlist").querySelectorAll("circle").length).toBe(1);
    const rows = screen.getByTestId("steps-table").querySelectorAll("tbody tr");
    expect(rows.length).toBe(2);
    expect(rows[0].textContent).toMatch(/Delete database.*250 ms.*5s/);
    expect(rows[1].textContent).toMatch(/whole job.*4.*1m 0s.*1m 30s/); // the whole job last
    fireEvent.click(screen.getByTestId("range-30d"));
    await act(async () => {});
    expect(insightCalls().at(-1)).toBe("/api/insights?range=30d");
  });
});
