package jobs

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/retry"
	"github.com/slotkeeper/slotkeeper/events"
)

// Waiting on the provider (issue 32). A deployment queues, builds and
// starts for minutes (real builds take 1–40; Coolify's own deployment
// timeout is 3,600 s), a new database starts, a queued delete is
// confirmed: these are waits, not calls. The step deadline (--step-timeout)
// bounds Slotkeeper's own calls — a request that hangs — and the job
// deadline an attempt's own work; neither says anything about how long
// Coolify's build queue is. So a wait sets both aside and has a bound of
// its own (the template's deploy_timeout, Coolify's 3,600 s by default);
// when the wait ends, the step gets a fresh step deadline and the job
// deadline moves by the time waited. Everything else is as for any call:
// the lease is renewed all along (the renewer runs for the whole
// attempt), a cancel or a fence ends the attempt's context and with it the
// wait at once, and what the wait is for is recorded in the log before it
// begins, so a later attempt follows it instead of starting another.

// errWaitBound ends a wait's context when its own bound passed.
var errWaitBound = errors.New("jobs: the wait's own bound passed")

// Polling while waiting: from waitPollFirst, doubling up to waitPollMax
// (back to the first at each change of phase, when the next change tends
// to come soon). At most one request per poll, so a 60-second build costs
// about seven and an hour's queue about 240.
var (
	waitPollFirst = time.Second
	waitPollMax   = 15 * time.Second
)

// settleAfterDeploy is how long, once a deployment finished, the
// application may read exited, restarting or unhealthy before that is its
// answer: Coolify learns its containers' state from a periodic check
// (GetContainersStatus), so the first reads after a deployment can still
// be the old container's.
var settleAfterDeploy = 3 * time.Minute

// dbStartGrace is how long a new database may read "exited" — the row's
// default until its start ran — before that is taken as a failed start
// (StartPostgresql.php:221-230: Coolify does not retry). It runs from the
// database's create, so a later attempt does not give it a second grace.
var dbStartGrace = 5 * time.Minute

// queuedDeleteBound bounds waiting for a queued delete's confirmation:
// above the Coolify client's own (coolify.ConfirmTotal, Coolify's longest
// stop grace period plus a minute), which answers CodeNotConfirmed first.
const queuedDeleteBound = 3720 * time.Second

// suspendDeadlines sets the step and job deadlines aside for a wait of at
// most bound; the returned function puts them back: a fresh step
// deadline, and the job deadline moved by the time waited.
func (a *attempt) suspendDeadlines(bound time.Duration) (resume func()) {
	start := a.e.now()
	a.waitUntil = start.Add(bound)
	slack := bound + a.e.cfg.StepTimeout
	if a.stepTimer != nil {
		a.stepTimer.Reset(slack)
	}
	if a.jobTimer != nil {
		a.jobTimer.Reset(a.jobDeadline.Sub(start) + slack)
	}
	done := false
	return func() {
		if done {
			return
		}
		done = true
		a.waitUntil = time.Time{}
		now := a.e.now()
		a.jobDeadline = a.jobDeadline.Add(now.Sub(start))
		if a.jobTimer != nil {
			a.jobTimer.Reset(a.jobDeadline.Sub(now))
		}
		if a.stepTimer != nil {
			a.stepTimer.Reset(a.e.cfg.StepTimeout)
		}
	}
}

// boundEachRequest gives each provider request made with ctx the step
// deadline while a wait has set it aside (a queued delete's confirmation:
// the client's polls run inside the delete call, out of the poller's
// reach). Without it a confirmation GET that hung held the attempt until
// the wait's own bound, an hour, instead of the step deadline
// (TestHungDeleteConfirmationEndsAtTheStepDeadline, found by
// TestRandomFaultSchedules, seed 8). Between requests the wait's slack is
// back.
func (a *attempt) boundEachRequest(ctx context.Context) context.Context {
	return providers.WithRequestHook(ctx, func() func() {
		if a.waitUntil.IsZero() || a.stepTimer == nil {
			return func() {}
		}
		a.stepTimer.Reset(a.e.cfg.StepTimeout)
		return func() {
			if !a.waitUntil.IsZero() {
				a.stepTimer.Reset(max(a.waitUntil.Sub(a.e.now()), 0) + a.e.cfg.StepTimeout)
			}
		}
	})
}

