import { useState } from "react";
import { Button } from "../ui/Button";
import { StateBadge } from "../ui/Badge";
import { slotTone } from "../ui/tone";
import { Link, useLocation } from "wouter";
import { RESUMABLE_STATES, jobsService, type JobView } from "../services/jobs";
import { slotsService, type SlotView } from "../services/slots";
import { jobActions, ownsSlot, slotActions } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { LoadFallback } from "../components/LoadFallback";
import { ConfirmPlan } from "../components/ConfirmPlan";
import { Countdown } from "../components/Countdown";
import { EarlierDeadline } from "../components/EarlierDeadline";
import { OccupantPicker } from "../components/OccupantPicker";
import { RecoveryNotice } from "../components/Recovery";
import { AppStatus } from "../components/AppStatus";
import { PRPushes, PullRequestInfo } from "../pullrequests/PullRequestInfo";
import { actorName, formatTime, resourceName, stateReason, untouched } from "../format";
import { useT } from "../i18n";
import { announce } from "../live/announce";
import { putSlot, useSlot } from "../live/store";
import { serverNow } from "../live/clock";
import { useCommand } from "../live/useCommand";
import { ResourceId } from "../components/ResourceId";
import { CleanupHow } from "../components/CleanupHow";
import { cleanupOf } from "../leftovers";
import { useLoad } from "../live/useLoad";
import { SlotMoment, SlotTimeline } from "../replay/SlotAsOf";
import { OutcomeNotice } from "../components/OutcomeNotice";
import { setOutcome } from "../live/outcome";

type Confirm = { kind: "reset" | "teardown" | "promote"; params?: { project: string; name: string } } | undefined;

function untilIn(hours: number): string {
  return new Date(serverNow() + hours * 3_600_000).toISOString();
}

/**
 * extendedDeadline adds hours to the current deadline (or to now, when it has
 * passed): extend never moves a deadline earlier, and the server refuses one
 * that would (issue 14).
 */
export function extendedDeadline(deadline: string | undefined, hours: number, now: number = serverNow()): string {
  const from = Math.max(deadline ? Date.parse(deadline) || 0 : 0, now);
  return new Date(from + hours * 3_600_000).toISOString();
}

/** SlotPage: resources with ids, occupancy, the guarded jobs and the slot's job list. */
export function SlotPage({ name }: { name: string }) {
  const t = useT();
  const slot = useSlot(name);
  const load = useLoad(`slot:${name}`, name, async (signal) => {
    const s = await slotsService.get(name, signal);
    putSlot(s);
    return s;
  });
  if (!slot) return <LoadFallback load={load} notFound={t("slot.not_found", { name })} />;
  return <SlotDetail slot={slot} />;
}

