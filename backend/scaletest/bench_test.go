package scaletest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// runJobs registers slots on w, then resets each of them `rounds` times
// through the processes in turn, and returns finished jobs per second from
// the first command to the last lock release. Every job is claimed, runs its
// five steps against the simulators and releases the slot, so this is
// end-to-end job throughput, bounded by the steps rather than by claiming.
func runJobs(b *testing.B, ctx context.Context, w *world, slots, rounds int) float64 {
	b.Helper()
	names := make([]string, slots)
	for i := range names {
		names[i] = fmt.Sprintf("b%03d", i)
		w.register(b, ctx, w.procs[i%len(w.procs)], names[i])
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, slots)
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				n := len(w.procs)
				id, err := w.reset(ctx, w.procs[(i+r)%n], w.procs[(i+r+1)%n], name)
				if err != nil {
					errs <- err
					return
				}
				if got := w.waitReleasedNoFatal(name, id); got != "JobSucceeded" {
					errs <- fmt.Errorf("job %s ended %q", id, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return float64(slots*rounds) / el.Seconds()
}

// BenchmarkScaleOutJobs compares job throughput with three processes on one
// KurrentDB (the fake) and PostgreSQL against one process on the same
// setup, measured in the same run.
func BenchmarkScaleOutJobs(b *testing.B) {
	const slots, rounds = 24, 5
	var one, three float64
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		one += runJobs(b, ctx, setup(b, ctx, 1), slots, rounds)
		three += runJobs(b, ctx, setup(b, ctx, 3), slots, rounds)
		cancel()
	}
	n := float64(b.N)
	b.ReportMetric(one/n, "jobs/s-1proc")
	b.ReportMetric(three/n, "jobs/s-3procs")
	b.ReportMetric(three/one, "3procs/1proc")
}
