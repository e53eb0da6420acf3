package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// world is a simulator with two slots, their tracked resources, and a
// reconciler over both slots' Coolify projects and the SLOT and TPL keys.
type world struct {
	sim     *sim.Sim
	store   events.Store
	slots   []sim.SlotFixture
	tracker *staticTracker
	paas    *coolify.Client
	git     *bitbucket.Client
}

type staticTracker struct {
	list  []reconcile.Tracked
	block chan struct{} // if set, Tracked waits for it
	in    chan struct{}
}

func (s *staticTracker) Tracked(ctx context.Context) ([]reconcile.Tracked, error) {
	if s.block != nil {
		s.in <- struct{}{}
		select {
		case <-s.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return s.list, nil
}

func newWorld(t *testing.T, pageLimit int) *world {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w := &world{sim: s, store: memstore.New(), tracker: &staticTracker{}}
	var views []projections.SlotView
	for _, n := range []string{"a", "b"} {
		fx, err := s.SeedSlot(n)
		if err != nil {
			t.Fatal(err)
		}
		w.slots = append(w.slots, fx)
		views = append(views, projections.SlotView{Name: n, ProjectUUID: fx.ProjectUUID,
			Repo: events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug}, TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug},
			Resources: []events.Resource{
				{Kind: events.ResProject, ID: fx.ProjectUUID}, {Kind: events.ResApplication, ID: fx.AppUUID},
				{Kind: events.ResDatabase, ID: fx.DBUUID}, {Kind: events.ResRepository, ID: fx.Repo.Project + "/" + fx.Repo.Slug},
			}})
	}
	tr, err := reconcile.ViewTracker{Slots: views2lister(views)}.Tracked(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.tracker.list = tr
	w.paas = coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken()})
	w.git = bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), PageLimit: pageLimit})
	return w
}

type views2lister []projections.SlotView

func (v views2lister) ListSlots(context.Context) ([]projections.SlotView, error) { return v, nil }

func (w *world) reconciler(cfg reconcile.Config) *reconcile.Reconciler {
	cfg.CoolifyProjects = []string{w.slots[0].ProjectUUID, w.slots[1].ProjectUUID}
	cfg.BitbucketProjects = []string{"SLOT", "TPL"}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return reconcile.New(w.store, w.tracker, w.paas, w.git, cfg)
}

