package coolify_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestCatchAllIsForeign: a base URL ending in /api (not /api/v1) reaches
// Coolify's catch-all, which answers every path 404 {"message":"Not
// found.","docs":…} (routes/api.php:431-433). That is never "absent", and
// /version names the fix (issue 22 item 1).
func TestCatchAllIsForeign(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	c := coolify.New(coolify.Options{BaseURL: strings.TrimSuffix(b.sim.CoolifyURL(), "/v1"), Token: token, RateRetries: -1})
	_, l, err := c.GetDatabase(ctx, b.fx.DBUUID)
	if l != providers.Unknown {
		t.Fatalf("lookup through the catch-all: %v", l)
	}
	checkErr(t, err, providers.CodeForeign, 404, false)
	out, err := c.DeleteApplication(ctx, b.fx.AppUUID)
	if out == providers.AlreadyAbsent {
		t.Fatal("the catch-all made a delete 'already absent'")
	}
	checkErr(t, err, providers.CodeForeign, 404, true)
	if _, err := c.DeleteEnv(ctx, b.fx.AppUUID, b.fx.EnvUUIDs[0]); providers.CodeOf(err) != providers.CodeForeign {
		t.Fatalf("delete env through the catch-all: %v", err)
	}
	_, err = c.Version(ctx)
	if providers.CodeOf(err) != providers.CodeForeign || !strings.Contains(err.Error(), "ends in /api; it must end in /api/v1") {
		t.Fatalf("version through the catch-all: %v", err)
	}
	if !b.sim.HasApp(b.fx.AppUUID) || !b.sim.HasEnv(b.fx.EnvUUIDs[0]) {
		t.Fatal("the catch-all deleted something")
	}
}

// TestNotFoundWordsPerEndpoint: only the endpoint's own words are absent;
// another endpoint's (or a resource's parent's) are not.
func TestNotFoundWordsPerEndpoint(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	missing := "zzzzzzzzzzzzzzzzzzzzzzzz"
	// The real answers: each endpoint's own words.
	if _, l, err := b.c.GetApplication(ctx, missing); l != providers.Absent {
		t.Fatalf("GET app: %v %v", l, err)
	}
	if out, err := b.c.DeleteApplication(ctx, missing); out != providers.AlreadyAbsent || err != nil {
		t.Fatalf(`DELETE app ("Application not found", no period): %v %v`, out, err)
	}
	if out, err := b.c.DeleteStorage(ctx, b.fx.AppUUID, missing); out != providers.AlreadyAbsent || err != nil {
		t.Fatalf("DELETE storage: %v %v", out, err)
	}
	// The parent's words on a child's delete: an error, not the child's absence.
	out, err := b.c.DeleteEnv(ctx, missing, b.fx.EnvUUIDs[0])
	if out == providers.AlreadyAbsent || providers.CodeOf(err) != providers.CodeNotFound {
		t.Fatalf("DELETE env of a missing app: %v %v", out, err)
	}
	// Another endpoint's words are foreign.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetApplication, Status: 404, Body: `{"message":"Database not found."}`, Times: 1})
	if _, l, err := b.c.GetApplication(ctx, b.fx.AppUUID); l != providers.Unknown || providers.CodeOf(err) != providers.CodeForeign {
		t.Fatalf("GET app answered the database's words: %v %v", l, err)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Status: 404, Body: `{"message":"Not found.","docs":"https://coolify.io/docs"}`, Times: 1})
	if out, err := b.c.DeleteDatabase(ctx, b.fx.DBUUID); out == providers.AlreadyAbsent || providers.CodeOf(err) != providers.CodeForeign {
		t.Fatalf("DELETE db answered the catch-all: %v %v", out, err)
	}
}

// TestWrongTeamToken: a token of another team sees the genuine "… not
// found." for live resources; the client cannot tell from the body, but
// Team says whose token it is.
func TestWrongTeamToken(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	other := newClient(b.sim, b.sim.AddCoolifyToken(7, "Other Team", "read", "write"))
	if _, l, _ := other.GetApplication(ctx, b.fx.AppUUID); l != providers.Absent {
		t.Fatalf("another team's token: app lookup %v, want Coolify's genuine not-found", l)
	}
	if _, l, _ := other.GetProject(ctx, b.fx.ProjectUUID); l != providers.Absent {
		t.Fatalf("another team's token: project lookup %v", l)
	}
	team, err := other.Team(ctx)
	if err != nil || team.ID != 7 || team.Name != "Other Team" {
		t.Fatalf("team %+v %v", team, err)
	}
	if team, err := b.c.Team(ctx); err != nil || team.ID != sim.RootTeam {
		t.Fatalf("root token's team %+v %v", team, err)
	}
	if !b.sim.HasApp(b.fx.AppUUID) {
		t.Fatal("gone")
	}
}

// TestStorageDeleteLeavesDockerVolume: the API removes the mount
// definition only; the Docker volume and its data stay on the server.
func TestStorageDeleteLeavesDockerVolume(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	list, err := b.c.ListStorages(ctx, b.fx.AppUUID)
	if err != nil {
		t.Fatal(err)
	}
	var vol providers.Storage
	for _, s := range list {
		if s.Kind == "persistent" {
			vol = s
		}
	}
	if vol.Name == "" || !b.sim.HasDockerVolume(vol.Name) {
		t.Fatalf("no persistent storage with a volume: %+v %+v", list, b.sim.DockerVolumes())
	}
	if out, err := b.c.DeleteStorage(ctx, b.fx.AppUUID, vol.UUID); out != providers.Deleted || err != nil {
		t.Fatalf("delete storage: %v %v", out, err)
	}
	if b.sim.HasStorage(vol.UUID) || !b.sim.HasDockerVolume(vol.Name) {
		t.Fatalf("after the delete: storage row %v, docker volume %v (want gone, kept)", b.sim.HasStorage(vol.UUID), b.sim.HasDockerVolume(vol.Name))
	}
}

