package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// BenchmarkAsOf (issues 28 and 37) measures the "as of" answers of
// projections.History for a slot with about BENCH_ASOF_SMALL (default
// 100) events in its streams and one with about BENCH_ASOF_LARGE (default
// 20,000), both in a bbolt log of BENCH_ASOF_LOG (default 1,000,000)
// events of the realistic mix (the two slots' generators append while the
// mix does, so their events are spread through the first part of the
// log). Per slot, against a plain read of its view (rm.Slot + JSON, the
// baseline, same run): the first answer after a start (it builds the
// checkpoints), ?at= at random positions, a five-position range of
// /changes, the dashboard timeline's page (the latest changes before a
// random moment, newest first), and the full fold every answer made before issue 37
// (FoldSlot). Then 40 concurrent five-position ranges on the large slot:
// their wall time and the heap they add at their peak.
func BenchmarkAsOf(b *testing.B) {
	logSize := envInt("BENCH_ASOF_LOG", 1_000_000)
	small := envInt("BENCH_ASOF_SMALL", 100)
	large := envInt("BENCH_ASOF_LARGE", 20_000)
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
		h := projections.NewHistory(store, projections.HistoryOptions{})
		fmt.Printf("FIGURE as of: log of %d events (generated in %s), checkpoints every %d events of a slot's streams\n", head, gen.Round(time.Second), projections.DefaultCheckpointEvery)
		s := asOfFigures(b, ctx, store, h, rm, "small-s000", head)
		l := asOfFigures(b, ctx, store, h, rm, "large-s000", head)
		for _, m := range []asOfFigure{s, l} {
			fmt.Printf("FIGURE as of: slot with %d events: plain read (baseline) %s; ?at= median %s (%.1f x the plain read), fastest %s; 5-position /changes median %s (%.1f x); timeline page (the latest %d changes before a moment) median %s; first answer after a start %s; full fold (before issue 37) median %s\n",
				m.events, us(m.plain), us(m.at), ratio(m.at, m.plain), us(m.atFast), us(m.tiny), ratio(m.tiny, m.plain), projections.DefaultChangesLimit, us(m.timeline), us(m.cold), us(m.full))
		}
		fmt.Printf("FIGURE as of: %d ÷ %d events in the slot's streams: %.1f x the events, %.2f x the ?at= median, %.2f x the 5-position range median, %.2f x the full fold (target: flat)\n",
			l.events, s.events, float64(l.events)/float64(s.events), ratio(l.at, s.at), ratio(l.tiny, s.tiny), ratio(l.full, s.full))
		wall, added := concurrentRanges(b, ctx, h, rm, "large-s000", l.positions, 40)
		fmt.Printf("FIGURE as of: 40 concurrent 5-position ranges on the %d-event slot: %s wall, %.1f MB heap added at the peak (target < 50 MB)\n",
			l.events, wall.Round(time.Millisecond), float64(added)/(1<<20))
	}
}

type asOfFigure struct {
	events            int
	positions         []events.Position
	plain, cold, full time.Duration
	at, atFast, tiny  time.Duration // medians (atFast: the fastest, the least disturbed by other processes)
	timeline          time.Duration // median: the latest changes before a moment (order=newest, one page)
}

func us(d time.Duration) string { return d.Round(time.Microsecond).String() }

func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

func median(ts []time.Duration) time.Duration {
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// asOfFigures times, for slot name: a plain read, the first History
// answer, 21 ?at= answers and 21 five-position ranges at random positions
// of its history, and 5 full folds (each with the JSON of its answer).
func asOfFigures(b *testing.B, ctx context.Context, store events.Store, h *projections.History, rm *memory.Store, name string, head events.Position) asOfFigure {
	ids, err := projections.SlotJobIDs(ctx, rm, name)
	if err != nil {
		b.Fatal(err)
	}
	evs, err := projections.SlotHistory(ctx, store, name, ids, head)
	if err != nil {
		b.Fatal(err)
	}
	f := asOfFigure{events: len(evs)}
	for _, ev := range evs {
		f.positions = append(f.positions, ev.Position)
	}
	timed := func(n int, fn func() any) []time.Duration {
		var ts []time.Duration
		for range n {
			t0 := time.Now()
			if _, err := json.Marshal(fn()); err != nil {
				b.Fatal(err)
			}
			ts = append(ts, time.Since(t0))
		}
		return ts
	}
	must := func(v any, err error) any {
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	rnd := rand.New(rand.NewPCG(37, uint64(len(evs))))
	random := func() events.Position { return f.positions[rnd.IntN(len(f.positions))] }
	f.plain = median(timed(21, func() any { return must(rm.Slot(ctx, name)) }))
	f.cold = timed(1, func() any {
		v, _, err := h.SlotAsOf(ctx, rm, name, projections.At{Position: random()})
		return must(v, err)
	})[0]
	ats := timed(21, func() any {
		v, _, err := h.SlotAsOf(ctx, rm, name, projections.At{Position: random()})
		return must(v, err)
	})
	f.at, f.atFast = median(ats), slices.Min(ats)
	f.tiny = median(timed(21, func() any {
		i := rnd.IntN(len(f.positions) - 5)
		return must(h.SlotChanges(ctx, rm, name, projections.At{Position: f.positions[i]}, projections.At{Position: f.positions[i+5]}, 0))
	}))
	f.timeline = median(timed(21, func() any {
		return must(h.SlotChangesNewest(ctx, rm, name, projections.At{}, projections.At{Position: random()}, 0))
	}))
	f.full = median(timed(5, func() any { return must(projections.FoldSlot(ctx, store, name, ids, random())) }))
	return f
}

// concurrentRanges runs n five-position ranges at once and returns their
// wall time and the most heap (live objects) they added over the heap
// before them, sampled every millisecond.
func concurrentRanges(b *testing.B, ctx context.Context, h *projections.History, rm *memory.Store, name string, positions []events.Position, n int) (time.Duration, uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	heap := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := heap()
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := heap(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	rnd := rand.New(rand.NewPCG(40, 37))
	starts := make([]int, n)
	for i := range starts {
		starts[i] = rnd.IntN(len(positions) - 5)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, i := range starts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := h.SlotChanges(ctx, rm, name, projections.At{Position: positions[i]}, projections.At{Position: positions[i+5]}, 0)
			if err == nil {
				_, err = json.Marshal(p.Changes)
			}
			if err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	close(stop)
	<-sampled
	if v := heap(); v > peak.Load() {
		peak.Store(v)
	}
	return wall, peak.Load() - min(base, peak.Load())
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
