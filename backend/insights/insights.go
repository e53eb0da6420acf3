// Package insights is a read model of how the pool is used, folded from the
// log, answering a pool owner's three questions: how full was the pool
// (slots in use / busy / vacant over time, time-weighted, with the peak),
// how long did people wait for a slot (waitlist join → accepted offer,
// median and p90, and the longest waitlist), and how long does each step
// take (median, p90 per job kind and step).
// It is served by GET /api/insights?range=1d|7d|30d (docs/waitlist.md).
package insights

import (
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// keep bounds the history held (the longest range served).
const keep = 31 * 24 * time.Hour

// point is the pool's state from T on.
type point struct {
	T                              time.Time
	Occupied, Vacant, Resetting, W int
}

// hour is one whole hour of the pool's use (issue 27 item 9): slot-time by
// category and the log's coverage in milliseconds, so a bucket's answer is
// a time-weighted mean (a state sampled at the bucket's end showed a
// 20-minute reset as nothing, or a pool full for an hour as one spike), and
// the peaks within the hour.
type hour struct {
	T time.Time
	// Ms is slot-milliseconds by category (occupied, vacant, resetting);
	// Covered the milliseconds of the hour the fold has seen the pool for.
	Ms      [3]int64
	Covered int64
	// InUse is the most slots occupied or busy at once; Waiting the
	// longest waitlist.
	InUse, Waiting int
}

// sample is one duration D that ended at T, both to the millisecond (what
// the answers show, and what keeps checkpoints small: see series).
type sample struct {
	T time.Time
	D time.Duration
}

func newSample(t time.Time, d time.Duration) sample {
	return sample{T: t.Truncate(time.Millisecond).UTC(), D: d.Truncate(time.Millisecond)}
}

type jobTrack struct {
	Kind        string
	Step        string
	Start, Last time.Time
	First       time.Time
	// EndSeq is set while the job has ended without success (it may be
	// resumed): its place among such jobs, newest highest.
	EndSeq uint64 `json:",omitempty"`
}

type slotTrack struct {
	Occupied, Locked bool
	LockKind         string
}

// The categories a slot is counted in.
const (
	occupied = iota
	vacant
	resetting
)

func (st *slotTrack) category() int {
	switch {
	case st.Locked && (st.LockKind == events.KindReset || st.LockKind == events.KindTeardown):
		return resetting
	case st.Occupied:
		return occupied
	}
	return vacant
}

// fold is the read model's state, what its checkpoints hold (JSON,
// checkpointVersion). Everything in it is bounded: slots that exist,
// jobs that are open (and the newest maxEnded ended without success),
// people waiting, one point per hour over keep, and the newest maxSamples
// samples per series within keep.
type fold struct {
	Slots   map[string]*slotTrack        `json:"slots"`
	Count   [3]int                       `json:"count"` // slots by category
	Jobs    map[string]*jobTrack         `json:"jobs"`
	Ended   []endedJob                   `json:"ended"` // jobs ended without success, oldest first
	EndSeq  uint64                       `json:"end_seq"`
	Waiting map[string]time.Time         `json:"waiting"` // entry → joined
	Points  []point                      `json:"points"`
	Hours   []hour                       `json:"hours"`   // checkpointVersion 2
	Since   time.Time                    `json:"since"`   // the pool's use is accounted up to here (zero: no slot or waitlist event yet)
	ToSlot  series                       `json:"to_slot"` // join → accepted
	Steps   map[string]map[string]series `json:"steps"`   // kind → step → samples ("job" = whole job)
}

type endedJob struct {
	ID  string
	Seq uint64
}

func newFold() fold {
	return fold{Slots: map[string]*slotTrack{}, Jobs: map[string]*jobTrack{}, Waiting: map[string]time.Time{},
		Steps: map[string]map[string]series{}}
}

// Service folds the log (a model, run by a consumer.Runner) and answers
// Series.
type Service struct {
	now func() time.Time
	m   *model
	r   *consumer.Runner
}

// model is the read model as a consumer.Fold; the Runner's lock guards it.
type model struct {
	maxSamples, maxEnded int
	f                    fold
}

func newModel(cfg Config) *model {
	return &model{maxSamples: cfg.MaxSamples, maxEnded: cfg.MaxEnded, f: newFold()}
}

// Config tunes the read model; zero values pick the defaults noted.
type Config struct {
	// MaxSamples bounds each series of durations: time-to-slot and each
	// kind's step (default 3,000, the newest kept: about 20 series fit one
	// checkpoint event).
	MaxSamples int
	// MaxEnded bounds the jobs that ended without success kept for a
	// resume's whole-job duration (default 1,000, the newest kept).
	MaxEnded int
	// CheckpointEvery is how many events Run folds between checkpoints
	// (default 10,000), at most one per CheckpointGap (default 10 s);
	// CheckpointAfter writes one once that much time passed and something
	// was folded (default 5 minutes). Run also writes one when it stops.
	CheckpointEvery int
	CheckpointGap   time.Duration
	CheckpointAfter time.Duration
	Logger          *slog.Logger
}

// New returns the insights read model on store (now: nil = time.Now).
func New(store events.Store, now func() time.Time, cfg Config) *Service {
	if now == nil {
		now = time.Now
	}
	if cfg.MaxSamples <= 0 {
		cfg.MaxSamples = 3000
	}
	if cfg.MaxEnded <= 0 {
		cfg.MaxEnded = 1000
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 10000
	}
	if cfg.CheckpointGap <= 0 {
		cfg.CheckpointGap = 10 * time.Second
	}
	if cfg.CheckpointAfter <= 0 {
		cfg.CheckpointAfter = 5 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := newModel(cfg)
	return &Service{now: now, m: m, r: consumer.NewRunner(store, m, options(cfg))}
}

// Wants implements consumer.Fold: slot, job and waitlist events.
func (m *model) Wants(ev events.RecordedEvent) bool {
	return strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) ||
		strings.HasPrefix(ev.Stream, events.JobStreamPrefix) || ev.Stream == events.WaitlistStream
}

// Apply implements consumer.Fold.
func (m *model) Apply(ev events.RecordedEvent) error {
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	t := ev.Meta.Time
	f := &m.f
	if !strings.HasPrefix(ev.Stream, events.JobStreamPrefix) {
		// The state so far lasted until this event.
		f.Hours, f.Since = f.advance(f.Hours, f.Since, t)
	}
	changed := false
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		name := ev.Stream[len(events.SlotStreamPrefix):]
		st := f.Slots[name]
		if st == nil {
			if _, ok := p.(events.SlotRegistered); !ok {
				// A retired slot's trailing events (it left the fold):
				// only registered, unretired slots are counted.
				return nil
			}
			st = &slotTrack{}
			f.Slots[name] = st
		} else {
			f.Count[st.category()]--
		}
		switch e := p.(type) {
		case events.SlotRegistered:
			changed = true
		case events.SlotOccupied:
			st.Occupied, changed = true, true
		case events.SlotVacated:
			st.Occupied, changed = false, true
		case events.JobAccepted:
			st.Locked, st.LockKind, changed = true, e.Kind, true
		case events.JobReleased:
			st.Locked, st.LockKind, changed = false, "", true
		case events.SlotRetired:
			// A name is never registered again.
			delete(f.Slots, name)
			changed = true
		}
		if f.Slots[name] == st {
			f.Count[st.category()]++
		}
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		id := ev.Stream[len(events.JobStreamPrefix):]
		j := f.Jobs[id]
		if j == nil {
			switch p.(type) {
			case events.JobQueued, events.StepStarted:
			default:
				// Nothing else of a job it does not know (finished and
				// forgotten) yields a sample.
				return nil
			}
			j = &jobTrack{}
			f.Jobs[id] = j
		}
		switch e := p.(type) {
		case events.JobQueued:
			j.Kind = e.Kind
		case events.StepStarted:
			j.EndSeq = 0 // resumed
			if e.Step != j.Step {
				m.finishStep(j)
				j.Step, j.Start, j.Last = e.Step, t, time.Time{}
			}
			if j.First.IsZero() {
				j.First = t
			}
		case events.JobSucceeded:
			m.finishStep(j)
			if !j.First.IsZero() {
				m.add(j.Kind, "job", newSample(t, t.Sub(j.First)))
			}
			delete(f.Jobs, id)
		default:
			switch r, isResult := events.StepResultOf(p); {
			case events.IsTerminal(ev.Type): // ended without success (the vocabulary's list, events/jobs.go)
				m.finishStep(j)
				j.Step = ""
				m.ended(id, j)
			case isResult && r.Step == j.Step: // any step's result, found from the catalogue
				j.Last = t
			}
		}
	case ev.Stream == events.WaitlistStream:
		switch e := p.(type) {
		case events.WaitlistJoined:
			f.Waiting[e.EntryID], changed = t, true
		case events.WaitlistLeft:
			delete(f.Waiting, e.EntryID)
			changed = true
		case events.OfferDeclined:
			delete(f.Waiting, e.EntryID)
			changed = true
		case events.OfferExpired:
			delete(f.Waiting, e.EntryID)
			changed = true
		case events.OfferAccepted:
			if j, ok := f.Waiting[e.EntryID]; ok {
				f.ToSlot = m.keepNewest(append(f.ToSlot, newSample(t, t.Sub(j))), t)
			}
			delete(f.Waiting, e.EntryID)
			changed = true
		}
	}
	if changed {
		m.record(t)
		f.peaks()
	}
	return nil
}

