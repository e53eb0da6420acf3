import { useRef } from "react";
import { Link, useLocation } from "wouter";
import { api } from "../api/client";
import type { JobView, RecordedEvent } from "../api/types";
import { TERMINAL_STATES } from "../api/types";
import { jobActions } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { LoadFallback } from "../components/LoadFallback";
import { RecoveryNotice } from "../components/Recovery";
import { Steps, completedSteps } from "../components/Steps";
import { formatTime, reasonText, resourceLabel, untouched } from "../format";
import { useT, type T } from "../i18n";
import { announce } from "../live/announce";
import { putJob, useEpoch, useJob } from "../live/store";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";

/** JobPage is a job's timeline: its live view and every event of its stream. */
export function JobPage({ id }: { id: string }) {
  const t = useT();
  const job = useJob(id);
  const epoch = useEpoch();
  const load = useLoad(`job:${id}`, `${id}:${epoch}`, async (signal) => {
    const j = await api.job(id, signal);
    putJob(j);
    return j;
  });
  if (!job) return <LoadFallback load={load} notFound={t("job.not_found", { id })} />;
  return <JobDetail job={job} />;
}

function JobDetail({ job }: { job: JobView }) {
  const t = useT();
  const [, navigate] = useLocation();
  const cmd = useCommand();
  const may = jobActions(useSubject());
  // The raw events: the history once, then, whenever the job view moves
  // (pushed by the stream), only the events after the last one held
  // (issue 14). A snapshot (new epoch) starts over.
  const epoch = useEpoch();
  const history = useRef<{ epoch: number; events: RecordedEvent[] }>({ epoch, events: [] });
  const events = useLoad(`events:${job.id}`, `${job.id}:${job.revision}:${epoch}`, async (signal) => {
    const base = history.current.epoch === epoch ? history.current.events : [];
    const last = base.length > 0 ? base[base.length - 1].revision : undefined;
    const got = (await api.jobEvents(job.id, signal, last)).events ?? [];
    // Events are immutable: whatever arrives after the last one held is appended.
    const add = got.filter((e) => last === undefined || e.revision > last);
    history.current = { epoch, events: add.length > 0 ? [...base, ...add] : base };
    return history.current.events;
  });
  const held = events.data ?? [];
  const unsuccessful = TERMINAL_STATES.has(job.state) && job.state !== "succeeded";
  // Cancelled before any step ran: the slot's resources are not "left over".
  const nothingChanged = untouched(job.state, completedSteps(job.steps), job.uncertain_step);

  const resume = async () => {
    const r = await cmd.run(() => api.resume(job.id));
    if (r) {
      announce(t("job.resumed"));
      if (r.job_id !== job.id) navigate(`/jobs/${encodeURIComponent(r.job_id)}`);
    }
  };
  const cancel = async () => {
    const r = await cmd.run(() => api.cancel(job.id));
    if (r) announce(t("job.cancelled"));
  };

  return (
    <section aria-labelledby="job-title" data-testid="job-page" data-state={job.state}>
      <h1 id="job-title">{t("job.title", { id: job.id })}</h1>
      <p>
        {t.dyn("kind", job.kind)} · <Link href={`/slots/${encodeURIComponent(job.slot)}`}>{job.slot}</Link> ·{" "}
        <span className={`badge st-${job.state}`} data-testid="job-state">
          {t.dyn("state", job.state)}
        </span>{" "}
        · {t("job.requested_by", { actor: job.requested_by })}
      </p>
      <p className="muted">
        {t("job.not_before", { time: formatTime(job.not_before, t.lang) })}
        {job.ended_at && <> · {t("job.ended", { time: formatTime(job.ended_at, t.lang) })}</>}
        {job.correlation_id && <> · {job.correlation_id}</>}
      </p>

      {unsuccessful && (
        <RecoveryNotice
          linkTimeline={false}
          info={{
            jobId: job.id,
            kind: job.kind,
            state: job.state,
            completed: completedSteps(job.steps),
            uncertain: job.uncertain_step,
            remaining: job.remaining,
          }}
        />
      )}
      {job.uncertain_step && <p className="warn-text">{t("job.uncertain", { step: t.dyn("step", job.uncertain_step) })}</p>}
      {job.reason && (
        <p>
          <strong>{t("job.reason")}:</strong> {job.reason}
        </p>
      )}

      <div className="actions">
        {job.resumable && may.resume && (
          <button type="button" disabled={cmd.pending} onClick={() => void resume()} data-testid="resume">
            {t("job.resume")}
          </button>
        )}
        {job.cancellable && may.cancel && (
          <button type="button" className="danger" disabled={cmd.pending} onClick={() => void cancel()} data-testid="cancel">
            {t("job.cancel")}
          </button>
        )}
      </div>
      <CommandError error={cmd.error} />

      <h2>{t("job.steps")}</h2>
      <Steps steps={job.steps ?? []} uncertain={job.uncertain_step} />

      <h2>{t("job.attempts")}</h2>
      <ul data-testid="attempts">
        {(job.attempts ?? []).map((a) => (
          <li key={a.number}>
            {t("job.attempt_line", {
              number: a.number,
              worker: a.worker,
              claimed: formatTime(a.claimed_at, t.lang),
              lease: formatTime(a.lease_until, t.lang),
            })}
            {a.ended_at && <> · {t("job.attempt_ended", { time: formatTime(a.ended_at, t.lang), outcome: a.outcome ? t.dyn("state", a.outcome) : "" })}</>}
          </li>
        ))}
      </ul>

      <h2>{t("job.remaining")}</h2>
      {!nothingChanged && job.remaining && job.remaining.length > 0 ? (
        <ul data-testid="job-remaining">
          {job.remaining.map((r) => (
            <li key={`${r.kind}:${r.id}`}>{resourceLabel(r, t)}</li>
          ))}
        </ul>
      ) : (
        <p>{t("common.none")}</p>
      )}

      <h2>{t("job.timeline")}</h2>
      {events.error && <CommandError error={events.error} />}
      <Timeline events={held} t={t} />
    </section>
  );
}

