// Audit by replay (issue 28, docs/api.md "Audit by replay"): GET
// /api/slots/{name}?at=, /api/jobs/{id}?at=, /api/slots/{name}/changes and
// /api/freshness.
import * as v from "valibot";
import { enc, query, request } from "./http";
import { JobView } from "./jobs";
import { Resource } from "./resources";
import { SlotView } from "./slots";
import { decoder, int, str } from "./wire";

/** AsOf says which moment a historic answer shows. */
export const AsOf = v.object({ position: int, time: str, live: v.boolean() });
export type AsOf = v.InferOutput<typeof AsOf>;

export const SlotAt = v.object({ ...SlotView.entries, as_of: AsOf });
export type SlotAt = v.InferOutput<typeof SlotAt>;
export const JobAt = v.object({ ...JobView.entries, as_of: AsOf });
export type JobAt = v.InferOutput<typeof JobAt>;

export type ChangeField = "occupant" | "deadline" | "lifecycle" | "resource" | "active_job" | "pull_request";

const ChangeValue = v.nullable(v.union([str, Resource, v.object({ id: str, kind: str })]));

/** SlotChange is one field of a slot changed by one event. */
export const SlotChange = v.object({
  field: v.picklist(["occupant", "deadline", "lifecycle", "resource", "active_job", "pull_request"]),
  change: v.optional(v.picklist(["gained", "lost"])),
  before: v.optional(ChangeValue, null),
  after: v.optional(ChangeValue, null),
  position: int,
  type: str,
  stream: str,
  actor: str,
  time: str,
});
export type SlotChange = v.InferOutput<typeof SlotChange>;

/** One page of a slot's changes (issue 37): next_from continues an
 * oldest-first page, next_to the older page of a newest-first one. */
export const SlotChanges = v.object({
  slot: str,
  from: AsOf,
  to: AsOf,
  changes: v.array(SlotChange),
  next_from: v.optional(int),
  next_to: v.optional(int),
});
export type SlotChanges = v.InferOutput<typeof SlotChanges>;

export const Freshness = v.object({
  head: int,
  read_model: int,
  rebuilding: v.boolean(),
  position: int,
  behind_events: int,
  behind_seconds: v.number(),
  server_time: str,
});
export type Freshness = v.InferOutput<typeof Freshness>;

const slotAt = decoder(SlotAt, "slot view as of");
const jobAt = decoder(JobAt, "job view as of");
const changes = decoder(SlotChanges, "slot changes");
const freshness = decoder(Freshness, "freshness");

export const replayService = {
  slotAt: (name: string, at: string, signal?: AbortSignal) => request(`/api/slots/${enc(name)}?at=${enc(at)}`, slotAt, { signal }),
  jobAt: (id: string, at: string, signal?: AbortSignal) => request(`/api/jobs/${enc(id)}?at=${enc(at)}`, jobAt, { signal }),
  /** The latest changes of a slot up to a moment (one page, newest first:
   * what the timeline shows; next_to is set when older ones remain). */
  changes: (name: string, from: string | undefined, to: string | undefined, signal?: AbortSignal) =>
    request(`/api/slots/${enc(name)}/changes${query({ from, to, order: "newest" })}`, changes, { signal }),
  freshness: (position: number | undefined, signal?: AbortSignal) =>
    request(`/api/freshness${position ? `?position=${position}` : ""}`, freshness, { signal }),
};