function SlotDetail({ slot }: { slot: SlotView }) {
  const t = useT();
  const [, navigate] = useLocation();
  const cmd = useCommand();
  const [confirm, setConfirm] = useState<Confirm>(undefined);
  const [hours, setHours] = useState(8);
  const [by, setBy] = useState("");
  const [project, setProject] = useState("");
  const [repoName, setRepoName] = useState("");
  const busy = slot.active_job !== undefined;
  const subject = useSubject();
  // What this role may try; the server still decides (and answers 403).
  const may = slotActions(subject, slot);
  const mayJob = jobActions(subject);
  // The server resumes failed, timed-out and interrupted jobs, and a
  // teardown cancelled after it started (not other cancelled jobs).
  const rec = slot.recovery;
  const recKind = rec ? Object.values(slot.latest_jobs ?? {}).find((j) => j.id === rec.job_id)?.kind : undefined;
  const resumable =
    rec !== undefined &&
    !busy &&
    mayJob.resume &&
    (RESUMABLE_STATES.has(rec.state) ||
      (rec.state === "cancelled" && recKind === "teardown" && !untouched(rec.state, rec.completed_steps, rec.uncertain_step)));
  const resume = async () => {
    if (!slot.recovery) return;
    const r = await cmd.run(() => jobsService.resume(slot.recovery?.job_id ?? ""));
    if (!r) return;
    announce(t("job.resumed"));
    navigate(`/jobs/${encodeURIComponent(r.job_id)}`);
  };
  // Offered only where it can succeed (issue 35 item 7): the server tears
  // down a slot nobody occupies (backend/slots canStart), so an occupied
  // slot says "release it first" instead of a Teardown that dead-ends.
  const canTeardown = slot.lifecycle === "vacant" || slot.lifecycle === "teardown_incomplete";
  const retiredSlot = slot.lifecycle === "retired";
  const anyAction =
    (slot.lifecycle === "vacant" && may.occupy) ||
    (slot.lifecycle === "occupied" && (may.extend || may.release)) ||
    (!retiredSlot && (may.teardown || may.promote));

  const occupy = async () => {
    const s = await cmd.run(() => slotsService.occupy(slot.name, untilIn(hours), (may.occupyForOthers && by) || undefined));
    if (s) {
      putSlot(s);
      announce(t("slot.done_occupy"));
      setOutcome({ where: `slot:${slot.name}`, text: t("outcome.occupied", { slot: slot.name, who: s.occupant ?? "", time: formatTime(s.deadline, t.lang) }) });
    }
  };
  const extend = async () => {
    const s = await cmd.run(() => slotsService.extend(slot.name, extendedDeadline(slot.deadline, hours)));
    if (s) {
      putSlot(s);
      announce(t("slot.done_extend"));
      setOutcome({ where: `slot:${slot.name}`, text: t("outcome.extended", { slot: slot.name, time: formatTime(s.deadline, t.lang) }) });
    }
  };
  const go = async (reason: string) => {
    if (!confirm) return;
    const res = await cmd.run(() =>
      confirm.kind === "reset"
        ? slotsService.release(slot.name, reason || undefined)
        : confirm.kind === "teardown"
          ? slotsService.teardown(slot.name)
          : slotsService.promote(slot.name, confirm.params?.project ?? "", confirm.params?.name ?? ""),
    );
    if (!res) return;
    setConfirm(undefined);
    const id = encodeURIComponent(res.job_id);
    navigate(confirm.kind === "reset" ? `/jobs/${id}/wait` : `/jobs/${id}`);
  };

  return (
    <section aria-labelledby="slot-title" data-testid="slot-page">
      <p>
        <Link href="/">← {t("slot.back")}</Link>
      </p>
      <div className="page-head">
        <h1 id="slot-title">{slot.name}</h1>
        <StateBadge tone={slotTone(slot.lifecycle)} className={`lc lc-${slot.lifecycle}`} data-testid="slot-lifecycle">
          {t.dyn("lifecycle", slot.lifecycle)}
        </StateBadge>
      </div>
      <AppStatus slot={slot} />
      {slot.pull_request && (
        <section className="pr-panel" aria-labelledby="slot-pr-title">
          <h2 id="slot-pr-title">{t("pr.heading")}</h2>
          <PullRequestInfo slot={slot} />
          <PRPushes slot={slot} />
        </section>
      )}
      <OutcomeNotice where={`slot:${slot.name}`} />
      {slot.recovery && (
        <RecoveryNotice
          info={{
            jobId: slot.recovery.job_id,
            kind: slot.latest_jobs ? (Object.values(slot.latest_jobs).find((j) => j.id === slot.recovery?.job_id)?.kind ?? "") : "",
            state: slot.recovery.state,
            completed: slot.recovery.completed_steps,
            uncertain: slot.recovery.uncertain_step,
            remaining: slot.recovery.remaining,
            failedStep: slot.recovery.uncertain_step ?? Object.values(slot.latest_jobs ?? {}).find((j) => j.id === slot.recovery?.job_id)?.current_step,
          }}
          resumable={resumable}
        >
          {resumable && (
            <div className="actions">
              <Button variant="primary" disabled={cmd.pending} onClick={() => void resume()} data-testid="resume">
                {t("job.resume")}
              </Button>
              <span className="muted small">{t("slot.resume_hint")}</span>
            </div>
          )}
        </RecoveryNotice>
      )}

      <dl className="facts">
        {slot.occupant && (
          <>
            <dt>{t("slot.occupant")}</dt>
            <dd>{slot.occupant}</dd>
          </>
        )}
        <dt>{t("slot.deadline")}</dt>
        <dd>
          {slot.deadline ? (
            <>
              {formatTime(slot.deadline, t.lang)} · <Countdown until={slot.deadline} />
            </>
          ) : (
            t("slot.no_deadline")
          )}
        </dd>
        {!retiredSlot && (
          // A retired slot's repository was deleted by its teardown: not listed as its own.
          <>
            <dt>{t("slot.repo")}</dt>
            <dd>
              {slot.repo.project}/{slot.repo.slug} ({t("slot.branch")} {slot.branch || "main"})
            </dd>
          </>
        )}
        <dt>{t("slot.template")}</dt>
        <dd>
          {slot.template_repo.project}/{slot.template_repo.slug}@{slot.template_ref}
        </dd>
        {slot.promoted_to && slot.promoted_to.length > 0 && (
          <>
            <dt>{t("slot.promoted_to")}</dt>
            <dd>{slot.promoted_to.map((r) => `${r.project}/${r.slug}`).join(", ")}</dd>
          </>
        )}
        {slot.state_reason && (
          <>
            <dt>{t("slot.state_reason")}</dt>
            <dd>{stateReason(slot, t)}</dd>
          </>
        )}
      </dl>

      {slot.active_job && (
        <div className="card-job">
          <h2>{t("slot.active_job")}</h2>
          <Link href={`/jobs/${encodeURIComponent(slot.active_job.id)}${slot.active_job.kind === "reset" ? "/wait" : ""}`}>
            {t.dyn("kind", slot.active_job.kind)} · {t.dyn("state", slot.active_job.state)}
            {slot.active_job.current_step ? ` · ${t.dyn("step", slot.active_job.current_step)}` : ""}
          </Link>
          {slot.active_job.state === "queued" && slot.active_job.not_before && (
            <>
              {" · "}
              <span data-testid="slot-job-starts">
                <Countdown until={slot.active_job.not_before} starts />
              </span>
            </>
          )}
          <progress max={Math.max(slot.active_job.steps_total, 1)} value={slot.active_job.steps_done} />{" "}
          {t("slot.step_progress", { done: slot.active_job.steps_done, total: slot.active_job.steps_total })}
        </div>
      )}

      <h2>{t("slot.actions")}</h2>
      {retiredSlot && (
        // Nobody can change a retired slot: not a matter of role (issue 35 item 6).
        <p className="muted" data-testid="retired-note">
          {t("slot.retired_note")}
        </p>
      )}
      {!anyAction && !retiredSlot && (
        <p className="muted" data-testid="read-only">
          {t("auth.read_only", { role: t.dyn("role", subject?.role ?? "") })}
        </p>
      )}
      <div className="actions">
        {((slot.lifecycle === "vacant" && may.occupy) || (slot.lifecycle === "occupied" && may.extend)) && (
          <label>
            {t("slot.hours")}{" "}
            <input type="number" min={1} max={720} value={hours} onChange={(e) => setHours(Math.max(1, Number(e.target.value) || 1))} />
          </label>
        )}
        {slot.lifecycle === "vacant" && may.occupy && (
          <>
            {may.occupyForOthers && subject && <OccupantPicker me={subject} value={by} onChange={setBy} />}
            <button type="button" disabled={cmd.pending || busy} onClick={() => void occupy()} data-testid="occupy">
              {t("slot.occupy")}
            </button>
          </>
        )}
        {slot.lifecycle === "occupied" && may.extend && (
          <button
            type="button"
            disabled={cmd.pending || busy}
            onClick={() => void extend()}
            data-testid="extend"
            title={t("slot.extend_to", { time: formatTime(extendedDeadline(slot.deadline, hours), t.lang) })}
          >
            {t("slot.extend", { hours })}
          </button>
        )}
        {slot.lifecycle === "occupied" && may.release && (
          <button type="button" disabled={cmd.pending || busy} onClick={() => setConfirm({ kind: "reset" })} data-testid="release">
            {t("slot.release")}
          </button>
        )}
        {canTeardown && may.teardown && (
          <button type="button" className="danger" disabled={cmd.pending || busy} onClick={() => setConfirm({ kind: "teardown" })} data-testid="teardown">
            {t("slot.teardown")}
          </button>
        )}
        {slot.lifecycle === "occupied" && may.teardown && (
          <span className="muted small" data-testid="teardown-after-release">
            {t("slot.teardown_after_release")}
          </span>
        )}
      </div>
      {slot.lifecycle === "occupied" && may.extend && !busy && <EarlierDeadline slot={slot} />}
      {slot.lifecycle !== "retired" && slot.lifecycle !== "teardown_incomplete" && may.promote && (
        <section className="promote-form" aria-labelledby="promote-title">
        <h3 id="promote-title">{t("slot.promote_title")}</h3>
        <p className="muted small">{t("slot.promote_hint")}</p>
        <form
          className="actions"
          onSubmit={(e) => {
            e.preventDefault();
            setConfirm({ kind: "promote", params: { project: project.trim(), name: repoName.trim() } });
          }}
        >
          <label>
            {t("slot.promote_project")} <input value={project} required onChange={(e) => setProject(e.target.value)} />
          </label>
          <label>
            {t("slot.promote_name")} <input value={repoName} required onChange={(e) => setRepoName(e.target.value)} />
          </label>
          <button type="submit" disabled={cmd.pending || busy} data-testid="promote">
            {t("slot.promote")}
          </button>
        </form>
        </section>
      )}
      {!confirm && <CommandError error={cmd.error} />}
      {confirm && (
        <ConfirmPlan
          slot={slot.name}
          kind={confirm.kind}
          params={confirm.params}
          command={cmd}
          onConfirm={(reason) => void go(reason)}
          reasonFor={confirm.kind === "reset" && may.releaseNeedsReason ? (slot.occupant ?? "") : undefined}
          othersSlot={slot.occupant && !ownsSlot(subject, slot) ? slot : undefined}
          onClose={() => setConfirm(undefined)}
        />
      )}

      <h2>{t("slot.resources")}</h2>
      {slot.resources && slot.resources.length > 0 ? (
        <ul data-testid="resources">
          {slot.resources.map((r) => {
            const del = slot.deleting?.find((d) => d.kind === r.kind && d.id === r.id);
            const how = cleanupOf(r);
            return (
              <li key={`${r.kind}:${r.id}`} data-resource={`${r.kind}:${r.id}`} data-deleting={del ? "true" : undefined}>
                {t.dyn("res", r.kind)} <ResourceId r={r} project={slot.project_uuid} />
                {r.name && r.name !== r.id ? ` ${resourceName(r, t)}` : ""}
                {how && (
                  // Left on the server for a person to clean: the same story as the job and the Remaining page (issue 35 item 3).
                  <span data-testid="slot-cleanup">
                    {" "}
                    <StateBadge tone="attention">{t("remaining.problem.to_clean")}</StateBadge>
                    <CleanupHow cleanup={how} id={r.id} />
                  </span>
                )}
                {del && (
                  <>
                    {" "}
                    <span className="badge warn" data-testid="deleting">
                      {t("slot.deleting", { time: formatTime(del.accepted_at, t.lang) })}
                    </span>
                  </>
                )}
              </li>
            );
          })}
        </ul>
      ) : (
        <p>{t("slot.no_resources")}</p>
      )}

      <SlotMoment name={slot.name} />
      <SlotTimeline name={slot.name} />
      <SlotJobs slot={slot} />
    </section>
  );
}

