package clock

import (
	"context"
	"sync"
	"time"
)

// AutoAdvance makes f's time pass only while the code under test waits:
// whenever a timer or ticker is armed, f moves to the earliest due time,
// reporting each jump to jumped (nil: not reported). It goes on until stop
// is called. Use it where a test wants a whole schedule of waits (a
// backoff, a Retry-After) run at once; a test that must act between two
// waits uses BlockUntil and Advance instead.
func (f *Fake) AutoAdvance(jumped func(d time.Duration)) (stop func()) {
	return f.autoAdvance(nil, jumped)
}

// AutoAdvanceOffWire is AutoAdvance for code that also does real work
// while its time is fake — HTTP round trips to a simulator on the same
// clock: time moves only while gate is held, and the code holds gate's
// read side for each round trip. On a real clock no minute passes while a
// request is answered in milliseconds; a fake clock that jumps while one
// is on the wire stands for a request that took the whole jump, which
// on a busy test machine made a "no 429" test meet one now and then.
func (f *Fake) AutoAdvanceOffWire(gate *sync.RWMutex) (stop func()) {
	return f.autoAdvance(gate, nil)
}

func (f *Fake) autoAdvance(gate *sync.RWMutex, jumped func(d time.Duration)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f.BlockUntil(ctx, 1) == nil {
			if gate != nil {
				gate.Lock()
			}
			if due, ok := f.NextDue(); ok {
				if d := due.Sub(f.Now()); jumped != nil && d > 0 {
					jumped(d)
				}
				f.Set(due)
			}
			if gate != nil {
				gate.Unlock()
			}
		}
	}()
	return func() { cancel(); <-done }
}