func run(t *testing.T, r *reconcile.Reconciler) reconcile.Report {
	t.Helper()
	rep, err := r.RunOnce(ctxT(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func summary(rep reconcile.Report) []string {
	var out []string
	for _, f := range rep.Findings {
		out = append(out, fmt.Sprintf("%s %s %s %s", f.Class, f.Provider, f.Kind, f.ID))
	}
	sort.Strings(out)
	return out
}

func has(rep reconcile.Report, class, kind, id string) bool {
	for _, f := range rep.Findings {
		if f.Class == class && f.Kind == kind && f.ID == id {
			return true
		}
	}
	return false
}

func TestCleanWorldHasNoFindings(t *testing.T) {
	w := newWorld(t, 100)
	rep := run(t, w.reconciler(reconcile.Config{}))
	if rep.Run == nil || rep.Run.State != "done" || len(rep.Findings) != 0 {
		t.Fatalf("clean world: run %+v findings %v", rep.Run, summary(rep))
	}
}

// TestOrphansDriftAndResolved: resources made outside Slotkeeper are
// orphans, a tracked database deleted behind its back is drift, and on the
// next run after they are cleaned up both are resolved.
func TestOrphansDriftAndResolved(t *testing.T) {
	w := newWorld(t, 100)
	p := w.slots[0].ProjectUUID
	strayApp, _ := w.sim.AddApp(p, "stray-app")
	strayDB, _ := w.sim.AddDatabase(p, "stray-db")
	stray, _ := w.sim.AddRepo("SLOT", "stray-repo")
	if _, err := w.paas.DeleteDatabase(ctxT(t), w.slots[1].DBUUID); err != nil {
		t.Fatal(err)
	}
	r := w.reconciler(reconcile.Config{})
	rep := run(t, r)
	for _, want := range []struct{ class, kind, id string }{
		{events.FindingOrphan, events.ResApplication, strayApp},
		{events.FindingOrphan, events.ResDatabase, strayDB},
		{events.FindingOrphan, events.ResRepository, "SLOT/" + stray.Slug},
		{events.FindingDrift, events.ResDatabase, w.slots[1].DBUUID},
	} {
		if !has(rep, want.class, want.kind, want.id) {
			t.Errorf("missing %v in %v", want, summary(rep))
		}
	}
	if len(rep.Findings) != 4 {
		t.Errorf("findings: %v", summary(rep))
	}
	if rep.Findings[0].Class != events.FindingDrift {
		t.Errorf("problems first: drift leads, got %v", rep.Findings[0].Class)
	}
	for _, f := range rep.Findings {
		if f.Kind == events.ResDatabase && f.Class == events.FindingDrift && f.Slot != "b" {
			t.Errorf("drift names its slot: %+v", f)
		}
	}
	first := rep.Findings[0].Since

	// Clean up the stray app; the next run resolves it and keeps the others'
	// first-seen time.
	if _, err := w.paas.DeleteApplication(ctxT(t), strayApp); err != nil {
		t.Fatal(err)
	}
	rep2 := run(t, r)
	if !has(rep2, events.FindingResolved, events.ResApplication, strayApp) || has(rep2, events.FindingOrphan, events.ResApplication, strayApp) {
		t.Fatalf("the deleted orphan is not resolved: %v", summary(rep2))
	}
	for _, f := range rep2.Findings {
		if f.Class == events.FindingDrift && !f.Since.Equal(first) {
			t.Errorf("drift's since moved: %v → %v", first, f.Since)
		}
	}
	// A third run no longer mentions what was resolved.
	if rep3 := run(t, r); has(rep3, events.FindingResolved, events.ResApplication, strayApp) {
		t.Fatalf("resolved findings linger: %v", summary(rep3))
	}
}

// TestPageBoundaryBetweenTwoOrphans: with a page of 2, the slot repos and
// two orphans span pages; both orphans are found.
func TestPageBoundaryBetweenTwoOrphans(t *testing.T) {
	w := newWorld(t, 2)
	o1, _ := w.sim.AddRepo("SLOT", "zz-orphan-1")
	o2, _ := w.sim.AddRepo("SLOT", "zz-orphan-2")
	rep := run(t, w.reconciler(reconcile.Config{}))
	if !has(rep, events.FindingOrphan, events.ResRepository, "SLOT/"+o1.Slug) || !has(rep, events.FindingOrphan, events.ResRepository, "SLOT/"+o2.Slug) {
		t.Fatalf("findings: %v", summary(rep))
	}
	lists := 0
	for _, rq := range w.sim.Requests() {
		if rq.Endpoint == sim.EndpointListRepos && strings.Contains(rq.Path, "/SLOT/") {
			lists++
		}
	}
	if lists != 2 { // 4 repos, pages of 2
		t.Fatalf("%d list requests for SLOT, want 2 pages", lists)
	}
}

// TestListFailureIsUnknownAndKeepsFindings: a list answering 500, or
// hanging on its second page, makes that scope "unknown" — never "nothing
// there" — and the previous findings under it are carried over, not resolved.
func TestListFailureIsUnknownAndKeepsFindings(t *testing.T) {
	w := newWorld(t, 2)
	p := w.slots[0].ProjectUUID
	strayApp, _ := w.sim.AddApp(p, "stray-app")
	o, _ := w.sim.AddRepo("SLOT", "zz-orphan")
	r := w.reconciler(reconcile.Config{CallTimeout: 300 * time.Millisecond})
	run(t, r)

	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListApplications, Status: 500})
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListRepos, Resource: "SLOT", Hang: true, Skip: 1})
	rep := run(t, r)
	if !has(rep, events.FindingUnknown, events.ResProject, p) || !has(rep, events.FindingUnknown, "project", "SLOT") {
		t.Fatalf("want unknown for the failing scopes: %v", summary(rep))
	}
	if !has(rep, events.FindingOrphan, events.ResApplication, strayApp) || !has(rep, events.FindingOrphan, events.ResRepository, "SLOT/"+o.Slug) {
		t.Fatalf("previous findings were dropped: %v", summary(rep))
	}
	for _, f := range rep.Findings {
		if f.Class == events.FindingResolved {
			t.Fatalf("an unchecked finding was resolved: %+v", f)
		}
	}
	if rep.Run.Counts[events.FindingUnknown] == 0 {
		t.Fatalf("counts: %v", rep.Run.Counts)
	}
}

