package insights

import (
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func rec(pos int, stream string, at time.Duration, p events.Payload) events.RecordedEvent {
	d := events.New(p, events.Metadata{Time: t0.Add(at)})
	return events.RecordedEvent{Position: events.Position(pos), Stream: stream, Type: d.Type, Data: d.Data, Meta: d.Meta}
}

// Occupancy, resets, waitlist length and step durations become the series.
func TestSeries(t *testing.T) {
	s := New(nil, func() time.Time { return t0.Add(5*time.Hour + 30*time.Minute) }, Config{})
	evs := []events.RecordedEvent{
		rec(1, "slot-a", 0, events.SlotRegistered{Slot: "a"}),
		rec(2, "slot-b", 0, events.SlotRegistered{Slot: "b"}),
		rec(3, "slot-a", time.Hour, events.SlotOccupied{Slot: "a", By: "x"}),
		rec(4, "waitlist", 90*time.Minute, events.WaitlistJoined{EntryID: "e1"}),
		rec(5, "slot-a", 2*time.Hour, events.JobAccepted{Slot: "a", JobID: "j1", Kind: events.KindReset}),
		rec(6, "job-j1", 2*time.Hour, events.JobQueued{JobID: "j1", Kind: events.KindReset, Slot: "a"}),
		rec(7, "job-j1", 2*time.Hour+time.Minute, events.StepStarted{JobID: "j1", Step: events.StepDeleteDB}),
		rec(8, "job-j1", 2*time.Hour+3*time.Minute, events.DBDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteDB}}),
		rec(9, "job-j1", 2*time.Hour+4*time.Minute, events.StepStarted{JobID: "j1", Step: events.StepVacate}),
		rec(10, "slot-a", 2*time.Hour+5*time.Minute, events.SlotVacated{Slot: "a", JobID: "j1"}),
		rec(11, "job-j1", 2*time.Hour+5*time.Minute, events.StepSucceeded{StepResult: events.StepResult{JobID: "j1", Step: events.StepVacate}}),
		rec(12, "job-j1", 2*time.Hour+6*time.Minute, events.JobSucceeded{JobID: "j1"}),
		rec(13, "slot-a", 2*time.Hour+6*time.Minute, events.JobReleased{Slot: "a", JobID: "j1", Outcome: "succeeded"}),
		rec(14, "waitlist", 3*time.Hour, events.OfferAccepted{EntryID: "e1", Slot: "a"}),
		rec(15, "slot-a", 3*time.Hour, events.SlotOccupied{Slot: "a", By: "y"}),
	}
	for _, ev := range evs {
		must(t, s.m.Apply(ev))
	}
	out, ok := s.Series("1d")
	if !ok || len(out.Buckets) != 24 || out.Bucket != "1h0m0s" {
		t.Fatalf("series = %+v", out)
	}
	// Buckets start at to-24h; find them by their start relative to t0.
	idx := func(h int) Bucket {
		for _, x := range out.Buckets {
			if x.T.Equal(t0.Add(time.Duration(h) * time.Hour)) {
				return x
			}
		}
		t.Fatalf("no bucket at +%dh", h)
		return Bucket{}
	}
	if x := idx(1); x.Occupied != 1 || x.Vacant != 1 || x.Waiting != 1 {
		t.Fatalf("+1h = %+v", x)
	}
	if x := idx(2); x.Resetting != 0 || x.Vacant != 2 {
		t.Fatalf("+2h (reset done within the hour) = %+v", x)
	}
	if x := idx(3); x.Occupied != 1 || x.Waiting != 0 || x.TimeToSlotSeconds == nil || *x.TimeToSlotSeconds != 90*60 {
		t.Fatalf("+3h = %+v", x)
	}
	want := map[string]float64{"delete_db": 120, "vacate": 60, "job": 300}
	if len(out.Steps) != 3 {
		t.Fatalf("steps = %+v", out.Steps)
	}
	for _, st := range out.Steps {
		if st.Kind != "reset" || st.MedianS != want[st.Step] || st.P90S != want[st.Step] || st.Count != 1 {
			t.Fatalf("step = %+v", st)
		}
	}
	if _, ok := s.Series("2w"); ok {
		t.Fatal("an unknown range was served")
	}
}

