package events

import "time"

// WaitlistStream is the one stream of the waitlist (backend/waitlist): who
// waits, in which order, and every offer made to them. Every decision is
// appended with the stream's expected revision, so one entry per person and
// one open offer per slot hold across processes.
const WaitlistStream = "waitlist"

// ---- waitlist ----

// WaitlistJoined puts a person at the back of the waitlist.
type WaitlistJoined struct {
	EntryID string `json:"entry_id"`
	// WhoID is the authenticated subject's stable id; Who its display name
	// (the name a slot is occupied by).
	WhoID string `json:"who_id"`
	Who   string `json:"who"`
	// DurationSeconds is how long they want the slot once it is offered.
	DurationSeconds int64  `json:"duration_s"`
	Note            string `json:"note,omitempty"`
	// Prefix, when set, limits offers to slots whose name starts with it.
	Prefix string `json:"prefix,omitempty"`
}

// WaitlistLeft removes an entry (the person left, or an admin removed it).
type WaitlistLeft struct {
	EntryID string `json:"entry_id"`
	By      string `json:"by"`
	Reason  string `json:"reason,omitempty"`
}

// WaitlistReordered moves an entry to Position (0-based) in the queue; only
// an admin does it, with a reason.
type WaitlistReordered struct {
	EntryID  string `json:"entry_id"`
	Position int    `json:"position"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
}

// OfferMade offers a vacant slot, after a verified successful reset (JobID),
// to the entry at the head of the queue until ExpiresAt. It is followed by
// SlotHeld on the slot's stream.
type OfferMade struct {
	OfferID   string    `json:"offer_id"`
	EntryID   string    `json:"entry_id"`
	WhoID     string    `json:"who_id"`
	Who       string    `json:"who"`
	Slot      string    `json:"slot"`
	JobID     string    `json:"job_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// OfferAccepted: the person occupied the offered slot; the entry is done.
type OfferAccepted struct {
	OfferID string    `json:"offer_id"`
	EntryID string    `json:"entry_id"`
	Slot    string    `json:"slot"`
	Until   time.Time `json:"until"`
}

// OfferDeclined: the person said no; the entry leaves the queue and the
// slot passes to the next.
type OfferDeclined struct {
	OfferID string `json:"offer_id"`
	EntryID string `json:"entry_id"`
	Slot    string `json:"slot"`
}

// OfferExpired: nobody answered before ExpiresAt; the entry leaves the queue
// and the slot passes to the next.
type OfferExpired struct {
	OfferID string `json:"offer_id"`
	EntryID string `json:"entry_id"`
	Slot    string `json:"slot"`
}

// OfferWithdrawn: the slot could not be held (taken, locked or retired in
// between); the entry keeps its place.
type OfferWithdrawn struct {
	OfferID string `json:"offer_id"`
	EntryID string `json:"entry_id"`
	Slot    string `json:"slot"`
	Reason  string `json:"reason"`
	// ReasonCode is Reason as a code (WaitReason*; Lifecycle for
	// WaitReasonSlotIs), which the dashboard words in the reader's language
	// (issue 26); absent in events written before it.
	ReasonCode string `json:"reason_code,omitempty"`
	Lifecycle  string `json:"lifecycle,omitempty"`
}

// The codes of the waitlist's own reasons (OfferWithdrawn and
// SlotHoldReleased .ReasonCode).
const (
	WaitReasonSlotUnknown = "slot_unknown" // the offered slot is not in the pool any more
	WaitReasonSlotIs      = "slot_is"      // the offered slot is in Lifecycle, not vacant
	WaitReasonOfferEnded  = "offer_ended"  // the offer the hold was for ended
)

// ---- slot-<name> ----

// SlotHeld reserves a vacant slot for the person an offer names, until
// Until: nobody else may occupy it meanwhile (backend/slots checks it).
// Appended with the slot's expected revision, like a claim.
type SlotHeld struct {
	Slot    string    `json:"slot"`
	OfferID string    `json:"offer_id"`
	ForID   string    `json:"for_id"`
	For     string    `json:"for"`
	Until   time.Time `json:"until"`
}

// SlotHoldReleased lifts a hold whose offer ended without a next one.
type SlotHoldReleased struct {
	Slot       string `json:"slot"`
	OfferID    string `json:"offer_id"`
	Reason     string `json:"reason"`
	ReasonCode string `json:"reason_code,omitempty"` // WaitReason*, as OfferWithdrawn's
}

// DeadlineWarning tells an occupant that Deadline (when the slot is reset)
// is LeadSeconds away. At most one per slot, deadline and lead; a moved
// deadline gets its own warnings.
type DeadlineWarning struct {
	Slot        string    `json:"slot"`
	Occupant    string    `json:"occupant"`
	Deadline    time.Time `json:"deadline"`
	LeadSeconds int64     `json:"lead_s"`
}

func (WaitlistJoined) EventType() string    { return "WaitlistJoined" }
func (WaitlistLeft) EventType() string      { return "WaitlistLeft" }
func (WaitlistReordered) EventType() string { return "WaitlistReordered" }
func (OfferMade) EventType() string         { return "OfferMade" }
func (OfferAccepted) EventType() string     { return "OfferAccepted" }
func (OfferDeclined) EventType() string     { return "OfferDeclined" }
func (OfferExpired) EventType() string      { return "OfferExpired" }
func (OfferWithdrawn) EventType() string    { return "OfferWithdrawn" }
func (SlotHeld) EventType() string          { return "SlotHeld" }
func (SlotHoldReleased) EventType() string  { return "SlotHoldReleased" }
func (DeadlineWarning) EventType() string   { return "DeadlineWarning" }

func init() {
	constructors["WaitlistJoined"] = decodeAs[WaitlistJoined]
	constructors["WaitlistLeft"] = decodeAs[WaitlistLeft]
	constructors["WaitlistReordered"] = decodeAs[WaitlistReordered]
	constructors["OfferMade"] = decodeAs[OfferMade]
	constructors["OfferAccepted"] = decodeAs[OfferAccepted]
	constructors["OfferDeclined"] = decodeAs[OfferDeclined]
	constructors["OfferExpired"] = decodeAs[OfferExpired]
	constructors["OfferWithdrawn"] = decodeAs[OfferWithdrawn]
	constructors["SlotHeld"] = decodeAs[SlotHeld]
	constructors["SlotHoldReleased"] = decodeAs[SlotHoldReleased]
	constructors["DeadlineWarning"] = decodeAs[DeadlineWarning]
}
