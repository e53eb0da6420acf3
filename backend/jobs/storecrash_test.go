package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// dyingStore is a worker's view of the store that dies right after one
// chosen append: from then on every append fails, as if the process had
// been killed between two appends. Reads still work (they change nothing).
// Lease renewals and the index's checkpoints go through while it lives but
// are neither counted nor offered to after: how many there are depends on
// the machine's speed (and Stop), and the crash points must be the same
// from run to run.
type dyingStore struct {
	events.Store
	after func(stream string, evs []events.EventData) bool
	dead  atomic.Bool
	n     atomic.Int64  // appends that went through, renewals aside
	died  chan struct{} // closed when it dies (if not nil)
}

var errDead = errors.New("test: the worker's process is gone")

func (d *dyingStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if d.dead.Load() {
		return events.AppendResult{}, errDead
	}
	res, err := d.Store.Append(ctx, stream, exp, evs...)
	if err == nil && !(len(evs) == 1 && evs[0].Type == "LeaseRenewed") && !strings.HasPrefix(stream, events.CheckpointStreamPrefix) {
		d.n.Add(1)
		if d.after(stream, evs) && !d.dead.Swap(true) && d.died != nil {
			close(d.died)
		}
	}
	return res, err
}

// TestCrashBetweenSlotAndJobAppends: a job that changes its slot (reset,
// teardown, promote) records JobSucceeded on the job stream, then the slot
// event its success implies (SlotVacated, SlotRetired, SlotPromoted) in the
// same append as JobReleased on the slot stream. A worker that dies between
// the two leaves a succeeded job holding the lock; another engine's releaser
// writes the slot event with the release, once, and the final state equals
// an undisturbed run's.
func TestCrashBetweenSlotAndJobAppends(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{events.KindReset, events.KindTeardown, events.KindPromote} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			slotEvent := slotEventOf[kind]
			w := newWorld(t, nil)
			w.patience = 2 * time.Minute
			fx := w.seed("cell")
			if kind == events.KindReset {
				w.occupy("cell")
			}
			dying := &dyingStore{Store: w.store, after: func(stream string, evs []events.EventData) bool {
				return strings.HasPrefix(stream, events.JobStreamPrefix) && len(evs) > 0 && evs[0].Type == "JobSucceeded"
			}}
			doomed := jobs.NewEngine(dying, w.deps, patientConfig(w))
			done := make(chan error, 1)
			go func() { done <- doomed.Run(context.Background()) }()
			res := startJob(t, w, kind, "cell")
			// The dying worker wrote its success and then nothing more.
			if j := w.waitJob(res.JobID, w.waitLimit(), func(j *events.JobState) bool { return j.Terminal() }); j.Status != events.StatusSucceeded {
				t.Fatalf("the run before the crash ended %s (%s), not succeeded%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			doomed.Stop(ctx)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if s := w.slot("cell"); s.LockJob != res.JobID || s.VacatedBy[res.JobID] || s.Retired || len(s.PromotedBy) > 0 {
				t.Fatalf("after the crash the slot shows lock %q, vacated %v, retired %v, promoted %v", s.LockJob, s.VacatedBy, s.Retired, s.PromotedBy)
			}
			// Another engine's releaser frees the lock and records the
			// slot's change.
			w.startEngine(patientConfig(w))
			j := w.waitEnded(res.JobID)
			assertEq(t, "job status", j.Status, events.StatusSucceeded)
			checkFinal(t, w, kind, fx, res.JobID)
			slotLog := w.logEvents(events.SlotStream("cell"))
			n := 0
			for _, ev := range slotLog {
				if ev.Type == slotEvent {
					n++
				}
			}
			assertEq(t, slotEvent+" events", n, 1)
			if k := len(slotLog); k < 2 || slotLog[k-2].Type != slotEvent || slotLog[k-1].Type != "JobReleased" || slotLog[k-2].Meta.Actor != slots.ActorRepair {
				t.Fatalf("the slot event is not the repairing release's:%s", history(slotLog))
			}
		})
	}
}

// TestCrashAfterEveryAppend kills a worker (its appends start failing, as if
// the process died) right after its k-th append, for every k of an
// undisturbed run of each job kind: after the claim, after every
// StepStarted, every result, every slot event, the terminal event and the
// release. Each time another engine takes over (the rescuer abandons the
// attempt, or the releaser frees a finished job's slot), a resume finishes
// what is left, and the final state equals an undisturbed run's, with each
// slot event written once.
func TestCrashAfterEveryAppend(t *testing.T) {
	t.Parallel()
	type kase struct {
		kind string
		k    int
	}
	var cases []kase
	for _, kind := range []string{events.KindReset, events.KindTeardown, events.KindPromote} {
		n := appendsOfUndisturbedRun(t, kind)
		t.Logf("%s: %d crash points", kind, n)
		for k := 1; k <= n; k++ {
			cases = append(cases, kase{kind, k})
		}
	}
	runCells(t, len(cases), func(i int) string { return fmt.Sprintf("%s/after-append-%d", cases[i].kind, cases[i].k) },
		func(t *testing.T, i int) { crashAfter(t, cases[i].kind, cases[i].k) })
}

