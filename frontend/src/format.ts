// Formatting helpers shared by every view.
import type { AuditEntry } from "./services/audit";
import type { ApiError } from "./services/http";
import type { StepView } from "./services/jobs";
import type { Resource } from "./services/resources";
import type { SlotView } from "./services/slots";
import { particles, type Key, type T } from "./i18n";
import { en } from "./i18n/en";
import vocabulary from "./i18n/vocabulary.json";

/** formatDuration renders a non-negative duration in the largest two units. */
export function formatDuration(ms: number, t: T): string {
  const total = Math.max(0, Math.floor(ms / 1000));
  const d = Math.floor(total / 86400);
  const h = Math.floor((total % 86400) / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  // Whole days, hours and minutes read alone: "2h", not "2h 0m" (the
  // waitlist's "2h0m0s"); "5m", not "5m 0s".
  if (d > 0) return h > 0 ? t("time.days", { d, h }) : t("time.days_only", { d });
  if (h > 0) return m > 0 ? t("time.hours", { h, m }) : t("time.hours_only", { h });
  if (m > 0) return s > 0 ? t("time.minutes", { m, s }) : t("time.minutes_only", { m });
  return t("time.seconds", { s });
}

/**
 * formatSpan renders a measured duration (a step, a job, a grace period):
 * under a second in milliseconds, under 10 s with a tenth of a second, so
 * a 0.8 s step reads "800 ms", not "0s" (issue 27 item 4); longer ones as
 * formatDuration.
 */
export function formatSpan(ms: number, t: T): string {
  if (!Number.isFinite(ms) || ms < 0) return formatDuration(0, t);
  if (ms < 1000) return t("time.ms", { ms: Math.round(ms) });
  const tenths = Math.round(ms / 100) / 10;
  if (ms < 10_000 && !Number.isInteger(tenths)) return t("time.seconds", { s: tenths.toLocaleString(t.lang, { maximumFractionDigits: 1 }) });
  return formatDuration(ms, t);
}

/**
 * goDurationMs reads a duration the server wrote in Go's notation
 * ("2h0m0s", "15m0s", "1.5s", "300ms") or as plain seconds ("7200"), in
 * milliseconds; undefined when it is neither. Go's time.Duration.String
 * is what the API returns for waitlist durations and the offer's TTL.
 */
export function goDurationMs(v: string): number | undefined {
  if (/^\d+(\.\d+)?$/.test(v)) return Number(v) * 1000;
  const re = /(\d+(?:\.\d+)?)(h|ms|m|s|µs|us|ns)/gy;
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, µs: 1e-3, us: 1e-3, ns: 1e-6 };
  let total = 0;
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = re.exec(v)) !== null) {
    total += Number(m[1]) * (unit[m[2]] ?? 0);
    end = re.lastIndex;
  }
  return end > 0 && end === v.length ? total : undefined;
}

/** formatGoDuration says a Go duration the way people do ("2h 0m" → "2h"), or shows it raw when it is not one. */
export function formatGoDuration(v: string, t: T): string {
  const ms = goDurationMs(v);
  return ms === undefined ? v : formatDuration(ms, t);
}

const timeFormats = new Map<string, Intl.DateTimeFormat>();

/**
 * formatTime renders an instant the way people write it in the reader's
 * language and time zone: "11월 30일 오전 8:53", "Nov 30, 8:53 AM"; the
 * year only when it is not this year; seconds when asked (step times).
 */
export function formatTime(iso: string | undefined, lang: string, opts: { seconds?: boolean } = {}): string {
  if (!iso) return "";
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return iso;
  const year = new Date(ms).getFullYear() !== new Date().getFullYear();
  const k = `${lang}|${year ? "y" : ""}|${opts.seconds ? "s" : ""}`;
  let f = timeFormats.get(k);
  if (!f) {
    f = new Intl.DateTimeFormat(lang, {
      year: year ? "numeric" : undefined,
      month: lang === "ko" ? "long" : "short",
      day: "numeric",
      hour: "numeric",
      minute: "2-digit",
      second: opts.seconds ? "2-digit" : undefined,
    });
    timeFormats.set(k, f);
  }
  if (lang !== "ko") return f.format(ms);
  // Some ICU builds (Node's among them) lack Korean day periods and print
  // "AM"/"PM"; Korean readers expect 오전/오후 whatever the runtime.
  const hour = new Date(ms).getHours();
  return f
    .formatToParts(ms)
    .map((p) => (p.type === "dayPeriod" ? (hour < 12 ? "오전" : "오후") : p.value))
    .join("");
}

