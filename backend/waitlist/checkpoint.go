package waitlist

import (
	"slices"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checkpoints of the consumer (backend/consumer): the whole fold, which is
// already only what offers, holds, warnings and the view need (State.prune
// and State.forget keep it from growing with history), at the position of
// the last event folded. Offers and warnings are conditional appends with
// expected revisions that the fold derives from the log, so refolding the
// events after an older checkpoint decides nothing twice.
const (
	checkpointConsumer = "waitlist"
	checkpointVersion  = 2
)

// snapshot is the JSON shape of a checkpoint's state (version 2), stored
// packed (consumer.Options.Packed: a pool of thousands of slots stays well under an
// event's size limit).
type snapshot struct {
	Revision       events.Revision         `json:"revision"`
	Exists         bool                    `json:"exists"`
	Order          []string                `json:"order"`
	Entries        map[string]*Entry       `json:"entries"`
	Offers         map[string]*Offer       `json:"offers"`
	Slots          map[string]slotSnapshot `json:"slots"`
	Resets         []time.Duration         `json:"resets"`
	OffersMade     int                     `json:"offers_made"`
	OffersExpired  int                     `json:"offers_expired"`
	OffersAccepted int                     `json:"offers_accepted"`
	HandOvers      []time.Duration         `json:"hand_overs"`
	ReleasedTime   map[string]time.Time    `json:"released_time"`
}

// slotSnapshot is what slotInfo keeps of a slot (slotInfo.prune drops the
// rest of slots.SlotState), in short form.
type slotSnapshot struct {
	Revision    events.Revision `json:"r"`
	Registered  bool            `json:"reg,omitempty"`
	Occupied    bool            `json:"occ,omitempty"`
	Occupant    string          `json:"by,omitempty"`
	OccupantID  string          `json:"by_id,omitempty"`
	Until       time.Time       `json:"until,omitzero"`
	Retired     bool            `json:"ret,omitempty"`
	Incomplete  bool            `json:"inc,omitempty"`
	LockJob     string          `json:"lj,omitempty"`
	LockKind    string          `json:"lk,omitempty"`
	Hold        events.SlotHeld `json:"hold,omitzero"`
	Vacated     []string        `json:"vac,omitempty"`
	LastJob     string          `json:"last,omitempty"`
	LastKind    string          `json:"lastk,omitempty"`
	LastOutcome string          `json:"lasto,omitempty"`
	ReleasedAt  events.Position `json:"rel,omitempty"`
	LockedAt    time.Time       `json:"at,omitzero"`
	Warned      []string        `json:"w,omitempty"`
}

// encode is the fold as a checkpoint's state.
func (s *State) encode() snapshot {
	out := snapshot{Revision: s.Revision, Exists: s.Exists, Order: s.Order, Entries: s.Entries, Offers: s.Offers,
		Slots: make(map[string]slotSnapshot, len(s.slots)), Resets: s.resets, OffersMade: s.OffersMade,
		OffersExpired: s.OffersExpired, OffersAccepted: s.OffersAccepted, HandOvers: s.HandOvers, ReleasedTime: s.releasedTime}
	for name, si := range s.slots {
		st := &si.st
		ss := slotSnapshot{Revision: st.Revision, Registered: st.Reg.Slot != "", Occupied: st.Occupied, Occupant: st.Occupant, OccupantID: st.OccupantID,
			Until: st.Until, Retired: st.Retired, Incomplete: st.Incomplete, LockJob: st.LockJob, LockKind: st.LockKind, Hold: st.Hold,
			LastJob: si.lastJob, LastKind: si.lastKind, LastOutcome: si.lastOutcome, ReleasedAt: si.releasedAt, LockedAt: si.lockedAt}
		for id := range st.VacatedBy {
			ss.Vacated = append(ss.Vacated, id)
		}
		slices.Sort(ss.Vacated)
		for k := range si.warned {
			ss.Warned = append(ss.Warned, k)
		}
		slices.Sort(ss.Warned)
		out.Slots[name] = ss
	}
	return out
}

// restore returns the fold a checkpoint's state holds.
func restore(snap snapshot) *State {
	s := NewState()
	s.Revision, s.Exists, s.Order = snap.Revision, snap.Exists, snap.Order
	if snap.Entries != nil {
		s.Entries = snap.Entries
	}
	if snap.Offers != nil {
		s.Offers = snap.Offers
	}
	if snap.ReleasedTime != nil {
		s.releasedTime = snap.ReleasedTime
	}
	s.resets, s.HandOvers = snap.Resets, snap.HandOvers
	s.OffersMade, s.OffersExpired, s.OffersAccepted = snap.OffersMade, snap.OffersExpired, snap.OffersAccepted
	for name, ss := range snap.Slots {
		st := slots.SlotState{Name: name, Exists: true, Revision: ss.Revision, Occupied: ss.Occupied, Occupant: ss.Occupant, OccupantID: ss.OccupantID,
			Until: ss.Until, Retired: ss.Retired, Incomplete: ss.Incomplete, LockJob: ss.LockJob, LockKind: ss.LockKind, Hold: ss.Hold,
			VacatedBy: map[string]bool{}, PromotedBy: map[string]events.RepoRef{}}
		if ss.Registered {
			st.Reg.Slot = name
		}
		for _, id := range ss.Vacated {
			st.VacatedBy[id] = true
		}
		si := &slotInfo{st: st, lastJob: ss.LastJob, lastKind: ss.LastKind, lastOutcome: ss.LastOutcome,
			releasedAt: ss.ReleasedAt, lockedAt: ss.LockedAt, warned: map[string]bool{}}
		for _, k := range ss.Warned {
			si.warned[k] = true
		}
		s.slots[name] = si
	}
	return s
}

// size counts the fold's entries (entries, offers, slots and what each slot
// keeps per job or warning): what the memory test watches.
func (s *State) size() int {
	n := len(s.Order) + len(s.Entries) + len(s.Offers) + len(s.resets) + len(s.HandOvers) + len(s.releasedTime)
	for _, si := range s.slots {
		n += 1 + len(si.warned) + len(si.st.VacatedBy) + len(si.st.PromotedBy) + len(si.st.Remaining)
	}
	return n
}
