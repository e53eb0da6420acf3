package memory_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
	"go.uber.org/goleak"
)

// everything keeps every view and audit entry in memory: the reference a
// bounded read model must answer exactly like.
var everything = memory.Limits{RecentJobs: -1, RecentAudit: -1, ClosedPRs: -1}

// tiny keeps one finished job and a few audit entries, so that nearly every
// answer about the past comes from the log.
var tiny = memory.Limits{RecentJobs: 1, RecentAudit: 3, ClosedPRs: 1, ClosedPRAge: time.Minute}

func TestConformance(t *testing.T) {
	reference := func(log events.Store) projections.Target { return memory.NewWithLimits(log, everything) }
	t.Run("Default", func(t *testing.T) {
		projtest.Run(t, func(t *testing.T, log events.Store) projections.Target { return memory.New(log) }, reference)
	})
	t.Run("Tiny", func(t *testing.T) {
		projtest.Run(t, func(t *testing.T, log events.Store) projections.Target { return memory.NewWithLimits(log, tiny) }, reference)
	})
}

// A long history projected live (the runner batches whatever has arrived
// while the generator appends) equals a replay of the same log, and Verify
// agrees.
func TestLongHistoryLiveEqualsReplay(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	live := memory.New(log)
	r := projections.NewRunner(log, live, projections.RunnerOptions{MaxBatch: 256})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	projtest.Must(t, projtest.NewGen(log, 2026).Random(ctx, 24, 30_000))
	head, _ := log.Head(ctx)
	projtest.Must(t, r.WaitFor(ctx, head))

	replayed := memory.New(log)
	projtest.Catchup(t, log, replayed, 1000)
	diffs, err := projections.Compare(ctx, live, replayed)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
	diffs, err = memory.Verify(ctx, log, live)
	projtest.Must(t, err)
	if len(diffs) != 0 {
		t.Fatalf("verify: %d differences", len(diffs))
	}
	// Verify is not blind: a read model missing the last event differs.
	short := memory.New(log)
	_, err = projections.Replay(ctx, log, short, head-1, 0)
	projtest.Must(t, err)
	if diffs, _ := projections.Compare(ctx, live, short); len(diffs) == 0 {
		t.Fatal("Compare found no difference with a read model one event behind")
	}
}

// The runner's and replay's goroutines (subscription, decoder) all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ApplyQuiet (what Replay uses: views changed in place within a batch)
// builds the same read model as Apply (a new view per change), whatever the
// batch size, and never changes a view a reader took between batches.
func TestApplyQuietEqualsApply(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 77).Random(ctx, 10, 3000))
	var evs []projections.Event
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	subCtx, stop := context.WithCancel(ctx)
	err = log.SubscribeAll(subCtx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		evs = append(evs, projections.DecodeEvent(ev))
		if ev.Position >= head {
			stop()
		}
		return nil
	})
	stop()
	if len(evs) != int(head) {
		t.Fatalf("read %d events of %d: %v", len(evs), head, err)
	}
	ref := memory.New(log)
	for _, e := range evs {
		_, err := ref.Apply(ctx, []projections.Event{e})
		projtest.Must(t, err)
	}
	for _, batch := range []int{1, 7, 500, len(evs)} {
		quiet := memory.New(log)
		// What readers took after each batch, and its JSON at that time.
		type taken struct {
			v    any
			json string
		}
		var seen []taken
		every := max(1, len(evs)/batch/40) // ~40 looks per run
		for i := 0; i < len(evs); i += batch {
			projtest.Must(t, quiet.ApplyQuiet(ctx, evs[i:min(i+batch, len(evs))]))
			if (i/batch)%every != 0 {
				continue
			}
			slots, err := quiet.ListSlots(ctx)
			projtest.Must(t, err)
			for _, s := range slots {
				jobs, err := quiet.JobsBySlot(ctx, s.Name, "", 3, "")
				projtest.Must(t, err)
				for _, v := range []any{s, jobs} {
					b, _ := json.Marshal(v)
					seen = append(seen, taken{v, string(b)})
				}
			}
		}
		diffs, err := projections.Compare(ctx, ref, quiet)
		projtest.Must(t, err)
		for _, d := range diffs {
			t.Errorf("batch %d: %s", batch, d)
		}
		for _, s := range seen {
			if b, _ := json.Marshal(s.v); string(b) != s.json {
				t.Fatalf("batch %d: a view a reader held changed later:\n  then: %s\n  now:  %s", batch, s.json, b)
			}
		}
	}
}

// Readers running while Replay applies in place see only finished batches
// and never share memory the replay writes: under -race any write to a view
// a reader took is reported, and every answer must marshal.
func TestReadersDuringQuietReplay(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 5).Random(ctx, 6, 4000))
	rm := memory.New(log)
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			slots, err := rm.ListSlots(ctx)
			if err != nil {
				readerErr <- err
				return
			}
			for _, s := range slots {
				page, err := rm.JobsBySlot(ctx, s.Name, "", 5, "")
				if err != nil {
					readerErr <- err
					return
				}
				if _, err := json.Marshal([]any{s, page}); err != nil {
					readerErr <- err
					return
				}
			}
		}
	}()
	_, err := projections.Replay(ctx, log, rm, 0, 50)
	close(done)
	projtest.Must(t, err)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	ref := memory.New(log)
	projtest.Catchup(t, log, ref, 1)
	diffs, err := projections.Compare(ctx, ref, rm)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
}