// TestComposeStorageIsReadOnly: a compose application's storages answer
// 422: a definite refusal, not retryable, one request.
func TestComposeStorageIsReadOnly(t *testing.T) {
	b := setup(t, 0)
	if err := b.sim.SetAppBuildPack(b.fx.AppUUID, "dockercompose"); err != nil {
		t.Fatal(err)
	}
	_, err := b.c.DeleteStorage(ctxT(t), b.fx.AppUUID, b.fx.StorageUUIDs[0])
	checkErr(t, err, providers.CodeUnprocessable, 422, false)
	if pe, _ := providers.AsError(err); pe.Retryable() || !strings.Contains(pe.Message, "read-only") {
		t.Fatalf("%v: retryable %v", err, pe.Retryable())
	}
	if n := len(b.sim.Requests()); n != 1 || !b.sim.HasStorage(b.fx.StorageUUIDs[0]) {
		t.Fatalf("%d requests; storage kept %v", n, b.sim.HasStorage(b.fx.StorageUUIDs[0]))
	}
}

// fakeSleep is a fake clock that runs every wait at once and records it.
type fakeSleep struct {
	*clock.Fake
	mu    sync.Mutex
	waits []time.Duration
}

func newFakeSleep(t *testing.T) *fakeSleep {
	f := &fakeSleep{Fake: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	t.Cleanup(f.AutoAdvance(func(d time.Duration) {
		f.mu.Lock()
		f.waits = append(f.waits, d)
		f.mu.Unlock()
	}))
	return f
}

func (f *fakeSleep) seen() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Duration(nil), f.waits...)
}

// TestRetryAfter60: Coolify's throttle answers Retry-After up to 60 s; the
// default bound waits it out (it used to give up past 30 s), with no wall
// time spent here (a fake clock).
func TestRetryAfter60(t *testing.T) {
	b := setup(t, 0)
	fs := newFakeSleep(t)
	c := coolify.New(coolify.Options{BaseURL: b.sim.CoolifyURL(), Token: token, Clock: fs})
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Status: 429, Header: map[string]string{"Retry-After": "60"}, Times: 1})
	_, l, err := c.GetDatabase(context.Background(), b.fx.DBUUID)
	if l != providers.Found || err != nil {
		t.Fatalf("after Retry-After 60: %v %v", l, err)
	}
	if waits := fs.seen(); len(waits) != 1 || waits[0] != 60*time.Second || len(b.sim.Requests()) != 2 {
		t.Fatalf("waits %v, requests %d", waits, len(b.sim.Requests()))
	}
	// The real limiter's 429: its own body and a Retry-After within 60 s.
	b.sim.SetCoolifyRateLimit(1)
	defer b.sim.SetCoolifyRateLimit(0)
	c2 := coolify.New(coolify.Options{BaseURL: b.sim.CoolifyURL(), Token: token, Clock: fs, RateRetries: -1})
	c2.GetDatabase(context.Background(), b.fx.DBUUID)
	_, _, err = c2.GetDatabase(context.Background(), b.fx.DBUUID)
	checkErr(t, err, providers.CodeRateLimited, 429, false)
	if !strings.Contains(err.Error(), "Too Many Attempts.") {
		t.Fatalf("%v", err)
	}
	reqs := b.sim.Requests()
	if last := reqs[len(reqs)-1]; last.Status != 429 {
		t.Fatalf("last request %+v", last)
	}
}

func TestVersionTeamAbilities(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	v, err := b.c.Version(ctx)
	if err != nil || v != sim.DefaultCoolifyVersion {
		t.Fatalf("version %q %v", v, err)
	}
	for _, ab := range []string{"write", "deploy"} {
		if ok, err := b.c.HasAbility(ctx, ab); !ok || err != nil {
			t.Fatalf("root token %s: %v %v", ab, ok, err)
		}
	}
	ro := newClient(b.sim, b.sim.AddCoolifyToken(sim.RootTeam, "", "read"))
	for _, ab := range []string{"write", "deploy"} {
		if ok, err := ro.HasAbility(ctx, ab); ok || err != nil {
			t.Fatalf("read-only token %s: %v %v", ab, ok, err)
		}
	}
	if _, err := ro.DeleteEnv(ctx, b.fx.AppUUID, b.fx.EnvUUIDs[0]); providers.CodeOf(err) != providers.CodeForbidden {
		t.Fatalf("read-only token deleting: %v", err)
	}
	for _, c := range []struct {
		v, min string
		ok     bool
	}{
		{"4.3.11", coolify.MinVersion, true},
		{"4.0.0", coolify.MinVersion, true},
		{"4.0.0-beta.470", coolify.MinVersion, true},
		{"4.0.0-beta.469", coolify.MinVersion, false},
		{"4.0.0-beta.420.7", coolify.MinVersionEnvironments, true},
		{"4.0.0-beta.420.6", coolify.MinVersionEnvironments, false},
		{"4.0.0-beta.420", coolify.MinVersionEnvironments, false},
		{"3.12.36", coolify.MinVersion, false},
	} {
		if ok, err := coolify.VersionAtLeast(c.v, c.min); ok != c.ok || err != nil {
			t.Errorf("VersionAtLeast(%s, %s) = %v %v", c.v, c.min, ok, err)
		}
	}
	if _, err := coolify.VersionAtLeast("<html>", coolify.MinVersion); err == nil {
		t.Error("an HTML page read as a version")
	}
	if coolify.ConfirmTotal <= time.Hour {
		t.Errorf("confirm bound %v is not above the longest stop grace period (3,600 s)", coolify.ConfirmTotal)
	}
}
