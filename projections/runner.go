package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Target is a read-model store the Runner projects into.
type Target interface {
	ReadModel
	// Apply projects evs (consecutive, in position order, all after the
	// target's Position) and moves the checkpoint to the last one, atomically:
	// after a crash either all of them or none are applied. It returns one
	// Change per event.
	Apply(ctx context.Context, evs []Event) ([]Change, error)
}

// QuietTarget is implemented by targets that can apply a batch faster when
// nobody needs its changes: Replay (and so Verify and `slotkeeper replay`)
// uses ApplyQuiet, the Runner, which publishes changes, uses Apply. The
// result is the same read model.
type QuietTarget interface {
	Target
	// ApplyQuiet is Apply without the changes.
	ApplyQuiet(ctx context.Context, evs []Event) error
}

// Exclusive is implemented by targets that several processes share (the
// postgres read model): only the holder of the projector lock may Apply.
// Acquire blocks until this process holds the lock (or ctx ends); the lock's
// context is cancelled when the lock is lost, and release gives it up.
type Exclusive interface {
	Acquire(ctx context.Context) (lockCtx context.Context, release func(), err error)
}

// Follower is implemented by shared targets whose projector runs in another
// process: Follow delivers the changes that projector commits after `after`,
// in position order without gaps, until ctx ends. A runner follows while it
// waits for the projector lock, so every process's change feed and WaitFor
// work, not only the projecting one's.
type Follower interface {
	Follow(ctx context.Context, after events.Position, h func([]Change)) error
}

// RunnerOptions tune a Runner; the zero value is good.
type RunnerOptions struct {
	// MaxBatch is the most events applied in one Apply (default 2000).
	MaxBatch int
	// RetryDelay is the wait before resubscribing after an error (default 1 s).
	RetryDelay time.Duration
	// OnError is told about errors the runner recovers from (default: none).
	OnError func(error)
}

// Runner keeps a Target up to date with a store: it subscribes from the
// target's checkpoint, applies the events in batches (whatever has arrived,
// up to MaxBatch, so catch-up is fast and live lag is one event), and
// publishes the changes. It never blocks on a consumer.
type Runner struct {
	store  events.Store
	target Target
	opt    RunnerOptions

	mu      sync.Mutex
	pos     events.Position
	advance chan struct{} // closed and replaced whenever pos grows
	subs    map[*Subscription]struct{}
	lastErr error
}

// NewRunner returns a runner; call Run to start it.
func NewRunner(store events.Store, target Target, opt RunnerOptions) *Runner {
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 2000
	}
	if opt.RetryDelay <= 0 {
		opt.RetryDelay = time.Second
	}
	return &Runner{store: store, target: target, opt: opt, advance: make(chan struct{}), subs: map[*Subscription]struct{}{}}
}

// Run projects until ctx ends (returning nil), the store closes (returning
// events.ErrClosed), is not the one started on any more (events.Guard:
// ErrStoreChanged) or the store is damaged (returning the error, which
// wraps events.ErrCorrupt: reading the same record again gives the same
// answer, so retrying would hang whoever waits for the read model). Other
// errors are reported to OnError and retried after RetryDelay from the
// target's checkpoint, which is safe because a batch and its checkpoint
// commit together.
func (r *Runner) Run(ctx context.Context) error {
	for {
		err := r.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.mu.Lock()
		r.lastErr = err
		r.mu.Unlock()
		// ErrPermanent: the store refuses this process (no $all read, bad
		// credentials): the same answer every time, so stop and say so.
		if errors.Is(err, events.ErrClosed) || errors.Is(err, events.ErrCorrupt) || errors.Is(err, events.ErrPermanent) || errors.Is(err, events.ErrStoreChanged) {
			return err
		}
		if r.opt.OnError != nil && err != nil {
			r.opt.OnError(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.opt.RetryDelay):
		}
	}
}

// Err is the last error the runner recovered from (nil if none yet).
func (r *Runner) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

