package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Fake is a Clock whose time moves only by Advance or Set. Its timers and
// tickers fire, in the order of their due times, when the time passes
// them; BlockUntil lets a test wait until the code under test has armed
// its timers, instead of sleeping. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter // armed timers and tickers
	seq     uint64        // arming order: ties fire first-armed first
	changed chan struct{} // closed and replaced whenever waiters change
}

// NewFake returns a fake clock at start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// fakeWaiter is one timer or ticker.
type fakeWaiter struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	period time.Duration // > 0: a ticker
	seq    uint64
	armed  bool
}

// Now implements Clock.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since implements Clock.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer implements Clock. A timer of d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	w := &fakeWaiter{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	f.arm(w, d)
	f.mu.Unlock()
	return (*fakeTimer)(w)
}

// NewTicker implements Clock.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	w := &fakeWaiter{f: f, c: make(chan time.Time, 1), period: d}
	f.mu.Lock()
	f.arm(w, d)
	f.mu.Unlock()
	return (*fakeTicker)(w)
}

// Advance moves the time forward by d, firing every timer and ticker due
// by then in the order of their due times (the time reads each one's due
// time while it fires). A ticker whose channel is full drops the tick, as
// time.Ticker does.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceTo(f.now.Add(d))
}

// Set moves the time to t (never backwards), firing what is due as Advance does.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.advanceTo(t)
	}
}

// Armed returns how many timers and tickers wait to fire.
func (f *Fake) Armed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// BlockUntil waits until at least n timers and tickers are armed, or ctx
// ends (then it returns ctx.Err()). A test calls it before Advance so the
// code under test has reached its wait.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.waiters), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// NextDue returns the time the earliest armed timer fires (ok false: none).
func (f *Fake) NextDue() (at time.Time, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.waiters) == 0 {
		return time.Time{}, false
	}
	return f.waiters[0].at, true
}

func (f *Fake) advanceTo(end time.Time) {
	for len(f.waiters) > 0 && !f.waiters[0].at.After(end) {
		w := f.waiters[0]
		f.now = w.at
		f.disarm(w)
		select {
		case w.c <- w.at:
		default: // a ticker nobody read: the tick is dropped
		}
		if w.period > 0 {
			f.arm(w, w.period)
		}
	}
	f.now = end
}

// arm and disarm are called with f.mu held.
func (f *Fake) arm(w *fakeWaiter, d time.Duration) {
	if w.armed {
		f.disarm(w)
	}
	f.seq++
	w.at, w.seq, w.armed = f.now.Add(max(d, 0)), f.seq, true
	f.waiters = append(f.waiters, w)
	sort.SliceStable(f.waiters, func(i, j int) bool {
		a, b := f.waiters[i], f.waiters[j]
		if a.at.Equal(b.at) {
			return a.seq < b.seq
		}
		return a.at.Before(b.at)
	})
	f.notify()
	if d <= 0 && w.period == 0 {
		f.advanceTo(f.now) // fires at once
	}
}

func (f *Fake) disarm(w *fakeWaiter) bool {
	if !w.armed {
		return false
	}
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			break
		}
	}
	w.armed = false
	f.notify()
	return true
}

func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// drain empties c: after Stop or Reset no stale value is received (the
// Go 1.23 time.Timer rule).
func drain(c chan time.Time) {
	select {
	case <-c:
	default:
	}
}

type fakeTimer fakeWaiter

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	w := (*fakeWaiter)(t)
	was := t.f.disarm(w)
	drain(t.c)
	t.f.arm(w, d)
	return was
}

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.f.disarm((*fakeWaiter)(t))
	drain(t.c)
	return was
}

type fakeTicker fakeWaiter

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	w := (*fakeWaiter)(t)
	t.f.disarm(w)
	drain(t.c)
	w.period = d
	t.f.arm(w, d)
}

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.disarm((*fakeWaiter)(t))
	drain(t.c)
}
