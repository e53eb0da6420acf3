import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { putJob } from "../live/store";
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
            { position: 1, stream: "job-j1", revision: 0, type: "JobQueued", data: {}, meta: { actor: "alice", time: "2026-01-01T00:00:00Z" } },
            { position: 2, stream: "job-j1", revision: 1, type: "JobClaimed", data: { worker: "w1", attempt: 1 }, meta: null },
            { position: 3, stream: "job-j1", revision: 2, type: "JobAbandoned", data: { uncertain_step: "delete_env_vars", completed_steps: ["delete_db"] }, meta: null },
          ],
        });
      }
      return jsonResponse(abandoned);
    }),
  );
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
    // The step's HTTP status on its timeline row (issue 35: one timeline, no step list beside it).
    expect(screen.getByTestId("job-timeline").textContent).toMatch(/HTTP 503/);
    // The worker in words; its id ("w1" here) as the line's tooltip, for operators.
    expect(screen.getByTestId("attempts").textContent).toMatch(/by a Slotkeeper worker,/);
    expect(screen.getByTestId("attempts").querySelector("li")?.getAttribute("title")).toBe("w1");
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

describe("job page reads like a run page (issue 14)", () => {
  const failed = job({
    state: "failed",
    slot: "dune",
    attempts: [{ number: 1, worker: "w1", claimed_at: "2026-01-01T00:00:00Z", lease_until: "2026-01-01T00:00:30Z", ended_at: "2026-01-01T00:00:08Z", outcome: "failed" }],
    ended_at: "2026-01-01T00:00:08Z",
    steps: [
      step("delete_db", "done", { started_at: "2026-01-01T00:00:00Z", ended_at: "2026-01-01T00:00:03Z" }),
      step("delete_env_vars", "failed", { started_at: "2026-01-01T00:00:03Z", ended_at: "2026-01-01T00:00:08Z" }),
    ],
    uncertain_step: "force_push_template",
    resumable: true,
    cancellable: false,
  });

  it("titles the job in words, with per-step durations and what a resume checks first, in en and ko", () => {
    putJob(failed);
    mount();
    expect(screen.getByTestId("job-title").textContent).toBe("Reset of dune — failed after 8s");
    expect(screen.getAllByTestId("tl-took").map((e) => e.textContent)).toEqual(["3s", "5s"]);
    expect(screen.getByTestId("resume-check").textContent).toMatch(/first checks whether “Force-push template” took effect: it reads the branch/);
    expect(screen.getByTestId("job-who-when").textContent).toMatch(/Requested by alice · queued/);
    expect(screen.getByTestId("resume")).toBeTruthy();
    act(() => setLang("ko"));
    expect(screen.getByTestId("job-title").textContent).toMatch(/^dune .+ — 8초 만에 실패$/);
  });

  it("the event history is typed, filterable, collapsible, with data, local times and a relative time on hover", async () => {
    putJob(failed);
    mount();
    await act(async () => {});
    const items = () => [...screen.getByTestId("timeline").querySelectorAll(":scope > li")];
    expect(items().map((li) => li.className)).toEqual(["ev ev-lifecycle", "ev ev-lifecycle", "ev ev-outcome"]);
    // Every event links to the slot at that moment (issue 28).
    expect(screen.getAllByTestId("history-moment").map((a) => a.getAttribute("href"))).toEqual(["/slots/s1/at/1", "/slots/s1/at/2", "/slots/s1/at/3"]);
    // Each event's data is there, folded until opened.
    const data = screen.getAllByTestId("event-data");
    expect(data[1].textContent).toContain('"worker": "w1"');
    expect(items()[1].querySelector("details")?.open).toBe(false);
    fireEvent.click(screen.getByTestId("history-expand"));
    expect(items().every((li) => li.querySelector("details")?.open)).toBe(true);
    // Filter by type, then by text.
    fireEvent.change(screen.getByTestId("history-type"), { target: { value: "JobAbandoned" } });
    expect(items().map((li) => li.getAttribute("data-type"))).toEqual(["JobAbandoned"]);
    fireEvent.change(screen.getByTestId("history-type"), { target: { value: "" } });
    fireEvent.change(screen.getByTestId("history-filter"), { target: { value: "w1" } });
    expect(items().map((li) => li.getAttribute("data-type"))).toEqual(["JobClaimed"]);
    fireEvent.change(screen.getByTestId("history-filter"), { target: { value: "nothing-like-this" } });
    expect(screen.getByText("No event matches.")).toBeTruthy();
    // Times: how long ago, with the ISO dateTime and the local time on hover (issue 27 item 8).
    const when = screen.getByTestId("job-who-when").querySelector("time") as HTMLTimeElement;
    expect(when.dateTime).toBe("2026-01-01T00:00:00Z");
    expect(when.textContent).toMatch(/ago/);
    expect(when.title).toMatch(/^Jan 1, (2026, )?\d+:00:00 [AP]M$/);
    fireEvent.change(screen.getByTestId("history-filter"), { target: { value: "" } });
    const historyTimes = [...screen.getByTestId("timeline").querySelectorAll("time")];
    expect(historyTimes.length).toBeGreaterThan(0);
    expect(historyTimes.every((t) => /ago/.test(t.textContent ?? "") && t.title !== "")).toBe(true);
  });
});
