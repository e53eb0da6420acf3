package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// growth is what the memory read model costs at one size of the log.
type growth struct {
	events     events.Position
	replay     time.Duration // full replay into a new read model (the baseline a snapshot saves)
	heap       uint64        // live heap the replayed read model holds (after GC)
	snapBytes  int64
	load       time.Duration // LoadSnapshot, the fastest of three
	loadedHeap uint64        // live heap of a read model loaded from the snapshot
	listed     int           // ListSlots' slots
	listBytes  int           // ListSlots as JSON: what GET /api/slots and the SSE snapshot send
}

// BenchmarkGrowth measures, in one run, the memory read model at a log of
// the realistic mix (loggen's: 128 generators of 2 slots, a fixed pool) of
// BENCH_GROWTH_SMALL events (default 100,000) and of BENCH_GROWTH_LARGE
// (default 1,000,000; another log, same pool): its snapshot's size and load
// time, its heap, and the slot list the API sends, with the large ÷ small
// ratios; load time is also shown against a full replay of the same log.
// It uses only memory.New, Replay, WriteSnapshot, LoadSnapshot and
// ListSlots (and projtest's FixedPool).
func BenchmarkGrowth(b *testing.B) {
	small := envInt("BENCH_GROWTH_SMALL", 100_000)
	large := envInt("BENCH_GROWTH_LARGE", 1_000_000)
	ctx := context.Background()
	dir := b.TempDir()
	// Two logs of the same pool, one ten times longer: what grows is
	// finished history (jobs, retired slots), not the pool.
	at := func(name string, n int) growth {
		d := filepath.Join(dir, name)
		store, err := boltstore.Open(filepath.Join(d, "log"), boltstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		grow(b, store, "a", n)
		return measure(b, ctx, store, d)
	}
	for range b.N {
		s := at("small", small)
		l := at("large", large)
		for _, g := range []growth{s, l} {
			fmt.Printf("FIGURE read model at %d events: snapshot %.1f MB, load %s (full replay %s, load = %.3f x replay); heap %.1f MB replayed, %.1f MB loaded; ListSlots %d slots, %.2f MB of JSON\n",
				g.events, mb(g.snapBytes), g.load.Round(time.Millisecond), g.replay.Round(time.Millisecond),
				g.load.Seconds()/g.replay.Seconds(), mb(int64(g.heap)), mb(int64(g.loadedHeap)), g.listed, mb(int64(g.listBytes)))
		}
		fmt.Printf("FIGURE read model %d ÷ %d events: snapshot size %.2f x, load time %.2f x, heap %.2f x (loaded %.2f x), ListSlots %.2f x\n",
			l.events, s.events, float64(l.snapBytes)/float64(s.snapBytes), l.load.Seconds()/s.load.Seconds(),
			float64(l.heap)/float64(s.heap), float64(l.loadedHeap)/float64(s.loadedHeap), float64(l.listBytes)/float64(s.listBytes))
	}
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// grow appends about n events of the mix with loggen's shape (128
// generators of 2 slots each, a fixed pool, prefix p).
func grow(b *testing.B, s events.Store, p string, n int) {
	if err := projtest.Many(context.Background(), s, p, n, 128, 2, true); err != nil {
		b.Fatal(err)
	}
}

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func measure(b *testing.B, ctx context.Context, store events.Store, dir string) growth {
	head, err := store.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	g := growth{events: head}
	rm := memory.New(store)
	t0 := time.Now()
	if _, err := projections.Replay(ctx, store, rm, head, 0); err != nil {
		b.Fatal(err)
	}
	g.replay = time.Since(t0)
	list, err := rm.ListSlots(ctx)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(list)
	g.listed, g.listBytes = len(list), len(raw)
	list, raw = nil, nil
	path := filepath.Join(dir, "readmodel.snapshot")
	if _, err := rm.WriteSnapshot(ctx, path); err != nil {
		b.Fatal(err)
	}
	// The read model's heap: the live heap with it less the live heap
	// without it (so whatever else is live does not count).
	with := heapNow()
	runtime.KeepAlive(rm)
	rm = nil
	g.heap = with - heapNow()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	g.snapBytes = fi.Size()
	for i := range 3 {
		loaded := memory.New(store)
		t0 := time.Now()
		if pos, why, err := loaded.LoadSnapshot(ctx, path); err != nil || pos != head {
			b.Fatalf("LoadSnapshot: %d %q %v", pos, why, err)
		}
		if d := time.Since(t0); i == 0 || d < g.load {
			g.load = d
		}
		with := heapNow()
		runtime.KeepAlive(loaded)
		loaded = nil
		g.loadedHeap = with - heapNow()
	}
	return g
}
