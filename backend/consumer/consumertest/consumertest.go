// Package consumertest checks, for any consumer.Fold, the properties the
// consumer runtime promises (docs/events.md, "Consumers"):
//
//   - a fold started from a checkpoint taken at any cut of the log ends as
//     the fold from position 0 does;
//   - a process that dies across a checkpoint write (before the append, or
//     after it and before anything else) starts again to the same state;
//   - an unusable checkpoint (undecodable, another version, not a
//     checkpoint, past the log's head, a state Restore refuses) is ignored
//     with a reason, and the log is folded from 0;
//   - the fold's size does not grow with finished history, where it
//     promises that.
//
// Every ported fold runs Run from its own package's tests.
package consumertest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// Case is one fold under test.
type Case struct {
	// New returns an empty fold of store (a fold that prepares, such as
	// the jobs index, reads it).
	New func(store events.Store) consumer.Fold
	// Packed is the fold's consumer.Options.Packed.
	Packed bool
	// Log appends a history that exercises the fold to store (a fresh
	// memstore each time it is called).
	Log func(t testing.TB, store events.Store)
	// Observe is what the fold's readers see, compared with
	// reflect.DeepEqual (default: the Snapshot's JSON).
	Observe func(f consumer.Fold) any
	// Grow, with Size, checks bounded memory: Grow appends rounds more of
	// history that ends (finished jobs, expired offers), and Size measures
	// the fold; Size after 4n rounds must not exceed Size after n.
	Grow func(t testing.TB, store events.Store, rounds int)
	Size func(f consumer.Fold) int
}

// Run runs every check on c.
func Run(t *testing.T, c Case) {
	if c.Observe == nil {
		c.Observe = func(f consumer.Fold) any {
			st, err := f.Snapshot()
			if err != nil {
				return "snapshot: " + err.Error()
			}
			b, err := json.Marshal(st)
			if err != nil {
				return "encode: " + err.Error()
			}
			return string(b)
		}
	}
	t.Run("CheckpointAtAnyCut", func(t *testing.T) { anyCut(t, c) })
	t.Run("RunnerCheckpoints", func(t *testing.T) { runnerCheckpoints(t, c) })
	t.Run("CrashAcrossCheckpointWrite", func(t *testing.T) { crash(t, c) })
	t.Run("UnusableCheckpoint", func(t *testing.T) { unusable(t, c) })
	if c.Grow != nil && c.Size != nil {
		t.Run("BoundedMemory", func(t *testing.T) { bounded(t, c) })
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newLog(t *testing.T, c Case) *memstore.Store {
	t.Helper()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	c.Log(t, store)
	return store
}

// All returns every event of store up to its head.
func All(t testing.TB, store events.Store) []events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if head == 0 {
		return nil
	}
	var out []events.RecordedEvent
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	err = store.SubscribeAll(sctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= head {
			stop()
		}
		return nil
	})
	if ctx.Err() != nil {
		t.Fatalf("read the log: %v", err)
	}
	return out
}

// Fold applies evs to f as the Runner does (checkpoints and unwanted
// events skipped, Prepare first, a refused event parked) and returns f.
func Fold(t testing.TB, f consumer.Fold, evs []events.RecordedEvent) consumer.Fold {
	t.Helper()
	prep, _ := f.(consumer.Preparer)
	for _, ev := range evs {
		if strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix) || !f.Wants(ev) {
			continue
		}
		if prep != nil {
			if err := prep.Prepare(context.Background(), ev); err != nil {
				t.Fatalf("Prepare %s@%d: %v", ev.Type, ev.Position, err)
			}
		}
		_ = f.Apply(ev) // parked
	}
	return f
}

