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

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
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
	err   error // if set, Tracked fails so
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
	return s.list, s.err
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
	// The first run, which must see everything, has the default call
	// timeout: a 300 ms one for every call made a loaded machine's first
	// run "unknown" too (issue 36 item 7). Only the run with the hang has
	// the short one, and there a slow call is unknown as well, which keeps
	// the findings as the test wants.
	run(t, w.reconciler(reconcile.Config{}))
	r := w.reconciler(reconcile.Config{CallTimeout: 300 * time.Millisecond})

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
	// The provider's answer is coded for the dashboard's words (a 500 is
	// Coolify's own error); a hang has no answer to code.
	for _, f := range rep.Findings {
		switch {
		case f.Class == events.FindingUnknown && f.ID == p:
			if f.ErrorCode != events.FailureProvider || f.ErrorArgs["provider"] != "coolify" || f.ErrorArgs["problem"] != string(providers.CodeServer) || f.ErrorArgs["status"] != "500" {
				t.Errorf("the failing Coolify scope's code: %q %v (%s)", f.ErrorCode, f.ErrorArgs, f.Detail)
			}
		case f.Class == events.FindingUnknown && f.ID == "SLOT":
			if f.ErrorCode == events.FailureProvider && f.ErrorArgs["status"] != "" {
				t.Errorf("a hang coded as an answer: %q %v (%s)", f.ErrorCode, f.ErrorArgs, f.Detail)
			}
		}
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
	fc := clock.NewFake(now)
	_, err := w.store.Append(ctxT(t), events.ReconcileStream, events.NoStream(), events.New(events.ReconcileStarted{RunID: "dead", StartedAt: now.Add(-time.Hour)}, events.Metadata{Actor: "x"}))
	if err != nil {
		t.Fatal(err)
	}
	r := w.reconciler(reconcile.Config{RunTimeout: time.Minute, Clock: fc})
	rep := run(t, r)
	if rep.Run.ID == "dead" || rep.Run.State != "done" {
		t.Fatalf("run %+v", rep.Run)
	}
	evs, _ := w.store.ReadStream(ctxT(t), events.ReconcileStream, 0, 0, events.Forward)
	if evs[1].Type != "ReconcileFinished" || !strings.Contains(string(evs[1].Data), `"dead"`) || !strings.Contains(string(evs[1].Data), "abandoned") {
		t.Fatalf("the dead run was not closed honestly: %s %s", evs[1].Type, evs[1].Data)
	}
	// Its code says it in the reader's language (events.FailureReconcile*).
	if p, _ := events.Decode(evs[1]); p.(events.ReconcileFinished).ErrorCode != events.FailureReconcileAbandoned {
		t.Errorf("the dead run's code: %s", evs[1].Data)
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

// TestViewTrackerCoversArchivedSlots: slots retired long ago are archived by
// the read model (not in ListSlots), yet their promoted repositories and
// their template stay tracked.
func TestViewTrackerCoversArchivedSlots(t *testing.T) {
	ctx := ctxT(t)
	store := memstore.New()
	g := projtest.NewGen(store, 3)
	for i := range 4 {
		s, err := g.Register(ctx, fmt.Sprintf("old%d", i))
		projtest.Must(t, err)
		projtest.Must(t, g.Occupy(ctx, s, "alice"))
		_, err = g.Job(ctx, s, events.KindPromote, projtest.Succeed)
		projtest.Must(t, err)
		_, err = g.Job(ctx, s, events.KindTeardown, projtest.Succeed)
		projtest.Must(t, err)
	}
	rm := memory.NewWithLimits(store, memory.Limits{ListedRetired: 1})
	_, err := projections.Replay(ctx, store, rm, 0, 0)
	projtest.Must(t, err)
	if listed, _ := rm.ListSlots(ctx); len(listed) != 1 {
		t.Fatalf("ListSlots lists %d slots, want 1 (the others archived)", len(listed))
	}
	counted := &countingSlots{Store: rm}
	cached := reconcile.NewViewTracker(counted, store)
	check := func(t *testing.T, tracker reconcile.ViewTracker, wantFolds int) {
		t.Helper()
		counted.folds = 0
		tr, err := tracker.Tracked(ctx)
		projtest.Must(t, err)
		got := map[string]reconcile.Tracked{}
		for _, x := range tr {
			got[x.ID] = x
		}
		for i := range 4 {
			if x := got[fmt.Sprintf("PROD/old%d-app", i)]; x.Slot != fmt.Sprintf("old%d", i) {
				t.Errorf("old%d's promoted repository is not tracked: %+v", i, x)
			}
		}
		if tpl := g.Slots["old0"].Reg.TemplateRepo.String(); !got[tpl].Template {
			t.Errorf("the template %s is not known: %+v", tpl, tr)
		}
		if wantFolds >= 0 && counted.folds != wantFolds {
			t.Errorf("the run folded %d archived slots, want %d", counted.folds, wantFolds)
		}
	}
	check(t, reconcile.ViewTracker{Slots: rm}, -1)
	// With the cache: the first run folds the three archived slots, the
	// next none; a slot whose stream moved is folded again.
	check(t, cached, 3)
	check(t, cached, 0)
	old := g.Slots["old1"]
	_, err = store.Append(ctx, events.SlotStream("old1"), events.Exact(old.Rev), events.New(events.SlotPromoted{
		Slot: "old1", JobID: "late", NewRepo: events.RepoRef{Project: "PROD", Slug: "old1-app"},
	}, events.Metadata{Actor: "test"}))
	projtest.Must(t, err)
	check(t, cached, 1)
}

// countingSlots counts the archived slots a tracker folds (Slot calls).
type countingSlots struct {
	*memory.Store
	folds int
}

func (c *countingSlots) Slot(ctx context.Context, name string) (projections.SlotView, error) {
	c.folds++
	return c.Store.Slot(ctx, name)
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

// streamTypes lists the event types of the reconcile stream in order.
func streamTypes(t *testing.T, s events.Store) []string {
	t.Helper()
	evs, err := s.ReadStream(ctxT(t), events.ReconcileStream, 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestStandingFindingsAreRecordedOnce: a finding is recorded when it
// appears and "resolved" when it goes; a run that finds the same standing
// findings appends only its start and end, and the report still lists them
// all with their first-seen time.
func TestStandingFindingsAreRecordedOnce(t *testing.T) {
	w := newWorld(t, 100)
	strayApp, _ := w.sim.AddApp(w.slots[0].ProjectUUID, "stray-app")
	stray, _ := w.sim.AddRepo("SLOT", "stray-repo")
	r := w.reconciler(reconcile.Config{SnapshotAfter: 1000})
	rep1 := run(t, r)
	if len(rep1.Findings) != 2 {
		t.Fatalf("first run: %v", summary(rep1))
	}
	n1 := len(streamTypes(t, w.store))

	rep2 := run(t, r)
	got := streamTypes(t, w.store)[n1:]
	if strings.Join(got, " ") != "ReconcileStarted ReconcileFinished" {
		t.Fatalf("a run with nothing new appended %v", got)
	}
	if strings.Join(summary(rep2), ",") != strings.Join(summary(rep1), ",") {
		t.Fatalf("standing findings: %v, want %v", summary(rep2), summary(rep1))
	}
	for i := range rep2.Findings {
		if !rep2.Findings[i].Since.Equal(rep1.Findings[i].Since) {
			t.Fatalf("since moved: %v → %v", rep1.Findings[i].Since, rep2.Findings[i].Since)
		}
	}
	if rep2.Run.ID == rep1.Run.ID || rep2.Run.Counts[events.FindingOrphan] != 2 {
		t.Fatalf("run %+v", rep2.Run)
	}

	if _, err := w.paas.DeleteApplication(ctxT(t), strayApp); err != nil {
		t.Fatal(err)
	}
	n2 := len(streamTypes(t, w.store))
	rep3 := run(t, r)
	if got := streamTypes(t, w.store)[n2:]; strings.Join(got, " ") != "ReconcileStarted ReconcileFinding ReconcileFinished" {
		t.Fatalf("a run with one finding gone appended %v", got)
	}
	if !has(rep3, events.FindingResolved, events.ResApplication, strayApp) || !has(rep3, events.FindingOrphan, events.ResRepository, "SLOT/"+stray.Slug) || len(rep3.Findings) != 2 {
		t.Fatalf("after the delete: %v", summary(rep3))
	}
	rep4 := run(t, r)
	if strings.Join(summary(rep4), ",") != "orphan bitbucket repository SLOT/"+stray.Slug {
		t.Fatalf("a resolved finding is shown once: %v", summary(rep4))
	}
}

// TestSnapshotsBoundTheReadBack: with a low floor, runs record the full
// list now and then; the report is the same on both sides of a snapshot,
// and between two snapshots there are never more events than the floor or
// the list allows.
func TestSnapshotsBoundTheReadBack(t *testing.T) {
	w := newWorld(t, 100)
	var apps []string
	for i := 0; i < 3; i++ {
		a, _ := w.sim.AddApp(w.slots[0].ProjectUUID, fmt.Sprintf("stray-%d", i))
		apps = append(apps, a)
	}
	r := w.reconciler(reconcile.Config{SnapshotAfter: 6})
	want := ""
	for i := 0; i < 8; i++ {
		if i == 4 {
			if _, err := w.paas.DeleteApplication(ctxT(t), apps[0]); err != nil {
				t.Fatal(err)
			}
		}
		rep := run(t, r)
		var standing []string
		for _, f := range rep.Findings {
			if f.Class != events.FindingResolved {
				standing = append(standing, f.ID)
			}
		}
		sort.Strings(standing)
		got := strings.Join(standing, ",")
		if i < 4 {
			a := append([]string(nil), apps...)
			sort.Strings(a)
			want = strings.Join(a, ",")
		} else {
			a := append([]string(nil), apps[1:]...)
			sort.Strings(a)
			want = strings.Join(a, ",")
		}
		if got != want {
			t.Fatalf("run %d: standing %s, want %s", i, got, want)
		}
	}
	types := streamTypes(t, w.store)
	snaps, since := 0, 0
	for _, ty := range types {
		if ty == "ReconcileSnapshot" {
			snaps++
			since = 0
			continue
		}
		since++
		if since > 6+2 {
			t.Fatalf("%d events since the last full list: %v", since, types)
		}
	}
	if snaps < 2 {
		t.Fatalf("%d snapshots in %v", snaps, types)
	}
}

// TestOlderLogRunIsABase: a run of an older log (every finding recorded,
// no changes_only) is the base the next run compares with: a standing
// orphan is not recorded again, one that went is resolved.
func TestOlderLogRunIsABase(t *testing.T) {
	w := newWorld(t, 100)
	strayApp, _ := w.sim.AddApp(w.slots[0].ProjectUUID, "stray-app")
	meta := events.Metadata{Actor: "old"}
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	scope := "coolify:" + w.slots[0].ProjectUUID
	_, err := w.store.Append(ctxT(t), events.ReconcileStream, events.NoStream(),
		events.New(events.ReconcileStarted{RunID: "old", StartedAt: since}, meta),
		events.New(events.ReconcileFinding{RunID: "old", Class: events.FindingOrphan, Provider: "coolify", Kind: events.ResApplication, ID: strayApp, Scope: scope, Since: since}, meta),
		events.New(events.ReconcileFinding{RunID: "old", Class: events.FindingOrphan, Provider: "coolify", Kind: events.ResDatabase, ID: "gone-db", Scope: scope, Since: since}, meta),
		events.New(events.ReconcileFinished{RunID: "old", State: "done", EndedAt: since}, meta))
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, w.reconciler(reconcile.Config{SnapshotAfter: 1000}))
	if got := streamTypes(t, w.store)[4:]; strings.Join(got, " ") != "ReconcileStarted ReconcileFinding ReconcileFinished" {
		t.Fatalf("appended %v", got)
	}
	if !has(rep, events.FindingOrphan, events.ResApplication, strayApp) || !has(rep, events.FindingResolved, events.ResDatabase, "gone-db") || len(rep.Findings) != 2 {
		t.Fatalf("report %v", summary(rep))
	}
	if !rep.Findings[0].Since.Equal(since) {
		t.Fatalf("the older log's since was not kept: %v", rep.Findings[0].Since)
	}
}

// TestFailedRunKeepsFindings: a run that could not compare at all (its
// deadline passed while reading what is tracked) records no change: every
// standing finding still holds.
func TestFailedRunKeepsFindings(t *testing.T) {
	w := newWorld(t, 100)
	strayApp, _ := w.sim.AddApp(w.slots[0].ProjectUUID, "stray-app")
	run(t, w.reconciler(reconcile.Config{}))
	w.tracker.block, w.tracker.in = make(chan struct{}), make(chan struct{}, 1)
	rep := run(t, w.reconciler(reconcile.Config{RunTimeout: 50 * time.Millisecond}))
	if rep.Run.State != "failed" || !has(rep, events.FindingOrphan, events.ResApplication, strayApp) || len(rep.Findings) != 1 {
		t.Fatalf("run %+v findings %v", rep.Run, summary(rep))
	}
	// The run's failure is coded on the log and in the report: its own
	// bound ran out.
	if rep.Run.ErrorCode != events.FailureReconcileTimeout || rep.Run.ErrorArgs["bound"] != "50ms" {
		t.Errorf("the report's failure: %q %v (%s)", rep.Run.ErrorCode, rep.Run.ErrorArgs, rep.Run.Error)
	}
	if f := lastFinished(t, w); f.ErrorCode != events.FailureReconcileTimeout || f.ErrorArgs["bound"] != "50ms" {
		t.Errorf("ReconcileFinished: %+v", f)
	}
	// The tracked resources cannot be read (the log answers an error).
	w.tracker.block, w.tracker.err = nil, errors.New("store: closed")
	rep = run(t, w.reconciler(reconcile.Config{}))
	if rep.Run.State != "failed" || rep.Run.ErrorCode != events.FailureReconcileTracked || len(rep.Findings) != 1 {
		t.Fatalf("run %+v findings %v", rep.Run, summary(rep))
	}
	if f := lastFinished(t, w); f.ErrorCode != events.FailureReconcileTracked || !strings.Contains(f.Error, "store: closed") {
		t.Errorf("ReconcileFinished: %+v", f)
	}
}

// lastFinished is the reconcile stream's last ReconcileFinished.
func lastFinished(t *testing.T, w *world) events.ReconcileFinished {
	t.Helper()
	evs, err := w.store.ReadStream(ctxT(t), events.ReconcileStream, 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if p, _ := events.Decode(evs[i]); p != nil {
			if f, ok := p.(events.ReconcileFinished); ok {
				return f
			}
		}
	}
	t.Fatal("no ReconcileFinished")
	return events.ReconcileFinished{}
}

// slotView folds real slot and job events into a slot's view, as the read
// model does.
func slotView(t *testing.T, name string, evs ...struct {
	stream string
	p      events.Payload
}) projections.SlotView {
	t.Helper()
	var v projections.SlotView
	for i, e := range evs {
		ed := events.New(e.p, events.Metadata{Actor: "test"})
		rec := events.RecordedEvent{Stream: e.stream, Type: ed.Type, Data: ed.Data, Meta: ed.Meta, Position: events.Position(i + 1)}
		p, err := events.Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		v = projections.ApplySlot(v, rec, p)
	}
	return v
}

// TestRetiredSlotLeftoversAfterFailedTeardown: a teardown whose app delete
// failed (TeardownIncomplete), then a slot retired anyway (as the system we
// replace did, and as an imported log may hold): its leftover app is still
// tracked — never an orphan — and when someone deletes it outside, that is
// drift naming the retired slot. A leftover the log lost track of (the
// seed's "retired, forgotten" database) is found as an orphan.
func TestRetiredSlotLeftoversAfterFailedTeardown(t *testing.T) {
	w := newWorld(t, 100)
	fx := w.slots[0]
	type ev = struct {
		stream string
		p      events.Payload
	}
	repo := events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug}
	v := slotView(t, "a",
		ev{"slot-a", events.SlotRegistered{Slot: "a", ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID, Repo: repo, TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: "main"}},
		ev{"job-t1", events.DBDeleted{StepResult: events.StepResult{JobID: "t1", Step: events.StepDeleteDB, Attempt: 1}, DBUUID: fx.DBUUID}},
		ev{"slot-a", events.TeardownIncomplete{Slot: "a", JobID: "t1", Remaining: []events.Resource{{Kind: events.ResApplication, ID: fx.AppUUID}, {Kind: events.ResRepository, ID: repo.String()}, {Kind: events.ResProject, ID: fx.ProjectUUID}}}},
		ev{"job-t1", events.RepoDeleted{StepResult: events.StepResult{JobID: "t1", Step: events.StepDeleteRepo, Attempt: 2}, Repo: repo}},
		ev{"slot-a", events.SlotRetired{Slot: "a", JobID: "t1"}},
	)
	if v.Lifecycle != projections.LifecycleRetired {
		t.Fatalf("lifecycle %s", v.Lifecycle)
	}
	// The database was deleted by the teardown; the repo too. Make the
	// world match what the log says happened.
	if _, err := w.paas.DeleteDatabase(ctxT(t), fx.DBUUID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.git.DeleteRepo(ctxT(t), repo.Project, repo.Slug); err != nil {
		t.Fatal(err)
	}
	forgotten, _ := w.sim.AddDatabase(fx.ProjectUUID, "left-by-the-old-system")
	other := w.tracker.list
	tr, err := reconcile.ViewTracker{Slots: views2lister{v}}.Tracked(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	w.tracker.list = tr
	for _, x := range other {
		if x.Slot == "b" {
			w.tracker.list = append(w.tracker.list, x)
		}
	}
	r := w.reconciler(reconcile.Config{})
	rep := run(t, r)
	if has(rep, events.FindingOrphan, events.ResApplication, fx.AppUUID) || has(rep, events.FindingOrphan, events.ResProject, fx.ProjectUUID) {
		t.Fatalf("a retired slot's leftover is an orphan: %v", summary(rep))
	}
	if !has(rep, events.FindingOrphan, events.ResDatabase, forgotten) {
		t.Fatalf("the forgotten database is not found: %v", summary(rep))
	}
	if _, err := w.paas.DeleteApplication(ctxT(t), fx.AppUUID); err != nil {
		t.Fatal(err)
	}
	rep = run(t, r)
	found := false
	for _, f := range rep.Findings {
		if f.Class == events.FindingDrift && f.ID == fx.AppUUID {
			found = f.Slot == "a"
		}
	}
	if !found {
		t.Fatalf("the retired slot's leftover deleted outside is not drift of slot a: %v", summary(rep))
	}
}

// TestOtherTeamTokenIsNotDrift: a token of another team gets Coolify's
// genuine "Project not found." for every live project; the reconciler
// reports unknown, never "the project is gone" (issue 22).
func TestOtherTeamTokenIsNotDrift(t *testing.T) {
	w := newWorld(t, 100)
	w.paas = coolify.New(coolify.Options{BaseURL: w.sim.CoolifyURL(), Token: w.sim.AddCoolifyToken(8, "Other", "read")})
	rep := run(t, w.reconciler(reconcile.Config{}))
	for _, f := range rep.Findings {
		if f.Class == events.FindingDrift && f.Provider == "coolify" {
			t.Errorf("drift with another team's token: %+v", f)
		}
	}
	if !has(rep, events.FindingUnknown, events.ResProject, w.slots[0].ProjectUUID) {
		t.Fatalf("no unknown finding for the invisible project: %v", summary(rep))
	}
}

// TestRunKeepsItsScheduleOnItsClock: Run reconciles at start, then every
// Every on its clock (a fake: no wall time), and at once on Trigger without
// moving the schedule.
func TestRunKeepsItsScheduleOnItsClock(t *testing.T) {
	w := newWorld(t, 100)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	runs := make(chan time.Time, 10)
	r := w.reconciler(reconcile.Config{Every: time.Hour, Clock: fc, Observe: func(reconcile.Report) { runs <- fc.Now() }})
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	expect := func(what string, at time.Time) {
		t.Helper()
		if got := <-runs; !got.Equal(at) {
			t.Fatalf("%s run at %v, want %v", what, got, at)
		}
		if err := fc.BlockUntil(ctxT(t), 1); err != nil { // waiting again
			t.Fatal(err)
		}
	}
	expect("first", start)
	fc.Advance(30 * time.Minute)
	if err := r.Trigger(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	expect("triggered", start.Add(30*time.Minute))
	fc.Advance(29 * time.Minute)
	if len(runs) != 0 {
		t.Fatal("a run before its time")
	}
	fc.Advance(time.Minute)
	expect("scheduled", start.Add(time.Hour))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
