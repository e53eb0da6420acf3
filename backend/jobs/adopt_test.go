package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// slotViewOf folds the slot's stream and its jobs' streams into the read
// model's view, as the projection does.
func slotViewOf(t *testing.T, w *world, name string, jobIDs ...string) projections.SlotView {
	t.Helper()
	var v projections.SlotView
	var all []events.RecordedEvent
	all = append(all, readStream(t, w, events.SlotStream(name))...)
	for _, id := range jobIDs {
		all = append(all, w.jobEvents(id)...)
	}
	sortByPosition(all)
	for _, ev := range all {
		p, err := events.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		v = projections.ApplySlot(v, ev, p)
	}
	return v
}

func readStream(t *testing.T, w *world, stream string) []events.RecordedEvent {
	t.Helper()
	evs, err := w.store.ReadStream(context.Background(), stream, 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func sortByPosition(evs []events.RecordedEvent) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].Position < evs[j-1].Position; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}

func tracks(v projections.SlotView, kind, id string) bool {
	for _, r := range v.Resources {
		if r.Kind == kind && r.ID == id {
			return true
		}
	}
	return false
}

// TestAdoptJob: an orphan application and repository are adopted into a
// slot: each job looks the resource up, then records it as the slot's, and
// the slot's view tracks it. A resource gone at the provider (its own 404)
// fails the job and is adopted by no one; a lookup answering 503 fails it
// without adopting either.
func TestAdoptJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx := context.Background()
	fx := w.seed("ad1")
	app, err := w.sim.AddApp(fx.ProjectUUID, "stray-app")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := w.sim.AddRepo("SLOT", "stray-repo")
	if err != nil {
		t.Fatal(err)
	}

	var done []string
	for _, c := range []slots.AdoptCmd{
		{Provider: "coolify", Kind: events.ResApplication, ID: app},
		{Provider: "bitbucket", Kind: events.ResRepository, ID: "SLOT/" + repo.Slug},
	} {
		res, err := w.svc.Adopt(ctx, bob, "ad1", c, nil)
		if err != nil {
			t.Fatal(err)
		}
		j := w.waitEnded(res.JobID)
		if j.Status != events.StatusSucceeded {
			t.Fatalf("adopt %s: %s %s%s", c.ID, j.Status, j.LastError, history(w.jobEvents(res.JobID)))
		}
		assertEq(t, "events", types(w.jobEvents(res.JobID)),
			"JobQueued,JobClaimed,StepStarted,StepSucceeded,ResourcesListed,StepSucceeded,JobSucceeded")
		done = append(done, res.JobID)
	}
	v := slotViewOf(t, w, "ad1", done...)
	if !tracks(v, events.ResApplication, app) || !tracks(v, events.ResRepository, "SLOT/"+repo.Slug) {
		t.Fatalf("the slot does not track what it adopted: %+v", v.Resources)
	}
	if !w.sim.HasApp(app) || !w.sim.HasRepo("SLOT", repo.Slug) {
		t.Fatal("adopting changed the provider")
	}

	// Gone at the provider: the job fails at the lookup and lists nothing.
	gone, _ := w.sim.AddDatabase(fx.ProjectUUID, "gone-db")
	if _, err := w.deps.PaaS.DeleteDatabase(ctx, gone); err != nil {
		t.Fatal(err)
	}
	res, err := w.svc.Adopt(ctx, bob, "ad1", slots.AdoptCmd{Provider: "coolify", Kind: events.ResDatabase, ID: gone}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "does not exist") {
		t.Fatalf("adopting a deleted database: %s %q", j.Status, j.LastError)
	}
	if strings.Contains(types(w.jobEvents(res.JobID)), "ResourcesListed") {
		t.Fatalf("a resource that is gone was adopted:%s", history(w.jobEvents(res.JobID)))
	}

	// The lookup answers 503: failed, nothing adopted, never "absent".
	other, _ := w.sim.AddDatabase(fx.ProjectUUID, "flaky-db")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Resource: other, Status: 503})
	res, err = w.svc.Adopt(ctx, bob, "ad1", slots.AdoptCmd{Provider: "coolify", Kind: events.ResDatabase, ID: other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	j = w.waitEnded(res.JobID)
	if j.Status == events.StatusSucceeded || strings.Contains(types(w.jobEvents(res.JobID)), "ResourcesListed") {
		t.Fatalf("adopt through a 503 lookup: %s%s", j.Status, history(w.jobEvents(res.JobID)))
	}
	if strings.Contains(j.LastError, "does not exist") {
		t.Fatalf("a 503 was read as absent: %q", j.LastError)
	}
}

// TestAdoptRefusals: bad input and wrong states get a clear error and
// append nothing: a retired slot, an unknown provider or kind, a path in an
// id, and the caller's own check (a stale finding).
func TestAdoptRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx := context.Background()
	w.seed("ad2")
	fx := w.seed("ad3")
	res, err := w.svc.Teardown(ctx, bob, "ad3")
	if err != nil {
		t.Fatal(err)
	}
	if j := w.waitEnded(res.JobID); j.Status != events.StatusSucceeded {
		t.Fatalf("teardown: %s", j.Status)
	}
	app, _ := w.sim.AddApp(w.sim.AddProject("p"), "stray")
	_ = fx
	before := len(readStream(t, w, events.SlotStream("ad2"))) + len(readStream(t, w, events.SlotStream("ad3")))
	stale := errors.New("stale")
	for name, c := range map[string]struct {
		slot  string
		cmd   slots.AdoptCmd
		check func() error
		code  slots.Code
	}{
		"retired slot": {"ad3", slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app}, nil, slots.CodeConflict},
		"provider":     {"ad2", slots.AdoptCmd{Provider: "github", Kind: events.ResRepository, ID: "A/b"}, nil, slots.CodeInvalid},
		"kind":         {"ad2", slots.AdoptCmd{Provider: "coolify", Kind: events.ResRepository, ID: app}, nil, slots.CodeInvalid},
		"path in id":   {"ad2", slots.AdoptCmd{Provider: "bitbucket", Kind: events.ResRepository, ID: "SLOT/../x"}, nil, slots.CodeInvalid},
		"caller refuses": {"ad2", slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app}, func() error {
			return &slots.Error{Code: slots.CodeConflict, Message: "stale", Err: stale}
		}, slots.CodeConflict},
	} {
		_, err := w.svc.Adopt(ctx, bob, c.slot, c.cmd, c.check)
		if got := slots.ErrorCode(err); got != c.code {
			t.Errorf("%s: %v (code %s), want %s", name, err, got, c.code)
		}
	}
	if after := len(readStream(t, w, events.SlotStream("ad2"))) + len(readStream(t, w, events.SlotStream("ad3"))); after != before {
		t.Fatalf("a refused adopt appended %d events", after-before)
	}
	if _, err := w.svc.PlanAdopt(ctx, "ad3", slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app}); slots.ErrorCode(err) != slots.CodeConflict {
		t.Fatalf("plan into a retired slot: %v", err)
	}
	p, err := w.svc.PlanAdopt(ctx, "ad2", slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app})
	if err != nil || p.Kind != events.KindAdopt || len(p.Resources) != 1 || p.Resources[0].ID != app || strings.Join(p.Steps, ",") != "lookup_resource,adopt_resource" {
		t.Fatalf("plan: %+v %v", p, err)
	}
}
