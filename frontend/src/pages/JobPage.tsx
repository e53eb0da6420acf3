import { useMemo, useRef, useState, type ReactNode } from "react";
import { Button } from "../ui/Button";
import { StateBadge } from "../ui/Badge";
import { jobTone, stepTone } from "../ui/tone";
import { Link, useLocation } from "wouter";
import { momentHref } from "../replay/moment";
import { TERMINAL_STATES, jobsService, type JobView, type RecordedEvent, type StepView } from "../services/jobs";
import { jobActions } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { LoadFallback } from "../components/LoadFallback";
import { RecoveryNotice, failureOf } from "../components/Recovery";
import { completedSteps } from "../components/Steps";
import { Actor } from "../components/Actor";
import { JobTimeline } from "../components/JobTimeline";
import { HEARTBEATS } from "./timelineModel";
import { eventCategory, jobTiming, jobTitle, resumeCheck } from "../components/jobText";
import { CopyButton, ResourceId } from "../components/ResourceId";
import { CleanupHow } from "../components/CleanupHow";
import { cleanupOf, jobLeftovers } from "../leftovers";
import { actorName, failureText, workerName, formatSpan, formatTime, reasonText, resourceLabel, untouched } from "../format";
import { useT, type Key, type T } from "../i18n";
import { When } from "../components/When";
import { noteServerInstant } from "../live/clock";
import { useNow } from "../live/ticker";
import { announce } from "../live/announce";
import { putJob, useEpoch, useJob, useSlot } from "../live/store";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";
import { jobTabState, useTab } from "../live/tabState";
import { groupHistory, type StepGroup } from "./historyGroups";

/** JobPage is a job's timeline: its live view and every event of its stream. */
export function JobPage({ id }: { id: string }) {
  const t = useT();
  const job = useJob(id);
  const epoch = useEpoch();
  const load = useLoad(`job:${id}`, `${id}:${epoch}`, async (signal) => {
    const j = await jobsService.get(id, signal);
    putJob(j);
    return j;
  });
  if (!job) return <LoadFallback load={load} notFound={t("job.not_found", { id })} />;
  return <JobDetail job={job} />;
}

