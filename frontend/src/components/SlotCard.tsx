import { memo } from "react";
import type { SlotView } from "../api/types";
import { stepList, untouched } from "../format";
import { useT } from "../i18n";
import { Countdown } from "./Countdown";

/** slotWarnings lists what a card must flag: leftovers and unfinished jobs. */
export function slotWarnings(s: SlotView): { remaining: number; interrupted: boolean; failed: boolean } {
  // A job cancelled before any step ran changed nothing: nothing to flag.
  const r = s.recovery;
  const recovery = r && untouched(r.state, r.completed_steps, r.uncertain_step) ? undefined : r;
  const leftover =
    recovery?.remaining?.length ??
    (s.lifecycle === "teardown_incomplete" || s.lifecycle === "retired" ? (s.resources?.length ?? 0) : 0);
  const interrupted = recovery?.state === "abandoned" || s.active_job?.state === "abandoned";
  return { remaining: leftover, interrupted, failed: recovery !== undefined && !interrupted };
}

/** SlotCard is one slot on the board. Memoised: it re-renders only when its slot view changes. */
export const SlotCard = memo(function SlotCard({ slot }: { slot: SlotView }) {
  const t = useT();
  const w = slotWarnings(slot);
  const job = slot.active_job;
  // Plain hash links: a wouter <Link> per card would subscribe 200+ hooks to
  // the location for nothing.
  const href = `#/slots/${encodeURIComponent(slot.name)}`;
  return (
    <li className={`card lc-${slot.lifecycle}`} data-testid="slot-card" data-slot={slot.name}>
      <div className="card-head">
        <a href={href} className="card-title">
          {slot.name}
        </a>
        <span className={`badge lc lc-${slot.lifecycle}`}>{t.dyn("lifecycle", slot.lifecycle)}</span>
      </div>
      {slot.occupant && (
        <div>
          <span className="muted">{t("slot.occupant")}: </span>
          {slot.occupant}
        </div>
      )}
      {slot.deadline && (
        <div>
          <span className="muted">{t("slot.deadline")}: </span>
          <Countdown until={slot.deadline} />
        </div>
      )}
      {job && (
        <div
          className="card-job"
          data-testid="card-job"
          data-job={job.id}
          data-job-state={job.state}
          data-steps-done={job.steps_done}
          data-steps-total={job.steps_total}
        >
          <a href={`#/jobs/${encodeURIComponent(job.id)}`}>
            {t.dyn("kind", job.kind)} · {t.dyn("state", job.state)}
          </a>
          {job.current_step && <div className="muted">{t.dyn("step", job.current_step)}</div>}
          <progress
            max={Math.max(job.steps_total, 1)}
            value={job.steps_done}
            aria-label={t("slot.step_progress", { done: job.steps_done, total: job.steps_total })}
          />
          <span className="muted small">{t("slot.step_progress", { done: job.steps_done, total: job.steps_total })}</span>
        </div>
      )}
      {(w.remaining > 0 || w.interrupted || w.failed) && (
        <div className="warnings">
          {w.remaining > 0 && (
            <span className="badge warn" data-testid="warn-remaining">
              ⚠ {t("slot.warn_remaining", { count: w.remaining })}
            </span>
          )}
          {w.interrupted && (
            <span className="badge warn" data-testid="warn-interrupted">
              ⚠ {t("slot.warn_interrupted")}
            </span>
          )}
          {w.failed && (
            <span className="badge warn" data-testid="warn-failed">
              ⚠ {t("slot.warn_failed")}
            </span>
          )}
          {slot.recovery && w.failed && (
            <span className="muted small">
              {t("job.completed_steps", { steps: stepList(slot.recovery.completed_steps, t) })}
            </span>
          )}
          {slot.recovery && (
            <a href={`#/jobs/${encodeURIComponent(slot.recovery.job_id)}`} className="small">
              {t("common.view_timeline")}
            </a>
          )}
        </div>
      )}
    </li>
  );
});
