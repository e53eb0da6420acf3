package waitlist_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// consumerRun is what both consumers offer: Run and CaughtUp.
type consumerRun interface {
	Run(ctx context.Context) error
	CaughtUp() <-chan struct{}
}

// startTime runs c until it caught up with the log and stops it (its last
// checkpoint is written then); it returns the time to catch up.
func startTime(b *testing.B, c consumerRun) time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.CaughtUp():
	case err := <-done:
		b.Fatalf("Run ended before catching up: %v", err)
	}
	took := time.Since(t0)
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return took
}

// heap is the live heap after a collection.
func heap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkConsumerStart: each consumer's start (Run until CaughtUp) on a
// generated log of $EVENTS events (default 200,000; memstore), first from
// position 0 (no checkpoint yet), then from the checkpoint the first run
// left, in the same run; *-heap-MB is what each fold holds once caught up
// (the live heap's growth while the second one started).
func BenchmarkConsumerStart(b *testing.B) {
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("EVENTS")); err == nil && v > 0 {
		n = v
	}
	store := memstore.New()
	defer store.Close()
	if err := projtest.NewGen(store, 1).Random(context.Background(), 100, n); err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wl0 := startTime(b, waitlist.New(store, nil, waitlist.Config{Logger: quiet}))
		before := heap()
		wl := waitlist.New(store, nil, waitlist.Config{Logger: quiet})
		wlCP := startTime(b, wl)
		wlHeap := heap() - before
		in0 := startTime(b, insights.New(store, nil, insights.Config{Logger: quiet}))
		before = heap()
		in := insights.New(store, nil, insights.Config{Logger: quiet})
		inCP := startTime(b, in)
		inHeap := heap() - before
		runtime.KeepAlive(wl)
		runtime.KeepAlive(in)
		b.ReportMetric(float64(wlHeap)/(1<<20), "waitlist-heap-MB")
		b.ReportMetric(float64(inHeap)/(1<<20), "insights-heap-MB")
		b.ReportMetric(float64(n), "events")
		b.ReportMetric(wl0.Seconds()*1000, "waitlist-from-0-ms")
		b.ReportMetric(wlCP.Seconds()*1000, "waitlist-from-checkpoint-ms")
		b.ReportMetric(in0.Seconds()*1000, "insights-from-0-ms")
		b.ReportMetric(inCP.Seconds()*1000, "insights-from-checkpoint-ms")
		b.ReportMetric(wl0.Seconds()/wlCP.Seconds(), "waitlist-ratio")
		b.ReportMetric(in0.Seconds()/inCP.Seconds(), "insights-ratio")
		// The next iteration starts from 0 again.
		b.StopTimer()
		for _, c := range []string{"waitlist", "insights"} {
			if _, err := store.Append(context.Background(), events.CheckpointStream(c), events.Any(),
				events.New(events.ConsumerCheckpointed{Consumer: c, Version: -1, State: "{}"}, events.Metadata{Actor: "bench"})); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
}
