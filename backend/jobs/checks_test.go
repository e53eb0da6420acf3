package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Issue 32: the checks before destroying, preview env copies, locked
// values, and deletes on an unreachable server.

// noDeletes fails the test if any DELETE reached the simulated Coolify or
// Bitbucket, or any git push: nothing was destroyed.
func noDeletes(t *testing.T, w *world) {
	t.Helper()
	for _, r := range w.sim.Requests() {
		if r.Method == "DELETE" || r.Endpoint == sim.EndpointGitReceivePack {
			t.Errorf("a destructive request was sent: %s %s (%s)", r.Method, r.Path, r.Endpoint)
		}
	}
}

// TestFirstReadyResetWithPreviewCopies: Coolify lists each normal env var
// with its preview copy and makes a copy for every var created through the
// API; the first ready reset of a slot used to fail at restore_env ("exists
// twice") after its data was gone. It succeeds, and the preview copies are
// left alone (Coolify made them for the restored vars).
func TestFirstReadyResetWithPreviewCopies(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("prv", "")
	if n := len(w.sim.PreviewEnvs(fx.AppUUID)); n != 3 {
		t.Fatalf("seeded slot has %d preview env vars, want one per normal var (3)", n)
	}
	w.occupy("prv")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "prv")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("first ready reset %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	if j.Queued.Steps[0] != events.StepPreflight {
		t.Fatalf("plan %v: the preflight is not first", j.Queued.Steps)
	}
	checkReady(t, w, fx, res.JobID)
	var keys []string
	for _, e := range w.sim.PreviewEnvs(fx.AppUUID) {
		keys = append(keys, e.Key)
	}
	if !slices.Equal(keys, []string{"APP_ENV", "DATABASE_URL", "LOG_LEVEL"}) {
		t.Errorf("preview env vars after the reset %v, want Coolify's copy of each restored var", keys)
	}
}

// TestPreflightRefusesTokenWithoutSensitive: a token without read:sensitive
// cannot copy the template's env values; the reset used to delete the
// database, env vars and storages and then fail at restore_env. Now its
// first step fails, nothing is deleted, and the fix is named.
func TestPreflightRefusesTokenWithoutSensitive(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	tok := w.sim.AddCoolifyToken(sim.RootTeam, "", "read", "write", "deploy")
	w.deps.PaaS = coolify.New(coolify.Options{BaseURL: w.sim.CoolifyURL(), Token: tok, RateRetries: -1})
	fx := w.seedReady("nosens", "")
	w.occupy("nosens")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "nosens")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || len(j.DoneOrder) != 0 {
		t.Fatalf("reset %s, done %v: want failed at its first step%s", j.Status, j.DoneOrder, history(w.jobEvents(res.JobID)))
	}
	if !strings.Contains(j.LastError, "nothing was deleted") || !strings.Contains(j.LastError, "read:sensitive") {
		t.Errorf("error %q: want it to say nothing was deleted and name read:sensitive", j.LastError)
	}
	noDeletes(t, w)
	if !w.sim.HasDatabase(fx.DBUUID) || len(w.sim.Envs(fx.AppUUID)) != 3 {
		t.Error("the slot's database or env vars are gone")
	}
}

// TestPreflightReportsLockedTemplateVar: a locked template variable is
// hidden from every token, root included: the reset says it is locked,
// with the fix (unlock it, or reference a shared variable), not "add
// read:sensitive" (the root token has it).
func TestPreflightReportsLockedTemplateVar(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("lck", "")
	if err := w.sim.LockEnv(fx.TemplateApp, "LOG_LEVEL"); err != nil {
		t.Fatal(err)
	}
	w.occupy("lck")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "lck")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || len(j.DoneOrder) != 0 {
		t.Fatalf("reset %s, done %v", j.Status, j.DoneOrder)
	}
	for _, want := range []string{"LOG_LEVEL locked", "unlock", "{{project.LOG_LEVEL}}"} {
		if !strings.Contains(j.LastError, want) {
			t.Errorf("error %q lacks %q", j.LastError, want)
		}
	}
	if strings.Contains(j.LastError, "read:sensitive") {
		t.Errorf("error %q advises read:sensitive for a locked var", j.LastError)
	}
	noDeletes(t, w)
}

