// Package waitlist is a fair queue of people waiting for a slot. Joins,
// leaves, reorders and every offer are events on one stream
// (events.WaitlistStream), appended with its expected revision; the hold on
// an offered slot is an event on the slot's own stream (events.SlotHeld),
// appended with the slot's expected revision like a claim, and
// backend/slots refuses anyone else's occupy while it lasts.
//
// Offers are made only by the Service's log consumer, and only for a slot
// whose last job was a reset that ended in JobSucceeded + SlotVacated (the
// JobReleased{succeeded} on the slot stream). The consumer derives what to
// do from its fold alone (see plan), so after a crash it resumes from the
// log and does the missing step exactly once.
package waitlist

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Entry is one person waiting.
type Entry struct {
	ID       string
	WhoID    string
	Who      string
	Note     string
	Prefix   string
	Duration time.Duration
	JoinedAt time.Time
}

// Offer is an open offer of a slot to an entry.
type Offer struct {
	ID        string
	EntryID   string
	WhoID     string
	Who       string
	Slot      string
	JobID     string
	MadeAt    time.Time
	ExpiresAt time.Time
}

// slotInfo is the slot aggregate plus what the waitlist needs beside it.
type slotInfo struct {
	st slots.SlotState
	// lastJob/lastKind/lastOutcome describe the newest JobReleased.
	lastJob, lastKind, lastOutcome string
	releasedAt                     events.Position
	lockedAt                       time.Time
	// warned holds "<deadline RFC 3339>/<lead>" for every warning written
	// for the current deadline, or carried to it by an extend
	// (carryWarnings; prune drops earlier deadlines').
	warned map[string]bool
}

func (si *slotInfo) clone() *slotInfo {
	c := *si
	c.warned = maps.Clone(si.warned)
	c.st.VacatedBy = maps.Clone(si.st.VacatedBy)
	c.st.PromotedBy = maps.Clone(si.st.PromotedBy)
	c.st.Remaining = slices.Clone(si.st.Remaining)
	return &c
}

// maxSamples bounds the reset durations kept for the estimate.
const maxSamples = 50

// State is the fold of the waitlist stream and the slot streams.
type State struct {
	// Revision of the waitlist stream; Exists is false before its first event.
	Revision events.Revision
	Exists   bool

	Order   []string          // entry ids, head first
	Entries map[string]*Entry // by entry id
	Offers  map[string]*Offer // open offers by offer id

	slots map[string]*slotInfo
	// resets are the newest measured reset durations (accept → release,
	// grace included: what a waiting person waits for).
	resets []time.Duration

	// Counters for metrics.
	OffersMade, OffersExpired, OffersAccepted int
	HandOvers                                 []time.Duration // reset success → accept, newest last (bounded)
	releasedTime                              map[string]time.Time
}

// clone returns a copy of s that shares nothing changeable with it.
func (s *State) clone() *State {
	c := *s
	c.Order = slices.Clone(s.Order)
	c.Entries = make(map[string]*Entry, len(s.Entries))
	for id, e := range s.Entries {
		cp := *e
		c.Entries[id] = &cp
	}
	c.Offers = make(map[string]*Offer, len(s.Offers))
	for id, o := range s.Offers {
		cp := *o
		c.Offers[id] = &cp
	}
	c.slots = make(map[string]*slotInfo, len(s.slots))
	for name, si := range s.slots {
		c.slots[name] = si.clone()
	}
	c.resets = slices.Clone(s.resets)
	c.HandOvers = slices.Clone(s.HandOvers)
	c.releasedTime = maps.Clone(s.releasedTime)
	return &c
}

// NewState returns an empty fold.
func NewState() *State {
	return &State{Entries: map[string]*Entry{}, Offers: map[string]*Offer{}, slots: map[string]*slotInfo{}, releasedTime: map[string]time.Time{}}
}

func warnKey(deadline time.Time, lead time.Duration) string {
	return deadlineKey(deadline) + lead.String()
}

// deadlineKey starts the warned keys of one deadline.
func deadlineKey(deadline time.Time) string {
	return deadline.UTC().Format(time.RFC3339Nano) + "/"
}

// Apply folds one event of the waitlist stream or a slot stream.
func (s *State) Apply(ev events.RecordedEvent) error {
	switch {
	case ev.Stream == events.WaitlistStream:
		return s.applyWaitlist(ev)
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		return s.applySlot(ev)
	}
	return nil
}