// Reason codes (issue 26): where the server writes one of its own
// sentences (a slot's state reason, a step's detail, a descriptive resource
// name) it sends a code and its parts next to the English, and the sentence
// in the reader's language is made here, from the dictionaries. A text
// without a code (an older server, a view from before) is shown as the
// server wrote it; nothing here reads the server's English.

/** codedText says a code under prefix with its parts (auditArg words each), or text when the code is unknown. */
function codedText(prefix: string, code: string | undefined, args: Record<string, string | undefined> | undefined, text: string, t: T): string {
  const key = `${prefix}.${code}`;
  if (!code || !known(key)) return text;
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(args ?? {})) if (v !== undefined) vars[k] = auditArg(k, v, t);
  const s = t(key, vars);
  return /\{\w+\}/.test(s) ? text : s;
}

/** resourceName renders a resource's name: a described one (name_code) in the reader's language, a provider's own as it is. */
export function resourceName(r: Resource, t: T): string {
  return codedText("resname", r.name_code, r.name_args, r.name ?? "", t);
}

/** stepDetail renders a step's detail: the server's own sentences (detail_code) in the reader's language, data as it is. */
export function stepDetail(s: StepView, t: T): string {
  const { already_absent: absent, ...args } = s.detail_args ?? {};
  const said = codedText("stepdetail", s.detail_code, args, s.detail ?? "", t);
  // "already absent; …": the provider said the resource was gone before the step deleted it.
  return absent === "true" && s.detail_code && said !== s.detail ? `${t("stepdetail.already_absent")}; ${said}` : said;
}

/** stateReason renders a slot's state reason from its code (state_reason_code); without one, as the server wrote it. */
export function stateReason(v: Pick<SlotView, "state_reason" | "state_reason_code" | "state_reason_args">, t: T): string {
  return codedText("reason", v.state_reason_code, v.state_reason_args, v.state_reason ?? "", t);
}

const SYSTEM_ACTORS = ["bootstrap", "cli", "deadline", "demo", "identity", "notifier", "oidc", "pull-requests", "readiness", "reconcile", "repair", "rescuer", "settings", "shutdown", "waitlist"] as const;

/**
 * actorName says who did something in the reader's language: a person's
 * name as written; the server's own actors ("system:deadline", the ids in
 * backend/… meta) as words ("the deadline timer"); a job's worker by its
 * number (workerName). Issue 27 item 10: "system:deadline" reached Korean
 * pages untranslated. The Actor component shows the same words with the raw
 * id as its title, for operators.
 */
export function actorName(actor: string | undefined, t: T): string {
  if (!actor) return "";
  const sys = /^system:([\w-]+)$/.exec(actor);
  if (sys) {
    const k = `actor.system.${sys[1]}`;
    return (SYSTEM_ACTORS as readonly string[]).includes(sys[1] ?? "") && known(k) ? t(k as Key) : t("actor.system", { what: sys[1] ?? "" });
  }
  if (actor === "system:") return t("actor.system", { what: "" });
  if (actor.startsWith("worker:")) return workerName(actor, t);
  return actor;
}

/**
 * workerName says a job's worker as a person reads it: "Slotkeeper worker
 * 2", its number among its process's workers (backend/jobs: the id is
 * worker:<host:pid>/<nonce>/<n>), not the id — a host, a process id and a
 * nonce that mean something only to an operator, who finds the whole id in
 * the Actor's title and the event's data. An id of another shape (an older
 * log, a test's "w1") is "a Slotkeeper worker".
 */
export function workerName(id: string, t: T): string {
  const n = /^worker:.+\/(\d+)$/.exec(id)?.[1];
  return n === undefined ? t("actor.worker_any") : t("actor.worker", { n: Number(n) + 1 });
}

/** isPerson is false for the server's own actors and workers, which are not offered as people to filter by. */
export function isPerson(actor: string | undefined): boolean {
  return !!actor && !actor.startsWith("system:") && !actor.startsWith("worker:");
}