// cuts are the numbers of events after which checkpoints are taken.
func cuts(n int) []int {
	seen := map[int]bool{}
	var out []int
	for _, k := range []int{1, n / 5, n / 3, n / 2, 2 * n / 3, 4 * n / 5, n - 1, n} {
		if k >= 1 && k <= n && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// restored is a new fold restored from f's snapshot, through JSON (and
// Pack, if packed), as a checkpoint carries it.
func restored(t *testing.T, c Case, store events.Store, f consumer.Fold) consumer.Fold {
	t.Helper()
	st, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("encode the snapshot: %v", err)
	}
	g := c.New(store)
	if err := g.Restore(b); err != nil {
		t.Fatalf("Restore of its own snapshot: %v", err)
	}
	return g
}

func anyCut(t *testing.T, c Case) {
	store := newLog(t, c)
	evs := All(t, store)
	if len(evs) < 2 {
		t.Fatalf("the case's log has %d events: too few to cut", len(evs))
	}
	want := c.Observe(Fold(t, c.New(store), evs))
	for _, k := range cuts(len(evs)) {
		g := Fold(t, restored(t, c, store, Fold(t, c.New(store), evs[:k])), evs[k:])
		if got := c.Observe(g); !reflect.DeepEqual(got, want) {
			t.Fatalf("from a checkpoint after %d of %d events:\n got %v\nwant %v", k, len(evs), short(got), short(want))
		}
	}
}

// runner runs a fresh fold of c on store with policy; Sync folds to the
// head.
func runner(c Case, store events.Store, policy consumer.SavePolicy) (*consumer.Runner, consumer.Fold) {
	f := c.New(store)
	return consumer.NewRunner(store, f, consumer.Options{Save: policy, Packed: c.Packed, Logger: quiet()}), f
}

func observe(c Case, r *consumer.Runner, f consumer.Fold) any {
	var got any
	r.View(func() { got = c.Observe(f) })
	return got
}

func syncRunner(t *testing.T, r *consumer.Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v", err)
	}
}

// checkpoints returns the positions the consumer's checkpoints name.
func checkpoints(t *testing.T, store events.Store, name string) []events.Position {
	t.Helper()
	evs, err := store.ReadStream(context.Background(), events.CheckpointStream(name), 0, 0, events.Forward)
	if err != nil {
		return nil
	}
	var out []events.Position
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.(events.ConsumerCheckpointed).Position)
	}
	return out
}

// runnerCheckpoints: a Runner writes checkpoints as it folds (here every
// third of the log), and a second one starts from the newest and ends as
// the fold from 0.
func runnerCheckpoints(t *testing.T, c Case) {
	store := newLog(t, c)
	evs := All(t, store)
	want := c.Observe(Fold(t, c.New(store), evs))
	before := len(checkpoints(t, store, c.New(nil).Name()))
	r1, _ := runner(c, store, consumer.SavePolicy{Every: max(len(evs)/3, 1), AtStop: -1})
	syncRunner(t, r1)
	cps := checkpoints(t, store, c.New(nil).Name())
	if len(cps)-before < 2 {
		t.Fatalf("%d checkpoints written folding %d events every %d", len(cps), len(evs), max(len(evs)/3, 1))
	}
	r2, f2 := runner(c, store, consumer.SavePolicy{})
	syncRunner(t, r2)
	if from, why, _ := r2.Started(); from != cps[len(cps)-1] || why != "" {
		t.Fatalf("started from %d (%q), want the newest checkpoint %d", from, why, cps[len(cps)-1])
	}
	if got := observe(c, r2, f2); !reflect.DeepEqual(got, want) {
		t.Fatalf("from the checkpoint:\n got %v\nwant %v", short(got), short(want))
	}
}

// dying is the store as a process that dies at its n+1-th checkpoint
// append sees it: that append and all after it fail.
type dying struct {
	events.Store
	left int
}

func (d *dying) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if strings.HasPrefix(stream, events.CheckpointStreamPrefix) {
		if d.left <= 0 {
			return events.AppendResult{}, fmt.Errorf("the process died")
		}
		d.left--
	}
	return d.Store.Append(ctx, stream, exp, evs...)
}

// crash: a process that dies before its checkpoint append (every one after
// the first fails, the one at stop too), and one that dies right after an
// append (it wrote its periodic checkpoint and no stop one), start again
// from what is in the log and end as the fold from 0.
func crash(t *testing.T, c Case) {
	for _, tc := range []struct {
		name   string
		left   int
		every  func(n int) int
		atStop int
	}{
		{"BeforeTheAppend", 1, func(n int) int { return max(n/2, 1) }, 0},
		{"AfterTheAppend", 1 << 30, func(n int) int { return max(n-1, 1) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newLog(t, c)
			evs := All(t, store)
			want := c.Observe(Fold(t, c.New(store), evs))
			before := len(checkpoints(t, store, c.New(nil).Name()))
			r1, _ := runner(c, &dying{Store: store, left: tc.left}, consumer.SavePolicy{Every: tc.every(len(evs)), AtStop: tc.atStop})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r1.Run(ctx) }()
			select {
			case <-r1.CaughtUp():
			case err := <-done:
				t.Fatalf("Run ended before it caught up: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not catch up")
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Run: %v", err)
			}
			cps := checkpoints(t, store, c.New(nil).Name())
			if len(cps)-before != 1 {
				t.Fatalf("%d checkpoints written, want 1", len(cps)-before)
			}
			r2, f2 := runner(c, store, consumer.SavePolicy{})
			syncRunner(t, r2)
			if from, why, _ := r2.Started(); from != cps[len(cps)-1] || why != "" {
				t.Fatalf("started from %d (%q), want %d", from, why, cps[len(cps)-1])
			}
			if got := observe(c, r2, f2); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the crash:\n got %v\nwant %v", short(got), short(want))
			}
		})
	}
}

