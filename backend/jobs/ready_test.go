package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providercheck"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// seedReady creates a slot in the simulator and registers it with a
// template: env vars copied from a template application, the database of
// engine (""= same as before), deployed and healthy.
func (w *world) seedReady(name, engine string) sim.SlotFixture {
	w.t.Helper()
	fx, err := w.sim.SeedSlot(name)
	if err != nil {
		w.t.Fatal(err)
	}
	if fx.TemplateApp, err = w.sim.EnsureTemplateApp(); err != nil {
		w.t.Fatal(err)
	}
	// These tests check running:healthy; new Coolify apps have no health
	// check (running:unknown, TestReadyNoHealthCheck).
	w.sim.EnableHealthCheck(fx.AppUUID, true)
	err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
		Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
		Template: &events.SlotTemplate{DBEngine: engine, ServerUUID: sim.ServerUUID, EnvFromApp: fx.TemplateApp, Volumes: []string{"/var/lib/app"}},
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return fx
}

// checkReady: after a successful ready reset the slot is a clean copy of
// its template, running: the old database gone and a new one the slot
// tracks, env vars exactly the template's plus DATABASE_URL pointing at the
// new database, the template code deployed (its commit) and healthy, the
// slot vacated; no secret value in any event.
func checkReady(t *testing.T, w *world, fx sim.SlotFixture, jobID string) string {
	t.Helper()
	checkResetDeletes(t, w, fx, jobID)
	st := w.final(fx.Name)
	db := st.Reg.DBUUID
	if db == fx.DBUUID || !w.sim.HasDatabase(db) {
		t.Fatalf("slot database %s (old %s): want a new one the simulator holds", db, fx.DBUUID)
	}
	got := map[string]string{}
	for _, e := range w.sim.Envs(fx.AppUUID) {
		if _, dup := got[e.Key]; dup {
			t.Errorf("env var %s twice", e.Key)
		}
		got[e.Key] = e.Value
	}
	want := map[string]string{"APP_ENV": "preview", "LOG_LEVEL": "info", "DATABASE_URL": w.sim.DatabaseURL(db)}
	if len(got) != len(want) {
		t.Errorf("env vars %v, want exactly %v", keysOf(got), keysOf(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("env %s = %q, want the template's", k, got[k])
		}
	}
	// Volumes: a new, empty one at the old mount path; the old one is left
	// on the server (its data too) and stays tracked as such.
	var mounted []sim.Storage
	for _, s := range w.sim.Storages(fx.AppUUID) {
		if s.Kind == "persistent" {
			mounted = append(mounted, s)
		}
	}
	if len(mounted) != 1 || mounted[0].MountPath != "/var/lib/app" || strings.HasPrefix(mounted[0].Name, "data-") || w.sim.VolumeData(mounted[0].Name) != "" {
		t.Errorf("persistent storages %+v: want one new, empty volume at /var/lib/app", mounted)
	}
	if s := w.sim.AppStatus(fx.AppUUID); s != "running:healthy" {
		t.Errorf("app status %s", s)
	}
	var deployed *events.AppDeployed
	secrets := []string{w.sim.DatabaseURL(db), w.sim.DatabaseURL(fx.DBUUID)}
	for _, ev := range append(w.jobEvents(jobID), w.logEvents(events.SlotStream(fx.Name))...) {
		for _, sec := range secrets {
			if strings.Contains(string(ev.Data), sec) || strings.Contains(string(ev.Data), strings.Split(strings.Split(sec, ":")[2], "@")[0]) {
				t.Errorf("a secret is in event %s: %s", ev.Type, ev.Data)
			}
		}
		if ev.Type == "AppDeployed" {
			p, _ := events.Decode(ev)
			e := p.(events.AppDeployed)
			deployed = &e
		}
	}
	if deployed == nil || deployed.Commit != fx.TemplateHead || deployed.Status != "running:healthy" || !strings.Contains(deployed.FQDN, fx.AppUUID) {
		t.Errorf("AppDeployed %+v, want the template head %s running:healthy with its fqdn", deployed, fx.TemplateHead)
	}
	return db
}

// checkResetDeletes is checkReset without its env-vars rule (a ready reset
// restores them).
func checkResetDeletes(t *testing.T, w *world, fx sim.SlotFixture, jobID string) {
	t.Helper()
	if w.sim.HasDatabase(fx.DBUUID) {
		t.Error("old database still exists after a successful reset")
	}
	head, err := w.sim.RepoHeadSHA(fx.Repo.Project, fx.Repo.Slug, "main")
	if err != nil || head != fx.TemplateHead {
		t.Errorf("slot repo at %s (%v), want template %s", head, err, fx.TemplateHead)
	}
	st := w.final(fx.Name)
	if st.Occupied || st.Locked() || !st.VacatedBy[jobID] {
		t.Errorf("slot after reset: occupied=%v lock=%q", st.Occupied, st.LockJob)
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestReadyReset: a reset of a slot with a template (engine "same as
// before") ends with a clean copy of the template, running; a second reset
// deletes the database the first created (it is the slot's), and the read
// model shows the slot ready with its URL, health and commit.
func TestReadyReset(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("rdy", "")
	w.occupy("rdy")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "rdy")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("reset %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	if !slices.Equal(j.Queued.Steps, events.StepNames(events.KindReset, true)) {
		t.Fatalf("plan %v", j.Queued.Steps)
	}
	db1 := checkReady(t, w, fx, res.JobID)
	var created events.DBCreated
	for _, ev := range w.jobEvents(res.JobID) {
		if ev.Type == "DBCreated" {
			p, _ := events.Decode(ev)
			created = p.(events.DBCreated)
		}
	}
	if created.DBUUID != db1 || created.Engine != "postgresql" {
		t.Fatalf("DBCreated %+v: want the same engine as the deleted database", created)
	}
	rm := w.readModel()
	v, err := rm.Slot(context.Background(), "rdy")
	if err != nil {
		t.Fatal(err)
	}
	if !v.Ready || v.Deployed == nil || v.Deployed.Commit != fx.TemplateHead || v.DBUUID != db1 || len(v.Missing) != 0 {
		t.Fatalf("read model: ready=%v deployed=%+v db=%s missing=%v", v.Ready, v.Deployed, v.DBUUID, v.Missing)
	}

	// The next reset deletes the new database and makes another.
	w.occupy("rdy")
	res2 := startJob(t, w, events.KindReset, "rdy")
	if j := w.waitEnded(res2.JobID); j.Status != events.StatusSucceeded {
		t.Fatalf("second reset %s: %s", j.Status, j.LastError)
	}
	fx2 := fx
	fx2.DBUUID = db1
	if db2 := checkReady(t, w, fx2, res2.JobID); db2 == db1 {
		t.Fatal("second reset kept the database")
	}
}

// TestResetWithoutTemplateShowsWhatItLacks: a slot registered without a
// template (every slot before issue 23) keeps the old reset, and the read
// model says the vacant slot is not ready and why.
func TestResetWithoutTemplateShowsWhatItLacks(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seed("old")
	w.occupy("old")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "old")
	if j := w.waitEnded(res.JobID); j.Status != events.StatusSucceeded || slices.Contains(j.Queued.Steps, events.StepCreateDB) {
		t.Fatalf("reset %s steps %v", j.Status, j.Queued.Steps)
	}
	checkReset(t, w, fx, res.JobID)
	v, err := w.readModel().Slot(context.Background(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if v.Ready || len(v.Missing) != 1 || !strings.Contains(v.Missing[0], "no slot template") {
		t.Fatalf("ready=%v missing=%v", v.Ready, v.Missing)
	}
}

// TestReadyResetFailedDeployIsNotVacant: a deployment that fails leaves the
// slot occupied (not vacant), says why, and a resume after the fix deploys
// again and vacates it.
func TestReadyResetFailedDeployIsNotVacant(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("dep", "postgresql")
	w.occupy("dep")
	w.sim.FailDeploy(fx.AppUUID, "build failed")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "dep")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || j.InFlight != "" && j.InFlight != events.StepDeploy || !strings.Contains(j.LastError, "failed") || j.Done[events.StepDeploy] {
		t.Fatalf("reset %s in-flight %q: %q", j.Status, j.InFlight, j.LastError)
	}
	if st := w.final("dep"); !st.Occupied {
		t.Fatal("slot vacated although its deploy failed")
	}
	w.sim.FailDeploy(fx.AppUUID, "")
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(res.JobID, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed reset %s: %s", j.Status, j.LastError)
	}
	checkReady(t, w, fx, res.JobID)
}

// TestReadyResetCreateUncertain: the create's answer is lost (the
// connection resets after Coolify made the database: a fault that lets the
// request through then drops the answer is not available, so the create is
// made by an earlier attempt whose result was never recorded: the sim's
// 500 after the handler ran). The resumed attempt finds the database by its
// name and adopts it instead of creating a second one.
func TestReadyResetCreateUncertain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("unc", "postgresql")
	w.occupy("unc")
	// The create is answered 500 only after the database was made.
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateDatabase, Status: 500, AfterHandler: true, Times: 1})
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "unc")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || j.InFlight != events.StepCreateDB {
		t.Fatalf("reset %s in-flight %q: %q", j.Status, j.InFlight, j.LastError)
	}
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(res.JobID, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed reset %s: %s", j.Status, j.LastError)
	}
	checkReady(t, w, fx, res.JobID)
	found := false
	for _, ev := range w.jobEvents(res.JobID) {
		if ev.Type == "DBCreated" {
			p, _ := events.Decode(ev)
			found = p.(events.DBCreated).Found
		}
	}
	if !found {
		t.Error("the resumed create_db did not record that it found the uncertain create's database")
	}
	n := 0
	for _, d := range w.sim.DatabaseNames(fx.ProjectUUID) {
		if strings.HasPrefix(d, "db-unc-") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d databases created by the reset, want 1 (the uncertain create adopted)", n)
	}
}