/** Described names that say their kind already: "env vars of the application", not "Env var env vars of the application" (found on the walk). */
const SAYS_ITS_KIND: ReadonlySet<string> = new Set(["app_env_vars", "app_volumes", "list_env_vars", "list_storages", "list_template_env_vars"]);

/** resourceLabel names a resource with its kind and id. */
export function resourceLabel(r: Resource, t: T): string {
  const named = r.name && r.name !== r.id ? resourceName(r, t) : "";
  const what = named && SAYS_ITS_KIND.has(r.name_code ?? "") ? named : `${t.dyn("res", r.kind)}${named ? ` ${named}` : ""}`;
  // A resource about to be created has no id yet: no empty "()" (issue 35 item 8).
  return r.id ? `${what} (${r.id})` : what;
}

/**
 * untouched is true for a job that was cancelled before any step ran (e.g.
 * in the grace period): nothing completed, nothing was in flight, so nothing
 * changed and the resources it lists are simply the slot's own (issue 14).
 */
export function untouched(state: string, completed: readonly string[] | null | undefined, uncertain: string | undefined): boolean {
  return state === "cancelled" && (completed?.length ?? 0) === 0 && !uncertain;
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

const relativeFormats = new Map<string, Intl.RelativeTimeFormat>();

/** formatRelative says how far an instant is from now ("3 min ago", "in 2 h"). */
export function formatRelative(iso: string | undefined, now: number, lang: string): string {
  if (!iso) return "";
  const ms = Date.parse(iso);
  if (Number.isNaN(ms)) return "";
  const diff = (ms - now) / 1000;
  const abs = Math.abs(diff);
  let rtf = relativeFormats.get(lang);
  if (!rtf) {
    rtf = new Intl.RelativeTimeFormat(lang, { numeric: "auto" });
    relativeFormats.set(lang, rtf);
  }
  // Within a tick of now is now: the ticker publishes whole seconds, so an
  // event that just happened is up to a second after the published time
  // and would read "in 1 second" (issue 35 item 8).
  if (abs < 1) return rtf.format(0, "second");
  if (abs < 60) return rtf.format(Math.round(diff), "second");
  if (abs < 3600) return rtf.format(Math.round(diff / 60), "minute");
  if (abs < 86400) return rtf.format(Math.round(diff / 3600), "hour");
  return rtf.format(Math.round(diff / 86400), "day");
}

export function known(key: string): key is Key {
  return key in en;
}

// The args of a refusal's reason (docs/api.md "Reasons") by kind: instants
// in the reader's time format, durations as people say them, a slot's
// lifecycle and a job's state in the vocabulary's words; names and ids as
// they are.
const REFUSAL_TIMES = new Set(["until", "deadline", "held_until", "expired_at"]);
const REFUSAL_SLOT_STATE = new Set(["slot_registered", "slot_locked"]);

function refusalArg(reason: string, name: string, v: string, t: T): string {
  if (REFUSAL_TIMES.has(name)) return formatTime(v, t.lang);
  if (name === "duration" || (name === "max" && reason !== "position_out_of_range")) return formatGoDuration(v, t);
  if (name === "kind") return t.dyn("kind", v);
  if (name === "state") return t.dyn(REFUSAL_SLOT_STATE.has(reason) ? "lifecycle" : "state", v);
  return v;
}

/**
 * refusalText says a refusal from its reason and args (issue 26 item 4),
 * or undefined when this dashboard has no sentence for the reason (a newer
 * server) or an arg the sentence needs is missing or empty.
 */
function refusalText(error: ApiError, t: T): string | undefined {
  const reason = error.reason;
  const key = `refusal.${reason}`;
  if (!reason || !known(key)) return undefined;
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(error.args)) if (v !== "") vars[k] = refusalArg(reason, k, v, t);
  const s = t(key, vars);
  return /\{\w+\}/.test(s) ? undefined : s;
}

/**
 * apiErrorText says why the server refused, in the reader's language and
 * never from the server's English: from the error's reason and args when
 * the dictionaries know the reason; else from its code (English readers
 * also get the server's precise message); else, for a code this dashboard
 * does not know, the status and the server's message.
 */