func (s *State) applyWaitlist(ev events.RecordedEvent) error {
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	s.Exists, s.Revision = true, ev.Revision
	switch e := p.(type) {
	case events.WaitlistJoined:
		s.Entries[e.EntryID] = &Entry{ID: e.EntryID, WhoID: e.WhoID, Who: e.Who, Note: e.Note, Prefix: e.Prefix,
			Duration: time.Duration(e.DurationSeconds) * time.Second, JoinedAt: ev.Meta.Time}
		s.Order = append(s.Order, e.EntryID)
	case events.WaitlistLeft:
		s.removeEntry(e.EntryID)
	case events.WaitlistReordered:
		i := slices.Index(s.Order, e.EntryID)
		if i < 0 {
			break
		}
		s.Order = slices.Delete(s.Order, i, i+1)
		pos := min(max(e.Position, 0), len(s.Order))
		s.Order = slices.Insert(s.Order, pos, e.EntryID)
	case events.OfferMade:
		s.Offers[e.OfferID] = &Offer{ID: e.OfferID, EntryID: e.EntryID, WhoID: e.WhoID, Who: e.Who, Slot: e.Slot,
			JobID: e.JobID, MadeAt: ev.Meta.Time, ExpiresAt: e.ExpiresAt}
		s.OffersMade++
	case events.OfferAccepted:
		delete(s.Offers, e.OfferID)
		s.removeEntry(e.EntryID)
		s.OffersAccepted++
		if t, ok := s.releasedTime[e.Slot]; ok {
			s.HandOvers = append(s.HandOvers, ev.Meta.Time.Sub(t))
			if len(s.HandOvers) > maxSamples {
				s.HandOvers = s.HandOvers[1:]
			}
		}
	case events.OfferDeclined:
		delete(s.Offers, e.OfferID)
		s.removeEntry(e.EntryID)
	case events.OfferExpired:
		delete(s.Offers, e.OfferID)
		s.removeEntry(e.EntryID)
		s.OffersExpired++
	case events.OfferWithdrawn:
		delete(s.Offers, e.OfferID)
	}
	// A closed offer may have been all that kept a retired slot.
	for name, si := range s.slots {
		if si.st.Retired {
			s.forget(name)
		}
	}
	return nil
}

// removeEntry drops an entry and any offer still open for it.
func (s *State) removeEntry(id string) {
	delete(s.Entries, id)
	if i := slices.Index(s.Order, id); i >= 0 {
		s.Order = slices.Delete(s.Order, i, i+1)
	}
	for oid, o := range s.Offers {
		if o.EntryID == id {
			delete(s.Offers, oid)
		}
	}
}

func (s *State) applySlot(ev events.RecordedEvent) error {
	name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
	si := s.slots[name]
	if si == nil {
		if ev.Revision != 0 {
			// Only a retired slot's trailing events (its lock's release)
			// come after the slot left the fold (forget): registering
			// is a slot stream's first event, and a name is never reused.
			return nil
		}
		si = &slotInfo{st: slots.SlotState{Name: name}, warned: map[string]bool{}}
		s.slots[name] = si
	}
	defer func() {
		// After lastJob moved: its VacatedBy entry is the one offers read.
		si.prune()
		s.forget(name)
	}()
	lockKind := si.st.LockKind
	lockJob := si.st.LockJob
	until := si.st.Until
	if err := si.st.Apply(ev); err != nil {
		return err
	}
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case events.OccupancyExtended:
		si.carryWarnings(until, ev.Meta.Time)
	case events.JobAccepted:
		si.lockedAt = ev.Meta.Time
	case events.JobReleased:
		if e.JobID != lockJob {
			break
		}
		si.lastJob, si.lastKind, si.lastOutcome, si.releasedAt = e.JobID, lockKind, e.Outcome, ev.Position
		if lockKind == events.KindReset && e.Outcome == events.StatusSucceeded {
			if d := ev.Meta.Time.Sub(si.lockedAt); !si.lockedAt.IsZero() && d >= 0 {
				s.resets = append(s.resets, d)
				if len(s.resets) > maxSamples {
					s.resets = s.resets[1:]
				}
			}
			s.releasedTime[name] = ev.Meta.Time
		}
	case events.DeadlineWarning:
		// A warning covers its lead and every longer one for that deadline.
		si.warned[warnKey(e.Deadline, time.Duration(e.LeadSeconds)*time.Second)] = true
	}
	return nil
}