// Issue 27 item 9: a bucket answers how full the pool was over it, not at
// its end. A reset that held a slot for 20 minutes inside an hour showed
// as nothing (the state at the hour's end); a pool that filled for 15
// minutes showed as never full. Slot-time is time-weighted over the part of
// the bucket the log covers, with the peak in use and the longest waitlist.
func TestUtilisationIsTimeWeighted(t *testing.T) {
	now := t0.Add(3*time.Hour + 30*time.Minute)
	s := New(nil, func() time.Time { return now }, Config{})
	evs := []events.RecordedEvent{
		// The log starts at +30m: the first hour is half covered.
		rec(1, "slot-a", 30*time.Minute, events.SlotRegistered{Slot: "a"}),
		rec(2, "slot-b", 30*time.Minute, events.SlotRegistered{Slot: "b"}),
		rec(3, "slot-a", 45*time.Minute, events.SlotOccupied{Slot: "a", By: "x"}),
		// +1h: b is occupied for 15 minutes (the pool full), then reset for 20.
		rec(4, "slot-b", time.Hour+10*time.Minute, events.SlotOccupied{Slot: "b", By: "y"}),
		rec(5, "waitlist", time.Hour+12*time.Minute, events.WaitlistJoined{EntryID: "e1"}),
		rec(6, "waitlist", time.Hour+13*time.Minute, events.WaitlistJoined{EntryID: "e2"}),
		rec(7, "slot-b", time.Hour+25*time.Minute, events.JobAccepted{Slot: "b", JobID: "j1", Kind: events.KindReset}),
		rec(8, "slot-b", time.Hour+26*time.Minute, events.SlotVacated{Slot: "b", JobID: "j1"}),
		rec(9, "slot-b", time.Hour+45*time.Minute, events.JobReleased{Slot: "b", JobID: "j1", Outcome: "succeeded"}),
		rec(10, "waitlist", time.Hour+46*time.Minute, events.OfferAccepted{EntryID: "e1", Slot: "b"}),
		rec(11, "slot-b", time.Hour+46*time.Minute, events.SlotOccupied{Slot: "b", By: "e1"}),
		rec(12, "waitlist", time.Hour+50*time.Minute, events.WaitlistLeft{EntryID: "e2"}),
		// Nothing after +1h50m: the state lasts until now (+3h30m).
	}
	for _, ev := range evs {
		must(t, s.m.Apply(ev))
	}
	out, _ := s.Series("1d")
	at := func(h int) Bucket {
		for _, x := range out.Buckets {
			if x.T.Equal(t0.Add(time.Duration(h) * time.Hour)) {
				return x
			}
		}
		t.Fatalf("no bucket at +%dh", h)
		return Bucket{}
	}
	if b := at(-1); b.CoveredS != 0 || b.OccupiedAvg != 0 || b.InUsePeak != 0 {
		t.Fatalf("before the log: %+v", b)
	}
	// +0h: 30 minutes covered; a occupied for the last 15 of them.
	if b := at(0); b.CoveredS != 1800 || b.OccupiedAvg != 0.5 || b.VacantAvg != 1.5 || b.BusyAvg != 0 || b.InUsePeak != 1 {
		t.Fatalf("+0h: %+v", b)
	}
	// +1h: a occupied all hour (60 min); b occupied 10→25 (15) and from 46
	// (14) = 89 slot-minutes occupied; b busy 25→45 (20); vacant 10 + 0 +
	// 1 (45→46) = 11. The end-of-hour state knew nothing of the reset.
	b := at(1)
	if b.CoveredS != 3600 || b.OccupiedAvg != round2(89.0/60) || b.BusyAvg != round2(20.0/60) || b.VacantAvg != round2(11.0/60) {
		t.Fatalf("+1h: %+v", b)
	}
	if b.Resetting != 0 || b.InUsePeak != 2 || b.WaitingPeak != 2 || b.Waiting != 0 {
		t.Fatalf("+1h peaks: %+v", b)
	}
	if b.HandedOver != 1 || b.TimeToSlotSeconds == nil || *b.TimeToSlotSeconds != 34*60 || b.TimeToSlotP90Seconds == nil || *b.TimeToSlotP90Seconds != 34*60 {
		t.Fatalf("+1h wait: %+v", b)
	}
	// +2h: no event, the pool full all hour; +3h: full for the 30 minutes up to now.
	if b := at(2); b.CoveredS != 3600 || b.OccupiedAvg != 2 || b.InUsePeak != 2 || b.WaitingPeak != 0 {
		t.Fatalf("+2h: %+v", b)
	}
	if b := at(3); b.CoveredS != 1800 || b.OccupiedAvg != 2 || b.HandedOver != 0 || b.TimeToSlotP90Seconds != nil {
		t.Fatalf("+3h: %+v", b)
	}
	// The 7-day range's 6-hour bucket sums its hours.
	week, _ := s.Series("7d")
	for _, x := range week.Buckets {
		if x.T.Equal(t0) {
			if x.CoveredS != 3*3600 || x.InUsePeak != 2 || x.WaitingPeak != 2 || x.HandedOver != 1 {
				t.Fatalf("7d bucket: %+v", x)
			}
			return
		}
	}
	t.Fatal("no 7d bucket at t0")
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

// Issue 36 item 3: every step of every job kind gets its duration — the
// steps come from the vocabulary (events.StepNames of each events.JobKinds
// kind, the ready reset's too), and a step ends at any result event the
// catalogue has (events.StepResultOf). Before, a hand-written list of 11
// result types left the ready reset's creates and deploy without
// durations.
func TestEveryStepOfEveryKindGetsADuration(t *testing.T) {
	s := New(nil, func() time.Time { return t0.Add(23 * time.Hour) }, Config{})
	pos := 0
	at := time.Duration(0)
	add := func(ev events.RecordedEvent) {
		t.Helper()
		must(t, s.m.Apply(ev))
	}
	next := func(stream string, p events.Payload) {
		pos++
		at += time.Minute
		add(rec(pos, stream, at, p))
	}
	// The result types, each given a step of its own below.
	var results []string
	for _, typ := range events.Types() {
		if events.IsStepResult(typ) {
			results = append(results, typ)
		}
	}
	type want struct{ kind, step string }
	wanted := map[want]int{}
	n := 0
	for _, kind := range events.JobKinds() {
		for _, template := range []bool{false, true} {
			n++
			id := fmt.Sprintf("j%d", n)
			stream := events.JobStream(id)
			next(stream, events.JobQueued{JobID: id, Kind: kind, Slot: "a"})
			for i, step := range events.StepNames(kind, template) {
				next(stream, events.StepStarted{JobID: id, Step: step})
				// A result event of the catalogue, turn by turn, built from
				// its type alone (each embeds StepResult).
				typ := results[(n+i)%len(results)]
				pos++
				at += time.Minute
				data, _ := json.Marshal(events.StepResult{JobID: id, Step: step})
				add(events.RecordedEvent{Position: events.Position(pos), Stream: stream, Type: typ, Data: data, Meta: events.Metadata{Time: t0.Add(at)}})
				wanted[want{kind, step}]++
			}
			next(stream, events.JobSucceeded{JobID: id})
		}
	}
	out, ok := s.Series("1d")
	if !ok {
		t.Fatal("no series")
	}
	got := map[want]int{}
	for _, st := range out.Steps {
		got[want{st.Kind, st.Step}] = st.Count
	}
	for w, n := range wanted {
		if got[w] != n {
			t.Errorf("%s's step %s: %d durations, want one per run (%d)", w.kind, w.step, got[w], n)
		}
	}
}
