// Package retry is Slotkeeper's one backoff: the waits between tries of
// something that may succeed later (a delete being confirmed, a deployment
// becoming healthy, a webhook answering again). Every wait is on a
// clock.Clock, so a test on a clock.Fake moves it with Advance instead of
// sleeping, and every wait ends at once when its context does.
//
// Not cenkalti/backoff: its Retry keeps the timer it waits on unexported
// and measures elapsed time with time.Now, so it cannot be driven by a fake
// clock; what would be left to reuse is the doubling below.
package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// Backoff is a schedule of waits: Initial, doubling after each failure up
// to Max. Jitter (0..1) draws each wait from [d·(1-Jitter), d], so many
// processes retrying the same thing spread out; a wait is never longer
// than the schedule says.
type Backoff struct {
	Initial time.Duration
	// Max caps a wait; at or below Initial every wait is Initial.
	Max    time.Duration
	Jitter float64
}

// Constant is the schedule that waits d every time.
func Constant(d time.Duration) Backoff { return Backoff{Initial: d, Max: d} }

// Delay is the wait after the n-th failure in a row (n >= 1).
func (b Backoff) Delay(n int) time.Duration {
	d := max(b.Initial, 0)
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	if b.Max > b.Initial {
		d = min(d, b.Max)
	}
	if b.Jitter > 0 && d > 0 {
		d -= time.Duration(rand.Float64() * min(b.Jitter, 1) * float64(d))
	}
	return d
}

// Waits walks a Backoff on a clock. Create one per run of tries.
type Waits struct {
	b     Backoff
	c     clock.Clock
	n     int
	until time.Time // zero: no bound
}

// Start returns the waits of b on c.
func (b Backoff) Start(c clock.Clock) *Waits { return &Waits{b: b, c: c} }

// Within bounds the waits: from now on they end by total from now (see
// Wait). It returns w.
func (w *Waits) Within(total time.Duration) *Waits {
	w.until = w.c.Now().Add(total)
	return w
}

// Next is the wait the next Wait sleeps (before jitter), for a log line.
func (w *Waits) Next() time.Duration {
	b := w.b
	b.Jitter = 0
	return b.Delay(w.n + 1)
}

// Reset starts the schedule again: something worked, so the next failure
// waits Initial.
func (w *Waits) Reset() { w.n = 0 }

// Wait sleeps the next wait of the schedule, cut short to the Within
// bound. It returns ctx.Err() if ctx ended first, and ErrExhausted
// (without waiting) once the bound has passed.
func (w *Waits) Wait(ctx context.Context) error {
	w.n++
	d := w.b.Delay(w.n)
	if !w.until.IsZero() {
		left := w.until.Sub(w.c.Now())
		if left <= 0 {
			return ErrExhausted
		}
		d = min(d, left)
	}
	return clock.Sleep(ctx, w.c, d)
}

// ErrExhausted is Wait's answer once the Within bound has passed.
var ErrExhausted = exhausted{}

type exhausted struct{}

func (exhausted) Error() string { return "retry: time bound passed" }

// Poll calls check until it reports done or an error, waiting the
// schedule between calls, for at most total (then it returns false, nil;
// 0: no bound). It stops at once when ctx ends (false, ctx.Err()).
func Poll(ctx context.Context, c clock.Clock, b Backoff, total time.Duration, check func() (done bool, err error)) (bool, error) {
	w := b.Start(c)
	if total > 0 {
		w.Within(total)
	}
	for {
		done, err := check()
		if done || err != nil {
			return done, err
		}
		switch err := w.Wait(ctx); err {
		case nil:
		case ErrExhausted:
			return false, nil
		default:
			return false, err
		}
	}
}
