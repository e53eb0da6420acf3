// Package providertest is the test plumbing the provider packages' tests
// share: a simulator closed with the test, a bounded context, the check of
// a *providers.Error, and cancelling a call while its request is in flight.
package providertest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/httpc"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// Start starts a simulator that is closed when the test ends, and then
// forgets the process's API budgets for its address (httpc.ForgetBudgets,
// any path under it: a test may aim a client at the bare host). The
// provider tests give their simulators one fixed token, so a later test
// whose simulator gets the same port would otherwise inherit the budget
// this one left — closed for a minute after a 429.
func Start(t testing.TB, opts sim.Options) *sim.Sim {
	t.Helper()
	s, err := sim.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		httpc.ForgetBudgets(strings.TrimSuffix(s.CoolifyURL(), "/api/v1"))
	})
	return s
}

// StartSeeded is Start with slot "a" seeded and the seeding's requests
// forgotten, so a test sees only the requests it causes.
func StartSeeded(t testing.TB, opts sim.Options) (*sim.Sim, sim.SlotFixture) {
	t.Helper()
	s := Start(t, opts)
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	s.ResetRequests()
	return s, fx
}

// Ctx returns a context that ends after d or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// CheckErr asserts err's code, HTTP status and uncertainty, that it names
// an op and a resource, and that neither it nor its message carries token.
// An empty code asserts that err is nil.
func CheckErr(t testing.TB, err error, token string, code providers.Code, status int, uncertain bool) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	pe, ok := providers.AsError(err)
	if !ok {
		t.Fatalf("want *providers.Error %s, got %v", code, err)
	}
	if pe.Code != code || pe.Status != status || pe.Uncertain != uncertain {
		t.Fatalf("got code=%s status=%d uncertain=%v (%v); want %s %d %v", pe.Code, pe.Status, pe.Uncertain, err, code, status, uncertain)
	}
	if pe.Op == "" || pe.Resource == "" {
		t.Fatalf("error lacks op or resource: %#v", pe)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(pe.Message, token) {
		t.Fatalf("token leaked: %v", err)
	}
}

// CancelInFlight runs call in the background, waits (bounded by wctx) until
// the simulator records a request that sent accepts, cancels call's context
// and returns when call did, with the moment of cancelling and call's error.
func CancelInFlight(t testing.TB, wctx context.Context, s *sim.Sim, sent func(sim.Request) bool, call func(context.Context) error) (canceledAt time.Time, err error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	if _, err := s.WaitFor(wctx, sent); err != nil {
		t.Fatal(err)
	}
	cancel()
	canceledAt = time.Now()
	select {
	case err = <-errc:
	case <-wctx.Done():
		t.Fatal("call did not return after cancel")
	}
	return canceledAt, err
}

// ExpireInFlight is CancelInFlight with a deadline instead of a cancel:
// call's context reports context.DeadlineExceeded, as a real deadline's
// does, but it passes only once the simulator recorded a request that sent
// accepts. A fixed short deadline (40 ms) could pass on a loaded machine
// before the request even reached the simulator, and the test then waited
// for an aborted request that never came (issue 36 item 7).
func ExpireInFlight(t testing.TB, wctx context.Context, s *sim.Sim, sent func(sim.Request) bool, call func(context.Context) error) (expiredAt time.Time, err error) {
	t.Helper()
	ctx, expire := clock.ExpireWhen(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- call(ctx) }()
	if _, err := s.WaitFor(wctx, sent); err != nil {
		t.Fatal(err)
	}
	expire()
	expiredAt = time.Now()
	select {
	case err = <-errc:
	case <-wctx.Done():
		t.Fatal("call did not return after its deadline passed")
	}
	return expiredAt, err
}
