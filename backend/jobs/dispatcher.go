package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// dispatcher hands due jobs to the workers, which claim them (JobClaimed,
// after the acceptance's copy if the job stream lacks it, with the job
// stream's expected revision: one winner across goroutines, processes and
// a person's cancel) and run the attempt to its end (attempt.go). It also
// fences its attempts: any event on a job stream written by someone else
// after the claim cancels the attempt's context at once. Writes: [JobQueued
// | JobResumed,] JobClaimed, then the attempt's events.
type dispatcher struct {
	e     *Engine
	wake  <-chan struct{}
	ready chan struct{} // cap 1: queue has grown

	mu       sync.Mutex
	queue    []string            // due jobs no worker has taken yet
	local    map[string]*attempt // jobs this engine is claiming or running
	stopping bool
	draining bool // claims nothing new; running attempts go on
	attempts sync.WaitGroup
}

func newDispatcher(e *Engine) *dispatcher {
	return &dispatcher{e: e, wake: e.idx.wake(wantDue), ready: make(chan struct{}, 1), local: map[string]*attempt{}}
}

// run hands due jobs to the workers until ctx ends, stop is closed (then it
// waits for the attempts) or the index's subscription fails.
func (d *dispatcher) run(ctx context.Context, stop <-chan struct{}, subErr <-chan error) error {
	select {
	case <-d.e.idx.caughtUp:
	case <-ctx.Done():
		return nil
	case <-stop:
		return nil
	case err := <-subErr:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("jobs: subscription ended: %w", err)
	}
	// The one shape of timed work: pop what is due, queue it for the
	// workers, sleep on the engine's clock until the next is due or the
	// index changes.
	lctx, cancel := untilStop(ctx, stop)
	defer cancel()
	err := consumer.Loop(lctx, d.e.cfg.Clock, d.wake, subErr, func(context.Context) time.Time {
		ids, next := d.e.idx.popDue(d.e.now())
		d.hand(ids)
		return next
	})
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return fmt.Errorf("jobs: subscription ended: %w", err)
	}
	d.attempts.Wait() // stopped
	return nil
}

// hand queues due jobs for the workers.
func (d *dispatcher) hand(ids []string) {
	if len(ids) == 0 {
		return
	}
	d.mu.Lock()
	d.queue = append(d.queue, ids...)
	d.mu.Unlock()
	select {
	case d.ready <- struct{}{}:
	default:
	}
}

// take waits for a queued job; false when ctx ended first.
func (d *dispatcher) take(ctx context.Context) (string, bool) {
	for {
		d.mu.Lock()
		if len(d.queue) > 0 {
			id := d.queue[0]
			d.queue = d.queue[1:]
			more := len(d.queue) > 0
			d.mu.Unlock()
			if more { // pass the signal on to the next idle worker
				select {
				case d.ready <- struct{}{}:
				default:
				}
			}
			return id, true
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-d.ready:
		}
	}
}

// worker claims and runs the jobs handed out by run.
func (d *dispatcher) worker(ctx context.Context, n int) {
	actor := fmt.Sprintf("worker:%s/%s/%d", d.e.cfg.WorkerID, d.e.nonce, n)
	for {
		id, ok := d.take(ctx)
		if !ok {
			return
		}
		d.runJob(ctx, actor, id)
	}
}

// fence cancels the local attempt of the event's job if someone else wrote
// the event after the claim. Events up to the claim are history the index
// may still be catching up on; they fence nothing. Called by the index for
// every job event it folds.
func (d *dispatcher) fence(ev events.RecordedEvent) {
	d.mu.Lock()
	a := d.local[ev.Stream[len(events.JobStreamPrefix):]]
	d.mu.Unlock()
	if a == nil || ev.Meta.Actor == a.actor {
		return
	}
	if base := a.base.Load(); base != 0 && ev.Revision >= base {
		a.cancel(errFenced)
	}
}