/** eventSummary picks the fields of an event a person needs in one line. */
export function eventSummary(data: unknown, t: T, type = ""): string {
  if (typeof data !== "object" || data === null) return "";
  const d = data as Record<string, unknown>;
  const parts: string[] = [];
  if (typeof d.step === "string") parts.push(t.dyn("step", d.step));
  if (typeof d.attempt === "number" && d.attempt > 0) parts.push(`#${d.attempt}`);
  if (typeof d.worker === "string") parts.push(d.worker);
  if (typeof d.resource === "object" && d.resource !== null) {
    const r = d.resource as { kind?: unknown; id?: unknown };
    if (typeof r.kind === "string" && typeof r.id === "string") parts.push(`${t.dyn("res", r.kind)} ${r.id}`);
  }
  if (typeof d.http_status === "number" && d.http_status > 0) parts.push(t("job.http_status", { status: d.http_status }));
  if (typeof d.error === "string") parts.push(d.error);
  if (typeof d.reason === "string") parts.push(reasonText(d.reason, t));
  if (typeof d.uncertain_step === "string") parts.push(t("recovery.uncertain", { step: t.dyn("step", d.uncertain_step) }));
  if (Array.isArray(d.completed_steps) && d.completed_steps.length > 0) {
    parts.push(t("job.completed_steps", { steps: d.completed_steps.map((s) => t.dyn("step", String(s))).join(", ") }));
  }
  // A cancel before any step ran lists the slot's resources as "remaining":
  // they are untouched, not left over (issue 14).
  const nothingChanged =
    type === "JobCancelled" && !(Array.isArray(d.completed_steps) && d.completed_steps.length > 0) && typeof d.uncertain_step !== "string";
  if (nothingChanged) parts.push(t("job.nothing_changed"));
  else if (Array.isArray(d.remaining) && d.remaining.length > 0) {
    parts.push(t("recovery.remaining", { resources: d.remaining.map((r: { kind?: string; id?: string }) => `${t.dyn("res", r.kind ?? "")} ${r.id ?? ""}`).join(", ") }));
  }
  if (typeof d.old_sha === "string" && typeof d.new_sha === "string") parts.push(`${d.old_sha.slice(0, 8)} → ${d.new_sha.slice(0, 8)}`);
  if (d.already_absent === true) parts.push(t("job.already_absent"));
  return parts.join(" · ");
}

function Timeline({ events, t }: { events: readonly RecordedEvent[]; t: T }) {
  if (events.length === 0) return <p>{t("job.no_events")}</p>;
  return (
    <ol className="timeline" data-testid="timeline" start={0}>
      {events.map((e) => (
        <li key={e.position} data-type={e.type}>
          <strong>{t.dyn("event", e.type)}</strong>{" "}
          <span className="muted">
            {formatTime(e.meta?.time, t.lang)} {e.meta?.actor ? `· ${e.meta.actor}` : ""}
          </span>
          <div>{eventSummary(e.data, t, e.type)}</div>
        </li>
      ))}
    </ol>
  );
}
