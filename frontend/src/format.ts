// Formatting helpers shared by every view.
import type { Resource } from "./api/types";
import type { T } from "./i18n";

/** formatDuration renders a non-negative duration in the largest two units. */
export function formatDuration(ms: number, t: T): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (d > 0) return t("time.days", { d, h });
  if (h > 0) return t("time.hours", { h, m });
  if (m > 0) return t("time.minutes", { m, s });
  return t("time.seconds", { s });
}

const timeFormats = new Map<string, Intl.DateTimeFormat>();

/** formatTime renders an instant in the reader's time zone and language. */
export function formatTime(iso: string | undefined, lang: string): string {
  if (!iso) return "";
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  let f = timeFormats.get(lang);
  if (!f) {
    f = new Intl.DateTimeFormat(lang, { dateStyle: "short", timeStyle: "medium" });
    timeFormats.set(lang, f);
  }
  return f.format(ms);
}

/** resourceLabel names a resource with its kind and id. */
export function resourceLabel(r: Resource, t: T): string {
  const name = r.name && r.name !== r.id ? ` ${r.name}` : "";
  return `${t.dyn("res", r.kind)}${name} (${r.id})`;
}

/**
 * untouched is true for a job that was cancelled before any step ran (e.g.
 * in the grace period): nothing completed, nothing was in flight, so nothing
 * changed and the resources it lists are simply the slot's own (issue 14).
 */
export function untouched(state: string, completed: readonly string[] | null | undefined, uncertain: string | undefined): boolean {
  return state === "cancelled" && (completed?.length ?? 0) === 0 && !uncertain;
}

/**
 * stateReason renders the server's slot state reason in the reader's
 * language; the server writes it in English ("last job cancelled",
 * "reset job <id>", …). An unknown reason is shown raw.
 */
export function stateReason(reason: string, t: T): string {
  const last = /^last job (\w+)$/.exec(reason);
  if (last) return t("reason.last_job", { state: t.dyn("state", last[1] ?? "") });
  const job = /^(\w+) job (\S+)( \(resumed\))?$/.exec(reason);
  if (job) return t(job[3] ? "reason.job_resumed" : "reason.job", { kind: t.dyn("kind", job[1] ?? ""), id: job[2] ?? "" });
  if (reason === "teardown could not confirm every deletion") return t("reason.teardown_unconfirmed");
  return reason;
}

/** stepList names steps in the reader's language, or "none". */
export function stepList(steps: readonly string[] | null | undefined, t: T): string {
  return steps && steps.length > 0 ? steps.map((s) => t.dyn("step", s)).join(", ") : t("common.none");
}

// ---- issue 14 (board, job page, jobs page): shared helpers ----

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

/** naturalCompare orders names as people count: slot-2 before slot-10. */
export function naturalCompare(a: string, b: string): number {
  return collator.compare(a, b) || (a < b ? -1 : a > b ? 1 : 0);
}

/** formatRelative says how far an instant is from now ("3 min ago", "in 2 h"), for a title attribute. */
export function formatRelative(iso: string | undefined, now: number, lang: string): string {
  if (!iso) return "";
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  const diff = (ms - now) / 1000;
  const abs = Math.abs(diff);
  const rtf = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
  if (abs < 60) return rtf.format(Math.round(diff), "second");
  if (abs < 3600) return rtf.format(Math.round(diff / 60), "minute");
  if (abs < 86400) return rtf.format(Math.round(diff / 3600), "hour");
  return rtf.format(Math.round(diff / 86400), "day");
}
