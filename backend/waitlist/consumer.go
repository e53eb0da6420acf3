package waitlist

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// The consumer is a consumer.Runner of the State: the Runner owns the
// checkpoints, the subscription, catching up and the lock (View), and runs
// Step once caught up, after every event and when Step said to look again.

// options are the Runner's: the whole fold, packed, every CheckpointEvery
// events at most once per CheckpointGap, or after CheckpointAfter, and at
// stop; Step on the configured clock.
func (s *Service) options() consumer.Options {
	return consumer.Options{Packed: true, Clock: s.cfg.Clock, Health: s.cfg.Health, Logger: s.log,
		Save: consumer.SavePolicy{Every: s.cfg.CheckpointEvery, Gap: s.cfg.CheckpointGap, After: s.cfg.CheckpointAfter},
		Step: func(ctx context.Context) time.Time {
			next, err := s.Step(ctx)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("waitlist: step failed", "err", err)
			}
			return next
		}}
}

// Name implements consumer.Fold.
func (s *State) Name() string { return checkpointConsumer }

// Version implements consumer.Fold.
func (s *State) Version() int { return checkpointVersion }

// Wants implements consumer.Fold: the waitlist stream and slot streams.
func (s *State) Wants(ev events.RecordedEvent) bool {
	return ev.Stream == events.WaitlistStream || strings.HasPrefix(ev.Stream, events.SlotStreamPrefix)
}

// Snapshot implements consumer.Fold.
func (s *State) Snapshot() (any, error) { return s.encode(), nil }

// Restore implements consumer.Fold.
func (s *State) Restore(b []byte) error {
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return err
	}
	*s = *restore(snap)
	return nil
}

// Wake makes Run look again now (after a clock jump in tests).
func (s *Service) Wake() { s.r.Wake() }

// Sync folds the log up to its head as of the call (tests and start-up).
func (s *Service) Sync(ctx context.Context) error { return s.r.Sync(ctx) }

// WaitFor blocks until the fold has applied pos (read-your-writes).
func (s *Service) WaitFor(ctx context.Context, pos events.Position) error {
	return s.r.WaitApplied(ctx, pos)
}

// Run is the consumer: it starts from its newest usable checkpoint (else
// from position 0), follows the log, and after every event or timer does
// what the fold says is missing (Step). It returns nil when ctx ends.
func (s *Service) Run(ctx context.Context) error { return s.r.Run(ctx) }

// CaughtUp is closed once Run has folded the log up to its head as it was
// when Run started (from a checkpoint or from 0). It stays open if Run ends
// first.
func (s *Service) CaughtUp() <-chan struct{} { return s.r.CaughtUp() }

// action is one conditional append the fold says is missing.
type action struct {
	stream string
	exp    events.ExpectedRevision
	evs    []events.EventData
	warn   []events.DeadlineWarning
}

