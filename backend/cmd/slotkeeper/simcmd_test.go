package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// The tokens the simulator processes of these tests are started with.
const ctok, btok = "sim-coolify-token-1234567", "sim-bitbucket-token-1234567"

// runSimProcess runs `slotkeeper sim` on a free port with ctok and btok and
// waits until it listens; stop ends it and returns its exit code.
func runSimProcess(t *testing.T) (addr string, out, errb *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errb = newSyncBuffer(), newSyncBuffer()
	ready := make(chan string, 1)
	exited := make(chan int, 1)
	go func() {
		exited <- runWith(ctx, []string{"sim", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--delete-delay", "0s",
			"--coolify-token", ctok, "--bitbucket-token", btok}, noEnv, out, errb, ready)
	}()
	select {
	case addr = <-ready:
	case code := <-exited:
		cancel()
		t.Fatalf("sim exited %d: %s", code, errb.String())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("sim not ready")
	}
	return addr, out, errb, func() int { cancel(); return <-exited }
}

// TestSimAsItsOwnProcess: `slotkeeper sim` serves the simulated providers
// on one address with the tokens it was given (never printing them);
// `serve --sim-url` seeds the demo pool through it, proxies its fault
// controls, and a slot world seeded through the control API registers
// (looked up at the simulators) and its teardown runs to success there.
func TestSimAsItsOwnProcess(t *testing.T) {
	t.Parallel()
	addr, out, errb, stop := runSimProcess(t)
	defer func() {
		if code := stop(); code != 0 {
			t.Errorf("sim exit %d: %s", code, errb.String())
		}
	}()
	if strings.Contains(out.String(), ctok) || strings.Contains(out.String(), btok) || !strings.Contains(out.String(), "http://"+addr+"/api/v1") {
		t.Fatalf("sim output: %s", out.String())
	}

	base := "http://" + addr
	resp, err := http.Post(base+"/sim/slots", "application/json", strings.NewReader(`{"name":"solo"}`))
	if err != nil {
		t.Fatal(err)
	}
	var fx sim.SlotFixture
	json.NewDecoder(resp.Body).Decode(&fx)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("seed: %d", resp.StatusCode)
	}
	// serve on the external simulators, seeding the demo pool through their
	// control API; the solo world is in the demo's scope because the
	// simulators hold it (GET /sim/projects, issue 38), no flag needed.
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--sim-url", base, "--demo",
		"--coolify-token", ctok, "--bitbucket-token", btok, "--deadline-reset=false")
	var list struct{ Slots []projections.SlotView }
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 || len(list.Slots) != 8 {
		t.Fatalf("demo pool on the external simulators: %d, %d slots", code, len(list.Slots))
	}
	var faults struct{ Faults []sim.Fault }
	if code := s.call(t, "GET", "/api/sim/faults", nil, &faults); code != 200 {
		t.Fatalf("fault controls through the proxy: %d", code)
	}
	var e apiError
	if code := s.call(t, "POST", "/api/slots", slots.RegisterCmd{
		Name: "solo", ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: "main",
	}, &e); code != 201 {
		t.Fatalf("register: %d %+v", code, e.Error)
	}
	// The job's end arrives on the live stream (before: a 20 ms poll of
	// GET /api/jobs/…).
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	frames := follow(sctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}
	var res slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/slots/solo/teardown", nil, &res); code != 202 {
		t.Fatalf("teardown: %d", code)
	}
	ch := waitChange(t, frames, func(ch projections.Change) bool {
		return ch.Job != nil && ch.Job.ID == res.JobID && events.Ended(ch.Job.State)
	})
	if ch.Job.State != events.StatusSucceeded {
		t.Fatalf("teardown %s: %+v", ch.Job.State, ch.Job)
	}
	var st bytes.Buffer
	resp, err = http.Get(base + "/sim/state")
	if err != nil {
		t.Fatal(err)
	}
	st.ReadFrom(resp.Body)
	resp.Body.Close()
	if strings.Contains(st.String(), fx.AppUUID) || strings.Contains(st.String(), fx.Repo.Slug+`"`) {
		t.Fatalf("the simulators still hold the slot's resources: %s", st.String())
	}
}