// TestPreflightRefusesUnreachableServer: with the template's server
// unreachable the reset does not start deleting (a delete would remove
// Coolify's rows and leave the data); the failure is retryable.
func TestPreflightRefusesUnreachableServer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seedReady("unr", "")
	w.sim.SetServerReachable(false)
	w.occupy("unr")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "unr")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || len(j.DoneOrder) != 0 || !strings.Contains(j.LastError, "cannot reach") {
		t.Fatalf("reset %s, done %v: %s", j.Status, j.DoneOrder, j.LastError)
	}
	noDeletes(t, w)
}

// TestTeardownUnreachableServerIsIncomplete: Coolify's queued delete on an
// unreachable server removes the rows anyway (GET → 404) and leaves the
// containers and volumes. The teardown looks at the server after each
// confirmed delete: the slot is not retired, and its remaining resources
// name what is left, with the clean-up.
func TestTeardownUnreachableServerIsIncomplete(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seed("gone")
	w.sim.SetServerReachable(false)
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindTeardown, "gone")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || j.Done[events.StepRetire] || !strings.Contains(j.LastError, "docker volume ls -q --filter name="+fx.DBUUID) {
		t.Fatalf("teardown %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	if w.sim.HasDatabase(fx.DBUUID) || w.sim.HasApp(fx.AppUUID) {
		t.Fatal("the rows should be gone (Coolify deletes them anyway)")
	}
	// The simulator's server still holds them.
	left := map[string]bool{}
	for _, c := range w.sim.DockerContainers() {
		left[c.Name] = c.Left
	}
	if !left[fx.DBUUID] || !left[fx.AppUUID] || !w.sim.HasDockerVolume("postgres-data-"+fx.DBUUID) || !w.sim.HasDockerVolume("data-gone") {
		t.Fatalf("server inventory: containers %v volumes %v", w.sim.DockerContainers(), w.sim.DockerVolumes())
	}
	st := w.final("gone")
	if st.Retired {
		t.Fatal("slot retired as clean with the occupant's data on the server")
	}
	var inc *events.TeardownIncomplete
	for _, ev := range w.logEvents(events.SlotStream("gone")) {
		if ev.Type == "TeardownIncomplete" {
			p, _ := events.Decode(ev)
			e := p.(events.TeardownIncomplete)
			inc = &e
		}
	}
	if inc == nil {
		t.Fatal("no TeardownIncomplete")
	}
	want := map[events.Resource]bool{}
	for _, r := range inc.Remaining {
		want[events.Resource{Kind: r.Kind, ID: r.ID}] = true
	}
	for _, r := range []events.Resource{{Kind: events.ResDockerContainer, ID: fx.DBUUID}, {Kind: events.ResDockerVolume, ID: fx.DBUUID},
		{Kind: events.ResDockerContainer, ID: fx.AppUUID}, {Kind: events.ResDockerVolume, ID: fx.AppUUID}} {
		if !want[r] {
			t.Errorf("TeardownIncomplete remaining %+v lacks %+v", inc.Remaining, r)
		}
	}
	// The read model keeps them among the slot's resources.
	v, err := w.readModel().Slot(t.Context(), "gone")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range v.Resources {
		if r.Kind == events.ResDockerContainer || r.Kind == events.ResDockerVolume {
			n++
		}
	}
	if n != 4 || v.Lifecycle == "retired" {
		t.Errorf("read model: lifecycle %s, resources %+v", v.Lifecycle, v.Resources)
	}
	for _, rr := range projections.RemainingOf(v) {
		if rr.Resource.Kind == events.ResDockerVolume && rr.Resource.ID == fx.DBUUID &&
			!strings.Contains(rr.Cleanup, "docker volume ls -q --filter name="+fx.DBUUID+" | xargs -r docker volume rm") {
			t.Errorf("remaining %+v: want the clean-up by the uuid filter", rr)
		}
		// Coded (issue 35): the dashboard words it and offers the command alone.
		if (rr.Resource.Kind == events.ResDockerVolume || rr.Resource.Kind == events.ResDockerContainer) &&
			(rr.CleanupCode != projections.CleanupUnreachable || rr.CleanupCommand != rr.Resource.Cleanup) {
			t.Errorf("remaining %+v: want code %s and the command alone", rr, projections.CleanupUnreachable)
		}
	}
}

// lockAfterCreate locks a template var once the reset creates its
// database: after the preflight, before restore_env.
type lockAfterCreate struct {
	providers.PaaS
	lock func()
}