// Step does, once, every append the fold says is missing at the clock's
// now, and returns when it should look again (zero: nothing timed). Appends
// that lose a race (ErrWrongRevision) are dropped: the winner's events
// arrive through the log and the next Step decides again.
func (s *Service) Step(ctx context.Context) (time.Time, error) {
	now := s.now()
	var acts []action
	var next time.Time
	s.r.View(func() { acts, next = s.plan(now) })
	var firstErr error
	for _, a := range acts {
		_, err := s.store.Append(ctx, a.stream, a.exp, a.evs...)
		if errors.Is(err, events.ErrWrongRevision) {
			continue
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		for _, e := range a.evs {
			s.log.Info("waitlist", "event", e.Type, "stream", a.stream)
		}
		for _, w := range a.warn {
			if s.cfg.OnWarning != nil {
				s.cfg.OnWarning(ctx, w)
			}
		}
	}
	return next, firstErr
}

// plan computes the missing appends from the fold (inside s.r.View).
func (s *Service) plan(now time.Time) ([]action, time.Time) {
	st := s.st
	var next time.Time
	soon := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	sysMeta := events.Metadata{Actor: ActorWaitlist, Time: now}
	var wl []events.EventData
	var acts []action
	closing := map[string]bool{} // slots whose offer closes in this step

	offers := make([]*Offer, 0, len(st.Offers))
	for _, o := range st.Offers {
		offers = append(offers, o)
	}
	sort.Slice(offers, func(i, j int) bool { return offers[i].ID < offers[j].ID })
	for _, o := range offers {
		si := st.slots[o.Slot]
		switch {
		case si == nil || !si.st.Exists:
			wl = append(wl, events.New(events.OfferWithdrawn{OfferID: o.ID, EntryID: o.EntryID, Slot: o.Slot, Reason: "slot unknown",
				ReasonCode: events.WaitReasonSlotUnknown}, sysMeta))
			closing[o.Slot] = true
		case si.st.Occupied && si.st.Occupant == o.Who:
			// Accept's occupy landed, its OfferAccepted did not (crash).
			wl = append(wl, events.New(events.OfferAccepted{OfferID: o.ID, EntryID: o.EntryID, Slot: o.Slot, Until: si.st.Until}, sysMeta))
			closing[o.Slot] = true
		case si.st.Occupied || si.st.Locked() || si.st.Retired || si.st.Incomplete:
			wl = append(wl, events.New(events.OfferWithdrawn{OfferID: o.ID, EntryID: o.EntryID, Slot: o.Slot, Reason: "slot is " + si.st.Lifecycle(),
				ReasonCode: events.WaitReasonSlotIs, Lifecycle: si.st.Lifecycle()}, sysMeta))
			closing[o.Slot] = true
		case !now.Before(o.ExpiresAt):
			wl = append(wl, events.New(events.OfferExpired{OfferID: o.ID, EntryID: o.EntryID, Slot: o.Slot}, sysMeta))
			closing[o.Slot] = true
		case si.st.Hold.OfferID != o.ID:
			// OfferMade without its hold (first step, or a crash between).
			acts = append(acts, action{stream: events.SlotStream(o.Slot), exp: events.Exact(si.st.Revision),
				evs: []events.EventData{events.New(events.SlotHeld{Slot: o.Slot, OfferID: o.ID, ForID: o.WhoID, For: o.Who, Until: o.ExpiresAt}, sysMeta)}})
			soon(o.ExpiresAt)
		default:
			soon(o.ExpiresAt)
		}
	}

	// New offers: each offerable slot to the first waiting entry without an
	// open offer whose prefix fits.
	offered := map[string]bool{}
	newOffer := map[string]bool{}
	for _, slot := range st.offerableSlots() {
		for _, id := range st.Order {
			e := st.Entries[id]
			if offered[id] || st.offerOf(id) != nil || (e.Prefix != "" && !hasPrefix(slot, e.Prefix)) {
				continue
			}
			offered[id] = true
			newOffer[slot] = true
			wl = append(wl, events.New(events.OfferMade{OfferID: uuid.NewString(), EntryID: id, WhoID: e.WhoID, Who: e.Who,
				Slot: slot, JobID: st.slots[slot].lastJob, ExpiresAt: now.Add(s.cfg.OfferTTL)}, sysMeta))
			break
		}
	}
	if len(wl) > 0 {
		acts = append([]action{{stream: events.WaitlistStream, exp: expected(st), evs: wl}}, acts...)
	}

	names := make([]string, 0, len(st.slots))
	for n := range st.slots {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		si := st.slots[name]
		// A hold whose offer is over and that no new offer replaces.
		if h := si.st.Hold; h.OfferID != "" && st.Offers[h.OfferID] == nil && !newOffer[name] && st.offerFor(name) == nil && !closing[name] {
			acts = append(acts, action{stream: events.SlotStream(name), exp: events.Exact(si.st.Revision),
				evs: []events.EventData{events.New(events.SlotHoldReleased{Slot: name, OfferID: h.OfferID, Reason: "offer ended", ReasonCode: events.WaitReasonOfferEnded}, sysMeta)}})
			continue // one append per slot per step (same expected revision)
		}
		if a, ok := s.warning(si, now, sysMeta, soon); ok {
			acts = append(acts, a)
		}
	}
	return acts, next
}

// warning returns the DeadlineWarning due for an occupied slot, if any: the
// shortest lead already reached and not yet warned for this deadline.
// Never for a slot being reset or torn down, nor after the deadline.
func (s *Service) warning(si *slotInfo, now time.Time, m events.Metadata, soon func(time.Time)) (action, bool) {
	st := &si.st
	if !st.Occupied || st.Until.IsZero() || st.Retired || st.LockKind == events.KindReset || st.LockKind == events.KindTeardown || !now.Before(st.Until) {
		return action{}, false
	}
	var due time.Duration = -1
	for _, lead := range s.cfg.WarnLeads { // shortest first
		at := st.Until.Add(-lead)
		if warnedFrom(si, st.Until, lead, s.cfg.WarnLeads) {
			continue
		}
		if !now.Before(at) {
			due = lead
			break
		}
		soon(at)
	}
	if due < 0 {
		return action{}, false
	}
	w := events.DeadlineWarning{Slot: st.Name, Occupant: st.Occupant, Deadline: st.Until, LeadSeconds: int64(due / time.Second)}
	return action{stream: events.SlotStream(st.Name), exp: events.Exact(st.Revision),
		evs: []events.EventData{events.New(w, m)}, warn: []events.DeadlineWarning{w}}, true
}

// warnedFrom reports whether lead, or a shorter lead, was already warned
// for deadline (a shorter warning makes a longer one pointless).
func warnedFrom(si *slotInfo, deadline time.Time, lead time.Duration, leads []time.Duration) bool {
	for _, l := range leads {
		if l <= lead && si.warned[warnKey(deadline, l)] {
			return true
		}
	}
	return false
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