// advance accounts the current state's slot-time from since to t into
// hours (one entry per whole hour, none older than keep before t) and
// returns them and the new since. Series runs it on a copy up to now.
func (f *fold) advance(hours []hour, since, t time.Time) ([]hour, time.Time) {
	if since.IsZero() {
		since = t
	}
	if !t.After(since) {
		// Also an event dated before the last one (clocks of several
		// processes): its change counts from the time accounted to.
		return f.open(hours, since), since
	}
	if cut := t.Add(-keep).Truncate(time.Hour); since.Before(cut) {
		since = cut
	}
	for since.Before(t) {
		h := since.Truncate(time.Hour)
		end := h.Add(time.Hour)
		if t.Before(end) {
			end = t
		}
		hours = f.open(hours, h)
		cur := &hours[len(hours)-1]
		ms := end.Sub(since).Milliseconds()
		for c := range f.Count {
			cur.Ms[c] += int64(f.Count[c]) * ms
		}
		cur.Covered += ms
		since = end
	}
	hours = f.open(hours, t)
	// Forget what no range shows any more.
	i := 0
	for i < len(hours) && hours[i].T.Before(t.Add(-keep).Truncate(time.Hour)) {
		i++
	}
	if i > 0 {
		hours = slices.Clone(hours[i:])
	}
	return hours, since
}