export function apiErrorText(error: ApiError, t: T): string {
  if (error.status === 0 || error.code === "network") return t("error.network");
  const refusal = refusalText(error, t);
  // invalid_field is any 400 naming a field: its args do not say what is
  // wrong with it, so English readers keep the server's words as before.
  if (refusal) return t.lang === "en" && error.reason === "invalid_field" && error.message ? `${refusal} (${error.message})` : refusal;
  const field = typeof error.details.field === "string" ? error.details.field : "";
  const key = `error.${error.code}`;
  let text: string;
  if (error.code === "invalid" && field) text = t("error.invalid_field", { field });
  else if (known(key)) text = t(key);
  else {
    text = t("error.unknown", { status: error.status });
    // A code from a newer server: its message is all there is to say why
    // (not a non-JSON answer's body, "http_…", which may be a proxy's page).
    if (error.message && !error.code.startsWith("http_")) return `${text} (${error.message})`;
    return text;
  }
  return t.lang === "en" && error.message && error.message !== text ? `${text} (${error.message})` : text;
}

/**
 * reasonText renders a reason of an event: the waitlist's offer and hold
 * reasons from their code (events.WaitReason*, with the slot's lifecycle)
 * in the reader's language; a reason without a code (one a person typed, a
 * provider's error text, an event from before the codes) as written.
 */
export function reasonText(reason: string, t: T, code?: string, lifecycle?: string): string {
  return codedText("audit.reason", code, { lifecycle }, reason, t);
}

const PROVIDERS: Record<string, string> = { coolify: "Coolify", bitbucket: "Bitbucket", git: "Git" };
const FLAGS = ["absent", "verify", "uncertain", "final", "resumed"] as const;

/** A failure as the server codes it (events.Failure*): StepView's error_*, JobView's reason_*, an audit entry's args. */
export interface Failure {
  code?: string;
  args?: Record<string, string | undefined>;
  /** The HTTP status of the provider's answer, if any. */
  status?: number | string;
  /** The provider's and the engine's own text (English), shown beside the sentence, folded. */
  raw?: string;
  /** false: leave the target's id out (a page's lead sentence, which names no id). */
  target?: boolean;
}

/**
 * failureText says a failure in the reader's language from its code and
 * parts (issue: provider errors reached Korean pages in English): "Coolify:
 * API 토큰에 이 작업 권한이 없습니다 (HTTP 403)". A failure without a
 * code (an event from before the codes) says its reason is in the original
 * message, which the page shows folded beside it; never the raw text alone.
 */
export function failureText(f: Failure, t: T): string {
  const { code, status } = f;
  const args = f.args ?? {};
  let text: string | undefined;
  if (code === "provider") {
    const problem = args.problem && known(`failure.problem.${args.problem}`) ? t(`failure.problem.${args.problem}` as Key) : undefined;
    const provider = PROVIDERS[args.provider ?? ""] ?? args.provider;
    // A git remote's target is a URL: long, and the step already names it;
    // a page's lead sentence names no id (f.target false).
    const target = f.target !== false && args.target && !args.target.includes("://") ? args.target : "";
    // Who answered, about what, and how: "(Coolify, db-1, HTTP 403)".
    const about = [provider, target, status ? `HTTP ${status}` : ""].filter(Boolean).join(", ");
    if (problem && provider) return t("failure.provider", { problem, about });
  } else if (code) {
    const vars: Record<string, string> = {};
    for (const [k, v] of Object.entries(args)) if (v !== undefined) vars[k] = k === "bound" ? formatGoDuration(v, t) : v;
    const said = codedText("failure", code, vars, "", t);
    if (said) text = said;
  }
  text ??= t("failure.uncoded");
  return status ? t("failure.status", { text, status }) : text;
}

/** failureRawLabel labels the folded original message: the provider's own when the failure is its answer. */
export function failureRawLabel(f: Failure, t: T): string {
  return f.code === "provider" ? t("failure.raw_provider") : t("failure.raw");
}

