package jobs_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkFence runs 1,000 reset jobs whose delete_db call hangs, each with
// a random step deadline (10–60 ms). It measures, per trial, the time from
// the deadline to the simulator seeing the in-flight request aborted, and
// counts requests that arrived after the deadline (must be 0). Baseline in
// the same run: the same hung request cancelled by a bare context timeout
// (no engine, no store).
func BenchmarkFence(b *testing.B) {
	const trials = 1000
	s, err := sim.Start(context.Background(), sim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	s.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Hang: true})
	deps := simDeps(b, s)
	project := s.AddProject("fence")

	// Baseline: a bare cancelled request to the same hung endpoint.
	var base []time.Duration
	for range 200 {
		db, _ := s.AddDatabase(project, "base")
		d := time.Duration(10+rand.IntN(50)) * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), d)
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, s.CoolifyURL()+"/databases/"+db, nil)
		req.Header.Set("Authorization", "Bearer "+s.CoolifyToken())
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		cancel()
		deadline := start.Add(d)
		r, err := s.WaitFor(context.Background(), func(r sim.Request) bool { return r.Resource == db && r.Done() })
		if err == nil && r.WasAborted() {
			base = append(base, r.Aborted.Sub(deadline))
		}
	}

	var (
		mu          sync.Mutex
		aborts      []time.Duration
		after       atomic.Int64
		notAborted  atomic.Int64
		wrongResult atomic.Int64
	)
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range trials {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			stepTimeout := time.Duration(10+rand.IntN(50)) * time.Millisecond
			abort, late, ok := fenceTrial(b, s, deps, project, i, stepTimeout)
			if !ok {
				wrongResult.Add(1)
				return
			}
			after.Add(int64(late))
			if abort < 0 {
				notAborted.Add(1)
				return
			}
			mu.Lock()
			aborts = append(aborts, abort)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	p99, bp99 := pct(aborts, 0.99), pct(base, 0.99)
	fmt.Printf("fence: %d trials, deadline→abort p50 %.2f ms p99 %.2f ms (target p99 < 50 ms); requests after the deadline: %d (must be 0); not aborted: %d; wrong terminal: %d\n",
		trials, ms(pct(aborts, 0.5)), ms(p99), after.Load(), notAborted.Load(), wrongResult.Load())
	fmt.Printf("fence baseline (bare context timeout, same endpoint): p50 %.2f ms p99 %.2f ms; ratio p99 engine/baseline %.2f\n",
		ms(pct(base, 0.5)), ms(bp99), float64(p99)/float64(max(bp99, time.Microsecond)))
	b.ReportMetric(ms(p99), "p99-abort-ms")
	b.ReportMetric(float64(after.Load()), "requests-after-fence")
}

