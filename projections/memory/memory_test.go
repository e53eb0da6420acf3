package memory_test

import (
	"context"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
	"go.uber.org/goleak"
)

func TestConformance(t *testing.T) {
	projtest.Run(t,
		func(t *testing.T, log events.Store) projections.Target { return memory.New(log) },
		func(log events.Store) projections.Target { return memory.New(log) })
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
