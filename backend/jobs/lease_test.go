package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

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
func TestLeaseIsNotADeadlineForTheHolder(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seed("halfopen")
	w.occupy("halfopen")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Hang: true})
	hanging := &hangingStore{Store: w.store}
	cfg := w.engineConfig()
	cfg.Lease, cfg.RenewEvery, cfg.RescueGrace = 600*time.Millisecond, 150*time.Millisecond, 400*time.Millisecond
	cfg.StepTimeout, cfg.JobTimeout = 30*time.Second, time.Minute
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
	// Mid-step, the store stops answering the holder.
	hanging.hang()
	select {
	case <-hanging.waiting: // a renewal is stuck
	case <-ctx.Done():
		t.Fatal("the holder never tried to renew its lease")
	}
	// The lease the log holds is the one that binds the holder: the stuck
	// renewal did not land.
	j, err := slots.LoadJob(ctx, w.store, res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	leaseEnd := j.LeaseUntil
	// Well before the step deadline (30 s): bounded by the lease.
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	defer acancel()
	r, err := w.sim.WaitFor(actx, func(r sim.Request) bool { return r.Seq == hung.Seq && r.Done() })
	if err != nil {
		t.Fatalf("the hung call outlived the lease that ended at %s (now %s): %v%s", leaseEnd.Format("15:04:05.000"),
			time.Now().Format("15:04:05.000"), err, history(w.jobEvents(res.JobID)))
	}
	if !r.WasAborted() {
		t.Fatalf("the hung call ended without an abort: %+v", r)
	}
	t.Logf("lease ended %s, hung call aborted %s after", leaseEnd.Format("15:04:05.000"), r.Aborted.Sub(leaseEnd))
	if rescuable := leaseEnd.Add(cfg.RescueGrace); !r.Aborted.Before(rescuable) {
		t.Fatalf("the hung call was aborted at %s, after a rescuer may act (%s)", r.Aborted.Format("15:04:05.000"), rescuable.Format("15:04:05.000"))
	}
	// Another engine (on a healthy connection) abandons the job.
	w.startEngine(cfg)
	ended := w.waitEnded(res.JobID)
	assertEq(t, "status", ended.Status, events.StatusAbandoned)
	assertEq(t, "uncertain step", ended.InFlight, events.StepDeleteDB)
	// The holder's connection recovers: whatever it had pending is fenced.
	if err := stopHolder(); err != nil {
		t.Fatal(err)
	}
	for _, q := range w.sim.RequestsAfter(leaseEnd) {
		t.Errorf("request after the holder's lease ended: %s %s at %s", q.Method, q.Path, q.Arrived.Format("15:04:05.000"))
	}
	for _, ev := range w.jobEvents(res.JobID) {
		if ev.Meta.Time.After(leaseEnd) && ev.Meta.Actor == ended.Worker && ev.Type != "JobClaimed" {
			t.Errorf("%s by the holder after its lease ended%s", ev.Type, history(w.jobEvents(res.JobID)))
		}
	}
}
