package apperr

// Reason is a stable, machine-readable account of an error: the dashboard
// picks its sentence by Reason from its own dictionaries and fills in the
// error's Args; Message stays the English sentence for other clients and
// logs. Reasons are part of the API contract: docs/api.md "Reasons" lists
// every one with its args (a test keeps the two lists equal). An error
// without a reason of its own is sent with its Code as its reason.
type Reason string

// The reasons, grouped by what refuses. Args are named after the
// constant's comment.
const (
	// Validation (400, 422).
	ReasonInvalidField      Reason = "invalid_field"        // field: the offending field (any 400 naming one)
	ReasonUntilRequired     Reason = "until_required"       // field
	ReasonUntilNotFuture    Reason = "until_not_future"     // field, until
	ReasonUntilTooFar       Reason = "until_too_far"        // field, until, max (a Go duration)
	ReasonConfirmEarlier    Reason = "confirm_earlier"      // field: confirm_earlier must be true
	ReasonUnknownJobKind    Reason = "unknown_job_kind"     // kind
	ReasonOutsideScope      Reason = "outside_scope"        // field, project (403)
	ReasonResourceAbsent    Reason = "resource_absent"      // field, id (422: the provider says it does not exist)
	ReasonResourceForeign   Reason = "resource_foreign"     // field, id, project (422: not in the slot's project or environment)
	ReasonComposeTemplate   Reason = "compose_template"     // app (422: a docker-compose application cannot take a template)
	ReasonTemplateIsOwnRepo Reason = "template_is_own_repo" // repo (422)
	ReasonProviderUnchecked Reason = "provider_unchecked"   // field, id (502: the provider could not answer the lookup)

	// Slots and jobs (409 unless noted).
	ReasonSlotNotFound        Reason = "slot_not_found"       // slot (404)
	ReasonSlotRegistered      Reason = "slot_registered"      // slot, state: already registered
	ReasonResourceOwned       Reason = "resource_owned"       // field, value, owner: another slot names it
	ReasonSlotLocked          Reason = "slot_locked"          // slot, job, kind, state: another job holds the slot
	ReasonSlotOccupied        Reason = "slot_occupied"        // slot, occupant
	ReasonSlotRetired         Reason = "slot_retired"         // slot
	ReasonSlotIncomplete      Reason = "slot_incomplete"      // slot: a teardown could not confirm every deletion
	ReasonSlotNotOccupied     Reason = "slot_not_occupied"    // slot
	ReasonSlotHeld            Reason = "slot_held"            // slot, held_for, held_until: a waitlist offer holds it
	ReasonNotOccupant         Reason = "not_occupant"         // slot, occupant (403: only one's own slot)
	ReasonDeadlineNotLater    Reason = "deadline_not_later"   // slot, until: extend would move the deadline earlier
	ReasonDeadlineNotEarlier  Reason = "deadline_not_earlier" // slot, deadline, until
	ReasonJobNotFound         Reason = "job_not_found"        // job (404)
	ReasonJobEnded            Reason = "job_ended"            // job, state: cancel of a finished job
	ReasonJobNotResumable     Reason = "job_not_resumable"    // job, state
	ReasonJobStillEnding      Reason = "job_still_ending"     // job: its previous attempt still holds the lock
	ReasonChangedConcurrently Reason = "changed_concurrently" // what: others kept writing; try again
	ReasonFindingStale        Reason = "finding_stale"        // the reconciliation finding is no longer true
	ReasonResourceTracked     Reason = "resource_tracked"     // slot: a slot tracks the resource now

	// Waitlist.
	ReasonWaitlistOff        Reason = "waitlist_off"          // (404) the waitlist is not enabled
	ReasonAlreadyWaiting     Reason = "already_waiting"       // who, entry_id
	ReasonEntryNotFound      Reason = "entry_not_found"       // entry_id (404)
	ReasonEntryNotYours      Reason = "entry_not_yours"       // entry_id, who (403)
	ReasonOfferNotYours      Reason = "offer_not_yours"       // entry_id, who (403)
	ReasonNoOpenOffer        Reason = "no_open_offer"         // entry_id
	ReasonOfferExpired       Reason = "offer_expired"         // entry_id, slot, expired_at
	ReasonDurationInvalid    Reason = "duration_invalid"      // field, duration (400)
	ReasonDurationTooLong    Reason = "duration_too_long"     // field, duration, max (422)
	ReasonDurationTooShort   Reason = "duration_too_short"    // field, duration (422)
	ReasonReorderNeedsReason Reason = "reorder_needs_reason"  // field (422)
	ReasonPositionOutOfRange Reason = "position_out_of_range" // field, position, max (422; 1-based)

	// Accounts.
	ReasonNameTaken     Reason = "name_taken"     // (409) a user or token name already in use
	ReasonWrongPassword Reason = "wrong_password" // field (400)
)

// Reasons is every reason, in the order docs/api.md lists them.
var Reasons = []Reason{
	ReasonInvalidField, ReasonUntilRequired, ReasonUntilNotFuture, ReasonUntilTooFar, ReasonConfirmEarlier,
	ReasonUnknownJobKind, ReasonOutsideScope, ReasonResourceAbsent, ReasonResourceForeign, ReasonComposeTemplate,
	ReasonTemplateIsOwnRepo, ReasonProviderUnchecked,
	ReasonSlotNotFound, ReasonSlotRegistered, ReasonResourceOwned, ReasonSlotLocked, ReasonSlotOccupied,
	ReasonSlotRetired, ReasonSlotIncomplete, ReasonSlotNotOccupied, ReasonSlotHeld, ReasonNotOccupant,
	ReasonDeadlineNotLater, ReasonDeadlineNotEarlier, ReasonJobNotFound, ReasonJobEnded, ReasonJobNotResumable,
	ReasonJobStillEnding, ReasonChangedConcurrently, ReasonFindingStale, ReasonResourceTracked,
	ReasonWaitlistOff, ReasonAlreadyWaiting, ReasonEntryNotFound, ReasonEntryNotYours, ReasonOfferNotYours,
	ReasonNoOpenOffer, ReasonOfferExpired, ReasonDurationInvalid, ReasonDurationTooLong, ReasonDurationTooShort,
	ReasonReorderNeedsReason, ReasonPositionOutOfRange,
	ReasonNameTaken, ReasonWrongPassword,
}
