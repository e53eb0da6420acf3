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
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
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
	Clock     slots.Clock
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
		c.Clock = slots.SystemClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Engine claims and runs jobs. Create it with NewEngine, start it with Run,
// end it with Stop (or by cancelling Run's context, which is abrupt).
type Engine struct {
	store events.Store
	deps  Deps
	cfg   Config
	log   *slog.Logger
	slots *slots.SlotCache

	mu       sync.Mutex
	jobs     map[string]*slots.JobState
	slotSt   map[string]*slots.SlotState
	due      dueHeap             // queued jobs by NotBefore
	active   map[string]bool     // jobs the log shows running
	ended    map[string]bool     // terminal jobs whose slot lock is still held
	local    map[string]*attempt // jobs this engine is claiming or running
	busy     map[string]bool     // maintenance (rescue, release) in progress
	ready    []string            // due jobs waiting for a worker
	stopping bool
	// applied is the position of the last event the index folded;
	// appliedCh is closed (and replaced) whenever it moves.
	applied   events.Position
	appliedCh chan struct{}

	wake     chan struct{}
	work     chan string
	stopCh   chan struct{}
	nonce    string // tells this engine's attempts from another's with the same WorkerID
	stopOnce sync.Once
	running  atomic.Bool
	attempts sync.WaitGroup
	maint    sync.WaitGroup
	done     chan struct{}
}

// NewEngine returns an engine that runs jobs of store with deps.
func NewEngine(store events.Store, deps Deps, cfg Config) *Engine {
	cfg.defaults()
	if cfg.SlotCache == nil || cfg.SlotCache.Store() != store {
		cfg.SlotCache = slots.NewSlotCache(store, 0)
	}
	return &Engine{
		store: store, deps: deps, cfg: cfg, slots: cfg.SlotCache,
		log:       cfg.Logger.With("worker", cfg.WorkerID),
		jobs:      map[string]*slots.JobState{},
		slotSt:    map[string]*slots.SlotState{},
		active:    map[string]bool{},
		ended:     map[string]bool{},
		local:     map[string]*attempt{},
		busy:      map[string]bool{},
		appliedCh: make(chan struct{}),
		nonce:     uuid.NewString()[:8],
		wake:      make(chan struct{}, 1),
		work:      make(chan string),
		stopCh:    make(chan struct{}),
		done:      make(chan struct{}),
	}
}

func (e *Engine) now() time.Time { return e.cfg.Clock.Now().UTC() }

func (e *Engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

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
	go func() {
		subErr <- e.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStreamPrefix, events.SlotStreamPrefix}}, e.apply)
	}()
	var workers sync.WaitGroup
	for i := 0; i < e.cfg.Workers; i++ {
		workers.Add(1)
		go func(n int) {
			defer workers.Done()
			e.worker(ctx, n)
		}(i)
	}
	err := e.loop(ctx, subErr)
	cancel()
	workers.Wait()
	e.attempts.Wait()
	e.maint.Wait()
	return err
}

