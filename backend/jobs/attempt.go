package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Causes of an attempt's context cancellation.
var (
	errFenced       = errors.New("jobs: fenced: someone else appended to the job stream")
	errStepDeadline = errors.New("jobs: step deadline passed")
	errJobDeadline  = errors.New("jobs: job deadline passed")
	errShutdown     = errors.New("jobs: worker shutting down")
	errLeaseLost    = errors.New("jobs: lease ended before it could be renewed")
)

// stepError is a step's definite or uncertain failure that ends the job as
// JobFailed (as opposed to a deadline or a fence).
type stepError struct {
	msg       string
	status    int
	retryable bool
	uncertain bool
	// code and args are the failure as data (events.Failure*), which the
	// dashboard words in the reader's language; msg stays the English
	// detail. Never a secret: ids, names and a provider's Code.
	code string
	args map[string]string
}

func (e *stepError) Error() string { return e.msg }

// failf is a failure of the engine's own check (events.FailureCheck).
func failf(format string, args ...any) error {
	return &stepError{msg: fmt.Sprintf(format, args...), code: events.FailureCheck}
}

// fromProvider turns a provider error into a step error.
func fromProvider(what string, err error) error {
	if pe, ok := providers.AsError(err); ok {
		provider, _, _ := strings.Cut(pe.Op, ".")
		return &stepError{msg: what + ": " + pe.Error(), status: pe.Status, retryable: pe.Retryable(), uncertain: pe.Uncertain,
			code: events.FailureProvider, args: map[string]string{"provider": provider, "problem": string(pe.Code), "target": pe.Resource}}
	}
	return &stepError{msg: what + ": " + err.Error(), retryable: true, uncertain: true, code: events.FailureInternal}
}

// attempt is one claim of a job by a worker goroutine. Every append it makes
// carries the revision it last wrote (the fence).
type attempt struct {
	e     *Engine
	actor string
	log   *slog.Logger

	mu     sync.Mutex // serialises appends (step runner and lease renewer)
	rev    events.Revision
	fenced bool
	unsure error         // an append's outcome is unknown: no further append (see appendAt)
	base   atomic.Uint64 // first revision after the claim event; 0 until the claim
	job    events.JobState
	n      int
	// leaseUntil is the end of the lease the log holds for this attempt
	// (UnixNano): the claim's, then each successful renewal's. The
	// attempt's context ends there (leaseTimer), whatever the store does.
	leaseUntil atomic.Int64
	leaseMu    sync.Mutex // guards leaseTimer; never held across an append
	leaseTimer *clock.Func

	ctx    context.Context
	cancel context.CancelCauseFunc
	step   string    // the step in progress
	stepAt time.Time // when it started

	// The step and job deadlines' timers, and when the job deadline falls:
	// a wait on the provider sets them aside (wait.go). Touched by the
	// step goroutine only.
	stepTimer, jobTimer *clock.Func
	jobDeadline         time.Time
	// waitUntil is the end of the wait's own bound while a wait has the
	// deadlines set aside (zero otherwise): boundEachRequest.
	waitUntil time.Time
}

func (a *attempt) meta() events.Metadata {
	return events.Metadata{Actor: a.actor, CorrelationID: a.job.QueuedMeta.CorrelationID, Time: a.e.now()}
}

// append writes evs with the attempt's revision. A wrong revision means the
// attempt was superseded: it is marked fenced, its context is cancelled, and
// errFenced is returned; it must make no further outside call.
func (a *attempt) append(ctx context.Context, evs ...events.Payload) error {
	return a.appendAt(ctx, nil, nil, evs...)
}