// carryWarnings moves the warnings of deadline was to the current one
// after an extend at time at (issue 33: every extend inside the window
// used to warn again, 12 extends → 12 posts). A lead's warning stays sent
// while the new deadline is within twice the lead of the extend: the
// occupant was told and has just acted. An extend further out re-arms it:
// when the deadline comes near again, that is news. Since a re-armed lead
// fires only once the deadline is within the lead again, a lead warns at
// most once per lead time whatever the extends (extends only add time).
func (si *slotInfo) carryWarnings(was, at time.Time) {
	cur := si.st.Until
	if cur.Equal(was) {
		return
	}
	prefix := deadlineKey(was)
	for k := range si.warned {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if lead, err := time.ParseDuration(rest); err == nil && cur.Sub(at) <= 2*lead {
			si.warned[warnKey(cur, lead)] = true
		}
	}
}

// prune drops what grows with the slot's history and offers never read:
// vacating jobs other than the lock holder's and the last released job's
// (offerable reads VacatedBy[lastJob]), promotions, and warnings of earlier deadlines
// (warning and Warnings look only at the current one). So a slot's entry
// stays the same size however long its stream gets.
func (si *slotInfo) prune() {
	st := &si.st
	for id := range st.VacatedBy {
		if id != st.LockJob && id != si.lastJob {
			delete(st.VacatedBy, id)
		}
	}
	clear(st.PromotedBy)
	// Nor the rest of the aggregate no decision of the waitlist reads
	// (what restore cannot rebuild from a checkpoint).
	st.Reg = events.SlotRegistered{Slot: st.Reg.Slot}
	st.Lock, st.LockMeta, st.LockedAt, st.LockResume, st.LockRun = events.JobAccepted{}, events.Metadata{}, time.Time{}, false, 0
	st.Remaining, st.RetiredBy, st.DeadlineResetFor = nil, "", time.Time{}
	cur := deadlineKey(st.Until)
	for k := range si.warned {
		if !strings.HasPrefix(k, cur) {
			delete(si.warned, k)
		}
	}
}

// forget drops a retired slot once nothing refers to it any more (its lock
// released, no offer open for it): it can never be offered, warned about or
// occupied again, and its name is never registered again.
func (s *State) forget(name string) {
	si := s.slots[name]
	if si == nil || !si.st.Retired || si.st.Locked() || s.offerFor(name) != nil {
		return
	}
	delete(s.slots, name)
	delete(s.releasedTime, name)
}

// offerFor returns the open offer of a slot, if any.
func (s *State) offerFor(slot string) *Offer {
	for _, o := range s.Offers {
		if o.Slot == slot {
			return o
		}
	}
	return nil
}

// offerOf returns the open offer of an entry, if any.
func (s *State) offerOf(entry string) *Offer {
	for _, o := range s.Offers {
		if o.EntryID == entry {
			return o
		}
	}
	return nil
}

// entryOf returns the entry of a person (by subject id, else by name).
func (s *State) entryOf(whoID, who string) *Entry {
	for _, id := range s.Order {
		e := s.Entries[id]
		if (whoID != "" && e.WhoID == whoID) || (whoID == "" && e.WhoID == "" && e.Who == who) {
			return e
		}
	}
	return nil
}

// offerable reports whether a slot may be offered now: registered, vacant,
// unlocked, neither retired nor incomplete, its newest job a reset that
// succeeded and vacated it, and no offer open for it.
func (si *slotInfo) offerable() bool {
	st := &si.st
	return st.Exists && st.Reg.Slot != "" && !st.Retired && !st.Incomplete && !st.Occupied && !st.Locked() &&
		si.lastKind == events.KindReset && si.lastOutcome == events.StatusSucceeded && st.VacatedBy[si.lastJob]
}

// offerableSlots lists the slots to offer, longest vacant first.
func (s *State) offerableSlots() []string {
	var out []string
	for name, si := range s.slots {
		if si.offerable() && s.offerFor(name) == nil {
			out = append(out, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return s.slots[out[i]].releasedAt < s.slots[out[j]].releasedAt })
	return out
}

// medianReset is the median measured reset duration (ok false without data).
func (s *State) medianReset() (time.Duration, int, bool) {
	if len(s.resets) == 0 {
		return 0, 0, false
	}
	d := slices.Clone(s.resets)
	slices.Sort(d)
	return d[len(d)/2], len(d), true
}
