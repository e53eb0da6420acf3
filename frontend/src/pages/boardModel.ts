// The board's decisions, pure so they are tested without a browser: what
// needs attention first, the order of the cards, the next free slot.
import type { SlotView } from "../services/slots";
import { ownsSlot, type Subject } from "../auth/roles";
import { naturalCompare, untouched } from "../format";

/** Why a slot needs a person's attention, most urgent first. */
export const ATTENTION = ["uncertain", "failed", "interrupted", "teardown_incomplete", "deadline_soon"] as const;
export type Attention = (typeof ATTENTION)[number];

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
  if (s.lifecycle === "occupied" && s.deadline) {
    const d = Date.parse(s.deadline);
    if (!Number.isNaN(d) && d - now <= SOON_MS) out.push("deadline_soon");
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
    if (f.attention && a.length === 0) continue;
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
    if (attention(s, now).length > 0) c.attention++;
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

/** nextFreeSlot is the first vacant slot in natural order, with no job on it and not held for someone else. */
export function nextFreeSlot(slots: Iterable<SlotView>, holds: ReadonlyMap<string, Hold> = new Map()): SlotView | undefined {
  let best: SlotView | undefined;
  for (const s of slots) {
    if (s.lifecycle !== "vacant" || s.active_job) continue;
    const h = holds.get(s.name);
    if (h && !h.mine) continue;
    if (!best || naturalCompare(s.name, best.name) < 0) best = s;
  }
  return best;
}

/** LIFECYCLE_ORDER is the order the count chips are shown in. */
export const LIFECYCLE_ORDER = ["vacant", "occupied", "resetting", "tearing_down", "promoting", "teardown_incomplete", "retired"];
