// The job page's timeline (issue 35 item 8), modelled on Temporal's
// Timeline view: one bar per step and attempt on a time axis, the waits
// (the grace period, the queue, the time between attempts, a provider's
// own phases) drawn apart from the work. Pure, so it is tested without a
// browser; JobTimeline.tsx draws it.
import type { JobView, RecordedEvent, StepView } from "../services/jobs";
import { stepOf } from "./historyGroups";

/** A wait: time the job spent not working (nobody's work to speed up). */
export type WaitKind = "grace" | "queue" | "between_attempts" | "provider";

export interface Bar {
  key: string;
  /** work: a step's attempt; wait: see wait. */
  kind: "work" | "wait";
  wait?: WaitKind;
  /** The step (work bars and provider waits). */
  step?: string;
  attempt?: number;
  /** A provider wait's phase (e.g. "queued", "building") and where to see it at the provider. */
  phase?: string;
  phaseArgs?: PhaseArgs;
  link?: string;
  start: number;
  end: number;
  /** Still going: end is now. */
  open: boolean;
  /** done, failed, running, uncertain (work); "wait" for a wait. */
  state: string;
  /** A running step: when the engine times it out (the step or the attempt limit, whichever is first). */
  timeoutAt?: number;
  /** The events of a work bar (to fold under it). */
  events: RecordedEvent[];
  /** The job view's step, for the step's details (only on its latest attempt). */
  view?: StepView;
  /** A step that has not run: a row with no bar. */
  pending?: boolean;
}

export interface Timeline {
  start: number;
  end: number;
  bars: Bar[];
  /** Working time (sum of work bars, overlaps counted once) and waiting time (the rest of start..end). */
  workMs: number;
  waitMs: number;
}

function timeOf(e: RecordedEvent): number {
  return e.meta?.time ? Date.parse(e.meta.time) : NaN;
}

function attemptOf(e: RecordedEvent): number {
  const d = e.data as { attempt?: unknown } | null;
  return d && typeof d === "object" && typeof d.attempt === "number" ? d.attempt : 0;
}

/**
 * PROVIDER_PHASES maps an event type that says a provider began a phase
 * of its own to that phase's name: a fixed name, or a function of the
 * event's data where one event type carries the phase (issue 32's
 * WaitPhase: a deployment queued, building, starting, waiting for its
 * health, the new database starting). providerWaits draws them as wait
 * bars.
 */
export type PhaseOf = string | ((data: unknown) => string | undefined);

export const PROVIDER_PHASES: Record<string, PhaseOf> = {
  WaitPhase: (d) => {
    const p = d && typeof d === "object" ? (d as { phase?: unknown }).phase : undefined;
    return typeof p === "string" && p !== "" ? p : undefined;
  },
};

/** PhaseArgs are what a provider wait's words need (WaitPhase's place in the queue, Coolify's status). */
export interface PhaseArgs {
  ahead: number;
  building: number;
  status: string;
}

function phaseArgs(d: unknown): PhaseArgs {
  const o = (d && typeof d === "object" ? d : {}) as { ahead?: unknown; building?: unknown; status?: unknown };
  return {
    ahead: typeof o.ahead === "number" ? o.ahead : 0,
    building: typeof o.building === "number" ? o.building : 0,
    status: typeof o.status === "string" ? o.status : "",
  };
}

export function providerWaits(events: readonly RecordedEvent[], now: number, phases: Record<string, PhaseOf> = PROVIDER_PHASES): Bar[] {
  const out: Bar[] = [];
  const lastOf = new Map<string, number>();
  for (const e of events) {
    const k = `${stepOf(e)}#${attemptOf(e)}`;
    const at = timeOf(e);
    if (!Number.isNaN(at)) lastOf.set(k, Math.max(lastOf.get(k) ?? at, at));
  }
  const openBy = new Map<string, Bar>();
  for (const e of events) {
    const of = phases[e.type];
    const phase = typeof of === "function" ? of(e.data) : of;
    const k = `${stepOf(e)}#${attemptOf(e)}`;
    const at = timeOf(e);
    if (Number.isNaN(at)) continue;
    const prev = openBy.get(k);
    if (prev && phase !== undefined) {
      prev.end = at;
      prev.open = false;
      openBy.delete(k);
    }
    if (phase === undefined) continue;
    const d = e.data as { url?: unknown } | null;
    const bar: Bar = {
      key: `wait:${e.position}`,
      kind: "wait",
      wait: "provider",
      step: stepOf(e),
      attempt: attemptOf(e),
      phase,
      phaseArgs: phaseArgs(e.data),
      link: d && typeof d.url === "string" ? d.url : undefined,
      start: at,
      end: at,
      open: true,
      state: "wait",
      events: [e],
    };
    openBy.set(k, bar);
    out.push(bar);
  }
  for (const [k, b] of openBy) {
    const last = lastOf.get(k) ?? b.start;
    // The phase ended with its step's next event; a phase that is the
    // step's last event is still going while the step runs.
    b.end = last > b.start ? last : now;
    b.open = last <= b.start;
  }
  return out;
}

