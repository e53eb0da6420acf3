// Package lifecycle is the one shape in which the server's long-running
// parts start and stop (the shape of river's rivershared/startstop: Start,
// Stop, Started, Stopped), and the ordered list that starts them one after
// the other and stops them in reverse.
//
// Two things differ from river's shape, both because the server's shutdown
// has one budget (--shutdown-timeout) and one order:
//
//   - Stop takes a ctx that bounds it: the whole shutdown has one budget. A
//     service that has not stopped when ctx ends is abandoned with an error
//     (the process is exiting), so the parts after it still stop in order
//     and within the budget.
//   - A service lives until Stop, not until the ctx given to Start ends:
//     a signal ends the start-up and begins the shutdown, which then stops
//     every part in order. Start's ctx bounds the start only.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
)

// Service is one long-running part of the server.
type Service interface {
	// Start starts the service in the background and returns once it
	// started (or could not: then it is stopped and says why).
	Start(ctx context.Context) error
	// Stop stops the service and returns once it stopped, or with an error
	// once ctx ended first (it is then abandoned). Stopping a service that
	// never started, or twice, is no error.
	Stop(ctx context.Context) error
	// Started is closed once the service started (or failed to).
	Started() <-chan struct{}
	// Stopped is closed once the service stopped, by Stop or by itself.
	Stopped() <-chan struct{}
}

// Drainer is a service with a first, instant phase of the shutdown: stop
// taking new work (the job engine stops claiming, /readyz answers 503)
// while everything still works, so load balancers and other processes
// notice before the parts stop.
type Drainer interface {
	Drain()
}

// Failer is a service that can stop by itself; Err says why (nil when it
// stopped because it was asked to, or ended its work).
type Failer interface {
	Err() error
}

// state is the bookkeeping every service of this package shares: the two
// channels, closed once each.
type state struct {
	once             sync.Once
	started, stopped chan struct{}
	startedOnce      sync.Once
	stoppedOnce      sync.Once
}

func (s *state) init() {
	s.once.Do(func() { s.started, s.stopped = make(chan struct{}), make(chan struct{}) })
}

func (s *state) Started() <-chan struct{} { s.init(); return s.started }
func (s *state) Stopped() <-chan struct{} { s.init(); return s.stopped }

func (s *state) markStarted() { s.init(); s.startedOnce.Do(func() { close(s.started) }) }
func (s *state) markStopped() {
	s.markStarted()
	s.stoppedOnce.Do(func() { close(s.stopped) })
}

// Loop is a service made of a function that runs until its ctx ends (the
// shape of the log's consumers, the job engine, the schedulers).
type Loop struct {
	// Init, if set, runs in Start before Run (a first round, a load from
	// disk); its error fails the start.
	Init func(ctx context.Context) error
	// Run is the loop. Its ctx ends at Stop.
	Run func(ctx context.Context) error
	// Ready, if set, is closed by Run once it serves; Start waits for it.
	Ready <-chan struct{}
	// Halt, if set, asks Run to end gracefully, bounded by ctx, before
	// Stop cancels Run's ctx (the job engine fences its attempts).
	Halt func(ctx context.Context) error
	// OnDrain, if set, is the loop's Drain.
	OnDrain func()
	// Final, if set, runs once Run returned (the last snapshot).
	Final func(ctx context.Context)

	state
	mu      sync.Mutex
	begun   bool
	cancel  context.CancelFunc
	err     error
	halting bool
}

