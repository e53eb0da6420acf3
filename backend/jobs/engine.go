// Package jobs runs Slotkeeper's irreversible multi-step jobs (reset,
// teardown, promote) so that nothing is ever done by an attempt the system
// already gave up on. An Engine learns of jobs from the log (SubscribeAll),
// claims each with a conditional append (exactly one claimer across
// goroutines and processes), and runs its steps fenced by the job stream's
// expected revision: StepStarted is appended before every outside call, and
// once anyone else appends to the job stream the attempt's context is
// cancelled and its next append fails. A rescuer abandons attempts whose
// lease expired, and a releaser frees slot locks after terminal events.
// docs/jobs.md has the design and the decisions.
package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Deps are the outside systems steps act on.
type Deps struct {
	PaaS    providers.PaaS
	GitHost providers.GitHost
	Pusher  providers.Pusher
	// RepoURL returns a repository's clone URL (no credentials).
	RepoURL func(events.RepoRef) string
}

// Config tunes an Engine. Zero values pick the defaults noted.
type Config struct {
	// Workers is how many attempts run at once in this engine. Default 4.
	Workers int
	// WorkerID names this engine in JobClaimed.Worker. Default hostname:pid.
	WorkerID string
	// StepTimeout bounds one step, JobTimeout one attempt. Defaults 2 min
	// and 15 min.
	StepTimeout time.Duration
	JobTimeout  time.Duration
	// Lease is how long a claim or renewal holds the job; the attempt renews
	// every RenewEvery (default, and whenever it is not below Lease:
	// Lease/3). The lease is the attempt's deadline: its context ends when
	// the lease ends unless a renewal landed. Default Lease 30 s.
	Lease      time.Duration
	RenewEvery time.Duration
	// RescueGrace is waited after a lease expired before the rescuer
	// abandons the attempt or a lock is released on its behalf, covering
	// the abort of a call that was in flight. Default Lease/5.
	RescueGrace time.Duration
	// SlotCache folds slots for claims, steps and releases; pass the
	// commands' (slots.Config.SlotCache) to share one. Nil: the engine
	// makes its own.
	SlotCache *slots.SlotCache
	Clock     clock.Clock
	Logger    *slog.Logger
}