// appendAt is append with the expected revision given (nil: the attempt's
// own, a.rev) and events written before the attempt's own (the claim: the
// job stream's header).
func (a *attempt) appendAt(ctx context.Context, exp *events.ExpectedRevision, pre []events.EventData, evs ...events.Payload) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fenced {
		return errFenced
	}
	if a.unsure != nil {
		return a.unsure
	}
	want := events.Exact(a.rev)
	if exp != nil {
		want = *exp
	}
	data := append([]events.EventData(nil), pre...)
	m := a.meta()
	for _, p := range evs {
		data = append(data, events.New(p, m))
	}
	res, err := a.e.store.Append(ctx, events.JobStream(a.job.ID), want, data...)
	if errors.Is(err, events.ErrWrongRevision) {
		a.fenced = true
		a.cancel(errFenced)
		return errFenced
	}
	if errors.Is(err, events.ErrOutcomeUnknown) {
		// It may have landed (the store already re-sent it with the same
		// ids while it could), so a.rev may be stale: a later append on it
		// would be refused by this attempt's own event and read as a fence.
		// The attempt stops as on any store failure; the lease runs out and
		// the rescuer decides from the log.
		a.unsure = err
	}
	if err != nil {
		return err
	}
	a.rev = res.NextExpected
	return nil
}

// listOf makes one listing call (an application's env vars, its storages)
// through call, recorded as a StepStarted on application app named by code
// (events.NameListEnvs, NameListStorages) and its English name; verify
// marks a listing that confirms what the step did.
func listOf[T any](ctx context.Context, a *attempt, app, code string, verify bool, get func(context.Context, string) ([]T, error)) ([]T, error) {
	var out []T
	name := map[string]string{events.NameListEnvs: "list env vars", events.NameListStorages: "list storages", events.NameListTemplateEnvs: "list template env vars"}[code]
	err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: name, NameCode: code}, Verify: verify},
		func(ctx context.Context) error {
			var err error
			out, err = get(ctx, app)
			return err
		})
	return out, err
}

// call appends StepStarted (the fence check) and then makes one outside call
// with the step's context. No outside call happens without a StepStarted
// written by this attempt just before it.
func (a *attempt) call(ctx context.Context, st events.StepStarted, f func(context.Context) error) error {
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return err
	}
	st.JobID, st.Attempt = a.job.ID, a.n
	if st.Step == "" {
		st.Step = a.step
	}
	if err := a.append(ctx, st); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return f(ctx)
}

// run executes the job's remaining steps, then writes the terminal event
// and releases the slot lock.
func (a *attempt) run() {
	e := a.e
	jobTimer := clock.AfterFunc(e.cfg.Clock, e.cfg.JobTimeout, func() { a.cancel(errJobDeadline) })
	defer jobTimer.Stop()
	a.jobTimer, a.jobDeadline = jobTimer, e.now().Add(e.cfg.JobTimeout)
	// The lease is the attempt's deadline: its context ends when the lease
	// the log holds ends, unless a renewal moved it (renew resets the
	// timer). This holds even if the store hangs mid-renewal, since a
	// rescuer may act from then on.
	a.armLease()
	defer func() {
		a.leaseMu.Lock()
		a.leaseTimer.Stop()
		a.leaseMu.Unlock()
	}()
	// The renewal ticker is armed before the first step, so a step's
	// first outside call always finds it running (a test on a fake clock
	// relies on that).
	renewTick := e.cfg.Clock.NewTicker(e.cfg.RenewEvery)
	renewDone := make(chan struct{})
	go a.renew(renewTick, renewDone)

	kind := a.job.Queued.Kind
	var err error
	if events.Steps(kind, true) == nil {
		err = failf("unknown job kind %q", kind)
	}
	for _, name := range a.job.Queued.Steps {
		if err != nil {
			break
		}
		if a.job.Done[name] {
			continue
		}
		step := stepOf(kind, name)
		if step == nil {
			err = failf("job kind %s has no step %q", a.job.Queued.Kind, name)
			break
		}
		verify := a.job.InFlight == name
		err = a.runStep(name, step, verify)
	}
	// Stop renewing before the terminal event, so no LeaseRenewed follows it.
	a.cancel(nil)
	<-renewDone
	a.finish(err)
}

