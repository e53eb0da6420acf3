package bench_test

import (
	"context"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// BenchmarkMemoryApply (the apply stage as Replay runs it) and
// BenchmarkMemoryCatchUp (the whole replay) measure the memory replay with
// no PostgreSQL and no baselines, for profiling:
//
//	go test -run '^$' -bench MemoryApply -cpuprofile cpu.out ./projections/bench
//
// The figures the issue asks for come from BenchmarkReplay.
func BenchmarkMemoryApply(b *testing.B) {
	store, head := history(b, histEvents)
	var decoded []projections.Event
	if err := catchup(store, head, func(ev events.RecordedEvent) { decoded = append(decoded, projections.DecodeEvent(ev)) }); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rm := memory.New(store)
		for i := 0; i < len(decoded); i += 2000 {
			if err := rm.ApplyQuiet(ctx, decoded[i:min(i+2000, len(decoded))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(decoded))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemoryCatchUp is the whole replay into memory (catch-up, decode,
// apply), as the server's cold start runs it.
func BenchmarkMemoryCatchUp(b *testing.B) {
	store, head := history(b, histEvents)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := projections.Replay(ctx, store, memory.New(store), head, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(head)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkMemoryApplyLive is the apply stage as the live runner runs it
// (Apply: a Change with full views per event).
func BenchmarkMemoryApplyLive(b *testing.B) {
	store, head := history(b, histEvents)
	var decoded []projections.Event
	if err := catchup(store, head, func(ev events.RecordedEvent) { decoded = append(decoded, projections.DecodeEvent(ev)) }); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rm := memory.New(store)
		for i := 0; i < len(decoded); i += 2000 {
			if _, err := rm.Apply(ctx, decoded[i:min(i+2000, len(decoded))]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(decoded))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
