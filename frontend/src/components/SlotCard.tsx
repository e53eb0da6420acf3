import { memo } from "react";
import type { SlotView } from "../services/slots";
import { stepList } from "../format";
import { useT, type Key } from "../i18n";
import { Countdown } from "./Countdown";
import { AppStatus, READY_KEY } from "./AppStatus";
import { slotWarnings, unready, type Attention } from "../pages/boardModel";
import { toClean } from "../leftovers";
import { StateBadge } from "../ui/Badge";
import { jobTone, slotTone, type Tone } from "../ui/tone";
import { PullRequestInfo } from "../pullrequests/PullRequestInfo";

/** ATTN_KEY names each attention reason's text. */
export const ATTN_KEY: Record<Attention, Key> = {
  uncertain: "attn.uncertain",
  failed: "attn.failed",
  interrupted: "attn.interrupted",
  teardown_incomplete: "attn.teardown_incomplete",
  overdue: "attn.overdue",
  to_clean: "attn.to_clean",
  deadline_soon: "attn.due_soon",
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
  const urgent = reasons.filter((r) => r !== "deadline_soon");
  const soon = reasons.includes("deadline_soon");
  const tone: Tone = held ? "soon" : slotTone(slot.lifecycle);
  const notReady = unready(slot);
  // Left on the server for a person to clean (issue 35 item 3): a reason in the red band, with its count.
  const toCleanCount = toClean(slot).length;
  return (
    <li
      className={`card lc-${slot.lifecycle}${urgent.length > 0 ? " attn" : ""}${soon ? " soon" : ""}${mine ? " mine" : ""}`}
      data-tone={tone}
      data-testid="slot-card"
      data-slot={slot.name}
      data-attention={attention || undefined}
      data-mine={mine ? "true" : undefined}
    >
      {urgent.length > 0 && (
        // Impossible to miss (issue 35 item 1): a red band naming every reason.
        <div className="card-alert" data-testid="card-attention">
          <span aria-hidden="true">!</span> <strong>{t("attn.needs")}</strong>
          {urgent.map((r) => (
            <span key={r} data-testid={r === "to_clean" ? "card-to-clean" : undefined}>
              {" · "}
              {t(ATTN_KEY[r], { count: toCleanCount })}
            </span>
          ))}
        </div>
      )}
      <div className="card-head">
        <a href={href} className="card-title">
          {slot.name}
        </a>
        <StateBadge tone={tone} className={`lc lc-${slot.lifecycle}${held ? " held" : ""}`} data-testid="card-lifecycle">
          {held ? t("board.held") : t.dyn("lifecycle", slot.lifecycle)}
        </StateBadge>
      </div>
      {held && (
        <div className="held-for" data-testid="card-held">
          {holdMine === "1" ? t("board.held_for_you") : t("board.held_for", { who: holdFor ?? "" })} · <Countdown until={holdUntil ?? ""} />
        </div>
      )}
      {(soon || mine || notReady) && (
        <div className="attn-reasons" data-testid={urgent.length > 0 ? undefined : "card-attention"}>
          {mine && <StateBadge tone="taken">★ {t("board.mine_badge")}</StateBadge>}
          {soon && (
            <StateBadge tone="soon" className="attn-deadline_soon">
              {t("attn.due_soon")}
            </StateBadge>
          )}
          {notReady && (
            <StateBadge tone="soon" data-testid="card-unready" data-code={notReady.code}>
              {t(READY_KEY[notReady.code]?.[0] ?? "slot.not_ready")}
            </StateBadge>
          )}
        </div>
      )}
      <AppStatus slot={slot} />
      <PullRequestInfo slot={slot} compact />
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
          <a href={`#/jobs/${encodeURIComponent(job.id)}`}>{t.dyn("kind", job.kind)}</a>{" "}
          <StateBadge tone={jobTone(job.state)}>{t.dyn("state", job.state)}</StateBadge>
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
          {/* A slot that is not ready is offered as what it is (issue 35 item 5), never silently. */}
          <button
            type="button"
            className={notReady ? "" : "primary"}
            onClick={() => onOccupy(slot.name)}
            data-testid="card-occupy"
            data-unready={notReady ? "true" : undefined}
            aria-label={t(notReady ? "board.occupy_as_is_slot" : "board.occupy_slot", { slot: slot.name, hours: occupyHours })}
          >
            {t(notReady ? "board.occupy_as_is" : "board.occupy", { hours: occupyHours })}
          </button>
        </div>
      )}
      {(w.remaining > 0 || w.interrupted || w.failed) && (
        <div className="warnings">
          {w.remaining > 0 && (
            <StateBadge tone="attention" data-testid="warn-remaining">
              {t("slot.warn_remaining", { count: w.remaining })}
            </StateBadge>
          )}
          {w.interrupted && (
            <StateBadge tone="attention" data-testid="warn-interrupted">
              {t("slot.warn_interrupted")}
            </StateBadge>
          )}
          {w.failed && (
            <StateBadge tone="attention" data-testid="warn-failed">
              {t("slot.warn_failed")}
            </StateBadge>
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