// open returns hours ending with the entry of t's hour; a new entry starts
// with the state carried into it as its peaks.
func (f *fold) open(hours []hour, t time.Time) []hour {
	h := t.Truncate(time.Hour)
	if n := len(hours); n > 0 && !hours[n-1].T.Before(h) {
		return hours
	}
	return append(hours, hour{T: h, InUse: f.Count[occupied] + f.Count[resetting], Waiting: len(f.Waiting)})
}

// peaks raises the current hour's peaks to the state just folded.
func (f *fold) peaks() {
	if n := len(f.Hours); n > 0 {
		cur := &f.Hours[n-1]
		cur.InUse = max(cur.InUse, f.Count[occupied]+f.Count[resetting])
		cur.Waiting = max(cur.Waiting, len(f.Waiting))
	}
}

// ended remembers a job that ended without success (a resume continues its
// whole-job duration), forgetting the oldest such job past MaxEnded.
func (m *model) ended(id string, j *jobTrack) {
	f := &m.f
	f.EndSeq++
	j.EndSeq = f.EndSeq
	f.Ended = append(f.Ended, endedJob{ID: id, Seq: j.EndSeq})
	for len(f.Ended) > m.maxEnded {
		old := f.Ended[0]
		f.Ended = f.Ended[1:]
		// Still that ending (not resumed, not ended again since)?
		if oj := f.Jobs[old.ID]; oj != nil && oj.EndSeq == old.Seq {
			delete(f.Jobs, old.ID)
		}
	}
}

func (m *model) finishStep(j *jobTrack) {
	if j.Step != "" && !j.Last.IsZero() && j.Kind != "" {
		m.add(j.Kind, j.Step, newSample(j.Last, j.Last.Sub(j.Start)))
	}
	j.Step, j.Last = "", time.Time{}
}

func (m *model) add(kind, step string, x sample) {
	st := m.f.Steps[kind]
	if st == nil {
		st = map[string]series{}
		m.f.Steps[kind] = st
	}
	st[step] = m.keepNewest(append(st[step], x), x.T)
}

// keepNewest bounds a series: the newest MaxSamples, none older than keep
// before now (no range shows them).
func (m *model) keepNewest(xs series, now time.Time) series {
	cut := now.Add(-keep)
	i := max(len(xs)-m.maxSamples, 0)
	for i < len(xs) && xs[i].T.Before(cut) {
		i++
	}
	if i == 0 {
		return xs
	}
	// Copy when the dropped head is large, so the array does not keep it.
	if i > len(xs)/2 {
		return slices.Clone(xs[i:])
	}
	return xs[i:]
}