// Stop stops claiming, cancels every running attempt (each ends with
// JobTimedOut{deadline: "shutdown"} and releases its slot, so it can be
// resumed), waits for them and for Run to return, or until ctx is done.
func (e *Engine) Stop(ctx context.Context) error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopping = true
		for _, a := range e.local {
			a.cancel(errShutdown)
		}
		e.mu.Unlock()
		close(e.stopCh)
	})
	if !e.running.Load() {
		return nil // never started; a later Run returns at once
	}
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// apply folds one event into the index and fences local attempts.
func (e *Engine) apply(ctx context.Context, ev events.RecordedEvent) error {
	if id := e.missing(ev); id != "" {
		// A finished job the index forgot (see forget) is back: a resume.
		// Fold its stream as it stood before this event, outside the
		// lock (apply is the only writer of e.jobs, so no one races us).
		j, err := e.loadBefore(ctx, id, ev)
		if err != nil {
			return fmt.Errorf("jobs: reload job %s: %w", id, err)
		}
		e.mu.Lock()
		if e.jobs[id] == nil && j.Exists {
			e.jobs[id] = &j
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.poke()
	defer e.markApplied(ev.Position)
	if name, ok := strings.CutPrefix(ev.Stream, events.SlotStreamPrefix); ok {
		st := e.slotSt[name]
		if st == nil {
			st = &slots.SlotState{Name: name}
			e.slotSt[name] = st
		}
		if err := st.Apply(ev); err != nil {
			e.log.Error("undecodable slot event skipped", "stream", ev.Stream, "rev", ev.Revision, "err", err)
			return nil
		}
		switch ev.Type {
		case "JobAccepted":
			e.accepted(st.Lock, ev.Meta)
		case "JobReleased":
			for id := range e.ended {
				if j := e.jobs[id]; j != nil && j.Queued.Slot == name && st.LockJob != id {
					delete(e.ended, id)
					e.forget(id)
				}
			}
			if p, err := events.Decode(ev); err == nil {
				e.forget(p.(events.JobReleased).JobID)
			}
		}
		return nil
	}
	id := strings.TrimPrefix(ev.Stream, events.JobStreamPrefix)
	j := e.jobs[id]
	if j == nil {
		j = &slots.JobState{ID: id}
		e.jobs[id] = j
	}
	if j.Written && ev.Revision <= j.Revision {
		return nil // folded already, by a reload from the stream
	}
	if err := j.Apply(ev); err != nil {
		e.log.Error("undecodable job event skipped", "stream", ev.Stream, "rev", ev.Revision, "err", err)
		return nil
	}
	if a := e.local[id]; a != nil && ev.Meta.Actor != a.actor {
		// Someone else wrote to the job after the claim: the attempt is
		// fenced. Cancel its context now so the in-flight call is aborted,
		// not finished. Events up to the claim's base revision are history
		// the index may still be catching up on; they fence nothing.
		if base := a.base.Load(); base != 0 && ev.Revision >= base {
			a.cancel(errFenced)
		}
	}
	switch {
	case ev.Type == "JobQueued" || ev.Type == "JobResumed":
		delete(e.ended, id) // a resume that landed: the lock is its again
		heap.Push(&e.due, dueItem{id: id, at: j.NotBefore})
	case ev.Type == "JobClaimed":
		e.active[id] = true
	case slots.IsTerminal(ev.Type):
		delete(e.active, id)
		if st := e.slotSt[j.Queued.Slot]; st != nil && st.LockedFor(j) {
			e.ended[id] = true
		}
		e.forget(id)
	}
	return nil
}

// accepted folds a slot's JobAccepted into the job it accepts. A
// one-append acceptance (Run > 0) queues the job from the lock alone (its
// job stream may not exist yet); an old-format one is followed by the
// command's JobQueued or JobResumed on the job stream, and until that lands
// a resumed job is terminal under a held lock (released if it never does).
// Callers hold e.mu.
func (e *Engine) accepted(acc events.JobAccepted, meta events.Metadata) {
	j := e.jobs[acc.JobID]
	if j == nil && acc.Run == 1 {
		j = &slots.JobState{ID: acc.JobID}
		e.jobs[acc.JobID] = j
	}
	switch {
	case j == nil:
	case acc.Run > 0:
		before := j.Run()
		j.Accept(acc, meta)
		if j.Run() > before {
			delete(e.ended, j.ID)
			heap.Push(&e.due, dueItem{id: j.ID, at: j.NotBefore})
		}
	case j.Terminal():
		e.ended[j.ID] = true
	}
}

// forget drops a finished job from the index (DESIGN.md invariant 14:
// finished jobs leave memory): it has ended, its slot's lock does not name
// it (released, or never taken), and nothing in this engine works on it (no
// local attempt, no maintenance task, no rescue or release pending).
// A failed, timed-out or abandoned job can still be resumed: the resume's
// JobAccepted (or any later event of the job) makes apply fold the job again
// from its stream (loadBefore). Callers hold e.mu.
func (e *Engine) forget(id string) {
	j := e.jobs[id]
	if j == nil || !j.Terminal() || e.local[id] != nil || e.busy[id] || e.active[id] || e.ended[id] {
		return
	}
	if st := e.slotSt[j.Queued.Slot]; st != nil && st.LockJob == id {
		return
	}
	delete(e.jobs, id)
}

// markApplied records that the index folded everything up to pos. Callers
// hold e.mu.
func (e *Engine) markApplied(pos events.Position) {
	if pos > e.applied {
		e.applied = pos
		close(e.appliedCh)
		e.appliedCh = make(chan struct{})
	}
}

// WaitApplied blocks until the engine's index has folded every job and slot
// event up to position pos (as SubscribeAll delivers them), or ctx ends. pos
// must be the position of a job or slot event (the engine sees no others),
// e.g. the store's head when only those were written.
func (e *Engine) WaitApplied(ctx context.Context, pos events.Position) error {
	for {
		e.mu.Lock()
		done, ch := e.applied >= pos, e.appliedCh
		e.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// IndexedJobs is how many jobs the engine's index holds: queued, running,
// and ended ones whose lock or maintenance is still pending. Finished jobs
// leave it (see forget), so it does not grow with history.
func (e *Engine) IndexedJobs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.jobs)
}

// missing names the job ev concerns if the index must fold it from its
// stream first: a job event after the job's first, or a resume's
// JobAccepted, for a job the index does not hold (it forgot it).
func (e *Engine) missing(ev events.RecordedEvent) string {
	var id string
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		if ev.Type != "JobAccepted" {
			return ""
		}
		p, err := events.Decode(ev)
		if err != nil || !p.(events.JobAccepted).Resumed {
			return ""
		}
		id = p.(events.JobAccepted).JobID
	case ev.Revision > 0:
		id = strings.TrimPrefix(ev.Stream, events.JobStreamPrefix)
	default:
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.jobs[id] != nil {
		return ""
	}
	return id
}

// loadBefore folds job id's stream as the subscription has delivered it when
// it delivers ev: the events before ev in the global order.
func (e *Engine) loadBefore(ctx context.Context, id string, ev events.RecordedEvent) (slots.JobState, error) {
	j := slots.JobState{ID: id}
	evs, err := e.store.ReadStream(ctx, events.JobStream(id), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return j, nil
	}
	if err != nil {
		return j, err
	}
	n := 0
	for _, x := range evs {
		if x.Position >= ev.Position {
			break
		}
		if err := j.Apply(x); err != nil {
			e.log.Error("undecodable job event skipped", "stream", x.Stream, "rev", x.Revision, "err", err)
		}
		n++
	}
	if ev.Stream == events.JobStream(id) && uint64(n) != ev.Revision {
		// ReadStream lagging behind the subscription (a known boltstore
		// limit): the fold misses events; every decision re-reads the
		// stream before it appends, so this only delays work.
		e.log.Warn("reloaded job is missing events", "job", id, "read", n, "want", ev.Revision)
	}
	return j, nil
}

// loop dispatches due jobs to workers and runs maintenance, waking on index
// changes and on one timer set to the next moment something falls due.
func (e *Engine) loop(ctx context.Context, subErr <-chan error) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := e.tick(ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(e.now()), time.Millisecond)
		}
		timer.Reset(wait)
		var work chan string
		var head string
		e.mu.Lock()
		if len(e.ready) > 0 && !e.stopping {
			work, head = e.work, e.ready[0]
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-e.stopCh:
			e.attempts.Wait()
			return nil
		case err := <-subErr:
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("jobs: subscription ended: %w", err)
		case work <- head:
			e.mu.Lock()
			e.ready = e.ready[1:]
			e.mu.Unlock()
		case <-e.wake:
		case <-timer.C:
		}
	}
}

