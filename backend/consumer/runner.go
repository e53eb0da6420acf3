package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
)

// Fold is a consumer of the log as the Runner sees it: a pure fold of
// events into state, which it can write down (Snapshot) and take back
// (Restore). It does no I/O and takes no lock: the Runner calls it under
// its own lock (see Runner).
type Fold interface {
	// Name names the consumer: its checkpoints are on checkpoint-<Name>.
	Name() string
	// Version is the version of Snapshot's shape; a checkpoint of another
	// version is ignored and the log folded from 0.
	Version() int
	// Wants reports whether ev reaches Apply. Every event moves the
	// position, wanted or not, so the position follows the log's head.
	Wants(ev events.RecordedEvent) bool
	// Apply folds ev. An error parks ev (Health): it is skipped, logged
	// and listed, and the fold goes on (docs/events.md).
	Apply(ev events.RecordedEvent) error
	// Snapshot returns the state for a checkpoint, JSON-encodable. The
	// Runner encodes it before it lets go of the lock, so it may alias
	// the fold's own maps.
	Snapshot() (any, error)
	// Restore replaces the state by the one a checkpoint holds (JSON, as
	// Snapshot gave it). An error means the checkpoint cannot be used: the
	// fold must then be as it was (empty), and the Runner folds from 0.
	Restore(state []byte) error
}

// Preparer is a Fold that must read the store before it can apply some
// events (the jobs index reloads a job it forgot). Prepare runs before
// Apply, outside the Runner's lock, in the subscription's goroutine; it may
// take the lock through View or Update.
type Preparer interface {
	Prepare(ctx context.Context, ev events.RecordedEvent) error
}

// Marker is a Fold whose checkpoint may claim less than it applied: its
// effects finish after Apply (the notifier's deliveries), so a restart must
// read again from below the oldest unfinished one. Before each checkpoint
// the Runner asks Mark, under its read lock, which position to write
// (at most applied). A checkpoint held below applied does not count as
// saved: the next occasion (or the stop) tries again.
type Marker interface {
	Mark(applied events.Position) events.Position
}

// SavePolicy says when the Runner writes a checkpoint: after Every events
// folded if Gap passed since the last attempt (a catch-up of a million
// events writes a few, not a hundred), or once After passed and something
// was folded; and when it stops, if at least AtStop events were folded
// since the last one. Zero Every or After: never for that reason; zero
// AtStop: 1; a negative AtStop: no checkpoint at stop. Checkpoint events
// are never counted (counting them would make each one call for the next).
type SavePolicy struct {
	Every  int
	Gap    time.Duration
	After  time.Duration
	AtStop int
	// Clock times Gap and After (default clock.Real(): when to write is
	// the process's business, not the fold's time, so a test's fake
	// clock that jumps hours does not write a checkpoint per jump).
	Clock clock.Clock
}

// Options configure a Runner; zero values pick the defaults noted.
type Options struct {
	Save SavePolicy
	// Packed stores the state gzipped (Pack): for a fold whose JSON would
	// be too big for one event.
	Packed bool
	// Step, if set, is the consumer's timed work, "find what is due, act":
	// once the fold caught up, Run calls it after every folded event and
	// when the time it last returned comes (Loop), on Clock.
	Step func(ctx context.Context) (next time.Time)
	// Clock is the clock of Step's timer (default clock.Real()).
	Clock clock.Clock
	// Health parks what Apply refuses (nil: only logged).
	Health *Health
	// Stopping, if set, runs once the subscription ended and before the
	// checkpoint at stop: for a fold whose effects finish after Apply (the
	// notifier waits for its deliveries in flight, so the last checkpoint
	// says how far they got).
	Stopping func()
	Logger   *slog.Logger
}

// Runner runs one Fold: it owns the checkpoint load (an unusable or other-
// version checkpoint means folding from 0, and the log says why), the
// subscription from the checkpoint, catch-up detection, save timing, the
// checkpoint at stop, parking, waiting until a position is applied, the
// test signals (CaughtUp, Changed, Started) and the lock.
//
// The lock rule: the fold's state is guarded by the Runner's lock, and only
// by it. Apply, Restore and Snapshot run under it; everyone else reads the
// fold inside View and changes it inside Update. A fold has no mutex.
type Runner struct {
	store events.Store
	fold  Fold
	o     Options
	name  string

	mu sync.RWMutex
	// pos is the last event applied (or the checkpoint's); written under
	// mu, read without it (Position works inside View too).
	pos     atomic.Uint64
	changed chan struct{} // closed and replaced whenever pos moves or Update runs

	startMu sync.Mutex
	started bool
	from    events.Position
	why     string

	caughtUp     chan struct{}
	caughtUpOnce sync.Once
	wake         chan struct{}

	saveMu sync.Mutex // the saver, used by the subscriptions one event at a time
	saver  saver
}

