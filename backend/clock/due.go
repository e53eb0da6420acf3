package clock

import (
	"context"
	"time"
)

// idle is how long Due waits when nothing timed is due: only a wake or
// the end of ctx is expected, the timer is a backstop.
const idle = time.Hour

// Due is the one shape of Slotkeeper's timed work, "find what is due,
// act": step does what is due at now and returns when something next
// falls due (zero: nothing timed). Due calls it again at that time, or at
// once when wake fires (something changed that may be due sooner; nil:
// never), until ctx ends. It waits on c's timer, so a test on a Fake moves
// it with Advance; step runs on Due's goroutine, one call at a time. Its
// timer is armed only while it waits, so a Fake's BlockUntil tells a test
// that step has returned.
func Due(ctx context.Context, c Clock, wake <-chan struct{}, step func(ctx context.Context, now time.Time) (next time.Time)) {
	timer := c.NewTimer(idle)
	timer.Stop()
	defer timer.Stop()
	for ctx.Err() == nil {
		next := step(ctx, c.Now())
		wait := idle
		if !next.IsZero() {
			wait = max(next.Sub(c.Now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-wake:
			timer.Stop()
		case <-timer.C():
		}
	}
}

// Every runs do every d (d > 0), the first time d after it starts, until
// ctx ends: the periodic case of Due. A run that takes longer than d is
// followed by the next at once, never by two.
func Every(ctx context.Context, c Clock, d time.Duration, do func(ctx context.Context)) {
	next := c.Now().Add(d)
	Due(ctx, c, nil, func(ctx context.Context, now time.Time) time.Time {
		if now.Before(next) {
			return next
		}
		do(ctx)
		// As a ticker drops ticks: after a run longer than d the next
		// follows at once, and no backlog is caught up.
		if next = next.Add(d); next.Before(c.Now()) {
			next = c.Now()
		}
		return next
	})
}
