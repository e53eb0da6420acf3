// The one live store of a tab. The SSE stream (stream.ts) and REST answers
// feed it; components read it through the hooks below with
// useSyncExternalStore. Every update replaces the state object and only the
// maps it touches, so a component selecting one slot re-renders only when
// that slot changes.
import { useSyncExternalStore } from "react";
import type { AuditEntry } from "../services/audit";
import type { JobView } from "../services/jobs";
import type { PRView } from "../services/pullrequests";
import type { SlotView } from "../services/slots";
import type { Change, Snapshot } from "../services/stream";
import { learnServerTime, noteServerInstant } from "./clock";
import { observable } from "./observable";

/** How many live audit entries the store keeps (newest last). */
export const AUDIT_KEEP = 500;

export interface LiveState {
  /** The highest store position applied; the SSE resume point. 0 = none yet. */
  position: number;
  /** True once a snapshot has been applied. */
  ready: boolean;
  slots: ReadonlyMap<string, SlotView>;
  jobs: ReadonlyMap<string, JobView>;
  /** Pull requests by stream: loaded over REST (putPRs), then followed by the changes. */
  prs: ReadonlyMap<string, PRView>;
  audit: readonly AuditEntry[];
  /**
   * Bumped by every deliveries frame (the server recorded a webhook
   * delivery): the admin page's list of deliveries loads again.
   */
  deliveries: number;
  /**
   * Bumped by every snapshot. A snapshot means the stream could not resume,
   * so job views fetched earlier may have missed changes: pages holding one
   * refetch when the epoch moves.
   */
  epoch: number;
}

const initial: LiveState = {
  position: 0,
  ready: false,
  slots: new Map(),
  jobs: new Map(),
  prs: new Map(),
  audit: [],
  deliveries: 0,
  epoch: 0,
};

const state = observable<LiveState>(initial);

/**
 * A view's version: the store position of the last event that changed it.
 * A slot's `revision` is its own stream's and stays put while its jobs move
 * (the active job's state and step), so it must not decide which view is
 * newer (DESIGN invariant 13). A view without a position (an older server)
 * falls back to its revision.
 */
function version(v: { revision: number; position?: number }): number {
  return v.position ?? v.revision;
}

/** newer keeps the view with the highest position (the contract's rule). */
function newer<V extends { revision: number; position?: number }>(have: V | undefined, got: V): boolean {
  return have === undefined || version(got) > version(have);
}

/**
 * Applies a snapshot frame: the slots as of its position. Returns false, and
 * changes nothing, for a snapshot older than the applied position: it comes
 * from a server process whose projection is behind the one this tab followed
 * (behind a load balancer), and applying it would move the board backwards.
 * The caller reconnects from the applied position instead. The exception is
 * a snapshot marked log_reset (our position is beyond the server's log, so
 * what we hold belongs to another log): it replaces everything.
 */
export function applySnapshot(s: Snapshot): boolean {
  const prev = state.get();
  if (s.position < prev.position && !s.log_reset) return false;
  if (s.server_time) learnServerTime(s.server_time);
  const slots = new Map<string, SlotView>();
  for (const v of s.slots ?? []) {
    const have = s.log_reset ? undefined : prev.slots.get(v.name);
    slots.set(v.name, have !== undefined && version(have) > version(v) ? have : v);
  }
  if (s.log_reset) {
    // Views, jobs and audit entries of another log: none of it holds here.
    state.set({ position: s.position, ready: true, slots, jobs: new Map(), prs: new Map(), audit: [], deliveries: prev.deliveries, epoch: prev.epoch + 1 });
  } else {
    state.set({ ...prev, position: s.position, ready: true, slots, epoch: prev.epoch + 1 });
  }
  return true;
}

/**
 * Applies a change frame. Changes at or below the current position are
 * duplicates (a resumed stream may repeat the last one) and are dropped; a
 * view older than the one held is ignored.
 */
export function applyChange(c: Change): boolean {
  const prev = state.get();
  if (c.position <= prev.position) return false;
  // What changed happened on the server's clock: it is at least that late.
  noteServerInstant(c.job?.updated_at ?? c.slot?.updated_at);
  let { slots, jobs, prs, audit } = prev;
  if (c.slot && newer(slots.get(c.slot.name), c.slot)) {
    slots = new Map(slots).set(c.slot.name, c.slot);
  }
  if (c.job && newer(jobs.get(c.job.id), c.job)) {
    jobs = new Map(jobs).set(c.job.id, c.job);
  }
  if (c.pull_request && newerPR(prs.get(c.pull_request.stream), c.pull_request)) {
    prs = new Map(prs).set(c.pull_request.stream, c.pull_request);
  }
  if (c.audit) {
    audit = [...audit, c.audit];
    if (audit.length > AUDIT_KEEP) audit = audit.slice(audit.length - AUDIT_KEEP);
  }
  state.set({ ...prev, position: c.position, slots, jobs, prs, audit });
  return true;
}

/** noteDeliveries records a deliveries frame: the server recorded a webhook delivery. */
export function noteDeliveries(): void {
  // A counter of frames, not the server's count: another process (behind
  // a load balancer) counts from its own start.
  state.update((prev) => ({ ...prev, deliveries: prev.deliveries + 1 }));
}

/** newerPR keeps the pull request view with the highest position. */
function newerPR(have: PRView | undefined, got: PRView): boolean {
  return have === undefined || got.position > have.position;
}

/**
 * Records the pull requests fetched over REST (GET /api/pull-requests):
 * each kept only if newer than the one held, so a list answered before a
 * change the stream already brought does not undo it.
 */
export function putPRs(list: readonly PRView[]): void {
  state.update((prev) => {
    let prs: Map<string, PRView> | undefined;
    for (const p of list) {
      if (newerPR((prs ?? prev.prs).get(p.stream), p)) (prs ??= new Map(prev.prs)).set(p.stream, p);
    }
    return prs ? { ...prev, prs } : prev;
  });
}

/** Records a job view fetched over REST (kept only if newer). */
export function putJob(j: JobView): void {
  noteServerInstant(j.updated_at);
  state.update((prev) =>
    newer(prev.jobs.get(j.id), j) ? { ...prev, jobs: new Map(prev.jobs).set(j.id, j) } : prev,
  );
}

/** Records a slot view fetched over REST or returned by a command. */
export function putSlot(s: SlotView): void {
  state.update((prev) =>
    newer(prev.slots.get(s.name), s) ? { ...prev, slots: new Map(prev.slots).set(s.name, s) } : prev,
  );
}

export function getLiveState(): LiveState {
  return state.get();
}

export function subscribeLive(listener: () => void): () => void {
  return state.subscribe(listener);
}

/** resetLiveStore is for tests. */
export function resetLiveStore(): void {
  state.set(initial);
}

/** useLive selects a slice of the live state; select must return stable references. */
export function useLive<T>(select: (s: LiveState) => T): T {
  return useSyncExternalStore(
    state.subscribe,
    () => select(state.get()),
    () => select(state.get()),
  );
}

export const useSlot = (name: string): SlotView | undefined => useLive((s) => s.slots.get(name));
export const useJob = (id: string): JobView | undefined => useLive((s) => s.jobs.get(id));
export const useSlots = (): ReadonlyMap<string, SlotView> => useLive((s) => s.slots);
export const useReady = (): boolean => useLive((s) => s.ready);
export const useEpoch = (): number => useLive((s) => s.epoch);
export const useLiveAudit = (): readonly AuditEntry[] => useLive((s) => s.audit);

export const usePRs = (): ReadonlyMap<string, PRView> => useLive((s) => s.prs);
