package consumer

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// Loop is the shape every timed consumer of the log has: clock.Due (step
// does what is due now and returns when it should look again; zero:
// nothing timed, look again on a wake) that also ends when the
// subscription does. It returns nil when ctx ends, and the subscription's
// error when subErr delivers one (nil also when that error is only the
// context's). Its timer is clk's, so a test on a clock.Fake moves it with
// Advance.
func Loop(ctx context.Context, clk clock.Clock, wake <-chan struct{}, subErr <-chan error, step func(context.Context) time.Time) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		select {
		case err := <-subErr:
			failed <- err
			cancel()
		case <-lctx.Done():
		}
	}()
	// step gets ctx, not lctx: the subscription's end stops the loop, not
	// the work it is doing.
	clock.Due(lctx, clk, wake, func(context.Context, time.Time) time.Time { return step(ctx) })
	cancel()
	select {
	case err := <-failed:
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	default:
		return nil
	}
}