// record notes the pool's state from t on. One point per hour is enough:
// every bucket of every range ends on a whole hour and shows the last
// point before its end, which is the last point of some hour.
func (m *model) record(t time.Time) {
	f := &m.f
	p := point{T: t, W: len(f.Waiting), Occupied: f.Count[occupied], Vacant: f.Count[vacant], Resetting: f.Count[resetting]}
	if n := len(f.Points); n > 0 && f.Points[n-1].T.Truncate(time.Hour).Equal(t.Truncate(time.Hour)) {
		f.Points[n-1] = p
	} else {
		f.Points = append(f.Points, p)
	}
	// Forget what no range shows any more (keep one point before the window).
	cut := t.Add(-keep)
	i := 0
	for i+1 < len(f.Points) && f.Points[i+1].T.Before(cut) {
		i++
	}
	if i > 0 {
		f.Points = slices.Clone(f.Points[i:])
	}
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

	// The pool's use over the bucket (issue 27 item 9), time-weighted over
	// the part of it the log covers (CoveredS; 0 = no data yet): the mean
	// number of slots occupied, busy (a reset or teardown holds them) and
	// vacant, and the most in use (occupied or busy) at once.
	OccupiedAvg float64 `json:"occupied_avg"`
	BusyAvg     float64 `json:"busy_avg"`
	VacantAvg   float64 `json:"vacant_avg"`
	InUsePeak   int     `json:"in_use_peak"`
	CoveredS    float64 `json:"covered_s"`
	// WaitingPeak is the longest waitlist in the bucket; HandedOver the
	// offers accepted in it, whose join → accept times give the median
	// above and the p90 (null without one).
	WaitingPeak          int      `json:"waiting_peak"`
	HandedOver           int      `json:"handed_over"`
	TimeToSlotP90Seconds *float64 `json:"time_to_slot_p90_s"`
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
	var out Series
	now := s.now()
	s.r.View(func() { out = s.m.series(rng, r, now, s.r.Position()) })
	return out, true
}

// series is Series of the fold at pos.
func (m *model) series(rng string, r [2]time.Duration, now time.Time, pos events.Position) Series {
	to := now.UTC().Truncate(r[1]).Add(r[1])
	from := to.Add(-r[0])
	f := &m.f
	out := Series{Range: rng, Bucket: r[1].String(), From: from, To: to, Position: pos, Buckets: []Bucket{}, Steps: []StepStat{}}
	// The hours with the current state accounted up to now.
	var hours []hour
	if !f.Since.IsZero() {
		hours, _ = f.advance(slices.Clone(f.Hours), f.Since, now)
	}
	pi, hi := 0, 0
	var cur point
	for b := from; b.Before(to); b = b.Add(r[1]) {
		end := b.Add(r[1])
		for pi < len(f.Points) && f.Points[pi].T.Before(end) {
			cur = f.Points[pi]
			pi++
		}
		bk := Bucket{T: b, Occupied: cur.Occupied, Vacant: cur.Vacant, Resetting: cur.Resetting, Waiting: cur.W}
		var ms [3]int64
		var covered int64
		for ; hi < len(hours) && hours[hi].T.Before(end); hi++ {
			h := hours[hi]
			if h.T.Before(b) {
				continue
			}
			for c := range ms {
				ms[c] += h.Ms[c]
			}
			covered += h.Covered
			bk.InUsePeak = max(bk.InUsePeak, h.InUse)
			bk.WaitingPeak = max(bk.WaitingPeak, h.Waiting)
		}
		if covered > 0 {
			avg := func(c int) float64 { return math.Round(float64(ms[c])/float64(covered)*100) / 100 }
			bk.OccupiedAvg, bk.VacantAvg, bk.BusyAvg = avg(occupied), avg(vacant), avg(resetting)
			bk.CoveredS = float64(covered) / 1000
		}
		var ds []time.Duration
		for _, x := range f.ToSlot {
			if !x.T.Before(b) && x.T.Before(end) {
				ds = append(ds, x.D)
			}
		}
		if len(ds) > 0 {
			m, p := quantile(ds, 0.5).Seconds(), quantile(ds, 0.9).Seconds()
			bk.TimeToSlotSeconds, bk.TimeToSlotP90Seconds, bk.HandedOver = &m, &p, len(ds)
		}
		out.Buckets = append(out.Buckets, bk)
	}
	for kind, st := range f.Steps {
		for step, xs := range st {
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
	return out
}

// quantile is the nearest-rank quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