// tick moves due jobs to the ready list and starts maintenance that fell
// due. It returns when it next needs to run (zero: only on a wake).
func (e *Engine) tick(ctx context.Context) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	var next time.Time
	soon := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for e.due.Len() > 0 {
		top := e.due[0]
		if top.at.After(now) {
			soon(top.at)
			break
		}
		heap.Pop(&e.due)
		j := e.jobs[top.id]
		if j == nil || j.Status != slots.StatusQueued || e.local[top.id] != nil {
			continue
		}
		if !e.lockedFor(j) {
			continue // only a job whose lock is for its current run is claimed
		}
		e.ready = append(e.ready, top.id)
	}
	// Rescue: attempts whose lease expired and that are not ours.
	for id := range e.active {
		j := e.jobs[id]
		if e.local[id] != nil || e.busy[id] {
			continue
		}
		at := j.LeaseUntil.Add(e.cfg.RescueGrace)
		if at.After(now) {
			soon(at)
			continue
		}
		e.spawn(ctx, id, func(ctx context.Context) { e.rescue(ctx, id) })
	}
	// Release: terminal jobs still holding their slot's lock.
	for id := range e.ended {
		j := e.jobs[id]
		if !j.Terminal() {
			delete(e.ended, id)
			e.forget(id)
			continue
		}
		if e.local[id] != nil || e.busy[id] {
			continue
		}
		at := j.LeaseUntil.Add(e.cfg.RescueGrace)
		if j.ByAttempt {
			at = j.TerminalAt.Add(e.cfg.RescueGrace)
		}
		if at.After(now) {
			soon(at)
			continue
		}
		e.spawn(ctx, id, func(ctx context.Context) { e.release(ctx, id) })
	}
	return next
}

