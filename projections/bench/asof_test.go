package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// BenchmarkAsOf (issue 28) measures an "as of" answer (projections.SlotAsOf
// and the JSON of its view: the work of one GET /api/slots/{name}?at=) for
// a slot with about BENCH_ASOF_SMALL (default 100) events in its streams
// and one with about BENCH_ASOF_LARGE (default 10,000), both in a bbolt log
// of BENCH_ASOF_LOG (default 1,000,000) events of the realistic mix (the
// two slots' generators append while the mix does, so their events are
// spread through the first part of the log). The median and the fastest
// of 21 requests at random positions of each slot's history are printed
// with the large ÷ small ratios: it follows the slot's streams, not the log.
func BenchmarkAsOf(b *testing.B) {
	logSize := envInt("BENCH_ASOF_LOG", 1_000_000)
	small := envInt("BENCH_ASOF_SMALL", 100)
	large := envInt("BENCH_ASOF_LARGE", 10_000)
	ctx := context.Background()
	store, err := boltstore.Open(filepath.Join(b.TempDir(), "log"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); errs <- projtest.Many(ctx, store, "mix", logSize-small-large, 128, 2, true) }()
	go func() { defer wg.Done(); errs <- oneSlot(ctx, store, "small", small) }()
	go func() { defer wg.Done(); errs <- oneSlot(ctx, store, "large", large) }()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	head, err := store.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	gen := time.Since(start)
	rm := memory.New(store)
	if _, err := projections.Replay(ctx, store, rm, 0, 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		s := asOfMedian(b, ctx, store, rm, "small-s000", head)
		l := asOfMedian(b, ctx, store, rm, "large-s000", head)
		fmt.Printf("FIGURE as of: log of %d events (generated in %s)\n", head, gen.Round(time.Second))
		for _, m := range []asOfFigure{s, l} {
			fmt.Printf("FIGURE as of: slot with %d events in its streams: median %s, fastest %s per request (of 21, at random positions)\n",
				m.events, m.median.Round(time.Microsecond), m.fastest.Round(time.Microsecond))
		}
		fmt.Printf("FIGURE as of: %d ÷ %d events in the slot's streams: %.1f x the events, %.2f x the median time, %.2f x the fastest\n",
			l.events, s.events, float64(l.events)/float64(s.events), l.median.Seconds()/s.median.Seconds(), l.fastest.Seconds()/s.fastest.Seconds())
	}
}

type asOfFigure struct {
	events  int
	median  time.Duration
	fastest time.Duration // the least disturbed by other processes on a shared machine
}

// asOfMedian times SlotAsOf + JSON at 21 random positions of the slot's history.
func asOfMedian(b *testing.B, ctx context.Context, store events.Store, rm *memory.Store, name string, head events.Position) asOfFigure {
	ids, err := projections.SlotJobIDs(ctx, rm, name)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := projections.SlotHistory(ctx, store, name, ids, head)
	if err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(28, uint64(len(evs))))
	var times []time.Duration
	for range 21 {
		at := evs[rnd.IntN(len(evs))].Position
		t0 := time.Now()
		v, _, err := projections.SlotAsOf(ctx, store, rm, name, projections.At{Position: at})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(v); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(t0))
	}
	slices.Sort(times)
	return asOfFigure{events: len(evs), median: times[len(times)/2], fastest: times[0]}
}

// oneSlot appends about n events to one slot (prefix-s000) and its jobs:
// occupancies, extensions and resets, as a busy slot's history is.
func oneSlot(ctx context.Context, store events.Store, prefix string, n int) error {
	g := projtest.NewGen(store, 99)
	g.Prefix = prefix + "-"
	s, err := g.Register(ctx, prefix+"-s000")
	if err != nil {
		return err
	}
	for g.Appended < n {
		if err := g.Occupy(ctx, s, "alice"); err != nil {
			return err
		}
		for range 3 {
			if err := g.Extend(ctx, s); err != nil {
				return err
			}
		}
		if _, err := g.Job(ctx, s, events.KindReset, projtest.Succeed); err != nil {
			return fmt.Errorf("slot %s: %w", s.Name, err)
		}
	}
	return nil
}
