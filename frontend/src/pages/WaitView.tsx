import { useEffect, useRef } from "react";
import { Link, useLocation } from "wouter";
import { jobsService } from "../services/jobs";
import { jobActions } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { Steps, completedSteps } from "../components/Steps";
import { apiErrorText, formatDuration, resourceLabel, stepList } from "../format";
import { useT } from "../i18n";
import { announce } from "../live/announce";
import { putJob, useEpoch, useJob, useSlot } from "../live/store";
import { jobLeftovers } from "../leftovers";
import { useStreamStatus } from "../live/stream";
import { useNow } from "../live/ticker";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";
import { jobTabState, useTab } from "../live/tabState";
import { waitPhase } from "./waitPhase";
import { FailureSentence, failureOf } from "../components/Recovery";
import { setOutcome } from "../live/outcome";
import { workedMs } from "../components/jobText";
import { formatSpan } from "../format";

/**
 * WaitView follows one release (reset) job by id: grace countdown, then live
 * steps. It moves to the slot page by itself only on success.
 */
export function WaitView({ id }: { id: string }) {
  const t = useT();
  const may = jobActions(useSubject());
  const [, navigate] = useLocation();
  const job = useJob(id);
  const epoch = useEpoch();
  const live = useStreamStatus() === "live";
  const now = useNow();
  const load = useLoad(`job:${id}`, `${id}:${epoch}:${live}`, async (signal) => {
    const j = await jobsService.get(id, signal);
    putJob(j);
    return j;
  });
  const phase = waitPhase(job, load, live, now);
  // "Every step is confirmed" is not the whole story when a step left a
  // volume on the server (issue 35 item 3): the count goes with it.
  const left = jobLeftovers({ steps: job?.steps ?? [] }, useSlot(job?.slot ?? "")).length;
  const succeeded = left > 0 ? t("wait.succeeded_left", { count: left }) : t("wait.succeeded");
  useTab(`${t.dyn("kind", "reset")} · ${job?.slot ?? id}`, job ? jobTabState(job.state) : "none");
  const cancel = useCommand();
  const resume = useCommand();
  const doResume = async () => {
    if (!job) return;
    const r = await resume.run(() => jobsService.resume(job.id));
    if (!r) return;
    announce(t("job.resumed"));
    // A resume continues the same job; this page keeps following it.
    if (r.job_id !== job.id) navigate(`/jobs/${encodeURIComponent(r.job_id)}/wait`);
  };

  const message =
    phase.kind === "succeeded"
      ? succeeded
      : phase.kind === "cancelled"
        ? t("wait.cancelled")
        : phase.kind === "failed"
        ? t("wait.failed", { state: t.dyn("state", phase.state) })
        : phase.kind === "unknown"
          ? t("wait.unknown")
          : phase.kind === "running"
            ? t("wait.running")
            : "";
  const announced = useRef("");
  useEffect(() => {
    if (message && message !== announced.current) {
      announced.current = message;
      announce(message);
    }
  }, [message]);
  // The only navigation of this page: after the job's own success.
  const doneSlot = phase.kind === "succeeded" ? job?.slot : undefined;
  useEffect(() => {
    if (doneSlot === undefined || !job) return;
    // The moment of success goes with the person to the slot page: "Done —
    // the reset of X finished in 1.3 s; the slot is vacant" (issue 27 item 5).
    const took = job.ended_at ? formatSpan(workedMs(job, Date.parse(job.ended_at)), t) : "";
    setOutcome({ where: `slot:${doneSlot}`, text: left > 0 ? t("outcome.reset_left", { slot: doneSlot, time: took, count: left }) : t("outcome.reset", { slot: doneSlot, time: took }) });
    navigate(`/slots/${encodeURIComponent(doneSlot)}`);
  }, [doneSlot, navigate, job, t, left]);

  const slot = job?.slot ?? "";
  return (
    <section aria-labelledby="wait-title" data-testid="wait-view" data-phase={phase.kind}>
      <h1 id="wait-title">
        {/* A reset the deadline started is no "release" (issue 35 item 6). */}
        {t(phase.kind === "cancelled" ? "wait.title_cancelled" : job?.requested_by === "system:deadline" ? "wait.title_deadline" : "wait.title", { slot })}
      </h1>
      <div className={`wait-status wait-${phase.kind}`} data-testid="wait-status">
        {phase.kind === "checking" && <p>{t("wait.checking")}</p>}
        {phase.kind === "grace" && (
          <p>{t("wait.grace", { time: formatDuration(Date.parse(phase.notBefore) - now, t) })}</p>
        )}
        {phase.kind === "queued" && <p>{t("wait.queued")}</p>}
        {phase.kind === "running" && <p>{t("wait.running")}</p>}
        {phase.kind === "succeeded" && <p data-testid="wait-succeeded">{succeeded}</p>}
        {phase.kind === "cancelled" && <p data-testid="wait-cancelled">{t("wait.cancelled")}</p>}
        {phase.kind === "not_found" && (
          <div role="alert" data-testid="wait-not-found">
            <p>{t("job.not_found", { id })}</p>
            <Link href="/">{t("slot.back")}</Link>
          </div>
        )}
        {phase.kind === "unknown" && (
          <div className="unknown" data-testid="cannot-verify">
            <strong>{t("wait.unknown")}</strong>
            <p>{phase.why === "stale" ? t("wait.stale_detail") : t("wait.unknown_detail")}</p>
            {job && <p data-testid="wait-recorded">{t("wait.recorded")}</p>}
            {load.error && <p className="muted">{apiErrorText(load.error, t)}</p>}
            <button type="button" onClick={load.reload}>
              {t("common.retry")}
            </button>
          </div>
        )}
        {phase.kind === "failed" && job && (
          <div data-testid="wait-failed">
            <FailureSentence
              info={{ jobId: job.id, kind: job.kind, state: job.state, completed: completedSteps(job.steps), uncertain: job.uncertain_step, remaining: job.remaining, ...failureOf(job.steps, job.uncertain_step), reason: job.reason }}
              resumable={job.resumable}
            />
            {job.resumable && may.resume && (
              <p className="actions">
                <button type="button" disabled={resume.pending} onClick={() => void doResume()} data-testid="resume">
                  {t("job.resume")}
                </button>
              </p>
            )}
            <p className="muted">{t("wait.failed", { state: t.dyn("state", phase.state) })}</p>
            <p>
              {completedSteps(job.steps).length > 0
                ? t("wait.failed_done", { steps: stepList(completedSteps(job.steps), t) })
                : job.uncertain_step
                  ? t("wait.failed_none_confirmed")
                  : t("wait.failed_nothing_done")}
            </p>
            {job.uncertain_step && (
              <p className="warn-text" data-testid="wait-uncertain">
                {t("wait.failed_uncertain", { step: t.dyn("step", job.uncertain_step) })}
              </p>
            )}
            <p>
              {job.remaining && job.remaining.length > 0
                ? t("wait.failed_remaining", { resources: job.remaining.map((r) => resourceLabel(r, t)).join(", ") })
                : t("wait.failed_nothing_remaining")}
            </p>
            <CommandError error={resume.error} />
            <Link href={`/jobs/${encodeURIComponent(job.id)}`} data-testid="timeline-link">
              {t("common.view_timeline")}
            </Link>
          </div>
        )}
      </div>
      {job && phase.kind === "grace" && job.cancellable && may.cancel && (
        <>
          <button type="button" disabled={cancel.pending} onClick={() => void cancel.run(() => jobsService.cancel(job.id))}>
            {t("job.cancel")}
          </button>
          <CommandError error={cancel.error} />
        </>
      )}
      {/* A release cancelled before it started has no step that will ever run. */}
      {job && phase.kind !== "cancelled" && <Steps steps={job.steps ?? []} uncertain={job.uncertain_step} />}
      {job && (
        <p>
          <Link href={`/jobs/${encodeURIComponent(job.id)}`}>{t("common.view_timeline")}</Link>
          {" · "}
          <Link href={`/slots/${encodeURIComponent(job.slot)}`}>{job.slot}</Link>
        </p>
      )}
    </section>
  );
}