/** SlotJobs lists the slot's jobs, newest first; it reloads when the slot changes (pushed, not polled). */
function SlotJobs({ slot }: { slot: SlotView }) {
  const t = useT();
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  const page = useLoad(`jobs:${slot.name}`, `${slot.name}:${slot.position}:${cursor ?? ""}`, (signal) =>
    jobsService.ofSlot(slot.name, undefined, cursor, signal),
  );
  const jobs: JobView[] = page.data?.jobs ?? [];
  return (
    <>
      <h2>{t("slot.jobs")}</h2>
      {page.error && <CommandError error={page.error} />}
      {page.data && jobs.length === 0 && <p>{t("slot.no_jobs")}</p>}
      <ul className="joblist" data-testid="slot-jobs">
        {jobs.map((j) => (
          <li key={j.id}>
            <Link href={`/jobs/${encodeURIComponent(j.id)}`}>
              {t.dyn("kind", j.kind)} · {t.dyn("state", j.state)} · {formatTime(j.queued_at, t.lang)}
            </Link>{" "}
            <span className="muted">{actorName(j.requested_by, t)}</span>
          </li>
        ))}
      </ul>
      {page.data?.next_cursor && (
        <button type="button" onClick={() => setCursor(page.data?.next_cursor)}>
          {t("slot.more_jobs")}
        </button>
      )}
    </>
  );
}