// doomedConfig has a short lease, so it runs out soon after the worker
// dies. (It renews while it lives: an attempt stops at the end of its
// lease. dyingStore leaves renewals out of the crash points.) The crash
// matrix keeps the wall clock: the second a lease takes to run out also
// lets a call the dead worker had in flight land at the simulator before
// the resume verifies it.
func doomedConfig(w *world) jobs.Config {
	cfg := w.engineConfig()
	cfg.Workers, cfg.Lease = 1, time.Second
	return cfg
}

func appendsOfUndisturbedRun(t *testing.T, kind string) int {
	w := newWorld(t, nil)
	w.seed("cell")
	if kind == events.KindReset {
		w.occupy("cell")
	}
	counting := &dyingStore{Store: w.store, after: func(string, []events.EventData) bool { return false }}
	eng := jobs.NewEngine(counting, w.deps, doomedConfig(w))
	done := make(chan error, 1)
	go func() { done <- eng.Run(context.Background()) }()
	res := startJob(t, w, kind, "cell")
	j := w.waitEnded(res.JobID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	eng.Stop(ctx)
	<-done
	if j.Status != events.StatusSucceeded {
		t.Fatalf("undisturbed %s: %s", kind, j.Status)
	}
	return int(counting.n.Load())
}

func crashAfter(t *testing.T, kind string, k int) {
	w := newWorld(t, nil)
	fx := w.seed("cell")
	if kind == events.KindReset {
		w.occupy("cell")
	}
	dying := &dyingStore{Store: w.store, died: make(chan struct{})}
	dying.after = func(string, []events.EventData) bool { return dying.n.Load() >= int64(k) }
	doomed := jobs.NewEngine(dying, w.deps, doomedConfig(w))
	done := make(chan error, 1)
	go func() { done <- doomed.Run(context.Background()) }()
	res := startJob(t, w, kind, "cell")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	select {
	case <-dying.died:
	case <-ctx.Done():
		t.Fatalf("the worker never made %d appends", k)
	}
	doomed.Stop(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.startEngine(w.engineConfig())
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusSucceeded {
		if !j.Resumable() {
			t.Fatalf("after the crash the job is %s, not resumable%s", j.Status, history(w.jobEvents(res.JobID)))
		}
		if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
			t.Fatalf("resume: %v%s", err, history(w.jobEvents(res.JobID)))
		}
		j = w.waitEndedN(res.JobID, j.Terminals+1)
		if j.Status != events.StatusSucceeded {
			t.Fatalf("after resume: %s (%s)%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
		}
	}
	checkFinal(t, w, kind, fx, res.JobID)
	counts := map[string]int{}
	for _, ev := range w.logEvents(events.SlotStream("cell")) {
		counts[ev.Type]++
	}
	for _, typ := range []string{"SlotVacated", "SlotRetired", "SlotPromoted", "TeardownIncomplete"} {
		if counts[typ] > 1 {
			t.Errorf("%s written %d times", typ, counts[typ])
		}
	}
}

// TestCancelOfAnotherProcessesAttempt: the attempt runs on engine A, whose
// process dies while its call hangs; a person cancels the job. The lock is
// not freed at the cancel — A might still be calling out — but by engine B
// once A's lease has expired, and only then can the slot take a new job.
func TestCancelOfAnotherProcessesAttempt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seed("remote")
	w.occupy("remote")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Hang: true})
	dying := &dyingStore{Store: w.store, after: func(string, []events.EventData) bool { return false }}
	// A and B share a fake clock a minute ahead of the wall clock (the
	// job queued now is due on it): A's lease ends only when the test
	// moves the clock past it.
	fc := clock.NewFake(time.Now().Add(time.Minute))
	cfgA := doomedConfig(w)
	cfgA.Clock = fc
	a := jobs.NewEngine(dying, w.deps, cfgA)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	res := startJob(t, w, events.KindReset, "remote")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := w.sim.WaitFor(ctx, func(r sim.Request) bool { return r.Fault != 0 }); err != nil {
		t.Fatal(err)
	}
	dying.dead.Store(true) // A can no longer write anything
	cfgB := w.engineConfig()
	cfgB.Clock = fc
	w.startEngine(cfgB) // engine B
	j, _ := slots.LoadJob(ctx, w.store, res.JobID)
	if err := w.svc.Cancel(ctx, slots.Actor{Name: "carol"}, res.JobID); err != nil {
		t.Fatal(err)
	}
	// Until A's lease is over the slot stays locked: a new reset is refused
	// (the clock stands still until the test moves it past the lease).
	if _, err := w.svc.Release(ctx, bob, "remote"); slots.ErrorCode(err) != slots.CodeConflict {
		t.Fatalf("release right after the cancel: %v, want conflict", err)
	}
	fc.Advance(cfgA.Lease + cfgB.RescueGrace)
	s := w.waitSlotN("remote", func(s *slots.SlotState, released map[string]int) bool { return !s.Locked() && released[res.JobID] == 1 })
	released := w.logEvents(events.SlotStream("remote"))
	last := released[len(released)-1]
	if last.Type != "JobReleased" || last.Meta.Time.Before(j.LeaseUntil) {
		t.Fatalf("lock released at %s (%s), before A's lease ended at %s", last.Meta.Time, last.Type, j.LeaseUntil)
	}
	assertEq(t, "lifecycle", s.Lifecycle(), "occupied")
	a.Stop(ctx)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
