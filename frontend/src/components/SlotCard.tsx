import { memo } from "react";
import type { SlotView } from "../services/slots";
import { stepList } from "../format";
import { useT, type Key } from "../i18n";
import { Countdown } from "./Countdown";
import { AppStatus } from "./AppStatus";
import { slotWarnings, type Attention } from "../pages/boardModel";

/** ATTN_KEY names each attention reason's text. */
export const ATTN_KEY: Record<Attention, Key> = {
  uncertain: "attn.uncertain",
  failed: "attn.failed",
  interrupted: "attn.interrupted",
  teardown_incomplete: "attn.teardown_incomplete",
  deadline_soon: "attn.deadline_soon",
};

export interface SlotCardProps {
  slot: SlotView;
  /** attention: why the slot needs attention, comma-separated (a string keeps the memo cheap). */
  attention?: string;
  /** mine: the signed-in person occupies it. */
  mine?: boolean;
  /** onOccupy: offered on a vacant card when the role may occupy; must be stable. */
  onOccupy?: (name: string) => void;
  /** occupyHours: what the card's occupy button asks for. */
  occupyHours?: number;
  /** hold: "who|until|mine" when the waitlist holds this vacant slot (a string keeps the memo cheap). */
  hold?: string;
}

/** SlotCard is one slot on the board. Memoised: it re-renders only when its props change. */
export const SlotCard = memo(function SlotCard({ slot, attention = "", mine = false, onOccupy, occupyHours = 8, hold = "" }: SlotCardProps) {
  const t = useT();
  const w = slotWarnings(slot);
  const reasons = attention ? (attention.split(",") as Attention[]) : [];
  const job = slot.active_job;
  // Plain hash links: a wouter <Link> per card would subscribe 200+ hooks to
  // the location for nothing.
  const href = `#/slots/${encodeURIComponent(slot.name)}`;
  const [holdFor, holdUntil, holdMine] = hold ? hold.split("|") : [];
  const held = hold !== "" && slot.lifecycle === "vacant";
  return (
    <li
      className={`card lc-${slot.lifecycle}${reasons.length > 0 ? " attn" : ""}${mine ? " mine" : ""}`}
      data-testid="slot-card"
      data-slot={slot.name}
      data-attention={attention || undefined}
      data-mine={mine ? "true" : undefined}
    >
      <div className="card-head">
        <a href={href} className="card-title">
          {slot.name}
        </a>
        <span className={`badge lc lc-${slot.lifecycle}${held ? " held" : ""}`} data-testid="card-lifecycle">
          {held ? t("board.held") : t.dyn("lifecycle", slot.lifecycle)}
        </span>
      </div>
      {held && (
        <div className="held-for" data-testid="card-held">
          {holdMine === "1" ? t("board.held_for_you") : t("board.held_for", { who: holdFor ?? "" })} · <Countdown until={holdUntil ?? ""} />
        </div>
      )}
      {(reasons.includes("uncertain") || reasons.includes("deadline_soon") || mine) && (
        <div className="attn-reasons" data-testid="card-attention">
          {mine && <span className="badge mine-badge">★ {t("board.mine_badge")}</span>}
          {/* Failed, interrupted and teardown incomplete already have their own badges below. */}
          {reasons.filter((r) => r === "uncertain" || r === "deadline_soon").map((r) => (
            <span key={r} className={`badge attn-badge attn-${r}`}>
              ⚠ {t(ATTN_KEY[r])}
            </span>
          ))}
        </div>
      )}
      <AppStatus slot={slot} />
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
          {job.state === "queued" && job.not_before && (
            <div className="muted" data-testid="card-job-starts">
              <Countdown until={job.not_before} starts />
            </div>
          )}
          {job.current_step && <div className="muted">{t.dyn("step", job.current_step)}</div>}
          <progress
            max={Math.max(job.steps_total, 1)}
            value={job.steps_done}
            aria-label={t("slot.step_progress", { done: job.steps_done, total: job.steps_total })}
          />
          <span className="muted small">{t("slot.step_progress", { done: job.steps_done, total: job.steps_total })}</span>
        </div>
      )}
      {held && holdMine === "1" && (
        <div className="card-actions">
          <a className="button primary" href="#/waitlist" data-testid="card-accept">
            {t("board.held_accept")}
          </a>
        </div>
      )}
      {onOccupy && slot.lifecycle === "vacant" && !slot.active_job && !held && (
        <div className="card-actions">
          <button type="button" onClick={() => onOccupy(slot.name)} data-testid="card-occupy" aria-label={t("board.occupy_slot", { slot: slot.name, hours: occupyHours })}>
            {t("board.occupy", { hours: occupyHours })}
          </button>
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
