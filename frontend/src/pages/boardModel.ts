// The board's decisions, pure so they are tested without a browser: what
// needs attention first, the order of the cards, the next free slot.
import type { SlotView } from "../services/slots";
import { ownsSlot, type Subject } from "../auth/roles";
import { naturalCompare, untouched } from "../format";
import { toClean } from "../leftovers";

/**
 * Why a card is flagged, most urgent first. All but deadline_soon "need
 * attention" (issue 35: failed, interrupted, uncertain, teardown
 * incomplete, overdue, something left on the server to clean — red,
 * counted in the chip); a deadline within the hour that has not passed is
 * a warning (amber), sorted after them.
 */
export const ATTENTION = ["uncertain", "failed", "interrupted", "teardown_incomplete", "overdue", "to_clean", "deadline_soon"] as const;
export type Attention = (typeof ATTENTION)[number];

/** needsAttention: whether the reasons include one that needs a person now (not only a near deadline). */
export function needsAttention(a: readonly Attention[]): boolean {
  return a.some((x) => x !== "deadline_soon");
}

/** The lead time under which a deadline counts as "within the hour". */
export const SOON_MS = 3_600_000;

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

/** attention lists why a slot needs attention now (empty: it does not). */
export function attention(s: SlotView, now: number): Attention[] {
  const out: Attention[] = [];
  const w = slotWarnings(s);
  const r = s.recovery;
  if (r?.uncertain_step && !untouched(r.state, r.completed_steps, r.uncertain_step)) out.push("uncertain");
  if (w.failed) out.push("failed");
  if (w.interrupted) out.push("interrupted");
  if (s.lifecycle === "teardown_incomplete") out.push("teardown_incomplete");
  // One story about leftovers (issue 35 item 3): a volume left on the
  // server with its data is for a person to clean, so it needs attention.
  if (toClean(s).length > 0) out.push("to_clean");
  if (s.lifecycle === "occupied" && s.deadline) {
    const d = Date.parse(s.deadline);
    if (!Number.isNaN(d) && d <= now) out.push("overdue");
    else if (!Number.isNaN(d) && d - now <= SOON_MS) out.push("deadline_soon");
  }
  return out;
}

function rank(a: readonly Attention[]): number {
  return a.length === 0 ? ATTENTION.length : Math.min(...a.map((x) => ATTENTION.indexOf(x)));
}

export interface BoardEntry {
  slot: SlotView;
  attention: Attention[];
  mine: boolean;
}

/** BoardFilter narrows the board: a text (name or occupant), a lifecycle, "mine", "attention". */
export interface BoardFilter {
  text: string;
  lifecycle?: string;
  mine?: boolean;
  attention?: boolean;
}

/**
 * boardEntries: the slots that pass the filter, those needing attention
 * first (most urgent first), then in natural name order.
 */
export function boardEntries(slots: Iterable<SlotView>, f: BoardFilter, now: number, subject: Subject | undefined): BoardEntry[] {
  const text = f.text.trim().toLowerCase();
  const out: BoardEntry[] = [];
  for (const s of slots) {
    if (text && !s.name.toLowerCase().includes(text) && !(s.occupant ?? "").toLowerCase().includes(text)) continue;
    if (f.lifecycle && s.lifecycle !== f.lifecycle) continue;
    const mine = ownsSlot(subject, s);
    if (f.mine && !mine) continue;
    const a = attention(s, now);
    if (f.attention && !needsAttention(a)) continue;
    out.push({ slot: s, attention: a, mine });
  }
  return out.sort((x, y) => rank(x.attention) - rank(y.attention) || naturalCompare(x.slot.name, y.slot.name));
}

/** BoardCounts: slots per lifecycle, how many need attention, how many are the subject's. */
export interface BoardCounts {
  lifecycle: Map<string, number>;
  attention: number;
  mine: number;
}

export function boardCounts(slots: Iterable<SlotView>, now: number, subject: Subject | undefined): BoardCounts {
  const c: BoardCounts = { lifecycle: new Map(), attention: 0, mine: 0 };
  for (const s of slots) {
    c.lifecycle.set(s.lifecycle, (c.lifecycle.get(s.lifecycle) ?? 0) + 1);
    if (needsAttention(attention(s, now))) c.attention++;
    if (ownsSlot(subject, s)) c.mine++;
  }
  return c;
}

/** Hold: a vacant slot the waitlist holds for its head (an offer), and whether that is the reader. */
export interface Hold {
  slot: string;
  who: string;
  until: string;
  mine: boolean;
  entry: string;
}

/**
 * holdsFrom reads the waitlist's open offers as holds by slot: the server
 * lets only the offered person occupy such a slot (backend/slots
 * service.go, "held for someone on the waitlist"), so for anyone else it is
 * not free (issue 27 item 3).
 */
export function holdsFrom(
  entries: readonly { id: string; who: string; who_id?: string; offer?: { slot: string; expires_at: string } }[] | null | undefined,
  subject: { id: string; name: string } | undefined,
): Map<string, Hold> {
  const m = new Map<string, Hold>();
  for (const e of entries ?? []) {
    if (!e.offer) continue;
    const mine = subject !== undefined && (e.who_id ? e.who_id === subject.id : e.who === subject.name);
    m.set(e.offer.slot, { slot: e.offer.slot, who: e.who, until: e.offer.expires_at, mine, entry: e.id });
  }
  return m;
}

/** Readiness codes (projections.Missing*): why a vacant slot is not ready. */
export type Readiness = "never_reset" | "no_template" | "no_template_reset" | "not_healthy" | "reset_incomplete";

/**
 * unready says why a vacant slot is not ready for its next occupant, as a
 * code (undefined: it is ready, or not vacant). A server without
 * missing_code is read from what the view says (no template; a reset or
 * not), so a first visit never shows server English.
 */
export function unready(s: SlotView): { code: Readiness; args: Record<string, string> } | undefined {
  if (s.lifecycle !== "vacant" || s.ready) return undefined;
  if (s.missing_code) return { code: s.missing_code as Readiness, args: s.missing_args ?? {} };
  const reset = s.latest_jobs?.reset !== undefined;
  if (s.has_template === false) return { code: reset ? "no_template_reset" : "no_template", args: {} };
  if (s.deployed) return { code: "not_healthy", args: { status: s.deployed.status } };
  return { code: reset ? "reset_incomplete" : "never_reset", args: {} };
}

/** nextFreeSlot is the first vacant slot in natural order, with no job on it and not held for someone else. */
export function nextFreeSlot(slots: Iterable<SlotView>, holds: ReadonlyMap<string, Hold> = new Map()): SlotView | undefined {
  // A ready slot first (issue 35 item 5): a never-reset one only when no
  // ready one is free, and then the board says so.
  let best: SlotView | undefined;
  for (const s of slots) {
    if (s.lifecycle !== "vacant" || s.active_job) continue;
    const h = holds.get(s.name);
    if (h && !h.mine) continue;
    if (!best) {
      best = s;
      continue;
    }
    const rs = unready(s) === undefined;
    const rb = unready(best) === undefined;
    if ((rs && !rb) || (rs === rb && naturalCompare(s.name, best.name) < 0)) best = s;
  }
  return best;
}

/** LIFECYCLE_ORDER is the order the count chips are shown in. */
export const LIFECYCLE_ORDER = ["vacant", "occupied", "resetting", "tearing_down", "promoting", "teardown_incomplete", "retired"];
