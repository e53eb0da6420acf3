package clock

import (
	"context"
	"sync"
	"time"
)

// Func is a timer that calls a function: AfterFunc's answer.
type Func struct {
	mu      sync.Mutex
	t       Timer       // a clock's timer, nil on the wall clock
	real    *time.Timer // the wall clock's own AfterFunc
	stopped bool
	done    chan struct{}
}

// AfterFunc calls f in its own goroutine once d has passed on c, and again
// each time a Reset's duration passes, until Stop. It is time.AfterFunc on
// c's time: on a Fake, f runs when Advance passes its due time.
func AfterFunc(c Clock, d time.Duration, f func()) *Func {
	if _, ok := c.(realClock); ok {
		return &Func{real: time.AfterFunc(d, f)}
	}
	t := &Func{t: c.NewTimer(d), done: make(chan struct{})}
	go func() {
		for {
			select {
			case <-t.done:
				return
			case <-t.t.C():
				go f()
			}
		}
	}()
	return t
}

// Reset makes f run d from now (again); it reports whether the timer was
// armed. After Stop it does nothing.
func (t *Func) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	if t.real != nil {
		return t.real.Reset(d)
	}
	return t.t.Reset(d)
}

// Stop prevents f from running again (a run already started goes on),
// for good; it reports whether the timer was armed.
func (t *Func) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	t.stopped = true
	if t.real != nil {
		return t.real.Stop()
	}
	close(t.done)
	return t.t.Stop()
}

// WithTimeout is context.WithTimeout on c's time: the context ends d from
// now on c, with context.DeadlineExceeded as its cause (its Err is
// context.Canceled on a Fake, since a context's own deadline is always the
// wall clock's).
func WithTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := c.(realClock); ok {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := AfterFunc(c, d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() { t.Stop(); cancel(context.Canceled) }
}
