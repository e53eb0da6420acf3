import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { setLang } from "../i18n";
import { setAuthForTest } from "../auth/session";
import { job, jsonResponse } from "../test/fakes";
import { JobsPage } from "./JobsPage";

let gets: string[];

let posts: string[];

beforeEach(() => {
  setLang("en");
  window.history.replaceState(null, "", "/#/jobs");
  gets = [];
  posts = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === "POST") {
        posts.push(url);
        if (url.includes("j3")) return jsonResponse({ error: { code: "conflict", message: "already running" } }, 409);
        return jsonResponse({ job_id: "jx", kind: "reset", slot: "dune", not_before: "2026-01-01T00:00:00Z", steps: [] }, 202);
      }
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
    // The filters are in the address, to bookmark or share (issue 35).
    expect(window.location.hash).toBe("#/jobs?state=failed&kind=reset&slot=dune&actor=alice");
  });

  it("starts from the filters in the address", async () => {
    window.history.replaceState(null, "", "/#/jobs?state=failed&kind=nuke&slot=dune");
    render(<JobsPage />);
    await flush();
    // An unknown kind in a link is ignored.
    expect(gets).toEqual(["/api/jobs?state=failed&slot=dune&limit=20"]);
    expect((screen.getByTestId("jobs-slot") as HTMLInputElement).value).toBe("dune");
  });

  it("an operator ticks several jobs and resumes them at once; each refusal is said (issue 35)", async () => {
    setAuthForTest({ id: "u1", name: "olga", role: "operator" }, "c-1");
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        if (init?.method === "POST") {
          posts.push(url);
          if (url.includes("j3")) return jsonResponse({ error: { code: "conflict", message: "already running" } }, 409);
          return jsonResponse({ job_id: "jx", kind: "reset", slot: "dune", not_before: "2026-01-01T00:00:00Z", steps: [] }, 202);
        }
        return jsonResponse({
          jobs: [
            job({ id: "j2", slot: "dune", state: "failed", resumable: true, cancellable: false }),
            job({ id: "j3", slot: "fjord", state: "timed_out", resumable: true, cancellable: false }),
            job({ id: "j4", slot: "ash", state: "succeeded", resumable: false, cancellable: false }),
          ],
        });
      }),
    );
    render(<JobsPage />);
    await flush();
    // Only what can succeed is selectable: the succeeded job has no box.
    const boxes = screen.getAllByTestId("jobs-select");
    expect(boxes).toHaveLength(2);
    fireEvent.click(boxes[0]);
    fireEvent.click(boxes[1]);
    expect(screen.getByTestId("jobs-bulk").textContent).toMatch(/2 selected/);
    expect((screen.getByTestId("jobs-bulk-cancel") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("jobs-bulk-resume"));
    await flush();
    await flush();
    expect(posts).toEqual(["/api/jobs/j2/resume", "/api/jobs/j3/resume"]);
    const result = screen.getByTestId("jobs-bulk-result").textContent ?? "";
    expect(result).toMatch(/Resumed 1 jobs/);
    expect(result).toMatch(/fjord:/);
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
