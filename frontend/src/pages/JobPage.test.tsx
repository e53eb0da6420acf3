import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { resetAuth, setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { resetHealth } from "../live/health";
import { putJob, resetLiveStore } from "../live/store";
import { stopTicker } from "../live/ticker";
import { job, jsonResponse, step } from "../test/fakes";
import { JobPage, eventSummary } from "./JobPage";

let posts: string[];

const abandoned = job({
  state: "abandoned",
  steps: [step("delete_db", "done"), step("delete_env_vars", "running", { http_status: 503, error: "upstream" })],
  uncertain_step: "delete_env_vars",
  remaining: [{ kind: "env_var", id: "e-1" }],
  resumable: true,
  cancellable: false,
  attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:00:30Z", outcome: "abandoned" }],
  revision: 7,
});

beforeEach(() => {
  setAuthForTest({ id: "u-alice", name: "alice", role: "operator" });
  setLang("en");
  posts = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === "POST") {
        posts.push(url);
        return jsonResponse({ job_id: "j1", kind: "reset", slot: "s1", not_before: "", steps: [] }, 202);
      }
      if (url.endsWith("/events")) {
        return jsonResponse({
          events: [
            { position: 1, stream: "job-j1", revision: 0, type: "JobQueued", data: {}, meta: { actor: "alice" } },
            { position: 2, stream: "job-j1", revision: 1, type: "JobClaimed", data: { worker: "w1", attempt: 1 }, meta: null },
            { position: 3, stream: "job-j1", revision: 2, type: "JobAbandoned", data: { uncertain_step: "delete_env_vars", completed_steps: ["delete_db"] }, meta: null },
          ],
        });
      }
      return jsonResponse(abandoned);
    }),
  );
});

afterEach(() => {
  cleanup();
  resetAuth();
  stopTicker();
  resetLiveStore();
  resetHealth();
  vi.unstubAllGlobals();
});

function mount() {
  const mem = memoryLocation({ path: "/jobs/j1" });
  render(
    <Router hook={mem.hook}>
      <Route path="/jobs/:id">{(p) => <JobPage id={p.id} />}</Route>
    </Router>,
  );
}

const flush = () => act(async () => {});

describe("job page", () => {
  it("names the completed steps, the uncertain step, the remaining resources and the HTTP error", async () => {
    mount();
    await flush();
    await flush();
    const recovery = screen.getByTestId("recovery").textContent ?? "";
    expect(recovery).toMatch(/Completed steps: Delete database/);
    expect(recovery).toMatch(/Uncertain: Delete env vars/);
    expect(recovery).toMatch(/e-1/);
    expect(screen.getByTestId("steps").textContent).toMatch(/HTTP 503/);
    expect(screen.getByTestId("attempts").textContent).toMatch(/w1/);
    const types = [...screen.getByTestId("timeline").querySelectorAll("li")].map((li) => li.getAttribute("data-type"));
    expect(types).toEqual(["JobQueued", "JobClaimed", "JobAbandoned"]);
  });

  it("offers resume only where allowed, and sends it", async () => {
    mount();
    await flush();
    expect(screen.queryByTestId("cancel")).toBeNull();
    fireEvent.click(screen.getByTestId("resume"));
    await flush();
    expect(posts).toEqual(["/api/jobs/j1/resume"]);
  });

  it("applies a change by fetching only the later events, keeping the history (issue 14)", async () => {
    const urls: string[] = [];
    const base = (globalThis.fetch as unknown as (u: string, i?: RequestInit) => Promise<Response>).bind(globalThis);
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string, init?: RequestInit) => {
        if (url.includes("/events")) urls.push(url);
        if (url.includes("/events?after=2")) {
          return jsonResponse({ events: [{ position: 4, stream: "job-j1", revision: 3, type: "JobResumed", data: {}, meta: null }] });
        }
        return base(url, init);
      }),
    );
    mount();
    await flush();
    await flush();
    expect(screen.getByTestId("timeline").querySelectorAll("li")).toHaveLength(3);
    await act(async () => {
      putJob({ ...abandoned, state: "queued", resumable: false, revision: 8, position: 8 });
    });
    await flush();
    expect(urls).toEqual(["/api/jobs/j1/events", "/api/jobs/j1/events?after=2"]);
    const types = [...screen.getByTestId("timeline").querySelectorAll("li")].map((li) => li.getAttribute("data-type"));
    expect(types).toEqual(["JobQueued", "JobClaimed", "JobAbandoned", "JobResumed"]);
  });

  it("a release cancelled before any step ran says nothing changed and lists no leftovers, in ko (issue 14)", async () => {
    setLang("ko");
    putJob(
      job({
        state: "cancelled",
        cancellable: false,
        revision: 9,
        remaining: [
          { kind: "database", id: "d-1" },
          { kind: "application", id: "a-1" },
        ],
      }),
    );
    mount();
    await flush();
    expect(screen.queryByTestId("recovery")).toBeNull();
    expect(screen.getByTestId("untouched").textContent).toMatch(/바뀐 것은 없습니다/);
    expect(screen.queryByTestId("job-remaining")).toBeNull();
  });

  it("the timeline's JobCancelled before any step ran says nothing changed, not 'Still there'", () => {
    const t = Object.assign((k: string) => k, { dyn: (_p: string, v: string) => v, lang: "en" }) as unknown as Parameters<typeof eventSummary>[1];
    const data = { job_id: "j1", by: "alice", remaining: [{ kind: "database", id: "d-1" }] };
    expect(eventSummary(data, t, "JobCancelled")).toBe("job.nothing_changed");
    expect(eventSummary({ ...data, completed_steps: ["delete_db"] }, t, "JobCancelled")).toMatch(/recovery.remaining/);
  });
});
