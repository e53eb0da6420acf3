package jobs_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestAdoptFaultMatrix: the adopt job's lookup under each fault. In every
// cell the job ends honestly (a deadline → timed out, a cancel → cancelled,
// every other answer → failed: a foreign 404 or a 5xx is never "gone", and
// never "found"), nothing is adopted (no ResourcesListed, the slot does not
// track it), no request falls outside the attempt's fenced span, a hung
// call is aborted, and — after the fault is cleared — a resume (a new job
// after a cancel) adopts it.
func TestAdoptFaultMatrix(t *testing.T) {
	t.Parallel()
	cells := []struct {
		name  string
		fault sim.Fault
		want  string
	}{
		{"hang", sim.Fault{Hang: true}, events.StatusTimedOut},
		{"500", sim.Fault{Status: 500}, events.StatusFailed},
		{"503", sim.Fault{Status: 503}, events.StatusFailed},
		{"401", sim.Fault{Status: 401}, events.StatusFailed},
		{"foreign404", sim.Fault{Foreign404: true}, events.StatusFailed},
		{"reset", sim.Fault{Reset: true}, events.StatusFailed},
		{"cancel", sim.Fault{Hang: true}, events.StatusCancelled},
	}
	runCells(t, len(cells), func(i int) string { return cells[i].name }, func(t *testing.T, i int) {
		adoptCell(t, cells[i].name, cells[i].fault, cells[i].want)
	})
}

func adoptCell(t *testing.T, name string, flt sim.Fault, want string) {
	flt.Endpoint = sim.EndpointGetApplication
	w, app, id, cmd, res, j, evs, from := orphanCell(t, name, flt, want, func(w *world, cmd slots.AdoptCmd) (slots.JobAcceptedResult, error) {
		return w.svc.Adopt(context.Background(), bob, "cell", cmd, nil)
	})
	if strings.Contains(types(evs), "ResourcesListed") || j.Done[events.StepLookupResource] {
		t.Fatalf("adopted through a %s:%s", name, history(evs))
	}
	if strings.Contains(j.LastError, "does not exist") {
		t.Fatalf("a %s was read as absent: %q", name, j.LastError)
	}
	w.checkFence(from, res.JobID)
	// A provider's answer is a coded failure the dashboard words in any
	// language: who answered and the provider error's code, besides the
	// English (issue: provider errors in English on Korean pages).
	problem := map[string]string{"500": "server", "503": "server", "401": "unauthorized", "foreign404": "foreign", "reset": "transport"}[name]
	if problem != "" {
		sf := payloads[events.StepFailed](w, res.JobID)
		if len(sf) != 1 || sf[0].ErrorCode != events.FailureProvider || sf[0].ErrorArgs["provider"] != "coolify" || sf[0].ErrorArgs["problem"] != problem || sf[0].ErrorArgs["target"] != app {
			t.Errorf("a %s: StepFailed %+v, want code provider, provider coolify, problem %s, target %s", name, sf, problem, app)
		}
		// Neither the words nor the parts carry a secret (both reach the dashboard).
		for _, f := range sf {
			for _, secret := range []string{w.sim.CoolifyToken(), w.sim.BitbucketToken()} {
				if strings.Contains(f.Error, secret) || slices.Contains(slices.Collect(maps.Values(f.ErrorArgs)), secret) {
					t.Errorf("a %s: StepFailed carries a provider token: %+v", name, f)
				}
			}
		}
	}
	if flt.Hang {
		for _, r := range w.sim.Requests() {
			if r.Fault == 0 {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			done, err := w.sim.WaitFor(ctx, func(q sim.Request) bool { return q.Seq == r.Seq && q.Done() })
			cancel()
			if err != nil || !done.WasAborted() {
				t.Errorf("hung lookup was not aborted (%v)", err)
			}
		}
	}
	if v := slotViewOf(t, w, "cell", res.JobID); tracks(v, events.ResApplication, app) {
		t.Fatalf("the slot tracks what a faulted adopt never confirmed: %+v", v.Resources)
	}

	// Converge once the provider answers again.
	w.sim.RemoveFault(id)
	ids := []string{res.JobID}
	if j.Status == events.StatusCancelled {
		again, err := w.svc.Adopt(context.Background(), bob, "cell", cmd, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, again.JobID)
	} else {
		if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
			t.Fatalf("resume: %v", err)
		}
	}
	last, runs := ids[len(ids)-1], 2 // the resumed job's second run
	if len(ids) == 2 {
		runs = 1 // a new job after the cancel
	}
	if j := w.waitEndedN(last, runs); j.Status != events.StatusSucceeded {
		t.Fatalf("after the fault: %s %q:%s", j.Status, j.LastError, history(w.jobEvents(last)))
	}
	if v := slotViewOf(t, w, "cell", ids...); !tracks(v, events.ResApplication, app) {
		t.Fatalf("not adopted after the fault cleared: %+v", v.Resources)
	}
}

