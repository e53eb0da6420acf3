// Package clock is the time every timed part of Slotkeeper reads and
// waits on. Production passes Real(); tests pass a Fake, whose time moves
// only when the test says (Advance) and which tells the test when the code
// under test is waiting (BlockUntil), so leases, deadlines and grace
// periods are tested without sleeping and without real sub-second timeouts.
//
// The clock owns timers, not only Now(): code that waits must wait through
// the same clock it reads, or a fake clock's Advance would move Now past a
// deadline while a real timer still waits for the wall clock.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers that fire by it.
type Clock interface {
	Now() time.Time
	// Since is Now().Sub(t).
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d (d > 0).
	NewTicker(d time.Duration) Ticker
}

// Timer is time.Timer behind an interface. As with time.Timer since Go
// 1.23, after Stop or Reset returns no stale value is received from C.
type Timer interface {
	C() <-chan time.Time
	// Reset changes the timer to fire d from now; it reports whether the
	// timer was active.
	Reset(d time.Duration) bool
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
}

// Ticker is time.Ticker behind an interface.
type Ticker interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

// Sleep waits d on c, or until ctx ends (then it returns ctx.Err()). It is
// the one way a retry loop or a backoff waits.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }
func (r realTimer) Stop() bool                 { return r.t.Stop() }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTicker) Stop()                 { r.t.Stop() }
