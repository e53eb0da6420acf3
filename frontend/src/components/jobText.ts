// Words for a job: its human title, and what a resume checks first. Pure,
// shared by the job page and the jobs list.
import type { JobView } from "../services/jobs";
import { formatDuration, formatSpan, untouched } from "../format";
import type { Key, T } from "../i18n";
import { completedSteps } from "./Steps";

const OUTCOME_KEY: Record<string, Key> = {
  succeeded: "jobt.outcome.succeeded",
  failed: "jobt.outcome.failed",
  timed_out: "jobt.outcome.timed_out",
  cancelled: "jobt.outcome.cancelled",
  abandoned: "jobt.outcome.abandoned",
};

/** jobStart is when the job began working: its first claim, else when it was queued. */
export function jobStart(job: JobView): number {
  const first = job.attempts?.[0]?.claimed_at;
  return Date.parse(first ?? job.queued_at);
}

/**
 * workedMs is how long workers worked on the job: each attempt from its
 * claim to its end (an attempt that ended without saying so — its worker
 * stopped — to its last lease or the next claim, whichever is first), the
 * running one to now. A resumed job is not "ran 6m 10s" for one second of
 * work: the gap between attempts is waiting, not work (issue 35 item 6).
 */
export function workedMs(job: JobView, now: number): number {
  const as = job.attempts ?? [];
  let sum = 0;
  as.forEach((a, i) => {
    const start = Date.parse(a.claimed_at);
    const next = as[i + 1] ? Date.parse(as[i + 1].claimed_at) : undefined;
    let end: number;
    if (a.ended_at) end = Date.parse(a.ended_at);
    else if (next !== undefined) end = Math.min(next, Date.parse(a.lease_until) || next);
    else if (job.ended_at) end = Date.parse(job.ended_at);
    else end = now;
    if (!Number.isNaN(start) && !Number.isNaN(end)) sum += Math.max(0, end - start);
  });
  return sum;
}

/**
 * jobTitle is the page title a person reads: "Reset of dune — failed after
 * 8 s", "… — running for 1 m 3 s" (live, from now), "… — queued", or, for a
 * job cancelled before any step ran, "… — cancelled before it started".
 */
export function jobTitle(job: JobView, now: number, t: T): string {
  const kind = t.dyn("kind", job.kind);
  const slot = job.slot;
  if (untouched(job.state, completedSteps(job.steps), job.uncertain_step) && !(job.attempts?.length ?? 0)) {
    return t("jobt.title_cancelled_before", { kind, slot });
  }
  if (job.state === "queued") return t("jobt.title_queued", { kind, slot });
  if (job.state === "running") return t("jobt.title_running", { kind, slot, time: formatDuration(workedMs(job, now), t) });
  const outcome = OUTCOME_KEY[job.state] ? t(OUTCOME_KEY[job.state]) : t.dyn("state", job.state);
  return t("jobt.title_ended", { kind, slot, outcome, time: formatSpan(workedMs(job, now), t) });
}

/**
 * jobTiming splits a job's time the way a person asks about it: how long
 * it waited in the grace period (queued → not before), then in the queue
 * (not before → first claim, when a worker was late), and how long it ran
 * (first claim → end, or now). Issue 27 item 4: the 2-minute grace was
 * counted nowhere.
 */
export function jobTiming(job: JobView, now: number, t: T): string {
  const queued = Date.parse(job.queued_at);
  const notBefore = Date.parse(job.not_before);
  const claimed = job.attempts?.[0]?.claimed_at ? Date.parse(job.attempts[0].claimed_at) : undefined;
  if (claimed === undefined) return "";
  const end = job.ended_at ? Date.parse(job.ended_at) : now;
  const worked = workedMs(job, now);
  const ran = formatSpan(worked, t);
  // Between the first claim and the end, what was not work was waiting
  // (between attempts: a failure until a resume, a stopped worker's lease).
  const between = end - claimed - worked;
  const gap = (job.attempts?.length ?? 0) > 1 && between >= 1000 ? ` · ${t("jobt.timing_between", { time: formatSpan(between, t) })}` : "";
  const grace = Number.isNaN(notBefore) ? 0 : Math.max(0, notBefore - queued);
  if (grace < 1000) return t("jobt.timing_ran", { ran }) + gap;
  const late = claimed - Math.max(notBefore, queued);
  if (late >= 1000) return t("jobt.timing_queued", { grace: formatSpan(grace, t), queued: formatSpan(late, t), ran }) + gap;
  return t("jobt.timing", { grace: formatSpan(grace, t), ran }) + gap;
}

/** resumeCheck says what a resume does first about an uncertain step (docs/jobs.md, "Resume verification"). */
export function resumeCheck(step: string, t: T): string {
  let check: Key = "jobt.check.other";
  if (step.startsWith("delete_")) check = "jobt.check.delete";
  else if (step === "force_push_template") check = "jobt.check.push";
  else if (step === "create_repo") check = "jobt.check.create_repo";
  else if (step === "push_code") check = "jobt.check.push_code";
  return t("jobt.resume_checks", { step: t.dyn("step", step), check: t(check) });
}

/** eventCategory types an event for the history's colour and filter. */
export function eventCategory(type: string): "outcome" | "step" | "resource" | "lifecycle" {
  if (/^Job(Succeeded|Failed|TimedOut|Cancelled|Abandoned)$/.test(type)) return "outcome";
  if (type.startsWith("Step")) return "step";
  if (/Deleted|DeleteAccepted|Created|Pushed|Repo|Resource/.test(type)) return "resource";
  return "lifecycle";
}
