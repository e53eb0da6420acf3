package insights

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

// history writes a realistic log of about n events into store: projtest's
// generator (slots occupied, reset, promoted, torn down and replaced, jobs
// failing and resumed) with people joining and leaving the waitlist and
// accepting offers in between. stretch spreads the generator's few seconds
// between events to stretch times as many (so a long history spans weeks).
func history(t testing.TB, store events.Store, seed uint64, prefix string, n int, stretch int) {
	t.Helper()
	ctx := context.Background()
	src := memstore.New()
	defer src.Close()
	g := projtest.NewGen(src, seed)
	g.Prefix = prefix
	must(t, g.Random(ctx, 8, n))
	rnd := rand.New(rand.NewPCG(seed, 3))
	var start time.Time
	var waiting []string
	entries := 0
	err := readAll(ctx, src, func(ev events.RecordedEvent) {
		if start.IsZero() {
			start = ev.Meta.Time
		}
		at := start.Add(ev.Meta.Time.Sub(start) * time.Duration(stretch))
		m := ev.Meta
		m.Time = at
		_, err := store.Append(ctx, ev.Stream, events.Any(), events.EventData{ID: ev.ID, Type: ev.Type, Data: ev.Data, Meta: m})
		must(t, err)
		if rnd.IntN(6) != 0 {
			return
		}
		var p events.Payload
		switch r := rnd.IntN(10); {
		case r < 5 || len(waiting) == 0:
			entries++
			id := fmt.Sprintf("%se%d", prefix, entries)
			waiting = append(waiting, id)
			p = events.WaitlistJoined{EntryID: id, Who: id}
		case r < 8:
			p = events.OfferAccepted{EntryID: waiting[0], Slot: "s000"}
			waiting = waiting[1:]
		default:
			i := rnd.IntN(len(waiting))
			p = events.WaitlistLeft{EntryID: waiting[i]}
			waiting = append(waiting[:i], waiting[i+1:]...)
		}
		_, err = store.Append(ctx, events.WaitlistStream, events.Any(), events.New(p, events.Metadata{Actor: "x", Time: at}))
		must(t, err)
	})
	must(t, err)
}

// readAll calls f with every event of the log up to its head.
func readAll(ctx context.Context, store events.Store, f func(events.RecordedEvent)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	head, err := store.Head(ctx)
	if err != nil || head == 0 {
		return err
	}
	err = store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		f(ev)
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func all(t testing.TB, store events.Store) []events.RecordedEvent {
	t.Helper()
	var out []events.RecordedEvent
	must(t, readAll(context.Background(), store, func(ev events.RecordedEvent) { out = append(out, ev) }))
	return out
}

// small caps, so the histories here run past them.
var small = Config{MaxSamples: 40, MaxEnded: 5}

// answers is every range's Series at now, and the fold.
func answers(m *model, now time.Time) string {
	out := map[string]any{}
	for name, r := range Ranges {
		out[name] = m.series(name, r, now, 0)
	}
	out["fold"] = m.f
	b, err := json.Marshal(out)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// observe is what readers see of a fold: every range's answer an hour and
// a half after the fold's last point, and the fold itself.
func observe(f consumer.Fold) any {
	m := f.(*model)
	var now time.Time
	if n := len(m.f.Points); n > 0 {
		now = m.f.Points[n-1].T.Add(90 * time.Minute)
	}
	return answers(m, now)
}

// The consumer runtime's properties (backend/consumer/consumertest) hold
// for the read model: from a checkpoint at any cut, across a crash at a
// checkpoint write, past an unusable checkpoint, its answers are those of
// the fold from 0. (Its bounded size is TestFoldSizeDoesNotGrowWithHistory.)
func TestConsumer(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New:    func(events.Store) consumer.Fold { return newModel(small) },
		Packed: options(small).Packed,
		Log: func(t testing.TB, store events.Store) {
			history(t, store, 9, "", 1500, 80)
		},
		Observe: observe,
	})
}

