import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../services/jobs";
import { job, step } from "../test/fakes";
import { buildTimeline, providerWaits } from "./timelineModel";

const T0 = Date.UTC(2026, 0, 1);
const at = (ms: number) => new Date(T0 + ms).toISOString();
let pos = 0;
const ev = (type: string, data: Record<string, unknown>, ms: number): RecordedEvent => ({
  position: ++pos,
  stream: "job-j1",
  revision: pos - 1,
  type,
  data: { job_id: "j1", ...data },
  meta: { actor: "system", time: at(ms) },
});

describe("job timeline (issue 35 item 8)", () => {
  it("draws the grace period and the gap between attempts as waits, one work bar per step and attempt, and heartbeats nowhere", () => {
    pos = 0;
    const events = [
      ev("JobQueued", {}, 0),
      ev("JobClaimed", { attempt: 1 }, 120_000),
      ev("StepStarted", { step: "delete_db", attempt: 1 }, 120_010),
      ev("LeaseRenewed", { attempt: 1 }, 120_300),
      ev("DBDeleted", { step: "delete_db", attempt: 1 }, 120_500),
      ev("StepStarted", { step: "force_push_template", attempt: 1 }, 120_510),
      ev("StepFailed", { step: "force_push_template", attempt: 1, uncertain: true }, 121_000),
      ev("JobResumed", {}, 490_000),
      ev("JobClaimed", { attempt: 2 }, 490_000),
      ev("StepStarted", { step: "force_push_template", attempt: 2, verify: true }, 490_010),
      ev("ForcePushed", { step: "force_push_template", attempt: 2 }, 490_510),
    ];
    const j = job({
      state: "succeeded",
      queued_at: at(0),
      not_before: at(120_000),
      ended_at: at(490_520),
      attempts: [
        { number: 1, worker: "w1", claimed_at: at(120_000), lease_until: at(150_000), ended_at: at(121_000), outcome: "failed" },
        { number: 2, worker: "w1", claimed_at: at(490_000), lease_until: at(520_000), ended_at: at(490_520), outcome: "succeeded" },
      ],
      steps: [step("delete_db", "done", { attempt: 1 }), step("force_push_template", "done", { attempt: 2 })],
    });
    const tl = buildTimeline(j, events, T0 + 600_000);
    expect(tl.bars.map((b) => `${b.kind}:${b.wait ?? b.step}${b.attempt ? `#${b.attempt}` : ""}:${b.state}`)).toEqual([
      "wait:grace:wait",
      "work:delete_db#1:done",
      "work:force_push_template#1:uncertain",
      "wait:between_attempts#1:wait",
      "work:force_push_template#2:done",
    ]);
    // Work is the bars; waiting is everything else (grace, the 6-minute gap).
    expect(tl.workMs).toBe(490 + 490 + 500);
    expect(tl.waitMs).toBe(490_520 - 1_480);
  });

  it("a step that hung until its attempt timed out lasts until then, and counts as work", () => {
    pos = 0;
    const events = [ev("JobClaimed", { attempt: 1 }, 0), ev("StepStarted", { step: "delete_volumes", attempt: 1 }, 1000), ev("JobTimedOut", { uncertain_step: "delete_volumes" }, 121_000)];
    const j = job({
      state: "timed_out",
      queued_at: at(0),
      not_before: at(0),
      ended_at: at(121_000),
      uncertain_step: "delete_volumes",
      attempts: [{ number: 1, worker: "w1", claimed_at: at(0), lease_until: at(30_000), ended_at: at(121_000), outcome: "timed_out" }],
      steps: [step("delete_volumes", "running", { attempt: 1, started_at: at(1000) })],
    });
    const tl = buildTimeline(j, events, T0 + 600_000);
    expect(tl.bars.map((b) => [b.step, b.state, b.end - b.start])).toEqual([["delete_volumes", "uncertain", 120_000]]);
    expect(tl.workMs).toBe(120_000);
  });

  it("a running step grows to now and says when it times out (the step or the attempt limit, whichever is first)", () => {
    pos = 0;
    const events = [ev("JobClaimed", { attempt: 1 }, 0), ev("StepStarted", { step: "delete_volumes", attempt: 1 }, 1000)];
    const j = job({
      state: "running",
      queued_at: at(0),
      not_before: at(0),
      ended_at: undefined,
      attempts: [{ number: 1, worker: "w1", claimed_at: at(0), lease_until: at(30_000) }],
      steps: [step("delete_volumes", "running", { attempt: 1, started_at: at(1000) }), step("force_push_template", "pending")],
    });
    const tl = buildTimeline(j, events, T0 + 5000, { step_timeout_ms: 10_000, job_timeout_ms: 60_000 });
    const running = tl.bars.find((b) => b.step === "delete_volumes");
    expect(running).toMatchObject({ open: true, end: T0 + 5000, timeoutAt: T0 + 11_000 });
    expect(tl.bars.find((b) => b.step === "force_push_template")).toMatchObject({ pending: true });
    expect(buildTimeline(j, events, T0 + 5000, { step_timeout_ms: 120_000, job_timeout_ms: 8_000 }).bars[0].timeoutAt).toBe(T0 + 8000);
  });

  it("a step waiting on Coolify says no step or attempt timeout: the wait has its own bound (issue 32)", () => {
    pos = 0;
    const events = [
      ev("JobClaimed", { attempt: 1 }, 0),
      ev("StepStarted", { step: "deploy", attempt: 1 }, 1000),
      ev("DeploymentStarted", { step: "deploy", attempt: 1, deployment_uuid: "d1" }, 1100),
      ev("WaitPhase", { step: "deploy", attempt: 1, phase: "building" }, 1200),
    ];
    const j = job({
      state: "running",
      queued_at: at(0),
      not_before: at(0),
      ended_at: undefined,
      attempts: [{ number: 1, worker: "w1", claimed_at: at(0), lease_until: at(30_000) }],
      steps: [step("deploy", "running", { attempt: 1, started_at: at(1000) })],
    });
    const tl = buildTimeline(j, events, T0 + 300_000, { step_timeout_ms: 10_000, job_timeout_ms: 60_000 });
    const running = tl.bars.find((b) => b.kind === "work" && b.step === "deploy");
    expect(running).toMatchObject({ open: true, state: "running" });
    expect(running?.timeoutAt).toBeUndefined();
  });

  it("the provider-wait adapter makes a wait bar per phase, from its event to the next (the table is filled where those events exist)", () => {
    pos = 0;
    const events = [
      ev("StepStarted", { step: "deploy", attempt: 1 }, 0),
      ev("DeploymentQueued", { step: "deploy", attempt: 1, url: "https://coolify.example.test/d/1" }, 100),
      ev("DeploymentBuilding", { step: "deploy", attempt: 1 }, 5000),
      ev("AppDeployed", { step: "deploy", attempt: 1 }, 9000),
    ];
    const bars = providerWaits(events, T0 + 10_000, { DeploymentQueued: "queued", DeploymentBuilding: "building" });
    expect(bars.map((b) => [b.phase, b.start - T0, b.end - T0, b.link ?? ""])).toEqual([
      ["queued", 100, 5000, "https://coolify.example.test/d/1"],
      ["building", 5000, 9000, ""],
    ]);
    expect(providerWaits(events, T0)).toEqual([]);
  });

  it("draws issue 32's WaitPhase events by the phase their data names, with the queue's place", () => {
    pos = 0;
    const url = "https://coolify.example.test/project/p/environment/production/application/a/deployment/d1";
    const events = [
      ev("StepStarted", { step: "deploy", attempt: 1 }, 0),
      ev("DeploymentStarted", { step: "deploy", attempt: 1, deployment_uuid: "d1", url }, 50),
      ev("WaitPhase", { step: "deploy", attempt: 1, phase: "queued", ahead: 3, building: 2, status: "queued", url }, 100),
      ev("WaitPhase", { step: "deploy", attempt: 1, phase: "building", status: "in_progress", url }, 60_000),
      ev("WaitPhase", { step: "deploy", attempt: 1, phase: "database", status: "exited" }, 120_000),
      ev("AppDeployed", { step: "deploy", attempt: 1 }, 130_000),
    ];
    const bars = providerWaits(events, T0 + 200_000);
    expect(bars.map((b) => [b.phase, b.start - T0, b.end - T0, b.open])).toEqual([
      ["queued", 100, 60_000, false],
      ["building", 60_000, 120_000, false],
      ["database", 120_000, 130_000, false],
    ]);
    expect(bars[0].phaseArgs).toEqual({ ahead: 3, building: 2, status: "queued" });
    expect(bars[0].link).toBe(url);
  });
});
