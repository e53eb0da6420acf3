// Audit by replay (issue 28): the REST calls and types of GET
// /api/slots/{name}?at=, /api/jobs/{id}?at=, /api/slots/{name}/changes and
// /api/freshness (docs/api.md "Audit by replay").
import { request } from "../api/client";
import type { JobView, Resource, SlotView } from "../api/types";

/** AsOf says which moment a historic answer shows. */
export interface AsOf {
  position: number;
  time: string;
  live: boolean;
}

export type SlotAt = SlotView & { as_of: AsOf };
export type JobAt = JobView & { as_of: AsOf };

export type ChangeField = "occupant" | "deadline" | "lifecycle" | "resource" | "active_job";

/** SlotChange is one field of a slot changed by one event. */
export interface SlotChange {
  field: ChangeField;
  change?: "gained" | "lost";
  before: string | Resource | { id: string; kind: string } | null;
  after: string | Resource | { id: string; kind: string } | null;
  position: number;
  type: string;
  stream: string;
  actor: string;
  time: string;
}

export interface SlotChanges {
  slot: string;
  from: AsOf;
  to: AsOf;
  changes: SlotChange[];
}

export interface Freshness {
  head: number;
  read_model: number;
  rebuilding: boolean;
  position: number;
  behind_events: number;
  behind_seconds: number;
  server_time: string;
}

const enc = encodeURIComponent;

export const replayApi = {
  slotAt: (name: string, at: string, signal?: AbortSignal) => request<SlotAt>(`/api/slots/${enc(name)}?at=${enc(at)}`, { signal }),
  jobAt: (id: string, at: string, signal?: AbortSignal) => request<JobAt>(`/api/jobs/${enc(id)}?at=${enc(at)}`, { signal }),
  changes: (name: string, from: string | undefined, to: string | undefined, signal?: AbortSignal) => {
    const q = new URLSearchParams();
    if (from) q.set("from", from);
    if (to) q.set("to", to);
    const s = q.toString();
    return request<SlotChanges>(`/api/slots/${enc(name)}/changes${s ? "?" + s : ""}`, { signal });
  },
  freshness: (position: number | undefined, signal?: AbortSignal) =>
    request<Freshness>(`/api/freshness${position ? `?position=${position}` : ""}`, { signal }),
};

/**
 * momentHref is the dashboard's link to "the slot at this moment" (a log
 * position, or an RFC 3339 time). A path segment, not ?at=: the dashboard
 * routes on the hash, and its router keeps a real query string across
 * later navigations, so every other page would stay "as of".
 */
export function momentHref(slot: string, at: string | number): string {
  return `/slots/${enc(slot)}/at/${enc(String(at))}`;
}

/** fromLocalInput turns a datetime-local field's value into an RFC 3339 time (local time zone); "" if invalid. */
export function fromLocalInput(v: string): string {
  const ms = Date.parse(v);
  return Number.isNaN(ms) || v === "" ? "" : new Date(ms).toISOString();
}