// The suite's history reaches what the answers show: time to slot, whole
// jobs, teardowns.
func TestConsumerHistoryShowsEverything(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	history(t, store, 9, "", 1500, 80)
	got := observe(consumertest.Fold(t, newModel(small), consumertest.All(t, store))).(string)
	for _, w := range []string{`"time_to_slot_s":`, `"step":"job"`, `"kind":"teardown"`} {
		if !strings.Contains(got, w) {
			t.Fatalf("the answers hold no %s: not a test of it", w)
		}
	}
}

// The fold's size does not grow with history past its caps: one point per
// hour over 31 days, MaxSamples per series, open jobs and MaxEnded others,
// registered slots that are not retired.
func TestFoldSizeDoesNotGrowWithHistory(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	history(t, store, 4, "", 30000, 120) // ~60 days
	evs := all(t, store)
	span := evs[len(evs)-1].Meta.Time.Sub(evs[0].Meta.Time)
	if span < 45*24*time.Hour {
		t.Fatalf("history spans %s: too short to pass the 31 days kept", span)
	}
	s := newModel(small)
	live := map[string]bool{}
	open := map[string]bool{}
	for i, ev := range evs {
		_ = s.Apply(ev)
		switch {
		case ev.Type == "SlotRegistered":
			live[ev.Stream] = true
		case ev.Type == "SlotRetired":
			delete(live, ev.Stream)
		case ev.Type == "StepStarted" || ev.Type == "JobQueued":
			open[ev.Stream] = true
		case ev.Type == "JobSucceeded":
			delete(open, ev.Stream)
		}
		if i%500 != 0 {
			continue
		}
		f := &s.f
		if n := len(f.Points); n > int(keep/time.Hour)+2 {
			t.Fatalf("at %d: %d points", i, n)
		}
		if n := len(f.ToSlot); n > small.MaxSamples {
			t.Fatalf("at %d: %d time-to-slot samples", i, n)
		}
		for kind, m := range f.Steps {
			for step, xs := range m {
				if len(xs) > small.MaxSamples {
					t.Fatalf("at %d: %d samples of %s/%s", i, len(xs), kind, step)
				}
			}
		}
		if len(f.Slots) > len(live) {
			t.Fatalf("at %d: %d slots tracked, %d registered and not retired", i, len(f.Slots), len(live))
		}
		unsucceeded := 0
		for id, j := range f.Jobs {
			if j.EndSeq != 0 {
				unsucceeded++
			} else if !open[events.JobStreamPrefix+id] {
				t.Fatalf("at %d: job %s tracked, neither open nor ended", i, id)
			}
		}
		if unsucceeded > small.MaxEnded {
			t.Fatalf("at %d: %d jobs ended without success kept", i, unsucceeded)
		}
	}
	if len(s.f.Points) < 31*24/2 || len(s.f.ToSlot) < small.MaxSamples {
		t.Fatalf("%d points, %d samples: the caps were not reached", len(s.f.Points), len(s.f.ToSlot))
	}
}

// Service.Run is the Runner on the model: a second run starts from the
// checkpoint the first wrote when it stopped, and answers at its position.
func TestServiceRunsFromItsCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	history(t, store, 10, "", 600, 30)
	head, err := store.Head(ctx)
	must(t, err)
	run := func() *Service {
		cfg := small
		cfg.Logger = quiet()
		s := New(store, nil, cfg)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- s.Run(rctx) }()
		select {
		case <-s.CaughtUp():
		case err := <-done:
			t.Fatalf("Run ended before catching up: %v", err)
		}
		cancel()
		must(t, <-done)
		return s
	}
	if from, _, _ := run().r.Started(); from != 0 {
		t.Fatalf("the first run started from %d", from)
	}
	s := run()
	if from, why, _ := s.r.Started(); from != head || why != "" {
		t.Fatalf("the second run started from %d (%q), want the first's checkpoint at %d", from, why, head)
	}
	// Its position passed the first run's checkpoint too.
	if x, ok := s.Series("1d"); !ok || x.Position != head+1 {
		t.Fatalf("answers at %d, want %d", x.Position, head+1)
	}
}
