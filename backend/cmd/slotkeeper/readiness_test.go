package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// readyz answers GET /readyz: the status and the error message.
func (s *server) readyz(t *testing.T) (int, string, error) {
	t.Helper()
	resp, err := http.Get(s.url() + "/readyz")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// untilReadyz polls /readyz (each answer is immediate) until want returns
// true for its answer, or fails after a bound. A poll: readiness itself is
// a periodic probe, and no event says when an answer changed; the bound
// is one only an answer that never comes reaches, not a loaded machine.
func untilReadyz(t *testing.T, s *server, what string, want func(code int, body string, err error) bool) (int, string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for {
		code, body, err := s.readyz(t)
		if want(code, body, err) {
			return code, body
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("/readyz never %s; last %d %s %v", what, code, body, err)
		}
	}
}

// TestReadyzFollowsProvidersAndDrains: /readyz is 503 naming the provider
// while Coolify refuses the server's token (the store and the read model
// are fine), 200 once it answers again; start-up logged what it reached.
// On SIGTERM it answers 503 "shutting down" for --drain-delay while the
// listener still accepts — before, it was ready with the providers down,
// and the 503 lasted milliseconds.
func TestReadyzFollowsProvidersAndDrains(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--ready-interval", "20ms", "--drain-delay", "2s", "--deadline-reset=false")
	for _, dep := range []string{"dependency=\"event store\"", "dependency=coolify", "dependency=bitbucket"} {
		if !strings.Contains(grepLines(s.err.String(), "msg=reached"), dep) {
			t.Errorf("start-up did not log %s as reached:\n%s", dep, grepLines(s.err.String(), "reached"))
		}
	}
	if code, body, err := s.readyz(t); code != 200 {
		t.Fatalf("/readyz %d %s %v", code, body, err)
	}
	var fault struct{ ID int }
	if code := s.call(t, "POST", "/api/sim/faults", sim.Fault{Server: "coolify", Endpoint: sim.EndpointVersion, Status: 401}, &fault); code != 201 {
		t.Fatalf("fault: %d", code)
	}
	_, body := untilReadyz(t, s, "503 naming coolify", func(code int, body string, _ error) bool {
		return code == 503 && strings.Contains(body, "coolify")
	})
	if !strings.Contains(body, "unauthorized") {
		t.Errorf("reason %s does not say why", body)
	}
	s.call(t, "DELETE", "/api/sim/faults", nil, nil)
	untilReadyz(t, s, "ready again", func(code int, _ string, _ error) bool { return code == 200 })

	s.cancel() // SIGTERM
	untilReadyz(t, s, "503 shutting down", func(code int, body string, err error) bool {
		if err != nil {
			t.Fatalf("the listener closed before draining: %v", err)
		}
		return code == 503 && strings.Contains(body, "shutting down")
	})
	// Still draining: the listener answers, the answer stays 503.
	if code, body, err := s.readyz(t); err != nil || code != 503 {
		t.Fatalf("during the drain: %d %s %v", code, body, err)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestStoreProbeRefusesAClosedStore: the write probe passes on a working
// store without writing anything, and names the store once it refuses.
func TestStoreProbeRefusesAClosedStore(t *testing.T) {
	st := memstore.New()
	r := &readiness{store: st, probes: []probe{storeProbe(st)}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := r.err(); err == nil {
		t.Fatal("ready before any check")
	}
	ctx := context.Background()
	r.round(ctx)
	if err := r.err(); err != nil {
		t.Fatalf("working store: %v", err)
	}
	if h, _ := st.Head(ctx); h != 0 {
		t.Fatalf("the probe wrote: head %d", h)
	}
	st.Close()
	r.round(ctx)
	if err := r.err(); err == nil || !strings.Contains(err.Error(), "event store: refuses writes") {
		t.Fatalf("closed store: %v", err)
	}
	r.draining.Store(true)
	if err := r.err(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("draining: %v", err)
	}
}

// TestReadinessRepeatsOnItsClock: the probes run again every interval on
// the readiness clock (a fake: no wall time), so a dependency that comes
// back is reported ready one interval later, not before.
func TestReadinessRepeatsOnItsClock(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var up atomic.Bool
	rounds := make(chan struct{}, 10)
	r := &readiness{interval: 5 * time.Second, clock: fc, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		probes: []probe{{name: "dep", check: func(context.Context) error {
			defer func() { rounds <- struct{}{} }()
			if !up.Load() {
				return errors.New("down")
			}
			return nil
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.round(ctx)
	<-rounds
	go r.run(ctx)
	up.Store(true)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := fc.BlockUntil(wctx, 1); err != nil {
		t.Fatal(err)
	}
	fc.Advance(4 * time.Second)
	if err := r.err(); err == nil {
		t.Fatal("ready before the next round")
	}
	fc.Advance(time.Second)
	<-rounds
	if err := fc.BlockUntil(wctx, 1); err != nil { // the round has ended
		t.Fatal(err)
	}
	if err := r.err(); err != nil {
		t.Fatalf("after the next round: %v", err)
	}
}
