import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { resetHealth } from "../live/health";
import { resetLiveStore } from "../live/store";
import { stopTicker } from "../live/ticker";
import { job, jsonResponse } from "../test/fakes";
import { JobsPage } from "./JobsPage";

let gets: string[];

beforeEach(() => {
  setLang("en");
  gets = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string) => {
      gets.push(url);
      const u = new URL(url, "http://x");
      if (u.searchParams.get("state") === "succeeded") return jsonResponse({ jobs: [] });
      if (u.searchParams.get("cursor") === "5") return jsonResponse({ jobs: [job({ id: "j0", slot: "old", state: "succeeded", position: 1 })] });
      return jsonResponse({
        jobs: [job({ id: "j2", slot: "dune", state: "failed", ended_at: "2026-01-01T00:00:08Z", attempts: [{ number: 1, worker: "w", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:01:00Z" }] })],
        next_cursor: "5",
      });
    }),
  );
});

afterEach(() => {
  cleanup();
  stopTicker();
  resetLiveStore();
  resetHealth();
  vi.unstubAllGlobals();
});

const flush = () => act(async () => {});

describe("jobs page", () => {
  it("lists jobs across slots with human titles, filters through the API, pages with the cursor", async () => {
    render(<JobsPage />);
    await flush();
    expect(gets).toEqual(["/api/jobs?limit=20"]);
    const row = screen.getByTestId("jobs-row");
    expect(row.getAttribute("data-state")).toBe("failed");
    expect(row.textContent).toMatch(/Reset of dune — failed after 8s/);
    fireEvent.click(screen.getByTestId("jobs-more"));
    await flush();
    expect(gets[1]).toBe("/api/jobs?cursor=5&limit=20");
    expect(screen.getAllByTestId("jobs-row").map((r) => r.getAttribute("data-job"))).toEqual(["j2", "j0"]);

    fireEvent.change(screen.getByTestId("jobs-state"), { target: { value: "failed" } });
    fireEvent.change(screen.getByTestId("jobs-kind"), { target: { value: "reset" } });
    fireEvent.change(screen.getByTestId("jobs-actor"), { target: { value: "alice" } });
    fireEvent.change(screen.getByTestId("jobs-slot"), { target: { value: " dune " } });
    fireEvent.click(screen.getByTestId("jobs-apply"));
    await flush();
    expect(gets.at(-1)).toBe("/api/jobs?state=failed&kind=reset&slot=dune&actor=alice&limit=20");
  });

  it("says when nothing matches, in ko too", async () => {
    setLang("ko");
    render(<JobsPage />);
    await flush();
    fireEvent.change(screen.getByTestId("jobs-state"), { target: { value: "succeeded" } });
    await flush();
    expect(screen.getByTestId("jobs-none").textContent).toBe("이 조건에 맞는 작업이 없습니다.");
  });
});
