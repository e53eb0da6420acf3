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

/** stepList names steps in the reader's language, or "none". */
export function stepList(steps: readonly string[] | null | undefined, t: T): string {
  return steps && steps.length > 0 ? steps.map((s) => t.dyn("step", s)).join(", ") : t("common.none");
}