/** auditArg renders one summary part (projections.AuditArgs) in the reader's language. */
function auditArg(name: string, v: string, t: T): string {
  const sub = (prefix: string) => (known(`${prefix}.${v}`) ? t(`${prefix}.${v}` as Key) : v);
  switch (name) {
    case "step":
      return t.dyn("step", v);
    case "kind":
      return t.dyn("kind", v);
    case "outcome":
      return t.dyn("state", v);
    case "role":
      return t.dyn("role", v);
    case "resource_kind":
      return t.dyn("res", v);
    case "until":
      return formatTime(v, t.lang);
    case "accepted_at":
      return formatTime(v, t.lang, { seconds: true });
    case "duration":
      return formatGoDuration(v, t);
    case "state":
      return sub("audit.recstate");
    case "deadline":
      return sub("audit.deadline");
    case "source":
      return sub("audit.source");
    case "class":
      return sub("audit.class");
    case "provider":
      return PROVIDERS[v] ?? v;
    case "reason":
      return reasonText(v, t);
    case "lifecycle":
      return t.dyn("lifecycle", v);
    case "worker":
      return workerName(v, t);
  }
  return v;
}

/** The event types whose audit line is the shared step result's (vocabulary.json, from projections.AuditLine). */
const STEP_RESULTS: ReadonlySet<string> = new Set(vocabulary.step_result_types);

/**
 * auditKey is the dictionary key of an event type's audit line: the same
 * code as the server's English (events/english), audit.ev.<type>, or
 * audit.ev.step_done for a step result without a line of its own.
 */
export function auditKey(type: string): string {
  const own = `audit.ev.${type}`;
  return !known(own) && STEP_RESULTS.has(type) ? "audit.ev.step_done" : own;
}

/**
 * auditSummary is an audit entry's one line in the reader's language, built
 * from its type and args. An entry without the args a template needs (from
 * an older server) shows the server's summary in English and the event's
 * name in Korean, never a template with holes.
 */
export function auditSummary(e: AuditEntry, t: T): string {
  const key = auditKey(e.type);
  const label = t.dyn("event", e.type);
  if (!known(key)) return t.lang === "en" && e.summary ? e.summary : label;
  const args = e.args ?? {};
  const vars: Record<string, string> = {};
  for (const [k, v] of Object.entries(args)) vars[k] = auditArg(k, v, t);
  if (args.reason) vars.reason = reasonText(args.reason, t, args.reason_code, args.lifecycle);
  // Codes the line names in words: a wait's phase, why a session ended.
  if (e.type === "WaitPhase" && args.state && known(`audit.waitphase.${args.state}`)) vars.state = t(`audit.waitphase.${args.state}` as Key);
  if (e.type === "SessionEnded" && args.reason && known(`audit.session.${args.reason}`)) vars.reason = t(`audit.session.${args.reason}` as Key);
  // The server's own actors by name ("Slotkeeper (deadline timer)"), as in the actor column, not as ids.
  const system: string[] = [];
  for (const k of ["by", "who"])
    if (args[k]?.startsWith("system:")) {
      vars[k] = actorName(args[k], t);
      system.push(vars[k]);
    }
  let s = t(key, vars);
  if (/\{\w+\}/.test(s)) return t.lang === "en" && e.summary ? e.summary : label;
  // Korean honours a person with 님; the server is no person: its particle follows its name.
  if (t.lang === "ko") for (const name of system) s = particles(s.replaceAll(`${name}님이`, `${name}이(가)`).replaceAll(`${name}님을`, `${name}을(를)`).replaceAll(`${name}님`, name));
  if (args.status) s += ` · ${t("audit.part.status", { status: args.status })}`;
  for (const f of FLAGS) if (args[f] === "true") s += ` ${t(`audit.flag.${f}`)}`;
  const failure = auditFailure(e);
  if (failure) s += t("audit.part.detail", { text: failureText(failure, t) });
  // A reason the line already names is not said twice ("Session ended (logout): logout").
  else if (args.reason && !(en[key as Key] ?? "").includes("{reason}")) s += t("audit.part.detail", { text: reasonText(args.reason, t, args.reason_code, args.lifecycle) });
  return s;
}

/**
 * auditFailure is an entry's failure, when it records one: a step's or a
 * webhook's error, a failed job's reason (the step's error again), a
 * reconcile run's error. Its sentence is in the summary; its raw text (the
 * provider's words, English) is for the page to show folded beside it.
 */
export function auditFailure(e: AuditEntry): Failure | undefined {
  const args = e.args ?? {};
  const raw = args.error ?? (e.type === "JobFailed" ? args.reason : undefined);
  if (!raw && !args.error_code) return undefined;
  return { code: args.error_code, args, raw };
}