// ready: the cell's slot is registered with a template (the ready reset's
// steps, issue 23; a pr_deploy deploys with it).
func (c stepCall) ready() bool {
	return c.kind == events.KindPRDeploy || slices.ContainsFunc(readyMatrixSteps, func(r stepCall) bool { return r.step == c.step && r.endpoint == c.endpoint })
}

// readyMatrixSteps are the ready reset's new outside calls, faulted like
// every other step's (matrix_test.go).
var readyMatrixSteps = []stepCall{
	// Issue 32: the preflight's look at the template's server.
	{events.KindReset, events.StepPreflight, sim.EndpointGetServer, func(sim.SlotFixture) string { return sim.ServerUUID }},
	{events.KindReset, events.StepCreateDB, sim.EndpointCreateDatabase, func(sim.SlotFixture) string { return "postgresql" }},
	{events.KindReset, events.StepRestoreEnv, sim.EndpointCreateEnv, func(fx sim.SlotFixture) string { return fx.AppUUID }},
	{events.KindReset, events.StepCreateVolumes, sim.EndpointCreateStorage, func(fx sim.SlotFixture) string { return fx.AppUUID }},
	{events.KindReset, events.StepDeploy, sim.EndpointDeploy, func(fx sim.SlotFixture) string { return fx.AppUUID }},
	{events.KindReset, events.StepDeploy, sim.EndpointGetDeployment, func(sim.SlotFixture) string { return "" }},
	// Issue 32: a queued deployment's place is read from the servers'
	// queue (GET /deployments), the wait's first poll.
	{events.KindReset, events.StepDeploy, sim.EndpointActiveDeployments, func(sim.SlotFixture) string { return "" }},
}

