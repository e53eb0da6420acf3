package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// names is a fold of the streams of "thing" events, in order; an event
// whose data is {"bad":true} is refused.
type names struct{ List []string }

func (n *names) Name() string                       { return "test" }
func (n *names) Version() int                       { return 3 }
func (n *names) Wants(ev events.RecordedEvent) bool { return ev.Type == "Thing" }
func (n *names) Apply(ev events.RecordedEvent) error {
	if strings.Contains(string(ev.Data), "bad") {
		return errors.New("bad thing")
	}
	n.List = append(n.List, ev.Stream)
	return nil
}
func (n *names) Snapshot() (any, error) { return n, nil }
func (n *names) Restore(b []byte) error {
	var m names
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*n = m
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func appendThing(t *testing.T, store events.Store, stream, data string) events.Position {
	t.Helper()
	res, err := store.Append(context.Background(), stream, events.Any(), events.EventData{Type: "Thing", Data: []byte(data)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Position
}

func checkpoints(t *testing.T, store events.Store) int {
	evs, err := store.ReadStream(context.Background(), events.CheckpointStream("test"), 0, 0, events.Forward)
	if err != nil {
		return 0
	}
	return len(evs)
}

// The suite itself, on the simplest fold.
func TestSuiteOnNames(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New: func(events.Store) consumer.Fold { return &names{} },
		Log: func(t testing.TB, store events.Store) {
			for _, s := range []string{"a", "b", "c", "d", "e", "f"} {
				if _, err := store.Append(context.Background(), s, events.Any(),
					events.EventData{Type: "Thing", Data: []byte(`{}`)}, events.EventData{Type: "Other", Data: []byte(`{}`)}); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

// The save policy: after Every events (checkpoint events not counted), at
// stop only when something was folded since; a refused event is parked and
// the fold goes on; WaitApplied and Changed follow the position.
func TestRunnerSavesParksAndWaits(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	health := consumer.NewHealth(quiet())
	f := &names{}
	r := consumer.NewRunner(store, f, consumer.Options{Save: consumer.SavePolicy{Every: 3}, Health: health, Logger: quiet()})
	appendThing(t, store, "a", `{}`)
	appendThing(t, store, "b", `{"bad":true}`)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := checkpoints(t, store); n != 0 {
		t.Fatalf("%d checkpoints after 2 events", n)
	}
	if rep := health.Report(); rep.ParkedTotal != 1 || rep.Parked[0].Stream != "b" {
		t.Fatalf("parked: %+v", rep)
	}
	pos := appendThing(t, store, "c", `{}`)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := r.WaitApplied(wctx, pos); err != nil {
		t.Fatal(err)
	}
	<-r.CaughtUp()
	if n := checkpoints(t, store); n != 1 {
		t.Fatalf("%d checkpoints after 3 events, want 1", n)
	}
	// Checkpoints (its own, another's) are no progress.
	if err := consumer.SaveCheckpoint(ctx, store, "other", 1, pos, struct{}{}); err != nil {
		t.Fatal(err)
	}
	head, _ := store.Head(ctx)
	if err := r.WaitApplied(wctx, head); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := checkpoints(t, store); n != 1 {
		t.Fatalf("%d checkpoints with nothing folded since, want 1", n)
	}
	var got []string
	r.View(func() { got = append(got, f.List...) })
	if strings.Join(got, ",") != "a,c" {
		t.Fatalf("folded %v", got)
	}
}

// Step runs once caught up, after every wanted event and when the time it
// returned comes on the Runner's clock.
func TestRunnerStepOnClock(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	steps := make(chan time.Time, 10)
	r := consumer.NewRunner(store, &names{}, consumer.Options{Clock: clk, Logger: quiet(),
		Step: func(context.Context) time.Time {
			steps <- clk.Now()
			return clk.Now().Add(time.Minute)
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-steps // the first, once caught up
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if at := <-steps; !at.Equal(clk.Now()) {
		t.Fatalf("step at %v", at)
	}
	appendThing(t, store, "a", `{}`)
	<-steps // woken by the event
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// held is names with a Marker: the checkpoint stays below hold while it
// is set (the notifier's delivery not settled).
type held struct {
	names
	hold events.Position
}

func (h *held) Mark(applied events.Position) events.Position {
	if h.hold > 0 {
		return h.hold - 1
	}
	return applied
}

func lastCheckpoint(t *testing.T, store events.Store) events.Position {
	t.Helper()
	evs, err := store.ReadStream(context.Background(), events.CheckpointStream("test"), 0, 0, events.Forward)
	if err != nil || len(evs) == 0 {
		t.Fatalf("no checkpoint: %v", err)
	}
	p, err := events.Decode(evs[len(evs)-1])
	if err != nil {
		t.Fatal(err)
	}
	return p.(events.ConsumerCheckpointed).Position
}

// A Marker's checkpoint claims Mark's position, not the one applied; a
// held checkpoint leaves the events unsaved, so once the hold is let go the
// checkpoint at stop claims everything, with no event folded since. The
// Stopping hook runs before that last checkpoint.
func TestRunnerMarkHoldsTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	f := &held{}
	stopping := make(chan struct{})
	r := consumer.NewRunner(store, f, consumer.Options{Save: consumer.SavePolicy{Every: 2}, Logger: quiet(),
		Stopping: func() {
			f.hold = 0 // before the last checkpoint: the effect finished
			close(stopping)
		}})
	p1 := appendThing(t, store, "a", `{}`)
	p2 := appendThing(t, store, "b", `{}`)
	f.hold = p2 // b's effect is not finished
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lastCheckpoint(t, store); got != p2-1 || got < p1 {
		t.Fatalf("checkpoint at %d, want held at %d", got, p2-1)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	<-r.CaughtUp()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-stopping
	// Run folded only the held checkpoint since: the events the hold kept
	// unsaved make the checkpoint at stop, at the position applied.
	if got, want := lastCheckpoint(t, store), r.Position(); got != want || checkpoints(t, store) != 2 {
		t.Fatalf("checkpoint at stop at %d (%d in all), want %d, 2", got, checkpoints(t, store), want)
	}
}
