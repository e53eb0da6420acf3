package httpc

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

func answer(status int, limit, remaining string) *http.Response {
	h := http.Header{}
	if limit != "" {
		h.Set("X-RateLimit-Limit", limit)
		h.Set("X-RateLimit-Remaining", remaining)
	}
	return &http.Response{StatusCode: status, Header: h}
}

// TestBudgetFollowsRemaining: what Coolify says is left is what goes out;
// at nothing left a caller waits for the window's end (fake clock), and a
// call whose deadline comes first fails at once.
func TestBudgetFollowsRemaining(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewBudget(fc, time.Minute)
	ctx := context.Background()
	if err := b.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	b.release(answer(200, "200", "1"))
	if err := b.acquire(ctx); err != nil { // the one left
		t.Fatal(err)
	}
	b.release(answer(200, "200", "0"))
	dl, cancel := context.WithTimeout(ctx, time.Second) // wall-clock deadline, well before the fake window's end
	defer cancel()
	if err := b.acquire(dl); err == nil {
		t.Fatal("a call went out with nothing left and a deadline before the window's end")
	}
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx) }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("went out before the window's end: %v", err)
	default:
	}
	fc.Advance(time.Minute + time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := b.Stats(); st.Waited != 2 || st.Limit != 200 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBudgetHungProbe: while what is left is unknown one request goes out;
// if it hangs, the next goes after probeWait, not after the hang.
func TestBudgetHungProbe(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewBudget(fc, time.Minute)
	ctx := context.Background()
	if err := b.acquire(ctx); err != nil { // the probe, never answered
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx) }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(probeWait)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestBudget429ClosesUntilRetryAfter: a 429 closes the budget for every
// caller until its Retry-After has passed; an answer without the headers
// (a route the server does not throttle) stops the counting.
func TestBudget429ClosesUntilRetryAfter(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewBudget(fc, time.Minute)
	ctx := context.Background()
	if err := b.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	r := answer(429, "200", "0")
	r.Header.Set("Retry-After", "17")
	b.release(r)
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx) }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(16 * time.Second)
	select {
	case <-got:
		t.Fatal("went out before Retry-After passed")
	default:
	}
	fc.Advance(time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	b.release(answer(200, "", ""))
	for i := 0; i < 5; i++ {
		if err := b.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.Limited != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBudgetWindowFromTheFirstAnswer: the server's window starts when the
// first request of it arrives, which may be long after it was sent (a slow
// proxy, a busy machine). The budget counts the window from that request's
// answer, never earlier, so it does not open a new window (and send into a
// 429) while the server's is still running. It counted from the send plus
// one second, which met a 429 whenever the request took longer.
func TestBudgetWindowFromTheFirstAnswer(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := NewBudget(fc, time.Minute)
	ctx := context.Background()
	if err := b.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	fc.Advance(5 * time.Second) // on its way; it reached the server at +4 s
	b.release(answer(200, "200", "0"))
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx) }()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(57 * time.Second) // 62 s after the send, 58 s into the server's window
	// Advance fires due timers before it returns: the waiter's is still
	// armed only if the budget has not opened.
	if fc.Armed() != 1 {
		t.Fatal("the budget opened while the server's window was still running")
	}
	fc.Advance(3 * time.Second) // a minute after the answer: the server's window is over
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// TestForgetBudgets: a budget left closed by a server that is gone (a
// test's simulator after a 429 of Retry-After 60) is not what a later
// server at the same address gets, whatever path a client put after it;
// other addresses keep theirs (one whose port starts with the same digits
// too).
func TestForgetBudgets(t *testing.T) {
	const gone, other = "http://127.0.0.1:4000/api/v1", "http://127.0.0.1:40002/api/v1"
	bare := BudgetFor("http://127.0.0.1:4000", "tok", nil)
	closed := BudgetFor(gone, "tok", nil)
	if err := closed.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed.release(&http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"60"}}})
	kept := BudgetFor(other, "tok", nil)
	ForgetBudgets("http://127.0.0.1:4000/")
	if BudgetFor(gone, "tok", nil) == closed || BudgetFor("http://127.0.0.1:4000", "tok", nil) == bare {
		t.Fatal("the budget of a forgotten address was handed out again")
	}
	if BudgetFor(other, "tok", nil) != kept {
		t.Fatal("another address lost its budget")
	}
	// The wall clock is one clock whether a client names it or not.
	if BudgetFor(other, "tok", clock.Real()) != kept {
		t.Fatal("clock.Real() and nil got two budgets for one credential")
	}
}
