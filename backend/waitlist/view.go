package waitlist

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// EntryView is one entry as GET /api/waitlist shows it.
type EntryView struct {
	ID       string    `json:"id"`
	Who      string    `json:"who"`
	WhoID    string    `json:"who_id,omitempty"`
	Position int       `json:"position"` // 1-based
	Duration string    `json:"duration"`
	Note     string    `json:"note,omitempty"`
	Prefix   string    `json:"prefix,omitempty"`
	JoinedAt time.Time `json:"joined_at"`
	// EstimatedWait is how long until a slot should be offered.
	EstimatedWait Estimate   `json:"estimated_wait"`
	Offer         *OfferView `json:"offer,omitempty"`
}

// OfferView is an entry's open offer.
type OfferView struct {
	ID        string    `json:"id"`
	Slot      string    `json:"slot"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Estimate is a wait estimate with how it was computed. Seconds is nil when
// there is no data to estimate from ("unknown").
type Estimate struct {
	Seconds *int64 `json:"seconds"`
	// At is when a slot should be offered (absent when unknown).
	At *time.Time `json:"at,omitempty"`
	// Basis says how it was computed, or why it is unknown.
	Basis string `json:"basis"`
	// BasisCode and BasisArgs are Basis as a code (Basis*) and its parts,
	// which the dashboard words in the reader's language (issue 35).
	BasisCode string            `json:"basis_code,omitempty"`
	BasisArgs map[string]string `json:"basis_args,omitempty"`
}

// The codes of an estimate's basis (Estimate.BasisCode).
const (
	BasisOffered  = "offered"  // a slot is offered now
	BasisNoData   = "no_data"  // no reset has been measured yet
	BasisTooFew   = "too_few"  // args ahead, slots: more ahead than slots that will free up
	BasisComputed = "computed" // args n, median, samples: the n-th slot to free up, from deadlines + the median reset
)

// View is GET /api/waitlist's answer.
type View struct {
	Entries []EntryView `json:"entries"`
	// Position is the log position the view reflects.
	Position events.Position `json:"position"`
	// ServerTime is the clock the estimates were computed at.
	ServerTime time.Time `json:"server_time"`
	// OfferTTL is how long an offer is held.
	OfferTTL string `json:"offer_ttl"`
}

// Stats are the figures for metrics.
type Stats struct {
	Length, OpenOffers, OffersMade, OffersExpired, OffersAccepted int
	// HandOver is the median reset success → accept time (0 without data).
	HandOver time.Duration
}

// View returns the waitlist read model (the consumer's fold).
func (s *Service) View(_ context.Context) View {
	now := s.now()
	var out View
	s.r.View(func() { out = s.view(now) })
	return out
}

// view is View at now (inside s.r.View).
func (s *Service) view(now time.Time) View {
	st := s.st
	frees := s.frees(now)
	med, n, ok := st.medianReset()
	out := View{Entries: make([]EntryView, 0, len(st.Order)), Position: s.r.Position(), ServerTime: now, OfferTTL: s.cfg.OfferTTL.String()}
	waiting := 0 // entries ahead without an offer
	for i, id := range st.Order {
		e := st.Entries[id]
		ev := EntryView{ID: e.ID, Who: e.Who, WhoID: e.WhoID, Position: i + 1, Duration: e.Duration.String(), Note: e.Note, Prefix: e.Prefix, JoinedAt: e.JoinedAt}
		if o := st.offerOf(id); o != nil {
			ev.Offer = &OfferView{ID: o.ID, Slot: o.Slot, ExpiresAt: o.ExpiresAt}
			zero := int64(0)
			ev.EstimatedWait = Estimate{Seconds: &zero, At: &now, Basis: "a slot is offered now", BasisCode: BasisOffered}
		} else {
			ev.EstimatedWait = estimate(now, waiting, frees, med, n, ok)
			waiting++
		}
		out.Entries = append(out.Entries, ev)
	}
	return out
}

// frees lists when each slot should next become free to offer, soonest
// first: occupied slots at their deadline (or now, if passed) + the median
// reset; slots being reset at their reset's start + the median.
func (s *Service) frees(now time.Time) []time.Time {
	med, _, ok := s.st.medianReset()
	if !ok {
		return nil
	}
	var out []time.Time
	for _, si := range s.st.slots {
		st := &si.st
		if !st.Exists || st.Retired || st.Incomplete {
			continue
		}
		switch {
		case st.LockKind == events.KindReset:
			out = append(out, maxTime(si.lockedAt.Add(med), now))
		case st.Occupied && !st.Until.IsZero() && !st.Locked():
			out = append(out, maxTime(st.Until, now).Add(med))
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// estimate is the wait of the k-th waiting entry (0-based).
func estimate(now time.Time, k int, frees []time.Time, med time.Duration, samples int, ok bool) Estimate {
	if !ok {
		return Estimate{Basis: "unknown: no reset has been measured yet", BasisCode: BasisNoData}
	}
	if k >= len(frees) {
		return Estimate{Basis: fmt.Sprintf("unknown: %d ahead and only %d slots with a deadline or a reset under way", k, len(frees)),
			BasisCode: BasisTooFew, BasisArgs: map[string]string{"ahead": strconv.Itoa(k), "slots": strconv.Itoa(len(frees))}}
	}
	at := frees[k]
	secs := int64(at.Sub(now) / time.Second)
	return Estimate{Seconds: &secs, At: &at,
		Basis:     fmt.Sprintf("slot #%d to free up: current deadlines and resets in progress + median reset %s (from %d resets); assumes nobody extends", k+1, med.Round(time.Second), samples),
		BasisCode: BasisComputed, BasisArgs: map[string]string{"n": strconv.Itoa(k + 1), "median": med.Round(time.Second).String(), "samples": strconv.Itoa(samples)}}
}

// Stats returns the figures for metrics.
func (s *Service) Stats() (out Stats) {
	s.r.View(func() { out = s.stats() })
	return out
}

func (s *Service) stats() Stats {
	st := s.st
	out := Stats{Length: len(st.Order), OpenOffers: len(st.Offers), OffersMade: st.OffersMade, OffersExpired: st.OffersExpired, OffersAccepted: st.OffersAccepted}
	if len(st.HandOvers) > 0 {
		d := slices.Clone(st.HandOvers)
		slices.Sort(d)
		out.HandOver = d[len(d)/2]
	}
	return out
}

// Warnings lists the deadline warnings in force: for occupied slots whose
// current deadline got a warning and has not passed (the dashboard banner).
func (s *Service) Warnings() []events.DeadlineWarning {
	now := s.now()
	var out []events.DeadlineWarning
	s.r.View(func() { out = s.warnings(now) })
	slices.SortFunc(out, func(a, b events.DeadlineWarning) int { return a.Deadline.Compare(b.Deadline) })
	return out
}

func (s *Service) warnings(now time.Time) []events.DeadlineWarning {
	var out []events.DeadlineWarning
	for _, si := range s.st.slots {
		st := &si.st
		if !st.Occupied || !now.Before(st.Until) || st.LockKind == events.KindReset || st.LockKind == events.KindTeardown {
			continue
		}
		for _, l := range s.cfg.WarnLeads {
			if si.warned[warnKey(st.Until, l)] {
				out = append(out, events.DeadlineWarning{Slot: st.Name, Occupant: st.Occupant, Deadline: st.Until, LeadSeconds: int64(l / time.Second)})
				break
			}
		}
	}
	return out
}
