package jobs_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

// BenchmarkIndexMemory (issue 13, "finished jobs leave memory"): an engine
// folds a bbolt log of finished jobs (each: JobAccepted, JobQueued,
// JobClaimed, StepStarted, StepSucceeded, JobSucceeded, JobReleased over 50
// slots) from position 0; figures are the process's private memory
// (RssAnon, /proc/self/status; the store's mmapped file is not in it) and
// the Go heap in use, after a GC, with the engine caught up, minus the same
// figures with the store open and no engine (the baseline of the same run),
// at BENCH_INDEX_JOBS (default 10,000) and 5× as many finished jobs.
// Flat cost means the ratio of the two stays near 1.
func BenchmarkIndexMemory(b *testing.B) {
	small := 10_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_INDEX_JOBS")); err == nil && v > 0 {
		small = v
	}
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	made := 0
	type figure struct {
		jobs, events    int
		rss, heap       int64 // growth over the baseline, bytes
		baseRSS, indexd int64
	}
	measure := func(total int) figure {
		// One writer per slot, so group commit batches the fsyncs.
		var wg sync.WaitGroup
		for k := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := made + k; i < total; i += 50 {
					if err := finishedJob(st, fmt.Sprintf("s%02d", k)); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if b.Failed() {
			b.FailNow()
		}
		made = total
		head, _ := st.Head(ctx)
		baseRSS, baseHeap := settledMemory()
		eng := jobs.NewEngine(st, jobs.Deps{}, jobs.Config{Workers: 1, WorkerID: "bench", Logger: testLogger()})
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		if err := eng.WaitApplied(wctx, head); err != nil {
			b.Fatal(err)
		}
		cancel()
		rss, heap := settledMemory()
		f := figure{jobs: total, events: int(head), rss: rss - baseRSS, heap: heap - baseHeap, baseRSS: baseRSS, indexd: int64(eng.IndexedJobs())}
		sctx, scancel := context.WithTimeout(ctx, time.Minute)
		_ = eng.Stop(sctx)
		scancel()
		<-done
		runtime.KeepAlive(eng)
		return f
	}
	b.ResetTimer()
	f1 := measure(small)
	f5 := measure(5 * small)
	b.StopTimer()
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	for _, f := range []figure{f1, f5} {
		fmt.Printf("index memory: %d finished jobs (%d events): engine caught up adds RssAnon %s, Go heap %s; jobs in the index %d (baseline RssAnon with the store open, no engine: %s)\n",
			f.jobs, f.events, mb(f.rss), mb(f.heap), f.indexd, mb(f.baseRSS))
	}
	fmt.Printf("index memory ratio: 5× the finished jobs → heap growth ×%.2f, RssAnon growth ×%.2f (flat cost: near 1)\n",
		float64(f5.heap)/float64(max(f1.heap, 1)), float64(f5.rss)/float64(max(f1.rss, 1)))
}

// finishedJob appends one succeeded job's events to the log directly.
func finishedJob(st events.Store, slot string) error {
	ctx := context.Background()
	id := uuid.NewString()
	meta := events.Metadata{Actor: "bench", CorrelationID: id, Time: time.Now().UTC()}
	if _, err := st.Append(ctx, events.SlotStream(slot), events.Any(), events.New(events.JobAccepted{Slot: slot, JobID: id, Kind: events.KindPromote}, meta)); err != nil {
		return err
	}
	worker := "worker:bench/x/0"
	wmeta := meta
	wmeta.Actor = worker
	_, err := st.Append(ctx, events.JobStream(id), events.NoStream(),
		events.New(events.JobQueued{JobID: id, Kind: events.KindPromote, Slot: slot, RequestedBy: "bench", NotBefore: meta.Time, Steps: events.StepNames(events.KindPromote, false)}, meta),
		events.New(events.JobClaimed{JobID: id, Worker: worker, Attempt: 1, LeaseUntil: meta.Time.Add(time.Minute)}, wmeta),
		events.New(events.StepStarted{JobID: id, Step: events.StepLookupRepo, Attempt: 1}, wmeta),
		events.New(events.StepSucceeded{StepResult: events.StepResult{JobID: id, Step: events.StepLookupRepo, Attempt: 1}}, wmeta),
		events.New(events.JobSucceeded{JobID: id, Attempt: 1}, wmeta))
	if err != nil {
		return err
	}
	_, err = st.Append(ctx, events.SlotStream(slot), events.Any(), events.New(events.JobReleased{Slot: slot, JobID: id, Outcome: events.StatusSucceeded}, wmeta))
	return err
}

// settledMemory is RssAnon and the Go heap in use after a GC that returned
// what it could to the OS.
func settledMemory() (rssAnon, heap int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	f, err := os.Open("/proc/self/status")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "RssAnon:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				rssAnon = kb << 10
			}
		}
	}
	return rssAnon, int64(ms.HeapInuse)
}
