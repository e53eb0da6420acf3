package insights

import (
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