// NewRunner returns a Runner of fold on store.
func NewRunner(store events.Store, fold Fold, o Options) *Runner {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Save.Clock == nil {
		o.Save.Clock = clock.Real()
	}
	r := &Runner{store: store, fold: fold, o: o, name: fold.Name(),
		changed: make(chan struct{}), caughtUp: make(chan struct{}), wake: make(chan struct{}, 1)}
	r.saver = saver{Log: store, Consumer: r.name, Version: fold.Version(), Every: o.Save.Every, Gap: o.Save.Gap,
		After: o.Save.After, Logger: o.Logger, Clock: o.Save.Clock, Snapshot: r.snapshot}
	return r
}

// View calls fn under the read lock: fn may read the fold, not change it.
func (r *Runner) View(fn func()) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn()
}

// Update calls fn under the lock, then wakes Step and whoever waits on
// Changed: for what changes the fold besides the log (the jobs engine's
// pins).
func (r *Runner) Update(fn func()) {
	r.mu.Lock()
	fn()
	r.signal()
	r.mu.Unlock()
	r.Wake()
}

// Wake makes Step run now (after a clock jump in tests).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Position is the position of the last event folded. Inside View it is
// the position of the state fn sees.
func (r *Runner) Position() events.Position { return events.Position(r.pos.Load()) }

// Changed returns a channel closed at the next event folded (or Update).
func (r *Runner) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// CaughtUp is closed once Run has folded the log up to its head as it was
// when Run started (from a checkpoint or from 0). It stays open if Run ends
// first.
func (r *Runner) CaughtUp() <-chan struct{} { return r.caughtUp }

// Started reports where the fold started (a checkpoint's position, or 0)
// and, if a checkpoint was ignored, why ("" if none was, or none existed).
// ok is false until Start (or Run, or Sync) loaded.
func (r *Runner) Started() (from events.Position, why string, ok bool) {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	return r.from, r.why, r.started
}

