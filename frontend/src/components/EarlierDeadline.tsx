import { useState, type FormEvent } from "react";
import { slotsService, type SlotView } from "../services/slots";
import { formatTime } from "../format";
import { useT } from "../i18n";
import { announce } from "../live/announce";
import { serverNow } from "../live/clock";
import { putSlot } from "../live/store";
import { useCommand } from "../live/useCommand";
import { CommandError } from "./CommandError";

/** localInput renders an instant for a datetime-local input (the reader's zone, to the minute). */
export function localInput(ms: number): string {
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/**
 * EarlierDeadline is the explicit way to shorten an occupancy (extend only
 * adds time, issue 14): pick the new time, review a sentence that names the
 * current and the new deadline, then confirm. The server refuses a time
 * that is not earlier (409) or not in the future (400).
 */
export function EarlierDeadline({ slot }: { slot: SlotView }) {
  const t = useT();
  const cmd = useCommand();
  const current = slot.deadline ? Date.parse(slot.deadline) : NaN;
  const [value, setValue] = useState(() => (Number.isNaN(current) ? "" : localInput(Math.max(serverNow() + 60_000, current - 3_600_000))));
  const [review, setReview] = useState<string | undefined>(undefined);
  const [problem, setProblem] = useState<"past" | "not_earlier" | undefined>(undefined);
  if (Number.isNaN(current)) return null;
  const from = formatTime(slot.deadline, t.lang);

  const check = (e: FormEvent): void => {
    e.preventDefault();
    const ms = Date.parse(value); // a datetime-local value is local time
    setReview(undefined);
    if (Number.isNaN(ms) || ms <= serverNow()) return setProblem("past");
    if (ms >= current) return setProblem("not_earlier");
    setProblem(undefined);
    setReview(new Date(ms).toISOString());
  };
  const go = async (): Promise<void> => {
    if (!review) return;
    const s = await cmd.run(() => slotsService.setEarlierDeadline(slot.name, review));
    if (!s) return;
    putSlot(s);
    setReview(undefined);
    announce(t("deadline.done"));
  };
  const to = review ? formatTime(review, t.lang) : "";
  return (
    <form className="earlier-deadline" onSubmit={check} aria-labelledby="deadline-title" data-testid="earlier-deadline">
      <h3 id="deadline-title">{t("deadline.title")}</h3>
      <p className="muted small" id="deadline-hint">
        {t("deadline.hint")}
      </p>
      <div className="actions">
        <label>
          <span>{t("deadline.field")}</span>{" "}
          <input
            type="datetime-local"
            value={value}
            onChange={(e) => {
              setValue(e.target.value);
              setReview(undefined);
            }}
            aria-describedby="deadline-hint"
            data-testid="deadline-input"
          />
        </label>
        <button type="submit" disabled={cmd.pending} data-testid="deadline-review">
          {t("deadline.review")}
        </button>
      </div>
      {problem && (
        <p className="error" role="alert" data-testid="deadline-problem">
          {problem === "past" ? t("deadline.past") : t("deadline.not_earlier", { from })}
        </p>
      )}
      {review && (
        <div className="recovery" role="group" aria-labelledby="deadline-confirm-text" data-testid="deadline-confirm">
          <p id="deadline-confirm-text">{t("deadline.confirm_text", { slot: slot.name, from, to })}</p>
          <div className="dialog-actions">
            <button type="button" onClick={() => setReview(undefined)}>
              {t("common.cancel")}
            </button>
            <button type="button" className="danger" disabled={cmd.pending} onClick={() => void go()} data-testid="deadline-confirm-button">
              {t("deadline.confirm", { to })}
            </button>
          </div>
        </div>
      )}
      <CommandError error={cmd.error} />
    </form>
  );
}