/** Event types that say a step waits on the provider under the wait's own bound (issue 32). */
const WAIT_EVENTS: ReadonlySet<string> = new Set(["DeploymentStarted", "WaitPhase"]);

/** Event types that are heartbeats, not progress: hidden unless asked for. */
export const HEARTBEATS: ReadonlySet<string> = new Set(["LeaseRenewed"]);

/**
 * buildTimeline lays a job out on a time axis from its view and its
 * events. limits are the engine's timeouts (from the signed-in answer);
 * without them a running step has no timeoutAt.
 */
export function buildTimeline(
  job: JobView,
  events: readonly RecordedEvent[],
  now: number,
  limits: { step_timeout_ms?: number; job_timeout_ms?: number } = {},
): Timeline {
  const queued = Date.parse(job.queued_at);
  const notBefore = Date.parse(job.not_before);
  const attempts = job.attempts ?? [];
  const end = job.ended_at ? Date.parse(job.ended_at) : now;
  const bars: Bar[] = [];

  // Waits before the first attempt: the grace period, then the queue (a
  // worker was late or busy).
  const firstClaim = attempts[0] ? Date.parse(attempts[0].claimed_at) : undefined;
  if (!Number.isNaN(notBefore) && notBefore > queued) {
    const graceEnd = Math.min(notBefore, firstClaim ?? end);
    if (graceEnd > queued)
      bars.push({ key: "wait:grace", kind: "wait", wait: "grace", start: queued, end: graceEnd, open: firstClaim === undefined && !job.ended_at && now < notBefore, state: "wait", events: [] });
  }
  const queueFrom = Math.max(queued, Number.isNaN(notBefore) ? queued : notBefore);
  const queueTo = firstClaim ?? (job.ended_at ? end : now);
  if (queueTo - queueFrom >= 1000) {
    bars.push({ key: "wait:queue", kind: "wait", wait: "queue", start: queueFrom, end: queueTo, open: firstClaim === undefined && !job.ended_at, state: "wait", events: [] });
  }

  // Work: one bar per step and attempt, from its first event to its last
  // (a running step's to now). Heartbeats carry no step, so they never
  // stretch a bar.
  const byKey = new Map<string, Bar>();
  const view = new Map((job.steps ?? []).map((s) => [s.name, s]));
  for (const e of events) {
    const step = stepOf(e);
    if (!step) continue;
    const a = attemptOf(e);
    const at = timeOf(e);
    if (Number.isNaN(at)) continue;
    const k = `${step}#${a}`;
    let b = byKey.get(k);
    if (!b) {
      b = { key: `work:${k}`, kind: "work", step, attempt: a, start: at, end: at, open: false, state: "done", events: [] };
      byKey.set(k, b);
      bars.push(b);
    }
    b.events.push(e);
    b.start = Math.min(b.start, at);
    b.end = Math.max(b.end, at);
  }
  const lastAttempt = new Map<string, number>();
  for (const b of byKey.values()) if (b.step) lastAttempt.set(b.step, Math.max(lastAttempt.get(b.step) ?? 0, b.attempt ?? 0));
  for (const b of byKey.values()) {
    const v = b.step ? view.get(b.step) : undefined;
    const latest = b.attempt === lastAttempt.get(b.step ?? "");
    if (latest && v) {
      b.view = v;
      b.state = b.step === job.uncertain_step && v.state !== "done" ? "uncertain" : v.state;
    } else if (!latest) {
      // A later attempt ran the step again: this one did not finish it.
      const last = b.events[b.events.length - 1];
      b.state = last.type === "StepFailed" && (last.data as { uncertain?: boolean }).uncertain ? "uncertain" : last.type === "StepSucceeded" ? "done" : "failed";
    } else {
      const last = b.events[b.events.length - 1];
      b.state = last.type === "StepFailed" ? "failed" : last.type === "StepStarted" ? "running" : "done";
    }
    // A step that ended without a word of its own (the attempt timed out or
    // its worker stopped mid-call) ran until its attempt ended: a 2-minute
    // hang is 2 minutes of the step, not "0 ms" (issue 35 item 8).
    if (b.state === "uncertain" || b.state === "failed") {
      const att = attempts.find((x) => x.number === b.attempt);
      const stop = b.view?.ended_at ? Date.parse(b.view.ended_at) : att?.ended_at ? Date.parse(att.ended_at) : NaN;
      if (!Number.isNaN(stop)) b.end = Math.max(b.end, stop);
    }
    if (b.state === "running" && !job.ended_at) {
      b.open = true;
      b.end = Math.max(b.end, now);
      // A step waiting on the provider (issue 32: a deployment, a database
      // start) has set the step and job deadlines aside for the wait's own
      // bound (the template's deploy_timeout, not in the view): no
      // "times out at" from them.
      const waiting = b.events.some((e) => WAIT_EVENTS.has(e.type));
      const claim = attempts.find((x) => x.number === b.attempt)?.claimed_at;
      const byStep = limits.step_timeout_ms && !waiting ? b.start + limits.step_timeout_ms : Infinity;
      const byJob = limits.job_timeout_ms && claim && !waiting ? Date.parse(claim) + limits.job_timeout_ms : Infinity;
      const at = Math.min(byStep, byJob);
      if (Number.isFinite(at)) b.timeoutAt = at;
    }
  }

  // Steps the events do not show (not loaded yet, or not run): from the
  // job view, a bar from its times or, for a pending step, a row alone.
  for (const v of job.steps ?? []) {
    if (lastAttempt.has(v.name)) continue;
    const from = v.started_at ? Date.parse(v.started_at) : NaN;
    const state = v.name === job.uncertain_step && v.state !== "done" ? "uncertain" : v.state;
    if (Number.isNaN(from)) {
      bars.push({ key: `step:${v.name}`, kind: "work", step: v.name, attempt: v.attempt, start: Infinity, end: Infinity, open: false, state, events: [], view: v, pending: true });
      continue;
    }
    const running = state === "running" && !job.ended_at;
    const to = v.ended_at ? Date.parse(v.ended_at) : running ? now : from;
    bars.push({ key: `step:${v.name}`, kind: "work", step: v.name, attempt: v.attempt, start: from, end: to, open: running, state, events: [], view: v });
  }

  // Between attempts: from one attempt's end (or, if its worker stopped,
  // its last lease) to the next claim — a failure waiting for a resume.
  for (let i = 0; i + 1 < attempts.length; i++) {
    const a = attempts[i];
    const next = Date.parse(attempts[i + 1].claimed_at);
    const from = a.ended_at ? Date.parse(a.ended_at) : Math.min(Date.parse(a.lease_until) || next, next);
    if (next - from >= 1000) bars.push({ key: `wait:between:${a.number}`, kind: "wait", wait: "between_attempts", attempt: a.number, start: from, end: next, open: false, state: "wait", events: [] });
  }
  bars.push(...providerWaits(events, now));

  // In time order, pending steps last in the job's own order (a stable sort keeps it).
  bars.sort((x, y) => (x.start === y.start ? 0 : x.start - y.start) || (x.kind === y.kind ? 0 : x.kind === "wait" ? -1 : 1));
  const drawn = bars.filter((b) => !b.pending);
  const start = Math.min(queued, ...drawn.map((b) => b.start));
  const stop = Math.max(end, ...drawn.map((b) => b.end));
  // Working time: the union of work bars (steps do not overlap today, but a
  // provider wait inside a step is waiting, so it is taken out of them).
  const work = union(drawn.filter((b) => b.kind === "work").map((b) => [b.start, b.end] as [number, number]));
  const providerWait = union(bars.filter((b) => b.wait === "provider").map((b) => [b.start, b.end] as [number, number]));
  const workMs = Math.max(0, total(work) - overlap(work, providerWait));
  return { start, end: stop, bars, workMs, waitMs: Math.max(0, stop - start - workMs) };
}

function union(spans: [number, number][]): [number, number][] {
  const s = [...spans].sort((a, b) => a[0] - b[0]);
  const out: [number, number][] = [];
  for (const [a, b] of s) {
    const last = out[out.length - 1];
    if (last && a <= last[1]) last[1] = Math.max(last[1], b);
    else out.push([a, b]);
  }
  return out;
}

function total(spans: [number, number][]): number {
  return spans.reduce((sum, [a, b]) => sum + (b - a), 0);
}

function overlap(a: [number, number][], b: [number, number][]): number {
  let sum = 0;
  for (const [x1, x2] of a) for (const [y1, y2] of b) sum += Math.max(0, Math.min(x2, y2) - Math.max(x1, y1));
  return sum;
}
