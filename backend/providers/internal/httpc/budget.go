package httpc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// Budget is one API budget: the requests one provider credential may send.
// Coolify throttles its API per user (`throttle:api`, keyed by the user's id
// once sanctum has authenticated the request: RouteServiceProvider.php:47-53,
// app/Http/Kernel.php:43 at v4.3.10-41), 200 a minute by default
// (API_RATE_LIMIT, config/api.php), in a fixed window that starts at the
// first request after the last one expired. Laravel's ThrottleRequests
// middleware answers every throttled request with X-RateLimit-Limit and
// X-RateLimit-Remaining (what is left in the user's window, whoever spent
// it), and a 429 with Retry-After (seconds to the window's end)
// (laravel/framework src/Illuminate/Routing/Middleware/ThrottleRequests.php,
// getHeaders / buildException).
//
// The budget follows those headers, so every caller in the process —
// workers, polling, reconciliation, readiness — and every process using the
// same user's tokens share what Coolify says is left: a call waits
// (ctx-cancellable) for the window's end instead of meeting a 429. While
// what is left is unknown (before the first answer, at a new window) one
// request goes out, and its answer says; should it hang, another goes
// after probeWait, so one stuck request never holds every caller. An answer without the
// headers says the server does not throttle that route: the budget then
// stops counting until one carries them. A 429 that still comes (another
// process spent the window on a clock the budget cannot see) closes the
// budget until its Retry-After has passed.
type Budget struct {
	clock  clock.Clock
	window time.Duration

	mu        sync.Mutex
	answered  bool // an answer came
	throttled bool // the last answer carried X-RateLimit headers
	known     bool // remaining is what an answer of this window said
	limit     int
	remaining int
	inflight  int
	// windowEnd is when the window the budget counts in ends: the first
	// answer of a window plus its length. The server's window started when
	// the first request of it arrived, which is never after that answer
	// came back — however long the request was on its way, so the budget
	// never opens a new window while the server's is still running. (It
	// was the send time plus a one-second margin: a request delayed past
	// the margin met a 429 at the next window.) Zero: no window known.
	windowEnd time.Time
	probeAt   time.Time // when the last request went out while unknown
	wake      chan struct{}

	waited  int64 // calls that had to wait (for tests and metrics)
	limited int64 // 429 answers seen
}

// probeWait is how long a request sent while what is left is unknown holds
// the others back.
const probeWait = time.Second

// NewBudget returns a budget of a Laravel-style fixed window.
func NewBudget(c clock.Clock, window time.Duration) *Budget {
	if c == nil {
		c = clock.Real()
	}
	return &Budget{clock: c, window: window, wake: make(chan struct{})}
}

var budgets = struct {
	sync.Mutex
	m    map[string]*Budget
	base map[string]string // key → its base URL, for ForgetBudgets
}{m: map[string]*Budget{}, base: map[string]string{}}

// BudgetFor is the process's one budget for a credential (a base URL and a
// token) on clock c (nil: the wall clock): every client made for it shares
// it. A process has one clock; tests that fake it get their own budgets.
func BudgetFor(base, token string, c clock.Clock) *Budget {
	if c == nil {
		c = clock.Real() // one key for the wall clock, however it is named
	}
	sum := sha256.Sum256([]byte(base + "\x00" + token))
	key := hex.EncodeToString(sum[:]) + fmt.Sprintf("/%p", c)
	budgets.Lock()
	defer budgets.Unlock()
	b := budgets.m[key]
	if b == nil {
		b = NewBudget(c, time.Minute)
		budgets.m[key] = b
		budgets.base[key] = base
	}
	return b
}

// ForgetBudgets drops the budgets of every base URL at or under root
// (every token and clock): a server that is gone for good (a test's
// simulator, closed) leaves no budget behind for another server that
// later gets the same address. A test process starts many simulators on
// 127.0.0.1 ports the kernel picks at random, so two of them can get the
// same port; a budget on the wall clock that one left closed (a 429's
// Retry-After of 60 s) would hold the other's first calls for a minute,
// or refuse them at their deadline.
func ForgetBudgets(root string) {
	root = strings.TrimRight(root, "/")
	budgets.Lock()
	defer budgets.Unlock()
	for key, base := range budgets.base {
		if base == root || strings.HasPrefix(base, root+"/") {
			delete(budgets.m, key)
			delete(budgets.base, key)
		}
	}
}