// TestDeleteOrphan: an orphan application is deleted by a delete_orphan
// job charged to a slot: looked up, adopted (tracked while it is deleted),
// deleted and confirmed gone by the provider's own 404 — only then is
// AppDeleted recorded and the slot no longer tracks it.
func TestDeleteOrphan(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	fx := w.seed("del")
	app, _ := w.sim.AddApp(fx.ProjectUUID, "stray")
	repo, _ := w.sim.AddRepo("SLOT", "stray-repo")
	var ids []string
	for _, c := range []slots.AdoptCmd{
		{Provider: "coolify", Kind: events.ResApplication, ID: app},
		{Provider: "bitbucket", Kind: events.ResRepository, ID: "SLOT/" + repo.Slug},
	} {
		res, err := w.svc.DeleteOrphan(context.Background(), bob, "del", c, nil)
		if err != nil {
			t.Fatal(err)
		}
		j := w.waitEnded(res.JobID)
		if j.Status != events.StatusSucceeded {
			t.Fatalf("delete %s: %s %q:%s", c.ID, j.Status, j.LastError, history(w.jobEvents(res.JobID)))
		}
		ids = append(ids, res.JobID)
	}
	if w.sim.HasApp(app) || w.sim.HasRepo("SLOT", repo.Slug) {
		t.Fatal("the orphans still exist at the providers")
	}
	if !w.sim.HasApp(fx.AppUUID) || !w.sim.HasDatabase(fx.DBUUID) {
		t.Fatal("deleting an orphan touched the slot's own resources")
	}
	v := slotViewOf(t, w, "del", ids...)
	if tracks(v, events.ResApplication, app) || tracks(v, events.ResRepository, "SLOT/"+repo.Slug) || !tracks(v, events.ResApplication, fx.AppUUID) {
		t.Fatalf("slot resources after the deletes: %+v", v.Resources)
	}
}

// TestDeleteOrphanFaultMatrix: faults on the delete and on its confirming
// lookup. The job never claims the orphan deleted unless the provider's own
// 404 confirmed it: no AppDeleted, the application is still the slot's
// (listed, never lost), and after the fault clears a resume (a new job
// after a cancel) deletes it.
func TestDeleteOrphanFaultMatrix(t *testing.T) {
	t.Parallel()
	cells := []struct {
		name  string
		fault sim.Fault
		want  string
	}{
		{"hang", sim.Fault{Endpoint: sim.EndpointDeleteApplication, Hang: true}, events.StatusTimedOut},
		{"500", sim.Fault{Endpoint: sim.EndpointDeleteApplication, Status: 500}, events.StatusFailed},
		{"503", sim.Fault{Endpoint: sim.EndpointDeleteApplication, Status: 503}, events.StatusFailed},
		{"foreign404", sim.Fault{Endpoint: sim.EndpointDeleteApplication, Foreign404: true}, events.StatusFailed},
		// The delete is accepted; every confirming GET answers a proxy's
		// HTML 404 (the first GET, the step's lookup, passes).
		{"confirm-foreign404", sim.Fault{Endpoint: sim.EndpointGetApplication, Foreign404: true, Skip: 1}, events.StatusFailed},
		{"cancel", sim.Fault{Endpoint: sim.EndpointDeleteApplication, Hang: true}, events.StatusCancelled},
	}
	runCells(t, len(cells), func(i int) string { return cells[i].name }, func(t *testing.T, i int) {
		deleteCell(t, cells[i].name, cells[i].fault, cells[i].want)
	})
}