// runStep runs one step under the step deadline.
func (a *attempt) runStep(name string, step stepFunc, verify bool) error {
	// Every provider call of the step names the job attempt (User-Agent, X-Slotkeeper-Job).
	sctx, cancel := context.WithCancelCause(providers.WithCallTag(a.ctx, providers.CallTag{Job: a.job.ID, Attempt: a.n}))
	defer cancel(nil)
	t := clock.AfterFunc(a.e.cfg.Clock, a.e.cfg.StepTimeout, func() { cancel(errStepDeadline) })
	defer t.Stop()
	a.stepTimer = t
	a.mu.Lock()
	a.step, a.stepAt = name, a.e.now()
	a.mu.Unlock()
	a.log.Debug("step", "step", name, "verify", verify)
	res, err := step(sctx, a, verify)
	if err != nil {
		if cause := context.Cause(sctx); sctx.Err() != nil && cause != nil {
			return cause
		}
		// A verification that failed resolved nothing: what the earlier
		// attempt may have done (a create whose answer was lost) is as
		// unknown as before, so the step stays uncertain and the next run
		// verifies again. Before, a lookup refused during the verify (a
		// proxy's 404) recorded a definite failure; the next run created
		// again, met its own repository and failed "already exists" for
		// good (TestFailedVerifyKeepsTheStepUncertain, found by
		// TestRandomFaultSchedules). Verifying again is a read first, so
		// it is always safe.
		var se *stepError
		if verify && errors.As(err, &se) {
			se.uncertain = true
		}
		return err
	}
	if err := a.append(sctx, res); err != nil {
		if cause := context.Cause(sctx); sctx.Err() != nil && cause != nil {
			return cause
		}
		return err
	}
	// The attempt's copy of the job follows what it wrote through the one
	// fold: the next steps and the terminal event read it.
	if err := a.job.Record(events.New(res, a.meta())); err != nil {
		return err
	}
	a.step = ""
	return nil
}

// finish writes the attempt's terminal event (unless it was fenced) and, if
// it wrote one, releases the slot lock: the attempt has stopped calling out.
func (a *attempt) finish(err error) {
	e := a.e
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	inFlight := a.step
	completed, remaining := a.job.Completed(), a.job.Remaining()
	var evs []events.Payload
	outcome := ""
	var se *stepError
	switch {
	case err == nil:
		evs = append(evs, events.JobSucceeded{JobID: a.job.ID, Attempt: a.n})
		outcome = events.StatusSucceeded
	case errors.Is(err, errFenced), errors.Is(err, errLeaseLost):
		// Fenced, or the lease ended (a rescuer may be acting): the
		// attempt has no right to write an outcome. The rescuer's
		// JobAbandoned names the uncertain step.
		a.log.Warn("attempt stopped: fenced or lease over", "step", inFlight, "err", err)
		a.releaseIfEnded(ctx)
		return
	case errors.Is(err, errStepDeadline), errors.Is(err, errJobDeadline), errors.Is(err, errShutdown):
		deadline := "step"
		if errors.Is(err, errJobDeadline) {
			deadline = "job"
		} else if errors.Is(err, errShutdown) {
			deadline = "shutdown"
		}
		evs = append(evs, events.JobTimedOut{JobID: a.job.ID, Attempt: a.n, UncertainStep: inFlight, Deadline: deadline,
			CompletedSteps: completed, Remaining: remaining})
		outcome = events.StatusTimedOut
	case errors.As(err, &se):
		evs = append(evs, events.StepFailed{JobID: a.job.ID, Step: inFlight, Attempt: a.n, Error: se.msg,
			HTTPStatus: se.status, Retryable: se.retryable, Uncertain: se.uncertain, ErrorCode: se.code, ErrorArgs: se.args},
			events.JobFailed{JobID: a.job.ID, Attempt: a.n, Reason: se.msg, ReasonCode: se.code, ReasonArgs: se.args, FailedStep: inFlight,
				CompletedSteps: completed, Remaining: remaining})
		outcome = events.StatusFailed
	default:
		// The store failed under the attempt: we cannot record anything
		// reliably. Stop; the lease expires and the rescuer abandons the
		// job, naming the uncertain step.
		a.log.Error("attempt stopped: store error", "step", inFlight, "err", err)
		return
	}
	if err := a.append(ctx, evs...); err != nil {
		a.log.Warn("terminal event not written", "outcome", outcome, "err", err)
		if errors.Is(err, errFenced) {
			a.releaseIfEnded(ctx)
		}
		return
	}
	a.log.Info("job ended", "outcome", outcome, "uncertain_step", inFlight, "err", err)
	// The attempt has stopped calling out, so the lock may go now. The
	// release runs beside the worker, which takes its next job at once:
	// more appends in flight make bigger group commits.
	meta := a.meta()
	j := a.job
	e.releases.Add(1)
	go func() {
		defer e.releases.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// A success's slot event (SlotVacated, SlotRetired,
		// SlotPromoted) is written here, with the release: only now is
		// the success in the job stream, beyond any cancel's reach.
		if _, err := e.slots.ReleaseLock(ctx, &j, outcome, meta); err != nil {
			a.log.Warn("release failed; the engine will retry", "err", err)
		}
	}()
}

