package jobs_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
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
}
