// Package kurrentbench holds the adapter's benchmarks. It is separate from
// the adapter's tests so that those never depend on the bbolt store's build.
package kurrentbench

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
)

var quiet = slog.New(slog.DiscardHandler)

func mustFake(b *testing.B) *kurrentfake.Server {
	b.Helper()
	f, err := kurrentfake.Start()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(f.Close)
	return f
}

func mustOpen(b *testing.B, f *kurrentfake.Server) *kurrent.Store {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := kurrent.Open(ctx, f.ConnString(), kurrent.Options{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func ev(typ string, n int) events.EventData {
	return events.EventData{ID: uuid.NewString(), Type: typ, Data: fmt.Appendf(nil, `{"n":%d}`, n), Meta: events.Metadata{Actor: "bench"}}
}

// Both benchmarks run the same workload through the adapter (against the fake
// node over loopback gRPC) and through the embedded bbolt store in the same
// run, and report both rates and their ratio. The fake keeps events in
// memory and never fsyncs, so the adapter figure is the cost of the client,
// gRPC and the adapter itself, not of a real KurrentDB disk.

const (
	benchWriters   = 32
	benchPerWriter = 100
	benchCatchUp   = 20_000
)

func openBolt(b *testing.B) events.Store {
	b.Helper()
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// appendWorkload runs benchWriters goroutines, each appending benchPerWriter
// single events to its own stream with exact revisions (the job engine's
// pattern), and returns events per second.
func appendWorkload(b *testing.B, s events.Store, round int) float64 {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, benchWriters)
	start := time.Now()
	for w := range benchWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("job-bench-%d-%d", round, w)
			exp := events.NoStream()
			for i := range benchPerWriter {
				res, err := s.Append(ctx, stream, exp, ev("StepStarted", i))
				if err != nil {
					errs <- err
					return
				}
				exp = events.Exact(res.NextExpected)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(benchWriters*benchPerWriter) / el.Seconds()
}

func BenchmarkKurrentAppend(b *testing.B) {
	ks := mustOpen(b, mustFake(b))
	bs := openBolt(b)
	var kRate, bRate float64
	for i := 0; i < b.N; i++ {
		kRate += appendWorkload(b, ks, i)
		bRate += appendWorkload(b, bs, i)
	}
	n := float64(b.N)
	b.ReportMetric(kRate/n, "kurrent-events/s")
	b.ReportMetric(bRate/n, "bolt-events/s")
	b.ReportMetric(kRate/bRate, "kurrent/bolt")
}

// catchUp fills s with benchCatchUp events, then measures how fast a
// subscription from position 0 delivers all of them.
func catchUp(b *testing.B, s events.Store) float64 {
	b.Helper()
	ctx := context.Background()
	batch := make([]events.EventData, 100)
	for i := 0; i < benchCatchUp; i += len(batch) {
		for j := range batch {
			batch[j] = ev("StepStarted", i+j)
		}
		if _, err := s.Append(ctx, fmt.Sprintf("job-cu-%d", i/1000), events.Any(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	errDone := fmt.Errorf("done")
	start := time.Now()
	err := s.SubscribeAll(subCtx, 0, events.Filter{StreamPrefixes: []string{"job-cu-"}}, func(context.Context, events.RecordedEvent) error {
		n++
		if n == benchCatchUp {
			return errDone
		}
		return nil
	})
	el := time.Since(start)
	if err != errDone {
		b.Fatalf("catch-up ended with %v after %d events", err, n)
	}
	return float64(n) / el.Seconds()
}

func BenchmarkKurrentCatchUp(b *testing.B) {
	var kRate, bRate float64
	for i := 0; i < b.N; i++ {
		kRate += catchUp(b, mustOpen(b, mustFake(b)))
		bRate += catchUp(b, openBolt(b))
	}
	n := float64(b.N)
	b.ReportMetric(kRate/n, "kurrent-events/s")
	b.ReportMetric(bRate/n, "bolt-events/s")
	b.ReportMetric(kRate/bRate, "kurrent/bolt")
}