// fenceTrial runs one reset whose delete_db hangs, on its own store and
// engine, and returns deadline→abort (-1 if the request was not aborted)
// and the number of requests that arrived after the deadline.
func fenceTrial(b *testing.B, s *sim.Sim, deps jobs.Deps, project string, i int, stepTimeout time.Duration) (time.Duration, int, bool) {
	st := memstore.New()
	defer st.Close()
	db, _ := s.AddDatabase(project, fmt.Sprintf("db%d", i))
	slot := fmt.Sprintf("f%d", i)
	id := uuid.NewString()
	m := events.Metadata{Actor: "bench"}
	ctx := context.Background()
	st.Append(ctx, events.SlotStream(slot), events.NoStream(),
		events.New(events.SlotRegistered{Slot: slot, DBUUID: db, AppUUID: "app", ProjectUUID: project}, m),
		events.New(events.JobAccepted{Slot: slot, JobID: id, Kind: events.KindReset}, m))
	st.Append(ctx, events.JobStream(id), events.NoStream(),
		events.New(events.JobQueued{JobID: id, Kind: events.KindReset, Slot: slot, Steps: events.StepNames(events.KindReset, false), NotBefore: time.Now()}, m))
	eng := jobs.NewEngine(st, deps, jobs.Config{Workers: 1, StepTimeout: stepTimeout, Logger: testLogger()})
	done := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	go func() { done <- eng.Run(rctx) }()
	defer func() {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		eng.Stop(sctx)
		scancel()
		cancel()
		<-done
	}()
	w := &world{t: b, sim: s, store: st}
	j := w.waitJob(id, 10*time.Second, func(j *events.JobState) bool { return j.Terminal() })
	if j.Status != events.StatusTimedOut || j.InFlight != events.StepDeleteDB {
		return 0, 0, false
	}
	var started time.Time
	for _, ev := range w.jobEvents(id) {
		if ev.Type == "StepStarted" {
			started = ev.Meta.Time
			break
		}
	}
	deadline := started.Add(stepTimeout)
	r, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.Resource == db && r.Fault != 0 && r.Done() })
	late := 0
	for _, q := range s.Requests() {
		if q.Resource == db && q.Arrived.After(deadline) {
			late++
		}
	}
	if err != nil || !r.WasAborted() {
		fmt.Printf("fence: trial %d: hung request not recorded as aborted: arrived %s, completed %s after the deadline, status %d (step timeout %s)\n",
			i, r.Arrived.Sub(deadline), r.Completed.Sub(deadline), r.Status, stepTimeout)
		return -1, late, true
	}
	// The step's timer starts just before StepStarted is written, so the
	// deadline estimated from StepStarted's time is a little late: an abort
	// a few µs "before" it is an abort at the deadline.
	return max(r.Aborted.Sub(deadline), 0), late, true
}

// BenchmarkClaims: one engine with 8 workers drains 10,000 no-op jobs on the
// embedded bbolt store; each must be claimed exactly once. Baseline in the
// same run on the same store: raw appends/s with 8 concurrent appenders.
func BenchmarkClaims(b *testing.B) {
	const njobs, workers = 10_000, 8
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	// Baseline: 8 appenders, one event per append.
	const baseN = 8000
	var wg sync.WaitGroup
	start := time.Now()
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range baseN / workers {
				st.Append(ctx, fmt.Sprintf("base-%d", g), events.Any(), events.New(events.StepSucceeded{Detail: fmt.Sprint(k)}, events.Metadata{}))
			}
		}()
	}
	wg.Wait()
	appendRate := baseN / time.Since(start).Seconds()

	// Queue the jobs with 32 writers (group commit makes setup quick).
	var ids []string
	var idMu sync.Mutex
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := queueNoops(b, st, fmt.Sprintf("b%d-", g), njobs/32+boolInt(g < njobs%32))
			idMu.Lock()
			ids = append(ids, got...)
			idMu.Unlock()
		}()
	}
	wg.Wait()

	claims := map[string]int{}
	var cmu sync.Mutex
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	head, _ := st.Head(ctx)
	go st.SubscribeAll(sctx, head, events.Filter{EventTypes: []string{"JobClaimed"}}, func(_ context.Context, ev events.RecordedEvent) error {
		cmu.Lock()
		claims[ev.Stream]++
		cmu.Unlock()
		return nil
	})
	b.ResetTimer()
	start = time.Now()
	eng := jobs.NewEngine(st, jobs.Deps{}, jobs.Config{Workers: workers, Logger: testLogger()})
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	waitReleases(b, st, len(ids), 5*time.Minute)
	elapsed := time.Since(start)
	b.StopTimer()
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	eng.Stop(stopCtx)
	cancel()
	<-done
	cmu.Lock()
	dup, missing := 0, 0
	for _, id := range ids {
		switch claims[events.JobStream(id)] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	cmu.Unlock()
	rate := float64(len(ids)) / elapsed.Seconds()
	fmt.Printf("claims: %d jobs, %d workers, bbolt: %.0f claims/s (target ≥ 2000), each job claim+succeed+release = 3 appends; duplicates %d, unclaimed %d (must be 0, 0)\n",
		len(ids), workers, rate, dup, missing)
	fmt.Printf("claims baseline: raw appends with %d appenders on the same store: %.0f appends/s; ratio claims/s ÷ appends/s %.2f\n",
		workers, appendRate, rate/appendRate)
	b.ReportMetric(rate, "claims/s")
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}