func (r *Runner) runOnce(ctx context.Context) error {
	if ex, ok := r.target.(Exclusive); ok {
		lockCtx, release, err := r.acquire(ctx, ex)
		if err != nil {
			return fmt.Errorf("projections: acquire projector lock: %w", err)
		}
		defer release()
		ctx = lockCtx
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	from, err := r.target.Position(ctx)
	if err != nil {
		return fmt.Errorf("projections: read checkpoint: %w", err)
	}
	r.setPos(from)

	p := pump(ctx, r.store, from, r.opt.MaxBatch, 0)
	defer func() {
		cancel()
		<-p.done
	}()
	for {
		batch, ok := p.next()
		if !ok {
			err := p.err
			if err == nil {
				err = errors.New("projections: subscription ended")
			}
			return err
		}
		changes, err := r.target.Apply(ctx, batch)
		if err != nil {
			return fmt.Errorf("projections: apply %d events up to %d: %w", len(batch), batch[len(batch)-1].Position, err)
		}
		r.publish(changes)
		r.setPos(batch[len(batch)-1].Position)
	}
}

// acquire waits for the projector lock, following the projecting process's
// changes meanwhile (when the target can).
func (r *Runner) acquire(ctx context.Context, ex Exclusive) (context.Context, func(), error) {
	f, ok := r.target.(Follower)
	if !ok {
		return ex.Acquire(ctx)
	}
	from, err := r.target.Position(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.setPos(from)
	publish := func(chs []Change) {
		r.publish(chs)
		r.setPos(chs[len(chs)-1].Position)
	}
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		for fctx.Err() == nil {
			err := f.Follow(fctx, r.Position(), publish)
			if fctx.Err() != nil {
				return
			}
			if r.opt.OnError != nil {
				r.opt.OnError(fmt.Errorf("projections: follow: %w", err))
			}
			select {
			case <-fctx.Done():
			case <-time.After(r.opt.RetryDelay):
			}
		}
	}()
	lockCtx, release, err := ex.Acquire(ctx)
	stop()
	<-followed
	if err != nil {
		return nil, nil, err
	}
	// What the last projector committed after the follower's last look is
	// published before this runner projects on, so the feed has no gap.
	cp, err := r.target.Position(lockCtx)
	if err != nil {
		release()
		return nil, nil, err
	}
	if cp > r.Position() {
		cctx, done := context.WithCancel(lockCtx)
		err := f.Follow(cctx, r.Position(), func(chs []Change) {
			publish(chs)
			if chs[len(chs)-1].Position >= cp {
				done()
			}
		})
		done()
		if r.Position() < cp {
			release()
			return nil, nil, fmt.Errorf("projections: catch up the feed to %d: %w", cp, err)
		}
	}
	return lockCtx, release, nil
}

// pipe hands decoded events from the subscription's goroutine to the apply
// loop in batches: the producer appends under a mutex and the consumer takes
// everything queued at once, so the per-event cost is a lock, not a channel
// operation, and the live path still hands over every event at once.
//
// The batch next returns is only valid until the following call of next:
// the two batch buffers take turns, so a catch-up does not allocate a new
// buffer per batch.
type pipe struct {
	mu     sync.Mutex
	items  []Event
	lent   []Event // the batch next returned last time
	max    int
	full   bool // next waits for max events (or the end): replay, not live
	closed bool
	err    error         // the subscription's end (nil when upTo was reached)
	ready  chan struct{} // cap 1: items queued or closed
	space  chan struct{} // cap 1: the consumer took items
	done   chan struct{} // closed when the subscription goroutine ended
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// push queues e, waiting while max events are queued.
func (p *pipe) push(ctx context.Context, e Event) error {
	for {
		p.mu.Lock()
		if len(p.items) < p.max {
			p.items = append(p.items, e)
			wake := !p.full || len(p.items) == p.max
			p.mu.Unlock()
			if wake {
				signal(p.ready)
			}
			return nil
		}
		p.mu.Unlock()
		select {
		case <-p.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// next waits for events and returns all queued ones (at most max). It
// reports false once the subscription ended and everything was taken.
func (p *pipe) next() ([]Event, bool) {
	for {
		p.mu.Lock()
		if len(p.items) > 0 && (!p.full || len(p.items) >= p.max || p.closed) {
			out := p.items
			clear(p.lent) // the caller is done with it; drop its payloads
			p.items, p.lent = p.lent[:0], out
			p.mu.Unlock()
			signal(p.space)
			return out, true
		}
		if p.closed {
			p.mu.Unlock()
			return nil, false
		}
		p.mu.Unlock()
		<-p.ready
	}
}

// pump runs a subscription from `from` that decodes every event and queues
// it on the returned pipe, at most max at a time (the store and the decoder
// run ahead of the target while it applies). With upTo > 0 it stops after
// the event at upTo, and next hands out full batches only (a replay wants
// few large batches; a live runner wants every event at once). Cancel ctx
// and wait on done to stop it early.
func pump(ctx context.Context, store events.Store, from events.Position, max int, upTo events.Position) *pipe {
	p := &pipe{max: max, full: upTo > 0, items: make([]Event, 0, max), ready: make(chan struct{}, 1), space: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		err := store.SubscribeAll(ctx, from, events.Filter{}, func(ctx context.Context, ev events.RecordedEvent) error {
			if upTo > 0 && ev.Position > upTo {
				return errReplayDone
			}
			if err := p.push(ctx, DecodeEvent(ev)); err != nil {
				return err
			}
			if upTo > 0 && ev.Position >= upTo {
				return errReplayDone
			}
			return nil
		})
		if errors.Is(err, errReplayDone) {
			err = nil
		}
		p.mu.Lock()
		p.closed, p.err = true, err
		p.mu.Unlock()
		signal(p.ready)
	}()
	return p
}

func (r *Runner) setPos(p events.Position) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p > r.pos || (p == 0 && r.pos == 0) {
		r.pos = p
		close(r.advance)
		r.advance = make(chan struct{})
	}
}

// Position is the last position applied by this runner (0 before the first
// batch or checkpoint read).
func (r *Runner) Position() events.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pos
}

// WaitFor blocks until the read model has applied pos (or ctx ends, returning
// ctx.Err()). The API calls it with an append's position before answering a
// command (read-your-writes); tests call it instead of sleeping.
func (r *Runner) WaitFor(ctx context.Context, pos events.Position) error {
	for {
		r.mu.Lock()
		cur, ch := r.pos, r.advance
		r.mu.Unlock()
		if cur >= pos {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// Subscription is one consumer of the change feed.
type Subscription struct {
	// C delivers changes in position order, without gaps. It is closed when
	// the subscription is cancelled or dropped.
	C       <-chan Change
	c       chan Change
	r       *Runner
	dropped bool
}

// Subscribe registers a change-feed consumer with a buffer of buf changes
// (minimum 1). The runner never waits for a consumer: one whose buffer is
// full when a change is published is dropped — its channel is closed and
// Dropped reports true — because a feed with a hole would be worse than none.
// A dropped consumer (an SSE client) starts again from a snapshot.
//
// To get a snapshot and a gapless stream, subscribe first, then read the
// snapshot and its Position, then skip changes at or below that position.
func (r *Runner) Subscribe(buf int) *Subscription {
	if buf < 1 {
		buf = 1
	}
	c := make(chan Change, buf)
	s := &Subscription{C: c, c: c, r: r}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	return s
}

// Cancel ends the subscription and closes C. It is safe to call twice.
func (s *Subscription) Cancel() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if _, ok := s.r.subs[s]; ok {
		delete(s.r.subs, s)
		close(s.c)
	}
}

// Dropped reports whether the runner dropped this consumer for being slow.
// Read it after C is closed.
func (s *Subscription) Dropped() bool {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.dropped
}

func (r *Runner) publish(changes []Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for s := range r.subs {
		for _, c := range changes {
			select {
			case s.c <- c:
				continue
			default:
			}
			s.dropped = true
			delete(r.subs, s)
			close(s.c)
			break
		}
	}
}