function JobDetail({ job }: { job: JobView }) {
  const t = useT();
  useTab(`${t.dyn("kind", job.kind)} · ${job.slot}`, jobTabState(job.state));
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
    const got = (await jobsService.events(job.id, signal, last)).events ?? [];
    // Events are immutable: whatever arrives after the last one held is appended.
    const add = got.filter((e) => last === undefined || e.revision > last);
    history.current = { epoch, events: add.length > 0 ? [...base, ...add] : base };
    // The page draws these events against now: now is no earlier than the last of them.
    if (add.length > 0) noteServerInstant(add[add.length - 1].meta?.time);
    return history.current.events;
  });
  const held = events.data ?? [];
  const unsuccessful = TERMINAL_STATES.has(job.state) && job.state !== "succeeded";
  // Cancelled before any step ran: the slot's resources are not "left over".
  const nothingChanged = untouched(job.state, completedSteps(job.steps), job.uncertain_step);

  const resume = async () => {
    const r = await cmd.run(() => jobsService.resume(job.id));
    if (r) {
      announce(t("job.resumed"));
      if (r.job_id !== job.id) navigate(`/jobs/${encodeURIComponent(r.job_id)}`);
    }
  };
  const cancel = async () => {
    const r = await cmd.run(() => jobsService.cancel(job.id));
    if (r) announce(t("job.cancelled"));
  };

  return (
    <section aria-labelledby="job-title" className="job-page" data-testid="job-page" data-state={job.state}>
      <h1 id="job-title" data-testid="job-title">
        <JobTitle job={job} />
      </h1>
      <p className="job-status">
        <StateBadge tone={jobTone(job.state)} data-testid="job-state">
          {t.dyn("state", job.state)}
        </StateBadge>{" "}
        {t.dyn("kind", job.kind)} · <Link href={`/slots/${encodeURIComponent(job.slot)}`}>{job.slot}</Link>
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
            ...failureOf(job.steps, job.uncertain_step),
            reason: job.reason,
          }}
          resumable={job.resumable}
        >
          {/* Resume first: on a phone it was below the fold (issue 27 item 6). */}
          {job.resumable && may.resume && (
            <div className="actions">
              <Button variant="primary" disabled={cmd.pending} onClick={() => void resume()} data-testid="resume">
                {t("job.resume")}
              </Button>
            </div>
          )}
        </RecoveryNotice>
      )}
      <p className="muted" data-testid="job-who-when">
        {t("jobt.who_when", { actor: actorName(job.requested_by, t), time: "" })}
        <When iso={job.queued_at} />
        {job.attempts?.[0] && (
          <>
            {" · "}
            {t("jobt.started", { time: "" })}
            <When iso={job.attempts[0].claimed_at} />
          </>
        )}
        {job.ended_at && (
          <>
            {" · "}
            {t("jobt.ended", { time: "" })}
            <When iso={job.ended_at} />
          </>
        )}
        {job.state === "queued" && <> · {t("job.not_before", { time: formatTime(job.not_before, t.lang) })}</>}
      </p>
      <JobTiming job={job} />
      {job.state === "succeeded" && <JobDone job={job} />}
      <dl className="facts job-ids">
        <dt>{t("job.id_label")}</dt>
        <dd data-testid="job-id">
          <code>{job.id}</code> <CopyButton text={job.id} testId="copy-job-id" />
        </dd>
        {job.kind === "pr_deploy" && job.params?.head && (
          // What this push deploys (issue 34): the PR's head and where it comes from.
          <>
            <dt>{t("pr.job_head")}</dt>
            <dd data-testid="job-pr-head">
              <code>{job.params.head.slice(0, 12)}</code> · <code>{job.params.pr_source ?? ""}</code> <code>{job.params.pr_branch ?? ""}</code>
            </dd>
          </>
        )}
        {job.correlation_id && job.correlation_id !== job.id && (
          <>
            <dt>{t("job.correlation_label")}</dt>
            <dd data-testid="job-correlation">
              <code>{job.correlation_id}</code> <CopyButton text={job.correlation_id} testId="copy-correlation-id" />
            </dd>
          </>
        )}
      </dl>

      {job.uncertain_step && (
        <div className="uncertain-box" data-testid="job-uncertain">
          <p className="warn-text">{t("job.uncertain", { step: t.dyn("step", job.uncertain_step) })}</p>
          {job.resumable && <p data-testid="resume-check">{resumeCheck(job.uncertain_step, t)}</p>}
        </div>
      )}
      {job.reason && !unsuccessful && (
        <p>
          <strong>{t("job.reason")}:</strong> {job.reason_code ? failureText({ code: job.reason_code, args: job.reason_args }, t) : reasonText(job.reason, t)}
        </p>
      )}

      <div className="actions">
        {job.resumable && may.resume && !unsuccessful && (
          <Button variant="primary" disabled={cmd.pending} onClick={() => void resume()} data-testid="resume">
            {t("job.resume")}
          </Button>
        )}
        {job.cancellable && may.cancel && (
          <button type="button" className="danger" disabled={cmd.pending} onClick={() => void cancel()} data-testid="cancel">
            {t("job.cancel")}
          </button>
        )}
      </div>
      <CommandError error={cmd.error} />

      {/* One timeline instead of a step list and a history that both listed the steps (issue 35 item 8). */}
      <JobTimeline job={job} events={held} />

      <details className="attempts-box">
        <summary>
          {t("job.attempts")} ({(job.attempts ?? []).length})
        </summary>
      <ul data-testid="attempts">
        {(job.attempts ?? []).map((a) => (
          // The worker by its number; its whole id (host, process, worker) as the line's tooltip, for operators.
          <li key={a.number} title={a.worker} data-worker={a.worker}>
            {t("job.attempt_line", {
              number: a.number,
              worker: workerName(a.worker, t),
              claimed: formatTime(a.claimed_at, t.lang),
              lease: formatTime(a.lease_until, t.lang),
            })}
            {a.ended_at && <> · {t("job.attempt_ended", { time: formatTime(a.ended_at, t.lang), outcome: a.outcome ? t.dyn("state", a.outcome) : "" })}</>}
          </li>
        ))}
      </ul>
      </details>

      <JobRemaining job={job} nothingChanged={nothingChanged} />

      {events.error && <CommandError error={events.error} />}
      <EventHistory events={held} slot={job.slot} steps={job.steps ?? []} uncertain={job.uncertain_step} />
    </section>
  );
}