// lockedFor reports whether j's slot lock is for j's current run.
func (e *Engine) lockedFor(j *slots.JobState) bool {
	st := e.slotSt[j.Queued.Slot]
	return st != nil && st.LockedFor(j)
}

// spawn runs a maintenance task for a job unless one is running. Callers
// hold e.mu.
func (e *Engine) spawn(ctx context.Context, id string, f func(context.Context)) {
	if e.stopping {
		return
	}
	e.busy[id] = true
	e.maint.Add(1)
	go func() {
		defer e.maint.Done()
		f(ctx)
		e.mu.Lock()
		delete(e.busy, id)
		e.forget(id)
		e.mu.Unlock()
		e.poke()
	}()
}

func (e *Engine) systemMeta(actor string, j *slots.JobState) events.Metadata {
	return events.Metadata{Actor: actor, CorrelationID: j.QueuedMeta.CorrelationID, Time: e.now()}
}

// rescue abandons an attempt whose lease expired (its worker crashed or lost
// the store). JobAbandoned is appended with the expected revision, which also
// fences the attempt should it still be alive.
func (e *Engine) rescue(ctx context.Context, id string) {
	j, err := slots.LoadJob(ctx, e.store, id)
	if err != nil || j.Status != slots.StatusRunning || j.LeaseUntil.Add(e.cfg.RescueGrace).After(e.now()) {
		return
	}
	meta := e.systemMeta(slots.ActorRescuer, &j)
	_, err = e.store.Append(ctx, events.JobStream(id), events.Exact(j.Revision), events.New(events.JobAbandoned{
		JobID: id, Attempt: j.Attempt, Worker: j.Worker, LeaseUntil: j.LeaseUntil,
		UncertainStep: j.InFlight, CompletedSteps: j.Completed(), Remaining: j.Remaining(),
	}, meta))
	if err != nil {
		if !errors.Is(err, events.ErrWrongRevision) {
			e.log.WarnContext(ctx, "rescue failed", "job", id, "err", err)
		}
		return
	}
	e.log.WarnContext(ctx, "attempt abandoned: lease expired", "job", id, "attempt", j.Attempt, "worker", j.Worker,
		"uncertain_step", j.InFlight, "correlation_id", meta.CorrelationID)
	if _, err := releaseLock(ctx, e.slots, &j, j.Run(), slots.StatusAbandoned, meta); err != nil {
		e.log.WarnContext(ctx, "release after abandon failed", "job", id, "err", err)
	}
}

// release frees the slot lock of a terminal job once no attempt can act.
func (e *Engine) release(ctx context.Context, id string) {
	j, err := slots.LoadJob(ctx, e.store, id)
	if err != nil || !j.Terminal() {
		return
	}
	st, err := e.slots.Load(ctx, j.Queued.Slot)
	if err != nil || !st.LockedFor(&j) {
		return // released, or a resume's lock for the next run
	}
	meta := e.systemMeta(slots.ActorRepair, &j)
	// For a succeeded job this also writes the slot event its success
	// implies, if its attempt died before its own release did.
	ok, err := releaseLock(ctx, e.slots, &j, j.Run(), j.Status, meta)
	if err != nil {
		e.log.WarnContext(ctx, "release failed", "job", id, "err", err)
		return
	}
	if ok {
		e.log.InfoContext(ctx, "slot lock released", "job", id, "slot", j.Queued.Slot, "outcome", j.Status, "correlation_id", meta.CorrelationID)
	}
}

// worker claims and runs jobs handed out by the loop.
func (e *Engine) worker(ctx context.Context, n int) {
	actor := fmt.Sprintf("worker:%s/%s/%d", e.cfg.WorkerID, e.nonce, n)
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-e.work:
			e.runJob(ctx, actor, id)
		}
	}
}

// dueHeap orders queued jobs by NotBefore.
type dueItem struct {
	id string
	at time.Time
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