func (c *Config) defaults() {
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.WorkerID == "" {
		h, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s:%d", h, os.Getpid())
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 2 * time.Minute
	}
	if c.JobTimeout <= 0 {
		c.JobTimeout = 15 * time.Minute
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.RenewEvery <= 0 || c.RenewEvery >= c.Lease {
		c.RenewEvery = c.Lease / 3
	}
	if c.RescueGrace <= 0 {
		c.RescueGrace = c.Lease / 5
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Engine claims and runs jobs. It is four small pieces, each readable
// alone (docs/jobs.md, "Engine pieces"): the index folds the log
// (index.go), the dispatcher hands due jobs to workers that claim and run
// them (dispatcher.go, attempt.go, steps.go), the rescuer abandons expired
// leases (rescuer.go) and the releaser frees locks after terminal events
// written by others (releaser.go). Only the index reads the log; the others
// ask it what is due and sleep on one timer each until then. Create it with
// NewEngine, start it with Run, end it with Stop (or by cancelling Run's
// context, which is abrupt).
type Engine struct {
	store events.Store
	deps  Deps
	cfg   Config
	log   *slog.Logger
	slots *slots.SlotCache
	nonce string // tells this engine's attempts from another's with the same WorkerID

	idx        *index
	dispatcher *dispatcher
	rescuer    *maintainer
	releaser   *maintainer
	// releases are the attempts' own lock releases, run beside the worker.
	releases sync.WaitGroup
	// queue is the provider's build queue as the waits read it, shared by
	// every attempt of this engine (wait.go).
	queue sharedRead[[]providers.Deployment]

	stopCh   chan struct{}
	stopOnce sync.Once
	running  atomic.Bool
	done     chan struct{}
}

// NewEngine returns an engine that runs jobs of store with deps.
func NewEngine(store events.Store, deps Deps, cfg Config) *Engine {
	cfg.defaults()
	if cfg.SlotCache == nil || cfg.SlotCache.Store() != store {
		cfg.SlotCache = slots.NewSlotCache(store, 0)
	}
	e := &Engine{
		store: store, deps: deps, cfg: cfg, slots: cfg.SlotCache,
		log:    cfg.Logger.With("worker", cfg.WorkerID),
		nonce:  uuid.NewString()[:8],
		stopCh: make(chan struct{}),
		done:   make(chan struct{}),
	}
	e.idx = newIndex(store, e.log)
	e.dispatcher = newDispatcher(e)
	e.idx.onJobEvent = e.dispatcher.fence
	e.rescuer = e.newRescuer()
	e.releaser = e.newReleaser()
	return e
}

func (e *Engine) now() time.Time { return e.cfg.Clock.Now().UTC() }

// Run consumes the log and runs jobs until ctx is done or Stop is called. It
// returns nil after Stop or when ctx ends, and the subscription's error if
// the store fails. Either way running attempts are cancelled and each writes
// JobTimedOut{deadline: "shutdown"} (if the store still takes it; if not,
// the rescuer abandons them once their leases expire). Run may be called
// once.
func (e *Engine) Run(ctx context.Context) error {
	e.running.Store(true)
	defer close(e.done)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	subErr := make(chan error, 1)
	idxDone := make(chan struct{})
	go func() {
		defer close(idxDone)
		subErr <- e.idx.run(ctx)
	}()
	var loops sync.WaitGroup
	start := func(f func()) {
		loops.Add(1)
		go func() {
			defer loops.Done()
			f()
		}()
	}
	for i := 0; i < e.cfg.Workers; i++ {
		start(func() { e.dispatcher.worker(ctx, i) })
	}
	start(func() { e.rescuer.run(ctx, e.stopCh) })
	start(func() { e.releaser.run(ctx, e.stopCh) })
	err := e.dispatcher.run(ctx, e.stopCh, subErr)
	cancel()
	loops.Wait()
	e.dispatcher.attempts.Wait()
	e.rescuer.wait()
	e.releaser.wait()
	e.releases.Wait()
	<-idxDone // and its last checkpoint
	return err
}

// Drain makes the engine claim no new job from now on, while its running
// attempts go on to their ends: a process that is shutting down (SIGTERM,
// the drain delay before Stop) leaves new work to the others.
func (e *Engine) Drain() { e.dispatcher.drain() }

// Stop stops claiming, cancels every running attempt (each ends with
// JobTimedOut{deadline: "shutdown"} and releases its slot, so it can be
// resumed), waits for them and for Run to return (the index writes its
// checkpoint as it stops, so the next start folds only what comes after),
// or until ctx is done.
func (e *Engine) Stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		e.dispatcher.stop()
		e.rescuer.stop()
		e.releaser.stop()
		close(e.stopCh)
	})
	if !e.running.Load() {
		return nil // never started; a later Run returns at once
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// WaitApplied blocks until the engine's index has folded the log up to
// position pos (as SubscribeAll delivers it), or ctx ends.
func (e *Engine) WaitApplied(ctx context.Context, pos events.Position) error {
	return e.idx.r.WaitApplied(ctx, pos)
}

// IndexedJobs is how many jobs the engine's index holds: queued, running,
// and ended ones whose lock or maintenance is still pending. Finished jobs
// leave it (see index.forget), so it does not grow with history.
func (e *Engine) IndexedJobs() int { return e.idx.len() }

func (e *Engine) systemMeta(actor string, j *events.JobState) events.Metadata {
	return events.Metadata{Actor: actor, CorrelationID: j.QueuedMeta.CorrelationID, Time: e.now()}
}