// TestReadyFaultMatrix: each new call of the ready reset × each fault:
// the honest terminal event, no request outside the fenced span, a hung
// call aborted, nothing untracked, and a resume (or a new reset after a
// cancel) converges to a clean copy of the template, running.
func TestReadyFaultMatrix(t *testing.T) {
	t.Parallel()
	runStepCells(t, readyMatrixSteps, byEndpoint)
}

// checkReadyTracked: every database the ready reset created is the slot's
// (its state names it), so none is lost track of, whatever the fault.
func checkReadyTracked(t *testing.T, w *world, fx sim.SlotFixture) {
	t.Helper()
	st := w.slot(fx.Name)
	for _, name := range w.sim.DatabaseNames(fx.ProjectUUID) {
		if strings.HasPrefix(name, "db-"+fx.Name+"-") && !w.sim.HasDatabase(st.Reg.DBUUID) {
			t.Errorf("database %s exists but the slot names %s, which the simulator does not hold", name, st.Reg.DBUUID)
		}
	}
}

// TestRegisterTemplate: register checks a template against Coolify: a
// docker-compose application is refused (its storages are read-only, so no
// reset could empty them), a bad field is a 400, and "same as before"
// records the engine Coolify reports — never one the caller sent. A refusal
// records nothing.
func TestRegisterTemplate(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	svc := slots.NewService(w.store, slots.Config{Logger: testLogger(), Resources: providercheck.Checker{PaaS: w.deps.PaaS, GitHost: w.deps.GitHost}})
	tmplApp, err := w.sim.EnsureTemplateApp()
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(fx sim.SlotFixture, name string, tm events.SlotTemplate) slots.RegisterCmd {
		return slots.RegisterCmd{Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
			Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
			TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef, Template: &tm}
	}
	ctx := context.Background()
	admin := slots.Actor{Name: "admin"}
	fx, err := w.sim.SeedSlot("cmp")
	if err != nil {
		t.Fatal(err)
	}
	good := events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: tmplApp, SeenEngine: "mysql"}
	for _, bad := range []events.SlotTemplate{
		{ServerUUID: sim.ServerUUID, DBEngine: "oracle"},
		{ServerUUID: ""},
		{ServerUUID: sim.ServerUUID, DBURLKey: "1BAD KEY"},
		{ServerUUID: sim.ServerUUID, Volumes: []string{"relative/path"}},
		{ServerUUID: sim.ServerUUID, DeployTimeout: -1},
		{ServerUUID: sim.ServerUUID, DeployTimeout: 86401},
	} {
		if err := svc.Register(ctx, admin, cmd(fx, "cmp", bad)); slots.ErrorCode(err) != slots.CodeInvalid {
			t.Errorf("template %+v: %v, want invalid", bad, err)
		}
	}
	if err := w.sim.SetAppBuildPack(fx.AppUUID, "dockercompose"); err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(ctx, admin, cmd(fx, "cmp", good)); slots.ErrorCode(err) != slots.CodeUnprocessable || !strings.Contains(err.Error(), "docker-compose") {
		t.Fatalf("compose app with a template: %v, want 422 naming docker-compose", err)
	}
	if st := w.slot("cmp"); st.Exists {
		t.Fatal("a refused registration recorded the slot")
	}
	fx2, err := w.sim.SeedSlot("ok")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Register(ctx, admin, cmd(fx2, "ok", good)); err != nil {
		t.Fatal(err)
	}
	if tm := w.slot("ok").Reg.Template; tm == nil || tm.SeenEngine != "postgresql" {
		t.Fatalf("registered template %+v: want the engine Coolify reports (postgresql), not the caller's", tm)
	}
}