/**
 * JobRemaining is what the job left: the resources it could not delete
 * (a failed job's remaining) and what its steps left on the server that a
 * person must clean (a Docker volume and its data), each with the command —
 * one list under one heading, so a succeeded reset never says "none" below
 * a volume it left (issue 35 item 3). A left volume no longer among the
 * slot's resources is not listed.
 */
function JobRemaining({ job, nothingChanged }: { job: JobView; nothingChanged: boolean }) {
  const t = useT();
  const slot = useSlot(job.slot);
  const left = jobLeftovers(job, slot);
  const remaining = nothingChanged ? [] : (job.remaining ?? []);
  const rows = [...remaining, ...left.filter((l) => !remaining.some((r) => r.kind === l.kind && r.id === l.id))];
  return (
    <section aria-labelledby="job-remaining-title" className={left.length > 0 ? "notice left-on-server" : undefined} data-testid={left.length > 0 ? "job-left" : undefined}>
      <h2 id="job-remaining-title">{t("job.remaining")}</h2>
      {rows.length > 0 ? (
        <ul data-testid="job-remaining">
          {rows.map((r) => {
            const how = cleanupOf(r);
            return (
              <li key={`${r.kind}:${r.id}`} data-resource={`${r.kind}:${r.id}`} data-to-clean={how ? "true" : undefined}>
                {resourceLabel(r, t)}
                {how && (
                  <>
                    {" "}
                    <StateBadge tone="attention">{t("remaining.problem.to_clean")}</StateBadge>
                    <CleanupHow cleanup={how} id={r.id} />
                  </>
                )}
              </li>
            );
          })}
        </ul>
      ) : (
        <p data-testid="job-remaining-none">{t("common.none")}</p>
      )}
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
  // A worker by its number; its id is in the event's data, below the line.
  if (typeof d.worker === "string") parts.push(workerName(d.worker, t));
  if (typeof d.resource === "object" && d.resource !== null) {
    const r = d.resource as { kind?: unknown; id?: unknown };
    if (typeof r.kind === "string" && typeof r.id === "string") parts.push(`${t.dyn("res", r.kind)} ${r.id}`);
  }
  if (typeof d.http_status === "number" && d.http_status > 0) parts.push(t("job.http_status", { status: d.http_status }));
  // A failure in the reader's words from its code; its original text is in the event's data below.
  const strs = (x: unknown) => (typeof x === "object" && x !== null ? (x as Record<string, string>) : undefined);
  const code = (x: unknown) => (typeof x === "string" ? x : undefined);
  if (typeof d.error === "string" || typeof d.error_code === "string") parts.push(failureText({ code: code(d.error_code), args: strs(d.error_args) }, t));
  if (type === "JobFailed") parts.push(failureText({ code: code(d.reason_code), args: strs(d.reason_args) }, t));
  else if (typeof d.reason === "string") parts.push(reasonText(d.reason, t));
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

/**
 * JobDone is the outcome moment of a finished job (issue 27 item 5): a
 * promote links the repository it made; a reset or teardown says what the
 * slot is now.
 */
function JobDone({ job }: { job: JobView }) {
  const t = useT();
  // Not "every step confirmed, nothing left" above a volume it left (issue 35 item 3).
  const left = jobLeftovers(job, useSlot(job.slot)).length;
  const target = job.kind === "promote" && job.params?.project && job.params?.name ? `${job.params.project}/${job.params.name}` : "";
  return (
    <div className="notice outcome" role="status" data-testid="job-done">
      <span aria-hidden="true">✓ </span>
      <strong>{t("outcome.done")}</strong>{" "}
      {target ? (
        <>
          {t("outcome.promoted", { repo: target })} <ResourceId r={{ kind: "repository", id: target }} />
        </>
      ) : (
        t(job.kind === "teardown" ? "outcome.torn_down" : job.kind === "reset" ? "outcome.reset_short" : "outcome.job", { slot: job.slot })
      )}
      {left > 0 && (
        <>
          {" "}
          <span data-testid="job-done-left">{t("outcome.left_to_clean", { count: left })}</span>
        </>
      )}
    </div>
  );
}

/** JobTiming says how long the job waited in grace and ran; live from the one ticker while it runs. */
function JobTiming({ job }: { job: JobView }) {
  const t = useT();
  const now = useNow();
  const text = jobTiming(job, now, t);
  return text ? (
    <p className="muted" data-testid="job-timing">
      {text}
    </p>
  ) : null;
}

/** JobTitle is the human title; a running job's elapsed time comes from the one ticker. */
function JobTitle({ job }: { job: JobView }) {
  const t = useT();
  const now = useNow();
  return <>{jobTitle(job, now, t)}</>;
}

const CATEGORY_KEY: Record<ReturnType<typeof eventCategory>, Key> = {
  lifecycle: "jobt.cat.lifecycle",
  step: "jobt.cat.step",
  resource: "jobt.cat.resource",
  outcome: "jobt.cat.outcome",
};

/**
 * EventHistory is the job's raw event log, like Temporal's history: the
 * job's own events one row each, a step's events folded under one row per
 * step with its outcome, attempts and running time (issue 27 item 8);
 * every event collapsible with its type, time, actor, a one-line summary
 * and the full data; filterable by type and by text.
 */
function EventHistory({ events, slot, steps, uncertain }: { events: readonly RecordedEvent[]; slot: string; steps: readonly StepView[]; uncertain?: string }) {
  const t = useT();
  const [type, setType] = useState("");
  const [text, setText] = useState("");
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  // Lease renewals are a heartbeat, not progress: 12 of 22 events during a
  // hang (issue 35 item 8). Hidden unless asked for (or filtered by type).
  const [beats, setBeats] = useState(false);
  const beatCount = useMemo(() => events.filter((e) => HEARTBEATS.has(e.type)).length, [events]);
  const types = useMemo(() => [...new Set(events.map((e) => e.type))], [events]);
  const shown = useMemo(() => {
    const q = text.trim().toLowerCase();
    return events.filter(
      (e) =>
        (beats || type === e.type || !HEARTBEATS.has(e.type)) &&
        (!type || e.type === type) &&
        (!q || e.type.toLowerCase().includes(q) || JSON.stringify(e.data ?? "").toLowerCase().includes(q)),
    );
  }, [events, type, text, beats]);
  const rows = useMemo(() => groupHistory(shown, steps, uncertain), [shown, steps, uncertain]);
  const toggle = (key: string, isOpen: boolean): void => {
    setOpen((prev) => {
      if (prev.has(key) === isOpen) return prev;
      const next = new Set(prev);
      if (isOpen) next.add(key);
      else next.delete(key);
      return next;
    });
  };
  const allKeys = (): Set<string> => new Set([...shown.map((e) => `e${e.position}`), ...rows.flatMap((r) => (r.kind === "step" ? [`s${r.step}`] : []))]);
  const item = (e: RecordedEvent) => <HistoryEvent key={e.position} e={e} slot={slot} open={open.has(`e${e.position}`)} onToggle={(o) => toggle(`e${e.position}`, o)} />;
  return (
    <details className="history" data-testid="history">
      <summary>
        <h2>{t("jobt.history")}</h2> <span className="muted">{t("jobt.history_count", { shown: shown.length, count: events.length })}</span>
      </summary>
      {events.length === 0 ? (
        <p>{t("job.no_events")}</p>
      ) : (
        <>
          <div className="history-filters">
            <label>
              <span>{t("jobt.history_type")}</span>{" "}
              <select value={type} onChange={(e) => setType(e.target.value)} data-testid="history-type">
                <option value="">{t("jobt.history_all")}</option>
                {types.map((ty) => (
                  <option key={ty} value={ty}>
                    {t.dyn("event", ty)}
                  </option>
                ))}
              </select>
            </label>
            <input
              type="search"
              aria-label={t("jobt.history_filter")}
              placeholder={t("jobt.history_filter")}
              value={text}
              onChange={(e) => setText(e.target.value)}
              data-testid="history-filter"
            />
            {beatCount > 0 && (
              <label className="check">
                <input type="checkbox" checked={beats} onChange={(e) => setBeats(e.target.checked)} data-testid="history-heartbeats" />{" "}
                {t("tl.heartbeats", { count: beatCount })}
              </label>
            )}
            <button type="button" onClick={() => setOpen(allKeys())} data-testid="history-expand">
              {t("jobt.expand_all")}
            </button>
            <button type="button" onClick={() => setOpen(new Set())}>
              {t("jobt.collapse_all")}
            </button>
          </div>
          {shown.length === 0 && <p>{t("jobt.history_none")}</p>}
          <ol className="timeline history-list" data-testid="timeline">
            {rows.map((r) => (r.kind === "event" ? item(r.event) : <HistoryStep key={`s${r.step}`} g={r} open={open.has(`s${r.step}`)} onToggle={(o) => toggle(`s${r.step}`, o)}>{r.events.map(item)}</HistoryStep>))}
          </ol>
        </>
      )}
    </details>
  );
}

/** HistoryStep is one step's row: name, outcome, attempts, running time; its events folded under it. */
function HistoryStep({ g, open, onToggle, children }: { g: StepGroup; open: boolean; onToggle: (open: boolean) => void; children: ReactNode }) {
  const t = useT();
  const attempts = g.attempts.map((a) => `#${a}`).join(", ");
  return (
    <li className={`ev ev-step ev-group ev-outcome-${g.outcome}`} data-type="StepGroup" data-step={g.step} data-outcome={g.outcome} data-testid="history-step">
      <details open={open} onToggle={(ev) => onToggle(ev.currentTarget.open)}>
        <summary>
          <span className="badge ev-cat ev-cat-step">{t("jobt.cat.step")}</span> <strong className="ev-type">{t.dyn("step", g.step)}</strong>{" "}
          <StateBadge tone={stepTone(g.outcome)}>{t.dyn("stepstate", g.outcome)}</StateBadge>{" "}
          <span className="muted small" data-testid="history-step-facts">
            {attempts && <>{t(g.attempts.length > 1 ? "jobt.group_attempts" : "jobt.group_attempt", { list: attempts })} · </>}
            {g.events.length > 1 && (
              <>
                <span data-testid="history-step-took">{t("jobt.step_took", { time: formatSpan(g.ms, t) })}</span>
                {" · "}
              </>
            )}
            {g.events.length === 1 ? t("jobt.group_event_one") : t("jobt.group_events", { count: g.events.length })}
            {" · "}
            <When iso={g.events[0].meta?.time} />
          </span>
        </summary>
        <ol className="history-list history-sub">{children}</ol>
      </details>
    </li>
  );
}

/** HistoryEvent is one event: a collapsible summary line over its full data, and a link to the slot at that moment. */
function HistoryEvent({ e, slot, open, onToggle }: { e: RecordedEvent; slot: string; open: boolean; onToggle: (open: boolean) => void }) {
  const t = useT();
  const cat = eventCategory(e.type);
  return (
    <li data-type={e.type} className={`ev ev-${cat}`}>
      <details open={open} onToggle={(ev) => onToggle(ev.currentTarget.open)}>
        <summary>
          <span className="ev-rev">#{e.revision}</span> <span className={`badge ev-cat ev-cat-${cat}`}>{t(CATEGORY_KEY[cat])}</span>{" "}
          <strong className="ev-type">{t.dyn("event", e.type)}</strong> <span className="muted small">
            <When iso={e.meta?.time} />
            {e.meta?.actor && (
              <>
                {" · "}
                <Actor actor={e.meta.actor} />
              </>
            )}
          </span>
          <span className="ev-summary">{eventSummary(e.data, t, e.type)}</span>
        </summary>
        <div className="ev-data">
          <span className="muted small">{t("jobt.event_data")}</span>
          <pre data-testid="event-data">{JSON.stringify(e.data, null, 2)}</pre>
        </div>
      </details>
      {slot && (
        // Outside the summary: a link inside it would nest interactive controls.
        <Link href={momentHref(slot, e.position)} className="small ev-moment" data-testid="history-moment">
          {t("asof.link")}
        </Link>
      )}
    </li>
  );
}
