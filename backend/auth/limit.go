package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter keeps a token-bucket rate limiter per key (an account name, a
// client address, a subject). Idle keys are forgotten so that the table
// stays bounded.
type Limiter struct {
	every time.Duration
	burst int
	now   func() time.Time

	mu        sync.Mutex
	m         map[string]*entry
	lastSweep time.Time
}

type entry struct {
	l    *rate.Limiter
	seen time.Time
	held int // events taken by Hold whose outcome is not known yet
}

// NewLimiter allows burst events at once per key, then one per every.
func NewLimiter(every time.Duration, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, burst: burst, now: now, m: map[string]*entry{}}
}

func (l *Limiter) get(key string, now time.Time) *rate.Limiter {
	e := l.m[key]
	if e == nil {
		e = &entry{l: rate.NewLimiter(rate.Every(l.every), l.burst)}
		l.m[key] = e
	}
	e.seen = now
	// A key idle for long enough to have refilled its bucket is the same as
	// a new one: forget it.
	full := l.every * time.Duration(l.burst+1)
	if now.Sub(l.lastSweep) > full && len(l.m) > 1024 {
		l.lastSweep = now
		for k, v := range l.m {
			if now.Sub(v.seen) > full && v.held == 0 {
				delete(l.m, k)
			}
		}
	}
	return e.l
}

// Allow takes one event for key; if none is available it returns false and
// how long until one is.
func (l *Limiter) Allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.get(key, now)
	if e := l.m[key]; e.held > 0 {
		if w := l.waitLocked(lim, e.held, now); w > 0 {
			return false, w
		}
	}
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// waitLocked is how long until key has an event left that no Hold holds.
func (l *Limiter) waitLocked(lim *rate.Limiter, held int, now time.Time) time.Duration {
	if tok := lim.TokensAt(now) - float64(held); tok < 1 {
		return time.Duration(math.Ceil((1 - tok) * float64(l.every)))
	}
	return 0
}

// Hold sets one event of key aside for an attempt whose outcome is not
// known yet (a password being hashed): while held it counts as taken, so
// concurrent attempts cannot all pass a check that only the finished ones
// have charged (issue 33: 100 wrong passwords sent at once were all
// hashed). done(true) takes the event, done(false) gives it back. Without
// an event left, Hold returns nil and how long until one is.
//
// Held events are kept beside the bucket rather than reserved from it:
// golang.org/x/time/rate cannot give back a reservation once its time has
// passed, and a failed attempt's outcome is known only after its hash.
func (l *Limiter) Hold(key string) (done func(take bool), wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.get(key, now)
	e := l.m[key]
	if w := l.waitLocked(lim, e.held, now); w > 0 {
		return nil, w
	}
	e.held++
	var once sync.Once
	return func(take bool) {
		once.Do(func() {
			now := l.now()
			l.mu.Lock()
			defer l.mu.Unlock()
			e.held--
			if take {
				e.l.ReserveN(now, 1)
			}
			e.seen = now
		})
	}, 0
}

// RetryAfter rounds a wait up to whole seconds for a Retry-After header.
func RetryAfter(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
