package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// BenchmarkIndexStart (issue 13, "restart to ready ... not growing with
// finished history"): the time from NewEngine to the engine's index having
// folded the log's head, on a bbolt log of BENCH_INDEX_EVENTS (default
// 200,000) events of projtest's realistic mix, written as loggen does.
// Baseline of the same run: the first start, which finds no checkpoint and
// folds from 0 (what every start did before). Then Stop writes the index's
// checkpoint and the engine restarts from it; and once more after another
// 9,000 events (just under the 10,000 after which a running index writes
// its next checkpoint: the most a restart refolds, short of a crash that
// lost the last Stop's checkpoint).
func BenchmarkIndexStart(b *testing.B) {
	n := 200_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_INDEX_EVENTS")); err == nil && v > 0 {
		n = v
	}
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	generate(b, st, "a", n)
	start := func(what string) (time.Duration, events.Position, int) {
		head, err := st.Head(ctx)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		eng := jobs.NewEngine(st, jobs.Deps{}, jobs.Config{Workers: 1, WorkerID: "bench", Logger: testLogger()})
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		if err := eng.WaitApplied(wctx, head); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		took := time.Since(t0)
		from, held := jobs.IndexStartedFrom(eng), eng.IndexedJobs()
		sctx, scancel := context.WithTimeout(ctx, time.Minute)
		defer scancel()
		if err := eng.Stop(sctx); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return took, from, held
	}
	b.ResetTimer()
	zero, from, held := start("from 0")
	if from != 0 {
		b.Fatalf("the first start began at position %d, want 0", from)
	}
	head, _ := st.Head(ctx)
	cp, cpFrom, cpHeld := start("from the checkpoint")
	if cpFrom == 0 {
		b.Fatal("the restart did not use the checkpoint Stop wrote")
	}
	generate(b, st, "b", 9_000)
	tail, tailFrom, _ := start("from a checkpoint 9,000 events behind")
	tailHead, _ := st.Head(ctx)
	b.StopTimer()
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("index start: %d events: from 0 %s (baseline, %d jobs held); from the checkpoint at %d %s (%d jobs held), ratio %.4f\n",
		head, ms(zero), held, cpFrom, ms(cp), cpHeld, float64(cp)/float64(zero))
	fmt.Printf("index start: %d events: from the checkpoint at %d (%d events behind) %s, ratio to from 0 %.4f\n",
		tailHead, tailFrom, tailHead-tailFrom, ms(tail), float64(tail)/float64(zero))
}

// generate appends about n events of projtest's mix to st from 64
// generators at once (as cmd/loggen does, so group commit batches them).
func generate(b *testing.B, st events.Store, prefix string, n int) {
	b.Helper()
	if err := projtest.Many(context.Background(), st, prefix, n, 64, 2, false); err != nil {
		b.Fatal(err)
	}
}
