package consumer

import (
	"context"
	"errors"
	"time"
)

// Loop is the shape every timed consumer of the log has: step does what is
// due now and returns when it should look again (zero: nothing timed, look
// again in an hour or on a wake); Loop calls it again at that time, or when
// wake fires (the subscription folded something new). It returns nil when
// ctx ends, and the subscription's error when subErr delivers one (nil also
// when that error is only the context's).
func Loop(ctx context.Context, now func() time.Time, wake <-chan struct{}, subErr <-chan error, step func(context.Context) time.Time) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := step(ctx)
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-wake:
		case <-timer.C:
		}
	}
}
