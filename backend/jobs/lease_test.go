package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// hangingStore is a worker's view of a store behind a half-open connection:
// once hang is called, every Append waits — without writing anything —
// until unhang or until the caller's context ends, as a client with a
// deadline would. Reads still work.
type hangingStore struct {
	events.Store
	mu      sync.Mutex
	gate    chan struct{} // nil while appends go through
	waiting chan struct{} // closed when the first append is held at the gate
}

func (h *hangingStore) hang() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gate, h.waiting = make(chan struct{}), make(chan struct{})
}

func (h *hangingStore) unhang() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate != nil {
		close(h.gate)
		h.gate = nil
	}
}

func (h *hangingStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	h.mu.Lock()
	gate, waiting := h.gate, h.waiting
	if gate != nil {
		select {
		case <-waiting:
		default:
			close(waiting)
		}
	}
	h.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return events.AppendResult{}, ctx.Err()
		}
	}
	return h.Store.Append(ctx, stream, exp, evs...)
}

// TestLeaseIsNotADeadlineForTheHolder (issue 12, item 4): while a step's
// provider call hangs, the worker's connection to the store goes half-open:
// its lease renewals neither land nor fail. The attempt must stop calling out
// when its lease ends — the hung request is aborted before the rescuer may
// act (lease end + RescueGrace), long before the step deadline — and no
// request reaches the providers after the lease ended, even after another
// engine's rescuer abandoned the job and the store came back.
//
// The engines run on a fake clock with production-like durations: the test
// moves time to the renewal, then to the lease's end, and waits for the
// abort there, without the clock passing the rescue grace (before, real
// 600 ms leases raced a loaded machine).
func TestLeaseIsNotADeadlineForTheHolder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seed("halfopen")
	w.occupy("halfopen")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Hang: true})
	hanging := &hangingStore{Store: w.store}
	// A minute ahead of the wall clock, so the job the service queues now
	// is already due on it.
	fc := clock.NewFake(time.Now().Add(time.Minute))
	cfg := w.engineConfig()
	cfg.Clock = fc
	cfg.Lease, cfg.RenewEvery, cfg.RescueGrace = 30*time.Second, 10*time.Second, 5*time.Second
	cfg.StepTimeout, cfg.JobTimeout = 10*time.Minute, time.Hour
	holder := jobs.NewEngine(hanging, w.deps, cfg)
	done := make(chan error, 1)
	go func() { done <- holder.Run(context.Background()) }()
	stopHolder := sync.OnceValue(func() error {
		hanging.unhang()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := holder.Stop(ctx); err != nil {
			return err
		}
		return <-done
	})
	t.Cleanup(func() { stopHolder() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := w.svc.Release(ctx, bob, "halfopen")
	if err != nil {
		t.Fatal(err)
	}
	hung, err := w.sim.WaitFor(ctx, func(r sim.Request) bool { return r.Fault != 0 })
	if err != nil {
		t.Fatal(err)
	}
	j, err := slots.LoadJob(ctx, w.store, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	leaseEnd := j.LeaseUntil
	// Mid-step, the store stops answering the holder; the renewal is due.
	hanging.hang()
	fc.Advance(cfg.RenewEvery)
	select {
	case <-hanging.waiting: // a renewal is stuck
	case <-ctx.Done():
		t.Fatal("the holder never tried to renew its lease")
	}
	// The lease the log holds is the one that binds the holder: the stuck
	// renewal did not land. Time reaches its end, and stays there.
	fc.Set(leaseEnd)
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	r, err := w.sim.WaitFor(actx, func(r sim.Request) bool { return r.Seq == hung.Seq && r.Done() })
	if err != nil {
		t.Fatalf("the hung call outlived the lease that ended at %s: %v%s", leaseEnd.Format("15:04:05.000"), err, history(w.jobEvents(res.JobID)))
	}
	if !r.WasAborted() {
		t.Fatalf("the hung call ended without an abort: %+v", r)
	}
	if now := fc.Now(); now.After(leaseEnd) || !now.Before(leaseEnd.Add(cfg.RescueGrace)) {
		t.Fatalf("the clock moved past the lease's end (%s) before the abort: %s", leaseEnd, now)
	}
	// Another engine (on a healthy connection) abandons the job once the
	// grace has passed.
	w.startEngine(cfg)
	fc.Advance(cfg.RescueGrace)
	ended := w.waitEnded(res.JobID)
	assertEq(t, "status", ended.Status, events.StatusAbandoned)
	assertEq(t, "uncertain step", ended.InFlight, events.StepDeleteDB)
	// The holder's connection recovers: whatever it had pending is fenced.
	if err := stopHolder(); err != nil {
		t.Fatal(err)
	}
	for _, q := range w.sim.Requests() {
		if q.Seq > hung.Seq {
			t.Errorf("request after the holder's lease ended: %s %s", q.Method, q.Path)
		}
	}
	for _, ev := range w.jobEvents(res.JobID) {
		if !ev.Meta.Time.Before(leaseEnd) && ev.Meta.Actor == ended.Worker && ev.Type != "JobClaimed" {
			t.Errorf("%s by the holder after its lease ended%s", ev.Type, history(w.jobEvents(res.JobID)))
		}
	}
}