// BudgetStats is what a budget saw: calls that waited for budget and 429
// answers.
type BudgetStats struct {
	Waited, Limited int64
	Limit           int
	Remaining       int
}

// Stats reports the budget's counters.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{Waited: b.waited, Limited: b.limited, Limit: b.limit, Remaining: b.remaining}
}

// errBudget is returned by acquire when ctx's deadline comes before the
// budget opens again; until is when it would.
type errBudget struct{ until time.Time }

func (e errBudget) Error() string {
	return "the API budget is spent until " + e.until.Format(time.RFC3339)
}

// acquire waits until a request may be sent, and counts it in flight. It
// returns ctx's error when ctx ends first, and errBudget at once when
// ctx's deadline is before the budget opens again (the caller's step would
// be cancelled half way through the wait).
func (b *Budget) acquire(ctx context.Context) error {
	counted := false
	for {
		b.mu.Lock()
		now := b.clock.Now()
		if !b.windowEnd.IsZero() && !now.Before(b.windowEnd) {
			// The window ended: what is left is unknown until an answer.
			b.windowEnd, b.known = time.Time{}, false
		}
		ok := false
		switch {
		case b.answered && !b.throttled:
			ok = true // the server does not throttle: nothing to count
		case !b.known:
			// One request finds out what is left (another if it hangs).
			ok = b.inflight == 0 || !now.Before(b.probeAt.Add(probeWait))
			if ok {
				b.probeAt = now
			}
		default:
			ok = b.remaining-b.inflight > 0
		}
		if ok {
			b.inflight++
			b.mu.Unlock()
			return nil
		}
		if !counted {
			b.waited++
			counted = true
		}
		wake, until := b.wake, b.windowEnd
		if !b.known && (until.IsZero() || b.probeAt.Add(probeWait).Before(until)) {
			until = b.probeAt.Add(probeWait)
		}
		b.mu.Unlock()
		// ctx's deadline is on the wall clock, the wait on the budget's.
		if dl, ok := ctx.Deadline(); ok && !until.IsZero() && time.Until(dl) < until.Sub(now) && b.known {
			return errBudget{until: until}
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if !until.IsZero() {
			timer = b.clock.NewTimer(until.Sub(now))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return context.Cause(ctx)
		case <-wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// release records the answer to a request acquire let out (nil: none came).
func (b *Budget) release(resp *http.Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	if resp != nil {
		b.answered = true
		limit, lerr := strconv.Atoi(resp.Header.Get("X-RateLimit-Limit"))
		rem, rerr := strconv.Atoi(resp.Header.Get("X-RateLimit-Remaining"))
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			b.limited++
			b.throttled, b.known, b.remaining = true, true, 0
			// Retry-After is the seconds to the window's end, rounded up
			// (Laravel's availableIn): no margin needed.
			wait, _ := retryAfter(resp.Header.Get("Retry-After"), b.window, b.clock.Now())
			b.windowEnd = b.clock.Now().Add(wait)
		case lerr == nil && rerr == nil:
			b.throttled, b.limit = true, limit
			if b.known {
				// Answers may come out of order; within a window what is
				// left only shrinks.
				rem = min(rem, b.remaining)
			} else {
				b.windowEnd = b.clock.Now().Add(b.window)
			}
			b.known, b.remaining = true, rem
		case resp.StatusCode < 300 || b.limit == 0:
			// A success without the headers: the route is not throttled
			// (or no longer). An error without them (a 401 answered
			// before the throttle, a proxy's page) says nothing.
			b.throttled, b.limit = false, 0
		}
	}
	close(b.wake)
	b.wake = make(chan struct{})
}
