// Package insights is a read model of how the pool is used, folded from the
// log: occupied / vacant / resetting slots over time, waitlist length and
// time-to-slot over time, and step durations (median, p90) per job kind.
// It is served by GET /api/insights?range=1d|7d|30d (docs/waitlist.md).
package insights

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// keep bounds the history held (the longest range served).
const keep = 31 * 24 * time.Hour

// Point is the pool's state from T on.
type point struct {
	T                              time.Time
	Occupied, Vacant, Resetting, W int
}

type sample struct {
	T time.Time
	D time.Duration
}

type jobTrack struct {
	kind        string
	step        string
	start, last time.Time
	first       time.Time
}

type slotTrack struct {
	occupied, locked, retired, exists bool
	lockKind                          string
}

// Service folds the log and answers Series.
type Service struct {
	store events.Store
	now   func() time.Time

	mu       sync.Mutex
	pos      events.Position
	slots    map[string]*slotTrack
	jobs     map[string]*jobTrack
	waiting  map[string]time.Time // entry → joined
	points   []point
	toSlot   []sample                       // join → accepted
	steps    map[string]map[string][]sample // kind → step → samples ("job" = whole job)
	lastTime time.Time
}

// New returns the insights read model on store (now: nil = time.Now).
func New(store events.Store, now func() time.Time) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now, slots: map[string]*slotTrack{}, jobs: map[string]*jobTrack{},
		waiting: map[string]time.Time{}, steps: map[string]map[string][]sample{}}
}

// Run follows the log from the start until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	err := s.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.SlotStreamPrefix, events.JobStreamPrefix, events.WaitlistStream}},
		func(_ context.Context, ev events.RecordedEvent) error {
			s.Apply(ev)
			return nil
		})
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Apply folds one event.
func (s *Service) Apply(ev events.RecordedEvent) {
	p, err := events.Decode(ev)
	if err != nil {
		return
	}
	t := ev.Meta.Time
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pos = ev.Position
	changed := false
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		name := ev.Stream[len(events.SlotStreamPrefix):]
		st := s.slots[name]
		if st == nil {
			st = &slotTrack{}
			s.slots[name] = st
		}
		switch e := p.(type) {
		case events.SlotRegistered:
			st.exists, changed = true, true
		case events.SlotOccupied:
			st.occupied, changed = true, true
		case events.SlotVacated:
			st.occupied, changed = false, true
		case events.JobAccepted:
			st.locked, st.lockKind, changed = true, e.Kind, true
		case events.JobReleased:
			st.locked, st.lockKind, changed = false, "", true
		case events.SlotRetired:
			st.retired, changed = true, true
		}
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		id := ev.Stream[len(events.JobStreamPrefix):]
		j := s.jobs[id]
		if j == nil {
			j = &jobTrack{}
			s.jobs[id] = j
		}
		switch e := p.(type) {
		case events.JobQueued:
			j.kind = e.Kind
		case events.StepStarted:
			if e.Step != j.step {
				s.finishStep(j)
				j.step, j.start, j.last = e.Step, t, time.Time{}
			}
			if j.first.IsZero() {
				j.first = t
			}
		case events.JobSucceeded:
			s.finishStep(j)
			if !j.first.IsZero() {
				s.add(j.kind, "job", sample{t, t.Sub(j.first)})
			}
			delete(s.jobs, id)
		case events.JobFailed, events.JobTimedOut, events.JobCancelled, events.JobAbandoned:
			s.finishStep(j)
			j.step = ""
		default:
			if r, ok := stepResult(p); ok && r == j.step {
				j.last = t
			}
		}
	case ev.Stream == events.WaitlistStream:
		switch e := p.(type) {
		case events.WaitlistJoined:
			s.waiting[e.EntryID], changed = t, true
		case events.WaitlistLeft:
			delete(s.waiting, e.EntryID)
			changed = true
		case events.OfferDeclined:
			delete(s.waiting, e.EntryID)
			changed = true
		case events.OfferExpired:
			delete(s.waiting, e.EntryID)
			changed = true
		case events.OfferAccepted:
			if j, ok := s.waiting[e.EntryID]; ok {
				s.toSlot = append(s.toSlot, sample{t, t.Sub(j)})
			}
			delete(s.waiting, e.EntryID)
			changed = true
		}
	}
	if changed {
		s.record(t)
	}
}

func (s *Service) finishStep(j *jobTrack) {
	if j.step != "" && !j.last.IsZero() && j.kind != "" {
		s.add(j.kind, j.step, sample{j.last, j.last.Sub(j.start)})
	}
	j.step, j.last = "", time.Time{}
}

func (s *Service) add(kind, step string, x sample) {
	m := s.steps[kind]
	if m == nil {
		m = map[string][]sample{}
		s.steps[kind] = m
	}
	m[step] = append(m[step], x)
	if len(m[step]) > 20000 {
		m[step] = m[step][len(m[step])-10000:]
	}
}

