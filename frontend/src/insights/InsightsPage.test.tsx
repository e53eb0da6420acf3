import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { jsonResponse } from "../test/fakes";
import { InsightsPage, type Bucket, type Series } from "./InsightsPage";

const bucket = (t: string, over: Partial<Bucket>): Bucket => ({
  t,
  occupied: 0,
  vacant: 0,
  resetting: 0,
  waiting: 0,
  time_to_slot_s: null,
  occupied_avg: 0,
  busy_avg: 0,
  vacant_avg: 0,
  in_use_peak: 0,
  covered_s: 0,
  waiting_peak: 0,
  handed_over: 0,
  time_to_slot_p90_s: null,
  ...over,
});

let waits = true;

const series = (range: string): Series => ({
  range,
  bucket: "6h0m0s",
  from: "2026-01-01T00:00:00Z",
  to: "2026-01-02T00:00:00Z",
  position: 10,
  buckets: [
    // Before the log starts: no data, no bar.
    bucket("2026-01-01T00:00:00Z", {}),
    bucket("2026-01-01T06:00:00Z", { occupied: 2, vacant: 1, occupied_avg: 1.5, vacant_avg: 1.5, in_use_peak: 2, covered_s: 10800, waiting_peak: 1, waiting: 1 }),
    bucket("2026-01-01T12:00:00Z", {
      occupied: 3,
      occupied_avg: 2.75,
      vacant_avg: 0.25,
      in_use_peak: 3,
      covered_s: 21600,
      waiting_peak: 2,
      ...(waits ? { time_to_slot_s: 1800, time_to_slot_p90_s: 3600, handed_over: 3 } : {}),
    }),
    bucket("2026-01-01T18:00:00Z", { occupied: 3, occupied_avg: 3, in_use_peak: 3, covered_s: 3600 }),
  ],
  steps: [
    { kind: "reset", step: "job", count: 4, median_s: 60, p90_s: 90 },
    { kind: "reset", step: "delete_db", count: 4, median_s: 0.25, p90_s: 5 },
    { kind: "teardown", step: "delete_app", count: 1, median_s: 1.2, p90_s: 1.2 },
  ],
});

let fetchMock: ReturnType<typeof vi.fn>;

beforeEach(() => {
  setLang("en");
  waits = true;
  fetchMock = vi.fn(async (url: string) =>
    url === "/api/auth/me"
      ? jsonResponse({ subject: { id: "user:v", name: "v", role: "viewer" }, csrf: "c" })
      : jsonResponse(series(new URL(url, "http://x").searchParams.get("range") ?? "")),
  );
  vi.stubGlobal("fetch", fetchMock);
});

describe("insights page (issue 27 item 9)", () => {
  const insightCalls = () => fetchMock.mock.calls.map((c) => c[0] as string).filter((u) => u.startsWith("/api/insights"));

  it("answers how full the pool was: averaged bars, the legend only for what is drawn, the state now, a table", async () => {
    render(<InsightsPage />);
    await act(async () => {});
    expect(insightCalls()).toEqual(["/api/insights?range=1d"]);
    expect(screen.getByRole("heading", { level: 2, name: "How full was the pool?" })).toBeTruthy();
    expect(screen.getByTestId("ins-now").textContent).toBe("Now: 3 in use · 0 busy · 0 vacant");
    const chart = screen.getByTestId("chart-slots");
    // No bar for the bucket before the log; nobody was busy, so no busy layer.
    const layers = [...chart.querySelectorAll("rect")].map((r) => r.getAttribute("data-layer"));
    expect(layers).toEqual(["occupied", "vacant", "occupied", "vacant", "occupied"]);
    expect(chart.getAttribute("aria-label")).toBe("Average slots over each bucket; at most 3 of 3 in use at once.");
    const legend = [...screen.getByTestId("chart-slots-legend").querySelectorAll("[data-key]")].map((e) => e.getAttribute("data-key"));
    expect(legend).toEqual(["occupied", "vacant"]);
    expect(screen.getByTestId("use-summary").textContent).toMatch(/No data before/);
    const rows = screen.getByTestId("use-table").querySelectorAll("tbody tr");
    expect(rows).toHaveLength(3);
    expect(rows[1].textContent).toMatch(/2\.8.*0.*0\.3.*3$/);
    // Every word is HTML, none inside the stretched SVG (6 px on a phone).
    expect(chart.querySelectorAll("text")).toHaveLength(0);
    expect(screen.getByText("Bars are averages over each 6h, from the event log; p90: 9 in 10 took less.")).toBeTruthy();
  });

  it("answers how long people waited: median bars with a p90 mark; without hand-overs a sentence, no empty chart or legend", async () => {
    render(<InsightsPage />);
    await act(async () => {});
    const chart = screen.getByTestId("chart-waitlist");
    expect([...chart.querySelectorAll("[data-layer]")].map((e) => e.getAttribute("data-layer"))).toEqual(["median", "mark"]);
    expect([...screen.getByTestId("chart-waitlist-legend").querySelectorAll("[data-key]")].map((e) => e.getAttribute("data-key"))).toEqual(["median", "mark"]);
    expect(screen.getByTestId("wait-summary").textContent).toBe("Slots handed over from the waitlist: 3 · longest waitlist: 2");
    expect(screen.getByTestId("wait-table").textContent).toMatch(/330m1h2/);
    cleanup();
    waits = false;
    render(<InsightsPage />);
    await act(async () => {});
    expect(screen.queryByTestId("chart-waitlist")).toBeNull();
    expect(screen.queryByTestId("chart-waitlist-legend")).toBeNull();
    expect(screen.getByTestId("wait-empty").textContent).toBe("Nobody got a slot from the waitlist in this range. Longest waitlist: 2.");
  });

  it("answers how long each step takes, per kind, in run order with the whole job last, sub-second in ms; in Korean too", async () => {
    render(<InsightsPage />);
    await act(async () => {});
    const kinds = screen.getAllByTestId("steps-rows");
    expect(kinds.map((k) => k.getAttribute("data-kind"))).toEqual(["reset", "teardown"]);
    const reset = [...kinds[0].querySelectorAll("li")];
    expect(reset.map((li) => li.getAttribute("data-step"))).toEqual(["delete_db", "job"]);
    expect(reset[0].textContent).toMatch(/Delete database.*median 250 ms · p90 5s · 4 runs/);
    expect(reset[1].textContent).toMatch(/whole job.*median 1m · p90 1m 30s/);
    expect(kinds[1].textContent).toMatch(/median 1.2s/);
    fireEvent.click(screen.getByTestId("range-30d"));
    await act(async () => {});
    expect(insightCalls().at(-1)).toBe("/api/insights?range=30d");
    act(() => setLang("ko"));
    expect(screen.getByRole("heading", { level: 2, name: "풀이 얼마나 찼나요?" })).toBeTruthy();
    expect(screen.getByTestId("ins-now").textContent).toBe("지금: 사용 중 3 · 작업 중 0 · 비어 있음 0");
    expect(screen.getAllByTestId("steps-rows")[0].textContent).toMatch(/중앙값 250밀리초 · 90백분위 5초 · 4회/);
  });
});
