// The frames of GET /api/stream (docs/api.md "Stream"): checked on arrival
// like every REST answer (live/stream.ts drops and counts a malformed one).
import * as v from "valibot";
import { AuditEntry } from "./audit";
import { JobView } from "./jobs";
import { PRView } from "./pullrequests";
import { SlotView } from "./slots";
import { decoder, int, list, str } from "./wire";

export const Snapshot = v.object({
  position: int,
  server_time: v.optional(str, ""),
  slots: list(SlotView),
  /**
   * Set when the id the client resumed from is beyond the server's log (the
   * store was replaced): everything held belongs to another log.
   */
  log_reset: v.optional(v.boolean()),
});
export type Snapshot = v.InferOutput<typeof Snapshot>;

export const Change = v.object({
  position: int,
  slot: v.optional(SlotView),
  job: v.optional(JobView),
  /** A pull request's view, when its event changed it (the board's waiting list). */
  pull_request: v.optional(PRView),
  audit: v.optional(AuditEntry),
});
export type Change = v.InferOutput<typeof Change>;

export const Heartbeat = v.object({
  server_time: v.optional(str, ""),
  position: int,
  /** The server's heartbeat interval, if it says. */
  interval_ms: v.optional(v.number()),
});
export type Heartbeat = v.InferOutput<typeof Heartbeat>;

/**
 * Deliveries: the server recorded a webhook delivery (no id, not replayed):
 * the admin page loads its list of deliveries again.
 */
export const Deliveries = v.object({
  /** Deliveries the server process recorded since it started. */
  received: int,
});
export type Deliveries = v.InferOutput<typeof Deliveries>;

export const frames = {
  snapshot: decoder(Snapshot, "snapshot frame"),
  change: decoder(Change, "change frame"),
  heartbeat: decoder(Heartbeat, "heartbeat frame"),
  deliveries: decoder(Deliveries, "deliveries frame"),
};
