import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { applyChange } from "../live/store";
import { startStream } from "../live/stream";
import { FakeEventSource, fakeFactory, job, jsonResponse, step } from "../test/fakes";
import { WaitView } from "./WaitView";

const NOW = new Date("2026-01-01T00:00:00Z");
let stopStream: (() => void) | undefined;
let fetchMock: ReturnType<typeof vi.fn>;
let history: string[];
let es: FakeEventSource;
let pos = 100;

beforeEach(() => {
  setAuthForTest({ id: "u-alice", name: "alice", role: "operator" });
  vi.useFakeTimers({ toFake: ["setInterval", "clearInterval", "setTimeout", "clearTimeout", "Date"] });
  vi.setSystemTime(NOW);
  setLang("en");
  FakeEventSource.opened = [];
  fetchMock = vi.fn();
  vi.stubGlobal("fetch", fetchMock);
  stopStream = startStream({ heartbeatMs: 15_000, create: fakeFactory });
  es = FakeEventSource.last();
  pos = 100;
});

// This file's own stream, stopped after the unmount (a page still mounted
// reacts to the stream stopping); the shared teardown runs after this.
afterEach(() => {
  cleanup();
  stopStream?.();
});

/** goLive opens the stream with a snapshot, as the server would. */
function goLive() {
  act(() => {
    es.open();
    es.emit("snapshot", { position: pos, server_time: NOW.toISOString(), slots: [] }, String(pos));
  });
}

function push(j: ReturnType<typeof job>) {
  act(() => {
    pos++;
    applyChange({ position: pos, job: j });
  });
}

function mount(answer: () => Promise<Response>) {
  fetchMock.mockImplementation(answer);
  const mem = memoryLocation({ path: "/jobs/j1/wait", record: true });
  history = mem.history;
  render(
    <Router hook={mem.hook}>
      <Route path="/jobs/:id/wait">{(p) => <WaitView id={p.id} />}</Route>
      <Route path="/slots/:name">{(p) => <p data-testid="slot-page">{p.name}</p>}</Route>
    </Router>,
  );
}

async function settle() {
  await act(async () => {
    await vi.advanceTimersByTimeAsync(0);
  });
}

const phase = () => screen.queryByTestId("wait-view")?.getAttribute("data-phase");