// waiting runs f, a wait on the provider, with the deadlines set aside and
// under bound: f's context ends with errWaitBound when bound passes (the
// caller turns it into an honest failure), and with the attempt's cause on
// a cancel, a fence or the lease's end.
func (a *attempt) waiting(ctx context.Context, bound time.Duration, f func(ctx context.Context) error) error {
	resume := a.suspendDeadlines(bound)
	defer resume()
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := clock.AfterFunc(a.e.cfg.Clock, bound, func() { cancel(errWaitBound) })
	defer t.Stop()
	err := f(wctx)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if wctx.Err() != nil && errors.Is(context.Cause(wctx), errWaitBound) {
		return errWaitBound
	}
	return err
}

// poller paces one wait's requests and records its phases.
type poller struct {
	a     *attempt
	waits *retry.Waits
	last  events.WaitPhase // the phase recorded last
}

func (a *attempt) newPoller() *poller {
	return &poller{a: a, waits: retry.Backoff{Initial: waitPollFirst, Max: waitPollMax}.Start(a.e.cfg.Clock)}
}

// pause waits before the next poll; it returns the context's cause when
// the wait must end (a cancel makes no further request).
func (p *poller) pause(ctx context.Context) error {
	if p.waits.Wait(ctx) != nil {
		return context.Cause(ctx)
	}
	return nil
}

// phase records ph when it differs from the last recorded phase (its
// phase, its place in the queue or Coolify's word for it); Since is kept
// from the last record while the phase stays.
func (p *poller) phase(ctx context.Context, ph events.WaitPhase) error {
	l := p.last
	if l.Phase == ph.Phase && l.Ahead == ph.Ahead && l.Building == ph.Building && l.Status == ph.Status &&
		l.DeploymentUUID == ph.DeploymentUUID && l.DBUUID == ph.DBUUID {
		return nil
	}
	a := p.a
	ph.JobID, ph.Step, ph.Attempt = a.job.ID, a.step, a.n
	if l.Phase == ph.Phase && l.DeploymentUUID == ph.DeploymentUUID && l.DBUUID == ph.DBUUID {
		ph.Since = l.Since
	} else {
		ph.Since = a.e.now()
		p.waits.Reset()
	}
	if err := a.append(ctx, ph); err != nil {
		return err
	}
	p.last = ph
	a.log.Debug("waiting", "phase", ph.Phase, "deployment", ph.DeploymentUUID, "db", ph.DBUUID, "ahead", ph.Ahead, "status", ph.Status)
	return nil
}

// do makes one request of the wait under the step deadline: the wait sets
// the deadline aside for the provider's queue, never for a request that
// hangs. A request that takes the whole step deadline ends the attempt as
// any call would (errStepDeadline: JobTimedOut, the step uncertain).
func (p *poller) do(ctx context.Context, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := clock.AfterFunc(p.a.e.cfg.Clock, p.a.e.cfg.StepTimeout, func() { cancel(errStepDeadline) })
	defer t.Stop()
	err := f(cctx)
	if ctx.Err() == nil && cctx.Err() != nil && errors.Is(context.Cause(cctx), errStepDeadline) {
		return errStepDeadline
	}
	return err
}

// queueFresh is how long one read of the servers' build queue (GET
// /deployments) serves every wait of the engine: eight resets queued
// behind one another cost one read per interval, not eight.
var queueFresh = 5 * time.Second

// sharedRead is one read shared by concurrent readers: the first reader
// makes it, the others wait for its answer (or their context's end), and a
// good answer serves every reader for a while. A failed read is not kept.
type sharedRead[T any] struct {
	mu   sync.Mutex
	at   time.Time
	val  T
	ok   bool
	wait chan struct{} // closed when the read in flight ends
}

// get answers a read no older than fresh, or makes one with fetch. The read
// runs under the context (and names the job) of the reader that made it.
func (s *sharedRead[T]) get(ctx context.Context, now func() time.Time, fresh time.Duration, fetch func(context.Context) (T, error)) (T, error) {
	for {
		s.mu.Lock()
		if s.wait == nil && s.ok && now().Sub(s.at) < fresh {
			v := s.val
			s.mu.Unlock()
			return v, nil
		}
		if w := s.wait; w != nil {
			s.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				var zero T
				return zero, context.Cause(ctx)
			}
		}
		w := make(chan struct{})
		s.wait = w
		s.mu.Unlock()
		v, err := fetch(ctx)
		s.mu.Lock()
		s.wait = nil
		if err == nil {
			s.val, s.at, s.ok = v, now(), true
		}
		s.mu.Unlock()
		close(w)
		return v, err
	}
}

// transient: a read failure worth polling through (the wait's bound
// bounds them); a definite refusal or a cancel is not.
func transient(err error) bool {
	if errors.Is(err, errStepDeadline) {
		return false
	}
	pe, ok := providers.AsError(err)
	return ok && pe.Retryable() && pe.Code != providers.CodeCanceled
}
