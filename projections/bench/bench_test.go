// Package bench measures the read models against the embedded bbolt log:
// replay throughput into memory and PostgreSQL, and the lag from an append to
// the change it causes. Every figure is printed with a baseline measured in
// the same run (the raw store's catch-up rate, the append latency), because
// the 2-core machines are noisy. Run it with scripts/bench/projections.sh.
package bench_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
	"github.com/slotkeeper/slotkeeper/projections/postgres/pgtest"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// histEvents is the size of the generated log the replay benchmarks read.
var histEvents = envInt("BENCH_PROJECTION_EVENTS", 200_000)

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err == nil && n > 0 {
		return n
	}
	return def
}

// history writes about n events into a new bolt store with 32 generators at
// once (each on its own slots and jobs, so every stream keeps its causal
// order while group commit batches the appends).
func history(b *testing.B, n int) (*boltstore.Store, events.Position) {
	b.Helper()
	ctx := context.Background()
	s, err := boltstore.Open(b.TempDir(), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := projtest.Many(ctx, s, "g", n, 32, 4, false); err != nil {
		b.Fatal(err)
	}
	head, err := s.Head(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return s, head
}

// rate runs f, which handles n events, and returns events per second.
func rate(n events.Position, f func() error) (float64, error) {
	start := time.Now()
	err := f()
	return float64(n) / time.Since(start).Seconds(), err
}

// catchup reads the whole log through a subscription, doing h per event.
func catchup(s events.Store, head events.Position, h func(events.RecordedEvent)) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := s.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		h(ev)
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// BenchmarkReplay replays the generated log into each read model. Baseline:
// the same log read by a subscription that does nothing (raw catch-up), and
// one that only decodes the payloads.
func BenchmarkReplay(b *testing.B) {
	store, head := history(b, histEvents)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		raw, err := rate(head, func() error { return catchup(store, head, func(events.RecordedEvent) {}) })
		if err != nil {
			b.Fatal(err)
		}
		dec, err := rate(head, func() error {
			return catchup(store, head, func(ev events.RecordedEvent) { _, _ = events.Decode(ev) })
		})
		if err != nil {
			b.Fatal(err)
		}
		var decoded []projections.Event
		if err := catchup(store, head, func(ev events.RecordedEvent) { decoded = append(decoded, projections.DecodeEvent(ev)) }); err != nil {
			b.Fatal(err)
		}
		// The apply stage alone, as Replay runs it (ApplyQuiet) and as the
		// live runner runs it (Apply, one new view per change).
		applyOnly, err := rate(head, func() error {
			rm := memory.New(store)
			for i := 0; i < len(decoded); i += 2000 {
				if err := rm.ApplyQuiet(ctx, decoded[i:min(i+2000, len(decoded))]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		applyLive, err := rate(head, func() error {
			rm := memory.New(store)
			for i := 0; i < len(decoded); i += 2000 {
				if _, err := rm.Apply(ctx, decoded[i:min(i+2000, len(decoded))]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		decoded = nil
		mem, err := rate(head, func() error {
			_, err := projections.Replay(ctx, store, memory.New(store), head, 0)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		// The server's cold start: a Runner catching up into memory while
		// a feed consumer (the SSE hub) takes every change, so every event
		// goes through Apply (a new view per change), not ApplyQuiet.
		cold, err := rate(head, func() error { return runnerCatchUp(store, head) })
		if err != nil {
			b.Fatal(err)
		}
		// PostgreSQL replays a prefix of the log (it is ~20x slower).
		pgN := min(head, events.Position(envInt("BENCH_PROJECTION_PG_EVENTS", 60_000)))
		pg, err := postgres.Open(ctx, pgtest.Start(b), postgres.Options{Log: store})
		if err != nil {
			b.Fatal(err)
		}
		pgRate, err := rate(pgN, func() error {
			_, err := projections.Replay(ctx, store, pg, pgN, 5000)
			return err
		})
		pg.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(raw, "raw-events/s")
		b.ReportMetric(mem, "memory-events/s")
		b.ReportMetric(pgRate, "postgres-events/s")
		fmt.Printf("FIGURE replay log: %d events (bbolt, 32 generators)\n", head)
		fmt.Printf("FIGURE baseline raw store catch-up: %.0f events/s; catch-up + decode: %.0f events/s\n", raw, dec)
		fmt.Printf("FIGURE replay into memory: %.0f events/s = %.2f x raw catch-up = %.2f x catch-up+decode (target >= 300000 events/s: %s)\n", mem, mem/raw, mem/dec, pass(mem >= 300_000))
		fmt.Printf("FIGURE   its apply stage alone (pre-decoded, 2000/batch): %.0f events/s = %.2f x catch-up+decode\n", applyOnly, applyOnly/dec)
		fmt.Printf("FIGURE   the live runner's apply stage (with changes, 2000/batch): %.0f events/s = %.2f x catch-up+decode\n", applyLive, applyLive/dec)
		fmt.Printf("FIGURE runner catch-up into memory with a feed consumer (server cold start): %.0f events/s = %.2f x raw catch-up = %.2f x catch-up+decode\n", cold, cold/raw, cold/dec)
		fmt.Printf("FIGURE replay into postgres (%d events, 5000/tx): %.0f events/s = %.3f x raw catch-up (target >= 20000 events/s: %s)\n", pgN, pgRate, pgRate/raw, pass(pgRate >= 20_000))
	}
}

// runnerCatchUp runs a Runner into a new memory read model until it has
// applied head, with one subscriber draining the change feed.
func runnerCatchUp(store events.Store, head events.Position) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := projections.NewRunner(store, memory.New(store), projections.RunnerOptions{})
	sub := r.Subscribe(1 << 16)
	drained := make(chan int)
	go func() {
		n := 0
		for range sub.C {
			n++
		}
		drained <- n
	}()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	err := r.WaitFor(ctx, head)
	cancel()
	<-done
	sub.Cancel()
	if n := <-drained; err == nil && sub.Dropped() {
		err = fmt.Errorf("the feed consumer was dropped after %d changes", n)
	}
	return err
}

// BenchmarkLag appends single events (one appender) to a live embedded
// store while a runner projects into memory, and measures the time from the
// acknowledged append to the change on the feed. Baseline: the append's own
// latency (an fsync'd commit).
func BenchmarkLag(b *testing.B) {
	const n = 2000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, err := boltstore.Open(b.TempDir(), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	g := projtest.NewGen(store, 9)
	if err := g.Random(ctx, 8, 5000); err != nil { // some state to project onto
		b.Fatal(err)
	}
	rm := memory.New(store)
	r := projections.NewRunner(store, rm, projections.RunnerOptions{})
	feed := r.Subscribe(1 << 14)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(ctx)
	}()
	head, _ := store.Head(ctx)
	if err := r.WaitFor(ctx, head); err != nil {
		b.Fatal(err)
	}
	slot := g.Slots["s000"]
	b.ResetTimer()
	for range b.N {
		lags := make([]time.Duration, 0, n)
		appends := make([]time.Duration, 0, n)
		for i := range n {
			ev := events.New(events.OccupancyExtended{Slot: slot.Name, By: "bench", Until: time.Now().Add(time.Duration(i) * time.Minute)}, events.Metadata{Actor: "bench"})
			t0 := time.Now()
			res, err := store.Append(ctx, events.SlotStream(slot.Name), events.Any(), ev)
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			for c := range feed.C {
				if c.Position == res.Position {
					if c.Slot == nil {
						b.Fatalf("change %d has no slot view", c.Position)
					}
					break
				}
			}
			lags = append(lags, time.Since(t1))
			appends = append(appends, t1.Sub(t0))
		}
		if feed.Dropped() {
			b.Fatal("the feed was dropped")
		}
		p := func(ds []time.Duration, q float64) time.Duration {
			slices.Sort(ds)
			return ds[int(q*float64(len(ds)-1))]
		}
		lag50, lag99, ap50, ap99 := p(lags, .5), p(lags, .99), p(appends, .5), p(appends, .99)
		b.ReportMetric(float64(lag99.Microseconds()), "lag-p99-µs")
		fmt.Printf("FIGURE lag append → visible change (memory, %d appends): p50 %s p99 %s (target p99 < 10ms: %s)\n", n, lag50, lag99, pass(lag99 < 10*time.Millisecond))
		fmt.Printf("FIGURE baseline append latency (fsync'd commit): p50 %s p99 %s; lag p99 = %.2f x append p99\n", ap50, ap99, float64(lag99)/float64(ap99))
	}
	cancel()
	<-done
}

func pass(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}