// unusable: each kind of bad newest checkpoint is ignored with a reason
// naming it, and the fold from 0 is what the Runner ends with.
func unusable(t *testing.T, c Case) {
	name, version := c.New(nil).Name(), c.New(nil).Version()
	garbage, _ := consumer.Pack("not this fold's state")
	if !c.Packed {
		garbage = []byte(`"not this fold's state"`)
	}
	for _, tc := range []struct {
		name string
		ev   func(head events.Position) events.EventData
		why  string
	}{
		{"Undecodable", func(events.Position) events.EventData {
			return events.EventData{Type: "ConsumerCheckpointed", Data: []byte(`{"position":"not a number"}`)}
		}, "undecodable"},
		{"NotACheckpoint", func(events.Position) events.EventData {
			return events.EventData{Type: "SomethingElse", Data: []byte(`{}`)}
		}, "not a checkpoint"},
		{"OtherVersion", func(head events.Position) events.EventData {
			return events.New(events.ConsumerCheckpointed{Consumer: name, Position: head, Version: version + 1, State: "{}"}, events.Metadata{})
		}, fmt.Sprintf("version %d, want %d", version+1, version)},
		{"PastTheHead", func(head events.Position) events.EventData {
			return events.New(events.ConsumerCheckpointed{Consumer: name, Position: head + 1000, Version: version, State: "{}"}, events.Metadata{})
		}, "not in this log"},
		{"StateRestoreRefuses", func(head events.Position) events.EventData {
			return events.New(events.ConsumerCheckpointed{Consumer: name, Position: head, Version: version, State: string(garbage)}, events.Metadata{})
		}, "cannot be restored"},
		{"NotPacked", func(head events.Position) events.EventData {
			return events.New(events.ConsumerCheckpointed{Consumer: name, Position: head, Version: version, State: `{"gzip":"aGVsbG8="}`}, events.Metadata{})
		}, "does not unpack"},
	} {
		if tc.name == "NotPacked" && !c.Packed {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			store := newLog(t, c)
			evs := All(t, store)
			want := c.Observe(Fold(t, c.New(store), evs))
			ctx := context.Background()
			head := evs[len(evs)-1].Position
			if _, err := store.Append(ctx, events.CheckpointStream(name), events.Any(), tc.ev(head)); err != nil {
				t.Fatal(err)
			}
			r, f := runner(c, store, consumer.SavePolicy{})
			syncRunner(t, r)
			from, why, _ := r.Started()
			if from != 0 || !strings.Contains(why, tc.why) {
				t.Fatalf("started from %d, why %q; want 0 and a reason with %q", from, why, tc.why)
			}
			if got := observe(c, r, f); !reflect.DeepEqual(got, want) {
				t.Fatalf("after an unusable checkpoint:\n got %v\nwant %v", short(got), short(want))
			}
		})
	}
}

// bounded: finished history does not grow the fold.
func bounded(t *testing.T, c Case) {
	store := newLog(t, c)
	const n = 10
	c.Grow(t, store, n)
	f := Fold(t, c.New(store), All(t, store))
	small := c.Size(f)
	c.Grow(t, store, 3*n)
	big := c.Size(Fold(t, c.New(store), All(t, store)))
	if big > small {
		t.Fatalf("the fold grew with finished history: size %d after %d rounds, %d after %d", small, n, big, 4*n)
	}
}

// short keeps a failure message readable.
func short(v any) string {
	s := fmt.Sprint(v)
	if len(s) > 600 {
		return s[:600] + "…"
	}
	return s
}