// TestReadyResetNoDeployDetailIsCoded: a template that declares no deploy
// makes the deploy step wait for the database only, and its detail is a
// code with its parts (issue 35: it reached Korean pages as server English).
func TestReadyResetNoDeployDetailIsCoded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx, err := w.sim.SeedSlot("nodep")
	if err != nil {
		t.Fatal(err)
	}
	if fx.TemplateApp, err = w.sim.EnsureTemplateApp(); err != nil {
		t.Fatal(err)
	}
	err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
		Name: "nodep", ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
		Template: &events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: fx.TemplateApp, NoDeploy: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.occupy("nodep")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "nodep")
	if j := w.waitEnded(res.JobID); j.Status != events.StatusSucceeded {
		t.Fatalf("reset %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	v, err := w.readModel().Job(context.Background(), res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range v.Steps {
		if s.Name != events.StepDeploy {
			continue
		}
		if s.DetailCode != events.DetailNoDeployDB || s.DetailArgs["db"] == "" || s.DetailArgs["db"] == fx.DBUUID || s.DetailArgs["db_status"] == "" {
			t.Fatalf("deploy step: code %q args %v (detail %q): want no_deploy_db with the new database and its status", s.DetailCode, s.DetailArgs, s.Detail)
		}
		if !strings.Contains(s.Detail, "declares no deploy") {
			t.Fatalf("deploy step detail %q: the English stays for the log", s.Detail)
		}
		return
	}
	t.Fatalf("no deploy step in %+v", v.Steps)
}