func (l lockAfterCreate) CreateDatabase(ctx context.Context, spec providers.DatabaseSpec) (providers.Database, error) {
	l.lock()
	return l.PaaS.CreateDatabase(ctx, spec)
}

// TestRestoreEnvReportsLockedVar: a template var locked after the
// preflight passed is reported by restore_env as locked, with its fix.
func TestRestoreEnvReportsLockedVar(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("lck2", "")
	w.deps.PaaS = lockAfterCreate{PaaS: w.deps.PaaS, lock: func() { w.sim.LockEnv(fx.TemplateApp, "APP_ENV") }}
	w.occupy("lck2")
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "lck2")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || !j.Done[events.StepCreateDB] || j.Done[events.StepRestoreEnv] {
		t.Fatalf("reset %s, done %v: %s", j.Status, j.DoneOrder, j.LastError)
	}
	if !strings.Contains(j.LastError, "locked env vars (APP_ENV)") || !strings.Contains(j.LastError, "unlock") || strings.Contains(j.LastError, "read:sensitive") {
		t.Fatalf("error %q", j.LastError)
	}
}

// TestDatabaseURLFromTheCreate: Coolify shows a new database's URL in the
// create's 201 to any token allowed to create, later only to read:sensitive
// ones. A token without read:sensitive (no env values to copy) finishes a
// ready reset with the URL from the create's answer; a restore_env that
// never saw that answer (another process) fails with the fix and nothing
// secret in the error; with a read:sensitive token a resume reads it.
func TestDatabaseURLFromTheCreate(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	tok := w.sim.AddCoolifyToken(sim.RootTeam, "", "read", "write", "deploy")
	root := w.deps.PaaS
	w.deps.PaaS = coolify.New(coolify.Options{BaseURL: w.sim.CoolifyURL(), Token: tok, RateRetries: -1})
	register := func(name string) sim.SlotFixture {
		fx, err := w.sim.SeedSlot(name)
		if err != nil {
			t.Fatal(err)
		}
		err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
			Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
			Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
			TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
			Template: &events.SlotTemplate{ServerUUID: sim.ServerUUID},
		})
		if err != nil {
			t.Fatal(err)
		}
		return fx
	}
	fx := register("url1")
	w.occupy("url1")
	_, stop := w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "url1")
	if j := w.waitEnded(res.JobID); j.Status != events.StatusSucceeded {
		t.Fatalf("reset without read:sensitive %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	db := w.final("url1").Reg.DBUUID
	if got := envValue(w, fx.AppUUID, "DATABASE_URL"); got != w.sim.DatabaseURL(db) {
		t.Fatal("DATABASE_URL is not the new database's")
	}

	// Another slot: restore_env's first create fails, and the URL the
	// create answered is forgotten (another process resumes).
	fx2 := register("url2")
	w.occupy("url2")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateEnv, Status: 500, Times: 1})
	res2 := startJob(t, w, events.KindReset, "url2")
	j := w.waitEnded(res2.JobID)
	if j.Status != events.StatusFailed || j.InFlight != events.StepRestoreEnv {
		t.Fatalf("reset %s at %q: %s", j.Status, j.InFlight, j.LastError)
	}
	db2 := w.final("url2").Reg.DBUUID
	jobs.ForgetCreatedURL(db2)
	if _, err := w.svc.Resume(context.Background(), bob, res2.JobID); err != nil {
		t.Fatal(err)
	}
	j = w.waitEndedN(res2.JobID, 2)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "read:sensitive") || strings.Contains(j.LastError, w.sim.DatabaseURL(db2)) {
		t.Fatalf("resume without the create's answer %s: %q", j.Status, j.LastError)
	}
	// With a read:sensitive token, the resume reads the URL by GET.
	stop()
	w.deps.PaaS = root
	w.startEngine(w.engineConfig())
	if _, err := w.svc.Resume(context.Background(), bob, res2.JobID); err != nil {
		t.Fatal(err)
	}
	if j = w.waitEndedN(res2.JobID, 3); j.Status != events.StatusSucceeded {
		t.Fatalf("resume with read:sensitive %s: %s", j.Status, j.LastError)
	}
	if envValue(w, fx2.AppUUID, "DATABASE_URL") != w.sim.DatabaseURL(db2) {
		t.Fatal("DATABASE_URL is not the new database's after the resume")
	}
}

func envValue(w *world, app, key string) string {
	for _, e := range w.sim.Envs(app) {
		if e.Key == key {
			return e.Value
		}
	}
	return ""
}