// stop makes the dispatcher start no more attempts and cancels the running
// ones with the shutdown cause (each ends JobTimedOut{deadline:
// "shutdown"}, resumable).
func (d *dispatcher) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopping = true
	for _, a := range d.local {
		a.cancel(errShutdown)
	}
}

// drain makes the dispatcher claim no new job; running attempts go on.
func (d *dispatcher) drain() {
	d.mu.Lock()
	d.draining = true
	d.mu.Unlock()
}

// runJob claims job id and, if this worker won, runs the attempt to its end.
func (d *dispatcher) runJob(ctx context.Context, actor, id string) {
	e := d.e
	a := &attempt{e: e, actor: actor}
	a.ctx, a.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	defer a.cancel(nil)
	d.mu.Lock()
	if d.stopping || d.draining || d.local[id] != nil {
		d.mu.Unlock()
		return
	}
	d.local[id] = a
	d.attempts.Add(1)
	d.mu.Unlock()
	e.idx.pin(id)
	defer func() {
		d.mu.Lock()
		delete(d.local, id)
		d.mu.Unlock()
		e.idx.requeue(id) // resumed while this attempt was still ending
		e.idx.unpin(id)
		d.attempts.Done()
	}()
	if !e.claim(ctx, a, id) {
		return
	}
	// From here on the attempt is the job's fence holder until it appends a
	// terminal event or is fenced.
	stop := context.AfterFunc(ctx, func() { a.cancel(errShutdown) })
	defer stop()
	a.run()
}

// claim appends JobClaimed with the job stream's expected revision: exactly
// one claimer wins, against other claimers and a person's cancel (both
// conditional appends on the job stream). Only a queued job whose grace
// has passed and whose slot lock is for its current run is claimed. If the
// job stream does not hold the run's first event yet (the acceptance is
// on the slot only), the claim writes it, in the same append.
func (e *Engine) claim(ctx context.Context, a *attempt, id string) bool {
	indexed, ok := e.idx.job(id)
	if !ok {
		return false
	}
	j, err := slots.LoadJob(ctx, e.store, id)
	if err != nil {
		return false
	}
	st, err := e.slots.Load(ctx, indexed.Queued.Slot)
	if err != nil {
		return false
	}
	slots.AcceptFrom(&j, &st)
	if j.Status != events.StatusQueued || j.NotBefore.After(e.now()) || !st.LockedFor(&j) {
		return false
	}
	header, exp := j.Header, j.Expected()
	a.job, a.rev = j, j.Revision
	claimRev := j.Revision + 1 + uint64(len(header))
	if !j.Written {
		claimRev = uint64(len(header))
	}
	// From the revision after the claim on, any event not written by this
	// attempt fences it. Zero means "not claimed yet".
	a.base.Store(claimRev + 1)
	a.n = j.Attempt + 1
	lease := e.now().Add(e.cfg.Lease)
	a.leaseUntil.Store(lease.UnixNano())
	a.log = e.log.With("job", id, "kind", j.Queued.Kind, "slot", j.Queued.Slot, "attempt", a.n, "correlation_id", j.QueuedMeta.CorrelationID)
	// A claim that takes longer than the lease it asks for is worthless:
	// the attempt would start with its lease already over.
	cctx, cancel := clock.WithTimeout(ctx, e.cfg.Clock, e.cfg.Lease)
	claimed := events.JobClaimed{JobID: id, Worker: a.actor, Attempt: a.n, LeaseUntil: lease}
	err = a.appendAt(cctx, &exp, header, claimed)
	cancel()
	if err != nil {
		if !errors.Is(err, errFenced) {
			e.log.WarnContext(ctx, "claim failed", "job", id, "err", err)
		}
		return false
	}
	// The attempt's copy of the job follows the claim through the one fold
	// (what this process just encoded decodes).
	for _, d := range header {
		_ = a.job.Record(d)
	}
	_ = a.job.Record(events.New(claimed, a.meta()))
	a.log.Info("job claimed", "lease_until", lease)
	return true
}
