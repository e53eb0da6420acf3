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
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
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
func answers(t testing.TB, s *Service) string {
	t.Helper()
	out := map[string]any{}
	for r := range Ranges {
		x, ok := s.Series(r)
		if !ok {
			t.Fatal(r)
		}
		out[r] = x
	}
	s.mu.Lock()
	out["fold"] = s.f
	s.mu.Unlock()
	b, err := json.Marshal(out)
	must(t, err)
	return string(b)
}

// upTo is the events up to pos (what a stopped Run had seen).
func upTo(evs []events.RecordedEvent, pos events.Position) []events.RecordedEvent {
	for i, ev := range evs {
		if ev.Position > pos {
			return evs[:i]
		}
	}
	return evs
}

func foldAll(evs []events.RecordedEvent, now time.Time, cfg Config) *Service {
	s := New(nil, func() time.Time { return now }, cfg)
	for _, ev := range evs {
		s.Apply(ev)
	}
	return s
}

// A fold restored from a checkpoint taken at any position, then folding the
// rest, answers every range exactly as the fold from 0.
func TestCheckpointAtAnyCutAnswersAsFromZero(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	history(t, store, 9, "", 6000, 80)
	evs := all(t, store)
	now := evs[len(evs)-1].Meta.Time.Add(90 * time.Minute)
	want := answers(t, foldAll(evs, now, small))
	for _, w := range []string{`"time_to_slot_s":`, `"step":"job"`, `"kind":"teardown"`, `"busy_avg":0.`, `"time_to_slot_p90_s":`} {
		if !strings.Contains(want, w) {
			t.Fatalf("the answers hold no %s: not a test of it", w)
		}
	}
	for c := 0; c <= len(evs); c += 1 + len(evs)/61 {
		a := foldAll(evs[:c], now, small)
		b, err := consumer.Pack(a.f)
		must(t, err)
		var packed consumer.Packed
		must(t, json.Unmarshal(b, &packed))
		var f fold
		must(t, packed.Unpack(&f))
		r := New(nil, func() time.Time { return now }, small)
		r.f, r.pos = f.complete(), a.pos
		for _, ev := range evs[c:] {
			r.Apply(ev)
		}
		if got := answers(t, r); got != want {
			t.Fatalf("cut at %d of %d:\n got %s\nwant %s", c, len(evs), got, want)
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
	s := New(nil, nil, small)
	live := map[string]bool{}
	open := map[string]bool{}
	for i, ev := range evs {
		s.Apply(ev)
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
		if n := len(f.Hours); n > int(keep/time.Hour)+2 {
			t.Fatalf("at %d: %d hours", i, n)
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
	if len(s.f.Points) < 31*24/2 || len(s.f.Hours) < 31*24 || len(s.f.ToSlot) < small.MaxSamples {
		t.Fatalf("%d points, %d samples: the caps were not reached", len(s.f.Points), len(s.f.ToSlot))
	}
}

// crashStore dies at its first checkpoint append: before it, or right
// after it. Once dead, every append fails.
type crashStore struct {
	events.Store
	after bool
	mu    sync.Mutex
	dead  bool
	died  chan struct{}
}

func (c *crashStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return events.AppendResult{}, errors.New("dead")
	}
	if strings.HasPrefix(stream, events.CheckpointStreamPrefix) {
		c.dead = true
		close(c.died)
		if c.after {
			if _, err := c.Store.Append(ctx, stream, exp, evs...); err != nil {
				return events.AppendResult{}, err
			}
		}
		return events.AppendResult{}, errors.New("dead")
	}
	return c.Store.Append(ctx, stream, exp, evs...)
}

// Run writes checkpoints and starts from them; a crash across a checkpoint
// write leaves the next start correct; it tells when it caught up.
func TestRunFromCheckpointAndCrash(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	now := time.Now()
	clock := func() time.Time { return now }
	cfg := small
	cfg.Logger, cfg.CheckpointEvery, cfg.CheckpointGap = quiet(), 500, time.Nanosecond

	// run runs a read model on log until it caught up, then stops it.
	run := func(log events.Store) *Service {
		s := New(log, clock, cfg)
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
	for _, after := range []bool{false, true} {
		// History the crashing process folds past a checkpoint.
		history(t, store, 10, fmt.Sprintf("a%v", after), 1200, 30)
		cs := &crashStore{Store: store, after: after, died: make(chan struct{})}
		run(cs)
		<-cs.died
		// More history after the crash.
		history(t, store, 11, fmt.Sprintf("b%v", after), 400, 30)
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		s := run(store)
		cfg.Logger = quiet()
		if after && !strings.Contains(logs.String(), "starting from checkpoint") {
			t.Fatalf("the restart after a written checkpoint did not use it: %s", logs.String())
		}
		if got, want := answers(t, s), answers(t, foldAll(upTo(all(t, store), s.pos), now, small)); got != want {
			t.Fatalf("after=%v:\n got %s\nwant %s", after, got, want)
		}
	}
}

// A checkpoint that cannot be used is ignored with a log line saying why.
func TestUnusableCheckpointIgnored(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	history(t, store, 1, "", 500, 30)
	head, err := store.Head(ctx)
	must(t, err)
	now := time.Now()
	// A version-1 checkpoint (before the fold held hours) of this very
	// log: its fold would answer with no slot-time before the checkpoint,
	// so it is ignored and the log folded from 0 (issue 27 item 9).
	v1 := foldAll(upTo(all(t, store), head), now, small).f
	v1.Hours, v1.Since = nil, time.Time{}
	v1packed, err := consumer.Pack(v1)
	must(t, err)
	for _, c := range []struct {
		name, why string
		version   int
		pos       events.Position
		state     any
	}{
		{"version 1, before hours", "version 1, want 2", 1, head, json.RawMessage(v1packed)},
		{"other version", "version 9", 9, 10, map[string]any{}},
		{"past head", "not in this log", checkpointVersion, head + 1000, map[string]any{}},
		{"undecodable", "does not decode", checkpointVersion, 10, map[string]any{"gzip": 5}},
		{"not gzip", "does not unpack", checkpointVersion, 10, map[string]any{"gzip": []byte("hello")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			must(t, consumer.SaveCheckpoint(ctx, store, checkpointConsumer, c.version, c.pos, c.state))
			var logs bytes.Buffer
			cfg := small
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			s := New(store, func() time.Time { return now }, cfg)
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- s.Run(rctx) }()
			<-s.CaughtUp()
			cancel()
			must(t, <-done)
			if !strings.Contains(logs.String(), "checkpoint ignored") || !strings.Contains(logs.String(), c.why) {
				t.Fatalf("log = %q", logs.String())
			}
			if got, want := answers(t, s), answers(t, foldAll(upTo(all(t, store), s.pos), now, small)); got != want {
				t.Fatalf("got %s\nwant %s", got, want)
			}
		})
	}
}
