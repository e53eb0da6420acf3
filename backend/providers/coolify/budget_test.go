package coolify_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/providertest"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestBudgetManyCallersNo429: Coolify throttles 200 requests a minute per
// user (RouteServiceProvider.php:47-53). 600 calls from 30 goroutines (a
// busy process: workers, polling, reconciliation, readiness) through two
// clients of the same token share one budget: every call succeeds, none
// meets a 429, and the calls are spread over three windows of the fake
// clock (no wall time). The clock moves only while no request is on the
// wire, as a real minute never passes inside a round trip.
func TestBudgetManyCallersNo429(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	wire := &offWire{gate: &sync.RWMutex{}}
	stop := fc.AutoAdvanceOffWire(wire.gate)
	defer stop()
	s, fx := providertest.StartSeeded(t, sim.Options{CoolifyToken: token, Clock: fc})
	s.SetCoolifyRateLimit(200)
	mk := func() *coolify.Client {
		return coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: token, Clock: fc, RateRetries: -1, HTTP: &http.Client{Transport: wire}})
	}
	clients := []*coolify.Client{mk(), mk()}
	start := fc.Now()
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: the waits are on the fake clock
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 600)
	for g := 0; g < 30; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%2]
			for i := 0; i < 20; i++ {
				if _, l, err := c.GetDatabase(ctx, fx.DBUUID); err != nil || l != providers.Found {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a call failed: %v", err)
	}
	if n := s.ThrottledCount(); n != 0 {
		t.Fatalf("%d answers were 429", n)
	}
	st := clients[0].Budget()
	if st.Limited != 0 || st.Waited == 0 || st.Limit != 200 {
		t.Fatalf("budget %+v: want waits, no 429, the limit read from X-RateLimit-Limit", st)
	}
	if el := fc.Now().Sub(start); el < 2*time.Minute {
		t.Fatalf("600 calls at 200/min took %s of the fake clock, want at least two full windows", el)
	}
}

// TestBudgetSharedWithAnotherProcess: another process spends the same
// user's budget (its requests count in Coolify's window, seen here only in
// X-RateLimit-Remaining). The first call after the other process spent the
// window meets the one 429 that tells this process (nothing else could);
// its Retry-After closes the budget for every caller until the window's
// end, and the calls then go on.
func TestBudgetSharedWithAnotherProcess(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stop := fc.AutoAdvance(nil)
	defer stop()
	s, fx := providertest.StartSeeded(t, sim.Options{CoolifyToken: token, Clock: fc})
	s.SetCoolifyRateLimit(10)
	ctx, cancel := context.WithCancel(context.Background()) // no deadline: the waits are on the fake clock
	defer cancel()
	ours := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: token, Clock: fc, RateRetries: 1})
	// The other process: another token of the same user (team), its own
	// budget (another clock instance stands for another process).
	other := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.AddCoolifyToken(sim.RootTeam, "", "root"), Clock: clock.NewFake(fc.Now()), RateRetries: -1})
	for i := 0; i < 4; i++ {
		if _, _, err := ours.GetDatabase(ctx, fx.DBUUID); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		if _, _, err := other.GetDatabase(ctx, fx.DBUUID); err != nil {
			t.Fatal(err)
		}
	}
	// The window is spent; ours saw 6 left, then the other process took
	// them: the next answer (429) tells it.
	before := fc.Now()
	for i := 0; i < 5; i++ {
		if _, _, err := ours.GetDatabase(ctx, fx.DBUUID); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if fc.Now().Sub(before) < 50*time.Second {
		t.Fatalf("no wait for the shared window (%s)", fc.Now().Sub(before))
	}
	if st := ours.Budget(); st.Limited > 1 {
		t.Fatalf("budget %+v: at most the one 429 that tells it", st)
	}
}

// offWire holds gate's read side for each round trip (see
// clock.AutoAdvanceOffWire).
type offWire struct{ gate *sync.RWMutex }

func (o *offWire) RoundTrip(r *http.Request) (*http.Response, error) {
	o.gate.RLock()
	defer o.gate.RUnlock()
	return http.DefaultTransport.RoundTrip(r)
}
