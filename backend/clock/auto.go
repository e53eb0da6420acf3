package clock

import (
	"context"
	"time"
)

// AutoAdvance makes f's time pass only while the code under test waits:
// whenever a timer or ticker is armed, f moves to the earliest due time,
// reporting each jump to jumped (nil: not reported). It goes on until stop
// is called. Use it where a test wants a whole schedule of waits (a
// backoff, a Retry-After) run at once; a test that must act between two
// waits uses BlockUntil and Advance instead.
func (f *Fake) AutoAdvance(jumped func(d time.Duration)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f.BlockUntil(ctx, 1) == nil {
			due, ok := f.NextDue()
			if !ok {
				continue
			}
			if d := due.Sub(f.Now()); jumped != nil && d > 0 {
				jumped(d)
			}
			f.Set(due)
		}
	}()
	return func() { cancel(); <-done }
}