// Start runs Init, then Run in the background; with Ready, it returns once
// Ready is closed, Run returned (its error), or ctx ended.
func (l *Loop) Start(ctx context.Context) error {
	l.init()
	l.mu.Lock()
	if l.begun {
		l.mu.Unlock()
		return nil
	}
	l.begun = true
	l.mu.Unlock()
	if l.Init != nil {
		if err := l.Init(ctx); err != nil {
			l.markStopped()
			return err
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := l.Run(runCtx)
		l.mu.Lock()
		if err != nil && runCtx.Err() == nil && !l.halting {
			l.err = err // it stopped by itself: a failure
		}
		l.mu.Unlock()
		if l.Final != nil {
			l.Final(runCtx)
		}
		cancel()
		l.markStopped()
	}()
	if l.Ready == nil {
		l.markStarted()
		return nil
	}
	select {
	case <-l.Ready:
		l.markStarted()
		return nil
	case <-done:
		if err := l.Err(); err != nil {
			return err
		}
		return errors.New("stopped while starting")
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}

// Stop halts Run (Halt), ends its ctx and waits for it to return, until
// ctx ends.
func (l *Loop) Stop(ctx context.Context) error {
	l.init()
	l.mu.Lock()
	cancel := l.cancel
	if !l.begun {
		l.begun = true // a later Start does nothing
		l.mu.Unlock()
		l.markStopped()
		return nil
	}
	l.halting = true
	l.mu.Unlock()
	if cancel == nil { // Init failed, or still running
		<-l.Stopped()
		return nil
	}
	var err error
	if l.Halt != nil {
		err = l.Halt(ctx)
	}
	cancel()
	select {
	case <-l.Stopped():
		return err
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("still running when the shutdown's time was up: %w", ctx.Err()))
	}
}

// Drain calls OnDrain.
func (l *Loop) Drain() {
	if l.OnDrain != nil {
		l.OnDrain()
	}
}

// Err is why Run ended by itself (nil while it runs, and after Stop).
func (l *Loop) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Closer is a service that only has an end: a store, a database pool, the
// simulators, closed in their place in the list.
type Closer struct {
	Close func()
	state
}

// OnClose is a Closer.
func OnClose(f func()) *Closer { return &Closer{Close: f} }

// Start does nothing.
func (c *Closer) Start(context.Context) error { c.markStarted(); return nil }

// Stop closes, once.
func (c *Closer) Stop(context.Context) error {
	c.init()
	select {
	case <-c.stopped:
	default:
		if c.Close != nil {
			c.Close()
		}
		c.markStopped()
	}
	return nil
}

// List is the server's services in the order they started. Stop stops them
// in reverse, so each part stops before what it depends on.
type List struct {
	// OnExit is told when a service stopped by itself with an error
	// (Failer), before Stop reached it.
	OnExit func(name string, err error)
	// Log takes the services' stop errors.
	Log *slog.Logger

	mu       sync.Mutex
	started  []named
	watchers sync.WaitGroup
}

type named struct {
	name string
	svc  Service
}

// Start starts svc and appends it to the list; a service that fails to
// start is not in the list.
func (l *List) Start(ctx context.Context, name string, svc Service) error {
	if err := svc.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	l.mu.Lock()
	l.started = append(l.started, named{name, svc})
	l.mu.Unlock()
	if f, ok := svc.(Failer); ok && l.OnExit != nil {
		l.watchers.Add(1)
		go func() {
			defer l.watchers.Done()
			<-svc.Stopped()
			if err := f.Err(); err != nil {
				l.OnExit(name, err)
			}
		}()
	}
	return nil
}

// Drain drains every Drainer, the last started first.
func (l *List) Drain() {
	for _, s := range l.reversed() {
		if d, ok := s.svc.(Drainer); ok {
			d.Drain()
		}
	}
}

// Stop stops every service, the last started first, and empties the list.
// ctx bounds the graceful parts; a service's stop error is logged.
func (l *List) Stop(ctx context.Context) {
	rev := l.reversed()
	l.mu.Lock()
	l.started = nil
	l.mu.Unlock()
	for _, s := range rev {
		if err := s.svc.Stop(ctx); err != nil && l.Log != nil {
			l.Log.Warn(s.name+" did not stop cleanly", slog.String("error", err.Error()))
		}
	}
	l.watchers.Wait()
}

func (l *List) reversed() []named {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.started)
	slices.Reverse(out)
	return out
}