func deleteCell(t *testing.T, name string, flt sim.Fault, want string) {
	w, app, id, cmd, res, j, evs, from := orphanCell(t, name, flt, want, func(w *world, cmd slots.AdoptCmd) (slots.JobAcceptedResult, error) {
		return w.svc.DeleteOrphan(context.Background(), bob, "cell", cmd, nil)
	})
	if strings.Contains(types(evs), "AppDeleted") || j.Done[events.StepDeleteResource] {
		t.Fatalf("claimed deleted through a %s:%s", name, history(evs))
	}
	w.checkFence(from, res.JobID)
	if v := slotViewOf(t, w, "cell", res.JobID); !tracks(v, events.ResApplication, app) {
		t.Fatalf("an orphan not confirmed deleted is no longer tracked: %+v", v.Resources)
	}

	w.sim.RemoveFault(id)
	ids := []string{res.JobID}
	runs := 2 // the resumed job's second run
	if j.Status == events.StatusCancelled {
		again, err := w.svc.DeleteOrphan(context.Background(), bob, "cell", cmd, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids, runs = append(ids, again.JobID), 1
	} else if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	last := ids[len(ids)-1]
	if j := w.waitEndedN(last, runs); j.Status != events.StatusSucceeded {
		t.Fatalf("after the fault: %s %q:%s", j.Status, j.LastError, history(w.jobEvents(last)))
	}
	if w.sim.HasApp(app) {
		t.Fatal("still at the provider after a successful delete")
	}
	if v := slotViewOf(t, w, "cell", ids...); tracks(v, events.ResApplication, app) {
		t.Fatalf("still tracked after the confirmed delete: %+v", v.Resources)
	}
}

// orphanCell is what the adopt and delete-orphan cells share: a world with a
// stray application no slot knows, flt on it (on flt.Endpoint), the job
// started by start, cancelled once the faulted call arrived when name is
// "cancel", and the job's end, which must be want.
func orphanCell(t *testing.T, name string, flt sim.Fault, want string, start func(*world, slots.AdoptCmd) (slots.JobAcceptedResult, error)) (
	w *world, app string, fault int, cmd slots.AdoptCmd, res slots.JobAcceptedResult, j events.JobState, evs []events.RecordedEvent, from time.Time) {
	t.Helper()
	w = newWorld(t, nil)
	cfg := w.engineConfig()
	if name == "hang" {
		// Above a quick lookup's time on a loaded machine (700 ms was not).
		cfg.StepTimeout = 3 * time.Second
	}
	w.startEngine(cfg)
	fx := w.seed("cell")
	app, err := w.sim.AddApp(fx.ProjectUUID, "stray")
	if err != nil {
		t.Fatal(err)
	}
	flt.Resource = app
	fault = w.sim.AddFault(flt)
	if name == "reset" {
		w.inert = map[int]bool{fault: true}
	}
	from = time.Now()
	cmd = slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app}
	if res, err = start(w, cmd); err != nil {
		t.Fatal(err)
	}
	if name == "cancel" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := w.sim.WaitFor(ctx, func(r sim.Request) bool { return r.Endpoint == flt.Endpoint && r.Fault != 0 }); err != nil {
			t.Fatalf("faulted call never arrived: %v", err)
		}
		if err := w.svc.Cancel(ctx, slots.Actor{Name: "carol"}, res.JobID); err != nil {
			t.Fatal(err)
		}
	}
	j = w.waitEnded(res.JobID)
	evs = w.jobEvents(res.JobID)
	if j.Status != want {
		t.Fatalf("terminal %s, want %s:%s", j.Status, want, history(evs))
	}
	return w, app, fault, cmd, res, j, evs, from
}