describe("release wait view", () => {
  it("counts the grace period down from the server clock", async () => {
    goLive();
    mount(async () => jsonResponse(job({ not_before: "2026-01-01T00:05:00Z" })));
    await settle();
    expect(phase()).toBe("grace");
    expect(screen.getByTestId("wait-status").textContent).toMatch(/starts in 5m\./);
    // A minute passes with the server's heartbeats arriving.
    for (let i = 0; i < 6; i++) {
      await act(async () => {
        await vi.advanceTimersByTimeAsync(10_000);
        es.emit("heartbeat", { server_time: new Date().toISOString(), position: pos });
      });
    }
    await act(async () => {
      await vi.advanceTimersByTimeAsync(1_000);
    });
    expect(phase()).toBe("grace");
    expect(screen.getByTestId("wait-status").textContent).toMatch(/starts in 3m 59s/);
    expect(screen.getByRole("button", { name: "Cancel job" })).toBeTruthy();
  });

  it("a reset the deadline started is titled as such, not as a release (issue 35 item 6)", async () => {
    goLive();
    mount(async () => jsonResponse(job({ requested_by: "system:deadline", not_before: "2026-01-01T00:05:00Z" })));
    await settle();
    expect(screen.getByRole("heading", { level: 1 }).textContent).toBe("Automatic reset of s1: its deadline passed");
  });

  it("shows steps arriving live while running", async () => {
    goLive();
    mount(async () => jsonResponse(job({ not_before: "2025-12-31T23:59:00Z" })));
    await settle();
    expect(phase()).toBe("queued");
    push(
      job({
        revision: 2,
        state: "running",
        steps: [step("delete_db", "done"), step("delete_env_vars", "running"), step("delete_volumes", "pending")],
      }),
    );
    expect(phase()).toBe("running");
    const running = screen.getByTestId("steps").querySelector('[data-step="delete_env_vars"]');
    expect(running?.getAttribute("data-state")).toBe("running");
    push(job({ revision: 3, state: "running", steps: [step("delete_db", "done"), step("delete_env_vars", "done")] }));
    expect(screen.getByTestId("steps").querySelector('[data-step="delete_env_vars"]')?.getAttribute("data-state")).toBe("done");
    expect(history).toEqual(["/jobs/j1/wait"]);
  });

  it("navigates to the slot only when the job itself succeeded", async () => {
    goLive();
    mount(async () => jsonResponse(job({ state: "running", not_before: "2025-12-31T23:59:00Z" })));
    await settle();
    // The slot turning vacant is not proof of the job's success.
    expect(history).toEqual(["/jobs/j1/wait"]);
    push(job({ revision: 5, state: "succeeded", steps: [step("delete_db", "done")] }));
    await settle();
    expect(history[history.length - 1]).toBe("/slots/s1");
    expect(screen.getByTestId("slot-page").textContent).toBe("s1");
  });

  it("on failure names what was done and what remains, links the timeline, and stays", async () => {
    goLive();
    mount(async () =>
      jsonResponse(
        job({
          state: "failed",
          reason: "delete_volumes: HTTP 500",
          steps: [step("delete_db", "done"), step("delete_env_vars", "done"), step("delete_volumes", "failed", { http_status: 500, error: "boom" })],
          remaining: [{ kind: "volume", id: "vol-9" }],
          resumable: true,
        }),
      ),
    );
    await settle();
    expect(phase()).toBe("failed");
    const failed = screen.getByTestId("wait-failed").textContent ?? "";
    expect(failed).toMatch(/Done: Delete database, Delete env vars/);
    expect(failed).toMatch(/Still there: Volume \(vol-9\)/);
    expect(screen.getAllByTestId("timeline-link")[0].getAttribute("href")).toMatch(/\/jobs\/j1$/);
    expect(screen.getByTestId("steps").textContent).toMatch(/HTTP 500/);
    expect(history).toEqual(["/jobs/j1/wait"]);
  });

  it("a failure with an uncertain step does not also say nothing was done, and offers Resume (issue 14)", async () => {
    goLive();
    const failed = job({
      state: "timed_out",
      cancellable: false,
      resumable: true,
      uncertain_step: "delete_db",
      steps: [step("delete_db", "uncertain"), step("delete_env_vars", "pending")],
      remaining: [{ kind: "database", id: "d-1" }],
    });
    const posts: string[] = [];
    mount(async (...args: unknown[]) => {
      const [url, init] = args as [string, RequestInit | undefined];
      if (init?.method === "POST") {
        posts.push(url);
        return jsonResponse({ job_id: "j1", kind: "reset", slot: "s1", not_before: NOW.toISOString(), steps: [] }, 202);
      }
      return jsonResponse(failed);
    });
    await settle();
    expect(phase()).toBe("failed");
    const text = screen.getByTestId("wait-failed").textContent ?? "";
    expect(text).not.toMatch(/Nothing was done/);
    expect(text).toMatch(/No step was confirmed done/);
    expect(text).toMatch(/Delete database.*may have taken effect/);
    act(() => screen.getByTestId("resume").click());
    await settle();
    expect(posts).toEqual(["/api/jobs/j1/resume"]);
  });

  it("a viewer is not offered Resume on a failed release", async () => {
    setAuthForTest({ id: "u-v", name: "vic", role: "viewer" });
    goLive();
    mount(async () => jsonResponse(job({ state: "failed", cancellable: false, resumable: true, steps: [step("delete_db", "failed")] })));
    await settle();
    expect(phase()).toBe("failed");
    expect(screen.queryByTestId("resume")).toBeNull();
  });

  it("a release cancelled in the grace period says nothing changed, not a failure, in ko (issue 14)", async () => {
    setLang("ko");
    goLive();
    mount(async () => jsonResponse(job({ state: "cancelled", cancellable: false, remaining: [{ kind: "project", id: "p-1" }, { kind: "application", id: "a-1" }, { kind: "database", id: "d-1" }, { kind: "repository", id: "PRJ/s1" }] })));
    await settle();
    expect(phase()).toBe("cancelled");
    expect(screen.queryByTestId("wait-failed")).toBeNull();
    const text = screen.getByTestId("wait-status").textContent ?? "";
    expect(text).toMatch(/시작하기 전에 취소/);
    expect(text).toMatch(/바뀐 것은 없습니다/);
    expect(text).not.toMatch(/[A-Za-z]{4,}/);
    expect(history).toEqual(["/jobs/j1/wait"]);
  });

  it("says the job was not found when the server answers 404 — not 'cannot verify' — and never navigates (issue 14)", async () => {
    goLive();
    mount(async () => jsonResponse({ error: { code: "not_found", message: "no such job" } }, 404));
    await settle();
    expect(phase()).toBe("not_found");
    expect(screen.getByTestId("wait-not-found").textContent).toMatch(/Job j1 was not found/);
    expect(screen.queryByTestId("cannot-verify")).toBeNull();
    expect(screen.queryByText(/finished/)).toBeNull();
    await act(async () => {
      await vi.advanceTimersByTimeAsync(120_000);
    });
    expect(history).toEqual(["/jobs/j1/wait"]);
  });

  it("says 'cannot verify progress' when the server is unreachable", async () => {
    goLive();
    mount(async () => {
      throw new TypeError("Failed to fetch");
    });
    await settle();
    expect(phase()).toBe("unknown");
    expect(screen.getByTestId("cannot-verify")).toBeTruthy();
  });

  it("becomes known again when the job arrives on the stream after a 404", async () => {
    goLive();
    mount(async () => jsonResponse({ error: { code: "not_found", message: "no such job" } }, 404));
    await settle();
    expect(phase()).toBe("not_found");
    push(job({ revision: 2, state: "running" }));
    expect(phase()).toBe("running");
  });

  it("does not claim progress while the stream is stale", async () => {
    goLive();
    mount(async () => jsonResponse(job({ state: "running", steps: [step("delete_db", "running")] })));
    await settle();
    expect(phase()).toBe("running");
    // Two heartbeats (30 s) pass in silence: the watchdog marks the stream stale.
    await act(async () => {
      await vi.advanceTimersByTimeAsync(31_000);
    });
    expect(phase()).toBe("unknown");
    expect(screen.getByTestId("cannot-verify").textContent).toMatch(/not live/);
    // The last known steps stay visible, but nothing navigates.
    expect(screen.getByTestId("steps")).toBeTruthy();
    expect(history).toEqual(["/jobs/j1/wait"]);
  });

  it("treats a terminal state it does not know as unverifiable, not as success", async () => {
    goLive();
    mount(async () => jsonResponse(job({ state: "paused_by_future_version" })));
    await settle();
    expect(phase()).toBe("unknown");
    expect(history).toEqual(["/jobs/j1/wait"]);
  });
});
