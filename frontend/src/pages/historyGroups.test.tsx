import { act, fireEvent, render, screen } from "@testing-library/react";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { Route, Router } from "wouter";
import { memoryLocation } from "wouter/memory-location";
import type { RecordedEvent } from "../services/jobs";
import { setAuthForTest } from "../auth/session";
import { setLang } from "../i18n";
import { putJob } from "../live/store";
import { job, jsonResponse, step } from "../test/fakes";
import { JobPage } from "./JobPage";
import { groupHistory } from "./historyGroups";

const at = (ms: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, 0, ms)).toISOString();
let pos = 0;
const ev = (type: string, data: Record<string, unknown>, ms: number): RecordedEvent => ({
  position: ++pos,
  stream: "job-j1",
  revision: pos - 1,
  type,
  data: { job_id: "j1", ...data },
  meta: { actor: "system", time: at(ms) },
});

/** A reset as the worker writes it: StepStarted once per resource a step touches. */
function resetLog(): RecordedEvent[] {
  pos = 0;
  const out = [ev("JobQueued", { kind: "reset" }, 0), ev("JobClaimed", { attempt: 1, worker: "w1" }, 10)];
  out.push(ev("StepStarted", { step: "delete_db", attempt: 1 }, 20), ev("DBDeleted", { step: "delete_db", attempt: 1 }, 230));
  for (let i = 0; i < 10; i++) {
    out.push(ev("StepStarted", { step: "delete_env_vars", attempt: 1, resource: { kind: "env_var", id: `e${i}` } }, 240 + i * 40));
    out.push(ev("EnvVarsDeleted", { step: "delete_env_vars", attempt: 1 }, 260 + i * 40));
  }
  out.push(ev("StepFailed", { step: "force_push", attempt: 1, error: "503", uncertain: true }, 700));
  out.push(ev("JobFailed", { uncertain_step: "force_push" }, 710));
  out.push(ev("JobResumed", {}, 5000), ev("JobClaimed", { attempt: 2, worker: "w2" }, 5010));
  out.push(ev("StepStarted", { step: "force_push", attempt: 2, verify: true }, 5020), ev("ForcePushed", { step: "force_push", attempt: 2 }, 5620));
  out.push(ev("JobSucceeded", {}, 5700));
  return out;
}

describe("groupHistory (issue 27 item 8)", () => {
  it("folds a step's events into one row per step; the job's own events stay rows", () => {
    const rows = groupHistory(resetLog());
    expect(rows.map((r) => (r.kind === "step" ? `step:${r.step}` : r.event.type))).toEqual([
      "JobQueued",
      "JobClaimed",
      "step:delete_db",
      "step:delete_env_vars",
      "step:force_push",
      "JobFailed",
      "JobResumed",
      "JobClaimed",
      "JobSucceeded",
    ]);
    const g = Object.fromEntries(rows.flatMap((r) => (r.kind === "step" ? [[r.step, r]] : [])));
    expect(g.delete_env_vars.events).toHaveLength(20);
    expect(g.delete_db.ms).toBe(210);
    expect(g.delete_env_vars.ms).toBe(380);
    // Two attempts: each one's own span, not the 4 s between them.
    expect(g.force_push.attempts).toEqual([1, 2]);
    expect(g.force_push.ms).toBe(600);
    expect(g.force_push.events.map((e) => e.type)).toEqual(["StepFailed", "StepStarted", "ForcePushed"]);
    expect(g.force_push.outcome).toBe("done");
    expect(g.delete_db.outcome).toBe("done");
  });

  it("takes the outcome from the job view when it has the step, else from the step's last event", () => {
    const log = resetLog().slice(0, 26); // up to JobFailed
    const fromEvents = groupHistory(log);
    expect(fromEvents.find((r) => r.kind === "step" && r.step === "force_push")).toMatchObject({ outcome: "uncertain" });
    const fromView = groupHistory(log, [step("force_push", "failed")], "force_push");
    expect(fromView.find((r) => r.kind === "step" && r.step === "force_push")).toMatchObject({ outcome: "uncertain" });
    const running = groupHistory(log.slice(0, 5));
    expect(running.find((r) => r.kind === "step" && r.step === "delete_env_vars")).toMatchObject({ outcome: "running", ms: 0 });
  });
});

describe("the job page's history, grouped by step", () => {
  beforeEach(() => {
    setAuthForTest({ id: "u-alice", name: "alice", role: "operator" });
    setLang("en");
    const log = resetLog();
    vi.stubGlobal(
      "fetch",
      vi.fn(async (url: string) => {
        if (url.endsWith("/events")) return jsonResponse({ events: log });
        return jsonResponse(j);
      }),
    );
  });
  const j = job({
    state: "succeeded",
    steps: [step("delete_db", "done"), step("delete_env_vars", "done"), step("force_push", "done")],
    resumable: false,
    cancellable: false,
    revision: 30,
  });

  async function mount() {
    putJob(j);
    const mem = memoryLocation({ path: "/jobs/j1" });
    render(
      <Router hook={mem.hook}>
        <Route path="/jobs/:id">{(p) => <JobPage id={p.id} />}</Route>
      </Router>,
    );
    await act(async () => {});
    await act(async () => {});
  }
  const top = () => [...screen.getByTestId("timeline").querySelectorAll(":scope > li")];

  it("shows one row per step with outcome, attempts, a sub-second time and its events folded", async () => {
    await mount();
    expect(top().map((li) => li.getAttribute("data-step") ?? li.getAttribute("data-type"))).toEqual([
      "JobQueued",
      "JobClaimed",
      "delete_db",
      "delete_env_vars",
      "force_push",
      "JobFailed",
      "JobResumed",
      "JobClaimed",
      "JobSucceeded",
    ]);
    const env = top()[3];
    expect(env.querySelectorAll("li[data-type=StepStarted]")).toHaveLength(10);
    expect(env.querySelector("details")?.open).toBe(false);
    expect(env.textContent).toMatch(/Delete env vars/);
    expect(env.querySelector("[data-testid=history-step-took]")?.textContent).toBe("took 380 ms");
    expect(env.textContent).toMatch(/attempt #1 · /);
    expect(env.textContent).toMatch(/20 events/);
    const push = top()[4];
    expect(push.getAttribute("data-outcome")).toBe("done");
    expect(push.textContent).toMatch(/attempts #1, #2/);
    expect(push.querySelector("[data-testid=history-step-took]")?.textContent).toBe("took 600 ms");
    fireEvent.click(screen.getByTestId("history-expand"));
    expect(env.querySelector("details")?.open).toBe(true);
    // A type filter keeps the groups that have such events, with only those.
    fireEvent.change(screen.getByTestId("history-type"), { target: { value: "ForcePushed" } });
    expect(top().map((li) => li.getAttribute("data-step"))).toEqual(["force_push"]);
    expect(top()[0].querySelectorAll("li")).toHaveLength(1);
    act(() => setLang("ko"));
    expect(top()[0].textContent).toMatch(/시도 #1, #2|시도 #2/);
    expect(top()[0].textContent).toMatch(/이벤트 1개/);
    // One event: no running time to tell.
    expect(top()[0].querySelector("[data-testid=history-step-took]")).toBeNull();
  });
});
