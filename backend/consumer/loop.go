package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// Loop is the shape every timed consumer of the log has: step does what is
// due now and returns when it should look again (zero: nothing timed, look
// again in an hour or on a wake); Loop calls it again at that time, or when
// wake fires (the subscription folded something new). It returns nil when
// ctx ends, and the subscription's error when subErr delivers one (nil also
// when that error is only the context's). Its timer is clk's, so a test
// on a clock.Fake moves it with Advance.
//
// Its timer is made after the first step: a test on a clock.Fake that sees
// it armed (BlockUntil) knows the first step is done.
func Loop(ctx context.Context, clk clock.Clock, wake <-chan struct{}, subErr <-chan error, step func(context.Context) time.Time) error {
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next := step(ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(clk.Now()), 0)
		}
		if timer == nil {
			timer = clk.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-wake:
		case <-timer.C():
		}
	}
}
