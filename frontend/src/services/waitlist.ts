// The waitlist (docs/api.md "Waitlist", docs/waitlist.md). Its commands go
// through the one request function, so they carry the session's current
// CSRF token (issue 26: a copy of its own went stale after a password change
// or a sign-in as someone else).
import * as v from "valibot";
import { enc, request } from "./http";
import { slotsService } from "./slots";
import { decoder, int, list, optStr, str, strMap } from "./wire";

export const Estimate = v.object({
  /** null: unknown (no data to estimate from). */
  seconds: v.nullable(v.number()),
  at: optStr,
  /** How the estimate was computed, or why it is unknown. */
  basis: str,
  /** basis as a code and its parts (issue 35), worded by the dictionaries. */
  basis_code: optStr,
  basis_args: v.optional(strMap),
});
export type Estimate = v.InferOutput<typeof Estimate>;

export const WaitlistOffer = v.object({ id: str, slot: str, expires_at: str });
export type WaitlistOffer = v.InferOutput<typeof WaitlistOffer>;

export const WaitlistEntry = v.object({
  id: str,
  who: str,
  who_id: optStr,
  position: int,
  duration: str,
  note: optStr,
  prefix: optStr,
  joined_at: str,
  estimated_wait: Estimate,
  offer: v.optional(WaitlistOffer),
});
export type WaitlistEntry = v.InferOutput<typeof WaitlistEntry>;

export const DeadlineWarning = v.object({ slot: str, occupant: str, deadline: str, lead_s: v.number() });
export type DeadlineWarning = v.InferOutput<typeof DeadlineWarning>;

export const WaitlistAnswer = v.object({
  entries: list(WaitlistEntry),
  position: int,
  server_time: str,
  offer_ttl: str,
  warnings: list(DeadlineWarning),
});
export type WaitlistAnswer = v.InferOutput<typeof WaitlistAnswer>;

const answer = decoder(WaitlistAnswer, "waitlist");

export const waitlistService = {
  list: (after: number, signal?: AbortSignal) => request(`/api/waitlist${after > 0 ? `?after=${after}` : ""}`, answer, { signal }),
  join: (duration: string, note: string) => request("/api/waitlist", answer, { method: "POST", body: note ? { duration, note } : { duration } }),
  leave: (id: string) => request(`/api/waitlist/${enc(id)}`, answer, { method: "DELETE" }),
  accept: (id: string) => request(`/api/waitlist/${enc(id)}/accept`, answer, { method: "POST" }),
  decline: (id: string) => request(`/api/waitlist/${enc(id)}/decline`, answer, { method: "POST" }),
  /** extend: a warning's extend button; true once the server took it (the page reloads). */
  extend: (slot: string, until: string) => slotsService.extend(slot, until).then(() => true as const),
};

/**
 * WAITLIST_TYPES are the event types after which the waitlist (or an
 * estimate, which follows deadlines and resets) may have changed; the page
 * reloads GET /api/waitlist?after=<their position> when the stream shows one.
 */
export const WAITLIST_TYPES = new Set([
  "WaitlistJoined",
  "WaitlistLeft",
  "WaitlistReordered",
  "OfferMade",
  "OfferAccepted",
  "OfferDeclined",
  "OfferExpired",
  "OfferWithdrawn",
  "SlotHeld",
  "SlotHoldReleased",
  "DeadlineWarning",
  "SlotOccupied",
  "OccupancyExtended",
  "JobAccepted",
  "JobReleased",
  "SlotVacated",
]);