// releaseIfEnded frees the slot after a fenced attempt has stopped, when the
// event that fenced it was terminal (a person's cancel, the rescuer).
func (a *attempt) releaseIfEnded(ctx context.Context) {
	j, err := slots.LoadJob(ctx, a.e.store, a.job.ID)
	if err != nil || !j.Terminal() {
		return
	}
	m := a.meta()
	if _, err := a.e.slots.ReleaseLock(ctx, &j, j.Status, m); err != nil {
		a.log.Warn("release failed; the engine will retry", "err", err)
	}
}

// leaseLeft is the time until the attempt's lease ends.
func (a *attempt) leaseLeft() time.Duration {
	return time.Unix(0, a.leaseUntil.Load()).Sub(a.e.now())
}

// armLease sets the lease timer to fire when the lease ends.
func (a *attempt) armLease() {
	a.leaseMu.Lock()
	defer a.leaseMu.Unlock()
	if a.leaseTimer == nil {
		a.leaseTimer = clock.AfterFunc(a.e.cfg.Clock, a.leaseLeft(), a.leaseEnded)
		return
	}
	a.leaseTimer.Reset(a.leaseLeft())
}

// leaseEnded runs when the lease timer fires: unless a renewal has just
// moved the lease (then it re-arms), the attempt's context ends with
// errLeaseLost, aborting the in-flight call. It never waits for a.mu, which
// an append stuck in the store may hold.
func (a *attempt) leaseEnded() {
	if a.leaseLeft() > 0 {
		a.armLease()
		return
	}
	a.cancel(errLeaseLost)
}

// renew extends the lease on each tick of t (every RenewEvery). A renewal may take at most the
// time left on the current lease: a renewal that lands later is useless, as
// a rescuer may have acted. A conflict means the attempt was superseded:
// its context is cancelled at once. Whatever happens to the renewals, the
// lease timer ends the attempt's context when the lease ends.
func (a *attempt) renew(t clock.Ticker, done chan<- struct{}) {
	defer close(done)
	defer t.Stop()
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C():
		}
		left := a.leaseLeft()
		if left <= 0 {
			a.cancel(errLeaseLost)
			return
		}
		until := a.e.now().Add(a.e.cfg.Lease)
		ctx, cancel := clock.WithTimeout(a.ctx, a.e.cfg.Clock, left)
		err := a.append(ctx, events.LeaseRenewed{JobID: a.job.ID, Attempt: a.n, LeaseUntil: until})
		cancel()
		switch {
		case err == nil:
			a.leaseUntil.Store(until.UnixNano())
			a.armLease()
		case errors.Is(err, errFenced):
			return
		default:
			a.log.Warn("lease renewal failed", "lease_left", a.leaseLeft(), "err", err)
			if a.leaseLeft() <= 0 {
				a.cancel(errLeaseLost)
				return
			}
		}
	}
}