// TestOneRunAtATime: a second process cannot open a run while one is open.
func TestOneRunAtATime(t *testing.T) {
	w := newWorld(t, 100)
	w.tracker.block, w.tracker.in = make(chan struct{}), make(chan struct{})
	r1 := w.reconciler(reconcile.Config{})
	r2 := w.reconciler(reconcile.Config{})
	done := make(chan error, 1)
	go func() { _, err := r1.RunOnce(ctxT(t), "one"); done <- err }()
	<-w.tracker.in // r1's run is open and comparing
	if _, err := r2.RunOnce(ctxT(t), "two"); !errors.Is(err, reconcile.ErrBusy) {
		t.Fatalf("second run: %v", err)
	}
	if err := r2.Trigger(ctxT(t)); !errors.Is(err, reconcile.ErrBusy) {
		t.Fatalf("trigger during a run: %v", err)
	}
	rep, _ := r2.Latest(ctxT(t))
	if rep.Run == nil || rep.Run.State != "running" {
		t.Fatalf("latest during the run: %+v", rep.Run)
	}
	close(w.tracker.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAbandonedRunIsTakenOver: a run whose process died (never finished)
// is closed as failed by the next run after twice the run timeout.
func TestAbandonedRunIsTakenOver(t *testing.T) {
	w := newWorld(t, 100)
	now := time.Now()
	clock := func() time.Time { return now }
	_, err := w.store.Append(ctxT(t), events.ReconcileStream, events.NoStream(), events.New(events.ReconcileStarted{RunID: "dead", StartedAt: now.Add(-time.Hour)}, events.Metadata{Actor: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	r := w.reconciler(reconcile.Config{RunTimeout: time.Minute, Now: clock})
	rep := run(t, r)
	if rep.Run.ID == "dead" || rep.Run.State != "done" {
		t.Fatalf("run %+v", rep.Run)
	}
	evs, _ := w.store.ReadStream(ctxT(t), events.ReconcileStream, 0, 0, events.Forward)
	if evs[1].Type != "ReconcileFinished" || !strings.Contains(string(evs[1].Data), `"dead"`) || !strings.Contains(string(evs[1].Data), "abandoned") {
		t.Fatalf("the dead run was not closed honestly: %s %s", evs[1].Type, evs[1].Data)
	}
}

// TestViewTrackerCoversRetiredAndPromoted: a retired slot's leftover and a
// promoted repository are tracked; templates are known.
func TestViewTrackerCoversRetiredAndPromoted(t *testing.T) {
	views := views2lister{
		{Name: "gone", Lifecycle: projections.LifecycleRetired, ProjectUUID: "p1", Resources: []events.Resource{{Kind: events.ResApplication, ID: "app-left"}}},
		{Name: "live", ProjectUUID: "p2", PromotedTo: []events.RepoRef{{Project: "PROM", Slug: "x"}}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "t"}},
	}
	tr, _ := reconcile.ViewTracker{Slots: views}.Tracked(context.Background())
	got := map[string]reconcile.Tracked{}
	for _, x := range tr {
		got[x.ID] = x
	}
	if got["app-left"].Scope != "coolify:p1" || got["app-left"].Slot != "gone" {
		t.Errorf("retired leftover: %+v", got["app-left"])
	}
	if got["PROM/x"].Scope != "bitbucket:PROM" || got["TPL/t"].Template != true {
		t.Errorf("promoted/template: %+v", tr)
	}
}

// TestForeign404IsNotDrift: a tracked database missing from the list whose
// lookup answers an HTML 404 (a misrouting proxy, not Coolify) is "could
// not check", never drift; and a foreign 404 on the project is unknown,
// never "the project is gone".
func TestForeign404IsNotDrift(t *testing.T) {
	w := newWorld(t, 100)
	if _, err := w.paas.DeleteDatabase(ctxT(t), w.slots[1].DBUUID); err != nil {
		t.Fatal(err)
	}
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Foreign404: true})
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetProject, Resource: w.slots[0].ProjectUUID, Foreign404: true})
	rep := run(t, w.reconciler(reconcile.Config{}))
	if has(rep, events.FindingDrift, events.ResDatabase, w.slots[1].DBUUID) || !has(rep, events.FindingUnknown, events.ResDatabase, w.slots[1].DBUUID) {
		t.Fatalf("foreign 404 on the lookup: %v", summary(rep))
	}
	if !has(rep, events.FindingUnknown, events.ResProject, w.slots[0].ProjectUUID) {
		t.Fatalf("foreign 404 on the project: %v", summary(rep))
	}
	for _, f := range rep.Findings {
		if f.Class == events.FindingDrift {
			t.Fatalf("drift from a foreign 404: %+v", f)
		}
	}
}