// WaitApplied blocks until the fold has applied pos or ctx ends.
func (r *Runner) WaitApplied(ctx context.Context, pos events.Position) error {
	for {
		r.mu.RLock()
		done, ch := r.Position() >= pos, r.changed
		r.mu.RUnlock()
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

// Start loads the newest usable checkpoint into the fold, once (later
// calls do nothing). Only a store that cannot be read is an error.
func (r *Runner) Start(ctx context.Context) error {
	r.startMu.Lock()
	defer r.startMu.Unlock()
	if r.started {
		return nil
	}
	pos, why, err := r.load(ctx)
	if err != nil {
		return fmt.Errorf("%s: read checkpoint: %w", r.name, err)
	}
	r.started, r.from, r.why = true, pos, why
	r.saveMu.Lock()
	r.saver.Start(pos)
	r.saveMu.Unlock()
	switch {
	case pos > 0:
		r.o.Logger.Info(r.name+": starting from checkpoint", "position", pos)
	case why != "":
		r.o.Logger.Warn(r.name+": checkpoint ignored, folding the log from the start", "why", why)
	}
	return nil
}

// load restores the newest checkpoint if it can be used; why says why one
// was not.
func (r *Runner) load(ctx context.Context) (events.Position, string, error) {
	var raw json.RawMessage
	pos, ok, why, err := LoadCheckpoint(ctx, r.store, r.name, r.fold.Version(), &raw)
	if err != nil || !ok {
		return 0, why, err
	}
	if r.o.Packed {
		var p Packed
		if err := json.Unmarshal(raw, &p); err != nil {
			return 0, "state is not packed: " + err.Error(), nil
		}
		raw = nil
		if err := p.Unpack(&raw); err != nil {
			return 0, "state does not unpack: " + err.Error(), nil
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.fold.Restore(raw); err != nil {
		return 0, "state cannot be restored: " + err.Error(), nil
	}
	r.pos.Store(uint64(pos))
	r.signal()
	return pos, "", nil
}

// Run starts (Start), follows the log from the fold's position until ctx
// ends, and writes a last checkpoint when it stops. With Step it runs the
// timed work once caught up. It returns nil when ctx ends, and the
// subscription's error if that fails.
func (r *Runner) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	head, err := r.store.Head(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%s: read the log's head: %w", r.name, err)
	}
	from := r.Position()
	if from >= head {
		r.markCaughtUp()
	}
	subErr := make(chan error, 1)
	subDone := make(chan struct{})
	defer func() {
		// The last checkpoint, once the subscription stopped folding; it
		// outlives ctx, briefly.
		<-subDone
		if r.o.Stopping != nil {
			r.o.Stopping()
		}
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		r.saveMu.Lock()
		r.saver.Stop(c, r.o.Save.AtStop)
		r.saveMu.Unlock()
	}()
	go func() {
		defer close(subDone)
		// Unfiltered, so the position follows the log's head (WaitApplied
		// works for any position, and catching up is visible).
		subErr <- r.store.SubscribeAll(ctx, from, events.Filter{}, r.handle(head, true))
	}()
	quiet := func(err error) error {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	if r.o.Step == nil {
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			return quiet(err)
		}
	}
	// Caught up first, so the first decisions see the whole log and not a
	// checkpoint's older picture.
	select {
	case <-r.caughtUp:
	case <-ctx.Done():
		return nil
	case err := <-subErr:
		return quiet(err)
	}
	return Loop(ctx, r.o.Clock, r.wake, subErr, r.o.Step)
}

// Sync folds the log up to its head as of the call (Start first): for a
// consumer folded on demand (the slot-owner index) and for tests. It may
// run beside Run: an event is applied once, by whichever gets it first.
// It writes checkpoints as the policy says, but none at its end.
func (r *Runner) Sync(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	head, err := r.store.Head(ctx)
	if err != nil {
		return err
	}
	from := r.Position()
	if from >= head {
		return nil
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := r.handle(head, false)
	err = r.store.SubscribeAll(sctx, from, events.Filter{}, func(ctx context.Context, ev events.RecordedEvent) error {
		if err := h(ctx, ev); err != nil {
			return err
		}
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if r.Position() >= head {
		return nil
	}
	if err == nil || errors.Is(err, context.Canceled) {
		if err = ctx.Err(); err == nil {
			err = errors.New("subscription ended before the head")
		}
	}
	return err
}

// handle is the subscription's handler: it applies an event past the
// fold's position, once.
func (r *Runner) handle(head events.Position, run bool) events.Handler {
	prep, _ := r.fold.(Preparer)
	return func(ctx context.Context, ev events.RecordedEvent) error {
		checkpoint := strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix)
		want := !checkpoint && r.fold.Wants(ev)
		if want && prep != nil && ev.Position > r.Position() {
			if err := prep.Prepare(ctx, ev); err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
		}
		var err error
		r.mu.Lock()
		if ev.Position <= r.Position() {
			r.mu.Unlock()
			return nil // folded already (by Sync, or Run)
		}
		if want {
			err = r.fold.Apply(ev)
		}
		r.pos.Store(uint64(ev.Position))
		r.signal()
		r.mu.Unlock()
		if want {
			_ = r.o.Health.Park(r.name, ev, err)
			r.Wake()
		}
		r.saveMu.Lock()
		r.saver.Folded(ctx, ev)
		r.saveMu.Unlock()
		// After the save, so whoever waits for CaughtUp sees the
		// checkpoint the catch-up called for.
		if run && ev.Position >= head {
			r.markCaughtUp()
		}
		return nil
	}
}

// Save writes a checkpoint now if at least n events (0: one) were folded
// since the last one: for a consumer folded on demand (Sync), which
// decides after a catch-up.
func (r *Runner) Save(ctx context.Context, n int) {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	r.saver.Stop(ctx, n)
}

// snapshot is the saver's view of the fold: the position to claim (the
// applied one, or less if the fold is a Marker: held), and the state,
// encoded under the read lock.
func (r *Runner) snapshot() (pos events.Position, held bool, b []byte, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	pos = r.Position()
	if m, ok := r.fold.(Marker); ok {
		if mark := min(m.Mark(pos), pos); mark < pos {
			pos, held = mark, true
		}
	}
	st, err := r.fold.Snapshot()
	if err != nil {
		return 0, false, nil, err
	}
	if r.o.Packed {
		b, err = Pack(st)
	} else {
		b, err = json.Marshal(st)
	}
	return pos, held, b, err
}

// signal wakes the waiters of Changed. r.mu is held.
func (r *Runner) signal() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Runner) markCaughtUp() { r.caughtUpOnce.Do(func() { close(r.caughtUp) }) }