func (s *Service) record(t time.Time) {
	p := point{T: t, W: len(s.waiting)}
	for _, st := range s.slots {
		switch {
		case !st.exists || st.retired:
		case st.locked && (st.lockKind == events.KindReset || st.lockKind == events.KindTeardown):
			p.Resetting++
		case st.occupied:
			p.Occupied++
		default:
			p.Vacant++
		}
	}
	if n := len(s.points); n > 0 && !s.points[n-1].T.After(t) && s.points[n-1].T.Equal(t) {
		s.points[n-1] = p
	} else {
		s.points = append(s.points, p)
	}
	// Forget what no range shows any more (keep one point before the window).
	cut := t.Add(-keep)
	i := 0
	for i+1 < len(s.points) && s.points[i+1].T.Before(cut) {
		i++
	}
	if i > 0 {
		s.points = slices.Clone(s.points[i:])
	}
}

func stepResult(p events.Payload) (string, bool) {
	switch e := p.(type) {
	case events.DBDeleted:
		return e.Step, true
	case events.EnvVarsDeleted:
		return e.Step, true
	case events.VolumeDeleted:
		return e.Step, true
	case events.ForcePushed:
		return e.Step, true
	case events.AppDeleted:
		return e.Step, true
	case events.RepoDeleted:
		return e.Step, true
	case events.ProjectDeleted:
		return e.Step, true
	case events.RepoCreated:
		return e.Step, true
	case events.CodePushed:
		return e.Step, true
	case events.StepSucceeded:
		return e.Step, true
	}
	return "", false
}

// Bucket is one time bucket of the series.
type Bucket struct {
	T         time.Time `json:"t"`
	Occupied  int       `json:"occupied"`
	Vacant    int       `json:"vacant"`
	Resetting int       `json:"resetting"`
	Waiting   int       `json:"waiting"`
	// TimeToSlotSeconds is the median join → accept of hand-overs in the
	// bucket (null without one).
	TimeToSlotSeconds *float64 `json:"time_to_slot_s"`
}

// StepStat is the duration of one step of one job kind over the range.
type StepStat struct {
	Kind    string  `json:"kind"`
	Step    string  `json:"step"` // "job" = the whole job
	Count   int     `json:"count"`
	MedianS float64 `json:"median_s"`
	P90S    float64 `json:"p90_s"`
}

// Series is GET /api/insights' answer.
type Series struct {
	Range    string          `json:"range"`
	Bucket   string          `json:"bucket"`
	From     time.Time       `json:"from"`
	To       time.Time       `json:"to"`
	Position events.Position `json:"position"`
	Buckets  []Bucket        `json:"buckets"`
	Steps    []StepStat      `json:"steps"`
}

// Ranges are the ranges served and their bucket sizes.
var Ranges = map[string][2]time.Duration{
	"1d":  {24 * time.Hour, time.Hour},
	"7d":  {7 * 24 * time.Hour, 6 * time.Hour},
	"30d": {30 * 24 * time.Hour, 24 * time.Hour},
}

// Series answers a range ("1d", "7d", "30d"); ok false for another.
func (s *Service) Series(rng string) (Series, bool) {
	r, ok := Ranges[rng]
	if !ok {
		return Series{}, false
	}
	to := s.now().UTC().Truncate(r[1]).Add(r[1])
	from := to.Add(-r[0])
	s.mu.Lock()
	defer s.mu.Unlock()
	out := Series{Range: rng, Bucket: r[1].String(), From: from, To: to, Position: s.pos, Buckets: []Bucket{}, Steps: []StepStat{}}
	pi := 0
	var cur point
	for b := from; b.Before(to); b = b.Add(r[1]) {
		end := b.Add(r[1])
		for pi < len(s.points) && s.points[pi].T.Before(end) {
			cur = s.points[pi]
			pi++
		}
		bk := Bucket{T: b, Occupied: cur.Occupied, Vacant: cur.Vacant, Resetting: cur.Resetting, Waiting: cur.W}
		var ds []time.Duration
		for _, x := range s.toSlot {
			if !x.T.Before(b) && x.T.Before(end) {
				ds = append(ds, x.D)
			}
		}
		if len(ds) > 0 {
			m := quantile(ds, 0.5).Seconds()
			bk.TimeToSlotSeconds = &m
		}
		out.Buckets = append(out.Buckets, bk)
	}
	for kind, m := range s.steps {
		for step, xs := range m {
			var ds []time.Duration
			for _, x := range xs {
				if !x.T.Before(from) {
					ds = append(ds, x.D)
				}
			}
			if len(ds) == 0 {
				continue
			}
			out.Steps = append(out.Steps, StepStat{Kind: kind, Step: step, Count: len(ds), MedianS: quantile(ds, 0.5).Seconds(), P90S: quantile(ds, 0.9).Seconds()})
		}
	}
	slices.SortFunc(out.Steps, func(a, b StepStat) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Step, b.Step)
	})
	return out, true
}

// quantile is the nearest-rank quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
