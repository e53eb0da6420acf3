package clock

import (
	"context"
	"sync"
	"time"
)

// ExpireWhen returns a context whose deadline passes when expire is
// called: its Err is then context.DeadlineExceeded, as a real deadline's
// is, but at a point the caller chooses (a request seen in flight, an
// event held by a fake node) instead of a wall-clock instant that a
// loaded machine may reach before the code under test got there. It
// reports no Deadline, so a client does not shorten its own bounds on
// the grounds that one is near. parent gives only values; its end is not
// this context's.
func ExpireWhen(parent context.Context) (ctx context.Context, expire func()) {
	c := &expiring{Context: parent, done: make(chan struct{})}
	var once sync.Once
	return c, func() { once.Do(func() { close(c.done) }) }
}

type expiring struct {
	context.Context
	done chan struct{}
}

func (c *expiring) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *expiring) Done() <-chan struct{}       { return c.done }
func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
