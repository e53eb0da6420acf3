package conformance

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
)

// CoolifyTarget is a Coolify for the conformance cases: the simulator in
// plain `go test`, a real instance with `-tags live`.
type CoolifyTarget struct {
	// URL is the API base ending in /api/v1; Token a token of the team
	// owning Project, with the read and write abilities.
	URL, Token string
	// OtherTeamToken is a token of another team (the team-visibility case).
	OtherTeamToken string
	// Project is a scratch project the suite works in: it creates and
	// removes only its own resources there (Scratch).
	Project string
	// Scratch creates, in Project, an application with one persistent
	// storage and one env var, and a database, and removes whatever is
	// left of them when the test ends.
	Scratch func(t *testing.T) Scratch
	// DockerVolume tells whether the server still holds the named Docker
	// volume; observable is false where the target cannot see the server
	// (a real Coolify's API cannot tell).
	DockerVolume func(name string) (exists, observable bool)
	// Provoke429 makes the next requests meet Coolify's throttle (the sim
	// lowers its limit; a live target bursts GET /version) and returns a
	// function undoing it. Nil: the target cannot, and the case says so.
	Provoke429 func(t *testing.T) (undo func())
	// ServerUUID is a server of the token's team the suite may create a
	// scratch database on (issue 32's cases); NoSensitiveToken a token of
	// the same team without read:sensitive.
	ServerUUID       string
	NoSensitiveToken string
}

// Scratch names the resources Scratch made.
type Scratch struct {
	App, Storage, StorageName, Env, DB string
}

// Coolify runs the cases a Coolify must pass for the client's reading of it
// to hold (backend/providers/coolify; docs/providers.md): each endpoint's
// own not-found words, the catch-all is foreign, team visibility, a storage
// delete leaves the Docker volume, a queued delete ends in the own 404, and
// the 429's shape.
func Coolify(t *testing.T, target CoolifyTarget) {
	if target.URL == "" || target.Token == "" || target.Project == "" || target.Scratch == nil {
		t.Fatal("conformance: CoolifyTarget needs URL, Token, Project and Scratch")
	}
	c := coolify.New(coolify.Options{BaseURL: target.URL, Token: target.Token, RateRetries: -1,
		Confirm: providers.Backoff{Initial: 100 * time.Millisecond, Max: 2 * time.Second, Total: 5 * time.Minute}})
	missing := "slotkeeperconformance0000"

	t.Run("own not-found words", func(t *testing.T) {
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		for _, w := range []struct{ method, path, msg string }{
			{"GET", "/applications/" + missing, "Application not found."},                                 // AC:2373
			{"DELETE", "/applications/" + missing, "Application not found"},                               // AC:2557
			{"GET", "/applications/" + missing + "/envs", "Application not found"},                        // AC:3217
			{"GET", "/applications/" + missing + "/storages", "Application not found"},                    // AC:4556
			{"DELETE", "/applications/" + sc.App + "/envs/" + missing, "Environment variable not found."}, // AC:3954
			{"DELETE", "/applications/" + sc.App + "/storages/" + missing, "Storage not found."},          // AC:5073
			{"GET", "/databases/" + missing, "Database not found."},                                       // DC:330
			{"DELETE", "/databases/" + missing, "Database not found."},                                    // DC:2584
			{"GET", "/projects/" + missing, "Project not found."},                                         // PC:98
			{"DELETE", "/projects/" + missing, "Project not found."},                                      // PC:478
			{"GET", "/projects/" + missing + "/environments", "Project not found."},                       // PC:554
		} {
			st, body := raw(t, ctx, w.method, target.URL+w.path, target.Token)
			if st != 404 || body != `{"message":`+strconv.Quote(w.msg)+`}` {
				t.Errorf("%s %s: %d %s, want 404 {\"message\":%q}", w.method, w.path, st, body, w.msg)
			}
		}
		if _, l, err := c.GetApplication(ctx, missing); l != providers.Absent {
			t.Errorf("client: GET app %v %v", l, err)
		}
		if out, err := c.DeleteApplication(ctx, missing); out != providers.AlreadyAbsent {
			t.Errorf("client: DELETE app %v %v", out, err)
		}
		if out, err := c.DeleteEnv(ctx, sc.App, missing); out != providers.AlreadyAbsent {
			t.Errorf("client: DELETE env %v %v", out, err)
		}
	})

	t.Run("catch-all is foreign", func(t *testing.T) {
		ctx := ctxFor(t)
		api := strings.TrimSuffix(strings.TrimRight(target.URL, "/"), "/v1")
		st, body := raw(t, ctx, "GET", api+"/databases/"+missing, target.Token)
		var m map[string]any
		if st != 404 || json.Unmarshal([]byte(body), &m) != nil || m["message"] != "Not found." || m["docs"] == nil {
			t.Errorf("GET %s/databases/…: %d %s, want the catch-all 404 (routes/api.php:431-433)", api, st, body)
		}
		wrong := coolify.New(coolify.Options{BaseURL: api, Token: target.Token, RateRetries: -1})
		if _, l, err := wrong.GetDatabase(ctx, missing); l != providers.Unknown || providers.CodeOf(err) != providers.CodeForeign {
			t.Errorf("client on /api: lookup %v %v, want unknown (foreign)", l, err)
		}
		if _, err := wrong.Version(ctx); providers.CodeOf(err) != providers.CodeForeign {
			t.Errorf("client on /api: version %v, want foreign", err)
		}
		v, err := c.Version(ctx)
		if err != nil {
			t.Fatalf("version: %v", err)
		}
		if ok, err := coolify.VersionAtLeast(v, coolify.MinVersion); !ok || err != nil {
			t.Errorf("Coolify %s is older than %s (%v)", v, coolify.MinVersion, err)
		}
	})

	t.Run("team visibility", func(t *testing.T) {
		if target.OtherTeamToken == "" {
			t.Fatal("no token of another team given")
		}
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		other := coolify.New(coolify.Options{BaseURL: target.URL, Token: target.OtherTeamToken, RateRetries: -1})
		mine, err := c.Team(ctx)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := other.Team(ctx)
		if err != nil || theirs.ID == mine.ID {
			t.Fatalf("other token's team %+v %v (mine %+v): not another team", theirs, err, mine)
		}
		if _, l, err := c.GetProject(ctx, target.Project); l != providers.Found {
			t.Fatalf("own token: project %v %v", l, err)
		}
		// The genuine words for live resources: why the jobs check that the
		// slot's project is visible before reading anything as absent.
		if _, l, _ := other.GetProject(ctx, target.Project); l != providers.Absent {
			t.Errorf("another team's token: project %v, want Coolify's own not-found", l)
		}
		if _, l, _ := other.GetApplication(ctx, sc.App); l != providers.Absent {
			t.Errorf("another team's token: live app %v, want Coolify's own not-found", l)
		}
		if _, l, _ := c.GetApplication(ctx, sc.App); l != providers.Found {
			t.Errorf("own token: app %v", l)
		}
	})

	t.Run("storage delete leaves the docker volume", func(t *testing.T) {
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		if out, err := c.DeleteStorage(ctx, sc.App, sc.Storage); out != providers.Deleted || err != nil {
			t.Fatalf("delete storage: %v %v", out, err)
		}
		list, err := c.ListStorages(ctx, sc.App)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range list {
			if s.UUID == sc.Storage {
				t.Fatalf("storage %s still listed after its delete", sc.Storage)
			}
		}
		if target.DockerVolume != nil {
			if exists, observable := target.DockerVolume(sc.StorageName); observable && !exists {
				t.Errorf("the Docker volume %s is gone: the storage delete removed data (the client says it does not)", sc.StorageName)
			} else if !observable {
				t.Logf("the server's Docker volumes are not observable here: only the mount definition's removal was checked")
			}
		}
	})

	t.Run("queued delete ends in the own 404", func(t *testing.T) {
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		st, body := raw(t, ctx, "DELETE", target.URL+"/databases/"+sc.DB+"?delete_volumes=true&delete_configurations=true&docker_cleanup=true&delete_connected_networks=true", target.Token)
		if st != 200 || !strings.Contains(body, "deletion request queued") {
			t.Fatalf("DELETE database: %d %s, want 200 … deletion request queued.", st, body)
		}
		if out, err := c.DeleteDatabase(ctx, sc.DB); err != nil || (out != providers.Deleted && out != providers.AlreadyAbsent) {
			t.Fatalf("client delete: %v %v", out, err)
		}
		if _, l, err := c.GetDatabase(ctx, sc.DB); l != providers.Absent {
			t.Fatalf("after the queued delete: %v %v", l, err)
		}
	})

	t.Run("ready-reset calls: create env, create storage, deployment not found", func(t *testing.T) {
		// Issue 23 (DC/AC/DeC at 379abb25): what the ready reset's client
		// relies on, on the scratch application only.
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		st, body := raw(t, ctx, "GET", target.URL+"/deployments/"+missing, target.Token)
		if st != 404 || body != `{"message":"Deployment not found."}` {
			t.Errorf("GET /deployments/…: %d %s, want 404 Deployment not found. (DeC:134)", st, body)
		}
		if _, l, err := c.GetDeployment(ctx, missing); l != providers.Absent {
			t.Errorf("client: deployment %v %v, want absent", l, err)
		}
		key := "SK_CONFORMANCE_" + strings.ToUpper(missing[:6])
		if id, err := c.CreateEnv(ctx, sc.App, key, "v"); err != nil || id == "" {
			t.Fatalf("create env: %q %v, want 201 {uuid} (AC:3867)", id, err)
		}
		if _, err := c.CreateEnv(ctx, sc.App, key, "v"); providers.CodeOf(err) != providers.CodeConflict {
			t.Errorf("create the same env again: %v, want 409 conflict (AC:3841)", err)
		}
		s, err := c.CreateStorage(ctx, sc.App, "skconformance", "/skconformance")
		if err != nil || s.UUID == "" || s.Name != sc.App+"-skconformance" || s.MountPath != "/skconformance" {
			t.Errorf("create storage: %+v %v, want 201 named <app uuid>-<name> (AC:4898, 4905)", s, err)
		}
	})

	t.Run("env vars: preview copies and locked values", func(t *testing.T) {
		// Issue 32 (AC:3207-3245, EnvironmentVariable.php:95-120,
		// AC:129-131): creating a normal var also creates its preview copy,
		// listed beside it; a locked var's value is hidden from every token.
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		key := "SK_PREVIEW_" + strings.ToUpper(missing[:6])
		if _, err := c.CreateEnv(ctx, sc.App, key, "v1"); err != nil {
			t.Fatal(err)
		}
		envs, err := c.ListEnvs(ctx, sc.App)
		if err != nil {
			t.Fatal(err)
		}
		var normal, preview int
		for _, e := range envs {
			if e.Key != key {
				continue
			}
			if e.Preview {
				preview++
			} else {
				normal++
			}
			if !e.Hidden && e.Value != "v1" {
				t.Errorf("%s (preview %v) = %q, want v1", key, e.Preview, e.Value)
			}
		}
		if normal != 1 || preview != 1 {
			t.Errorf("%s listed %d normal and %d preview, want one of each", key, normal, preview)
		}
		locked := "SK_LOCKED_" + strings.ToUpper(missing[:6])
		st, body := rawBody(t, ctx, "POST", target.URL+"/applications/"+sc.App+"/envs", target.Token,
			`{"key":"`+locked+`","value":"secret","is_shown_once":true}`)
		if st != 201 {
			t.Fatalf("create a locked env: %d %s", st, body)
		}
		envs, err = c.ListEnvs(ctx, sc.App)
		if err != nil {
			t.Fatal(err)
		}
		seen := false
		for _, e := range envs {
			if e.Key == locked && !e.Preview {
				seen = true
				if !e.Locked || !e.Hidden || e.Value != "" {
					t.Errorf("locked env %+v: want locked and hidden from this token", e)
				}
			}
		}
		if !seen {
			t.Errorf("locked env %s not listed", locked)
		}
	})

	t.Run("database create answers its URL; servers say whether they are reachable", func(t *testing.T) {
		// Issue 32 (DC:1950-1968, DC:56-79; ServersController.php:149-184).
		if target.ServerUUID == "" {
			t.Skip("no server to create a scratch database on; the create's answer and GET /servers/{uuid} were not checked")
		}
		ctx := ctxFor(t)
		srv, l, err := c.GetServer(ctx, target.ServerUUID)
		if l != providers.Found || !srv.Reachable || !srv.Usable {
			t.Fatalf("server %s: %v %+v %v, want found, reachable and usable", target.ServerUUID, l, srv, err)
		}
		if _, l, _ := c.GetServer(ctx, missing); l != providers.Absent {
			t.Errorf("missing server: %v, want Server not found.", l)
		}
		db, err := c.CreateDatabase(ctx, providers.DatabaseSpec{Engine: "postgresql", Name: "sk-conformance-" + missing[:6],
			ProjectUUID: target.Project, EnvironmentName: "production", ServerUUID: target.ServerUUID})
		if err != nil {
			t.Fatalf("create database: %v", err)
		}
		t.Cleanup(func() { c.DeleteDatabase(context.Background(), db.UUID) })
		if db.InternalURL == "" {
			t.Errorf("the create's 201 has no internal_db_url")
		}
		if target.NoSensitiveToken != "" {
			ns := coolify.New(coolify.Options{BaseURL: target.URL, Token: target.NoSensitiveToken, RateRetries: -1})
			if d, l, err := ns.GetDatabase(ctx, db.UUID); l != providers.Found || d.InternalURL != "" {
				t.Errorf("GET without read:sensitive: %v %v, internal URL shown %v", l, err, d.InternalURL != "")
			}
		}
	})

	t.Run("deployments: the queue, a skipped deploy, the listings", func(t *testing.T) {
		// Issue 32 (DeployController.php, bootstrap/helpers/applications.php
		// at 379abb25): a deploy of the scratch application while its
		// deployment is queued or building is skipped, yet answers a
		// freshly minted uuid that was never created (DeC:539-553, :599;
		// applications.php:46-65); the app's listing and the servers'
		// queue name the real one.
		ctx := ctxFor(t)
		sc := target.Scratch(t)
		st, body := raw(t, ctx, "GET", target.URL+"/deployments/applications/"+missing, target.Token)
		if st != 404 || body != `{"message":"Application not found"}` {
			t.Errorf("GET /deployments/applications/…: %d %s, want 404 Application not found (DeC:720)", st, body)
		}
		d1, err := c.Deploy(ctx, sc.App)
		if err != nil || d1.UUID == "" || d1.Skipped {
			t.Fatalf("deploy: %+v %v, want a queued deployment", d1, err)
		}
		got, l, err := c.GetDeployment(ctx, d1.UUID)
		if l != providers.Found || err != nil || !strings.HasSuffix(got.URL, "/application/"+sc.App+"/deployment/"+d1.UUID) {
			t.Fatalf("GET the deployment: %+v %v %v, want found with its page (applications.php:18-19)", got, l, err)
		}
		if got.Status != "queued" && got.Status != "in_progress" {
			t.Skipf("deployment %s is already %s: a skipped deploy cannot be provoked", d1.UUID, got.Status)
		}
		active, err := c.ActiveDeployments(ctx)
		if err != nil || !slices.ContainsFunc(active, func(d providers.Deployment) bool { return d.UUID == d1.UUID }) {
			t.Errorf("GET /deployments: %+v %v, want %s among the queued and in-progress ones (DeC:69-82)", active, err, d1.UUID)
		}
		d2, err := c.Deploy(ctx, sc.App)
		if err != nil || !d2.Skipped || d2.UUID == "" || d2.UUID == d1.UUID {
			t.Fatalf("deploy again: %+v %v, want skipped with a fresh uuid", d2, err)
		}
		if _, l, err := c.GetDeployment(ctx, d2.UUID); l != providers.Absent {
			t.Errorf("the skipped deploy's uuid %s: %v %v, want never created (404)", d2.UUID, l, err)
		}
		list, err := c.ListDeployments(ctx, sc.App)
		if err != nil || len(list) == 0 || list[0].UUID != d1.UUID {
			t.Errorf("GET /deployments/applications/{uuid}: %+v %v, want %s newest", list, err, d1.UUID)
		}
	})

	t.Run("429 shape", func(t *testing.T) {
		if target.Provoke429 == nil {
			t.Skip("this target cannot provoke Coolify's throttle; the 429's shape was not checked")
		}
		ctx := ctxFor(t)
		undo := target.Provoke429(t)
		defer undo()
		var st int
		var hdr http.Header
		var body string
		for i := 0; i < 300 && st != 429; i++ {
			st, body, hdr = rawH(t, ctx, "GET", target.URL+"/version", target.Token)
			if i == 0 && st == 200 {
				// Laravel's ThrottleRequests answers every throttled
				// request with the user's limit and what is left (issue 32:
				// the client's budget follows them).
				if _, err := strconv.Atoi(hdr.Get("X-RateLimit-Limit")); err != nil {
					t.Errorf("200 without X-RateLimit-Limit (%q)", hdr.Get("X-RateLimit-Limit"))
				}
				if _, err := strconv.Atoi(hdr.Get("X-RateLimit-Remaining")); err != nil {
					t.Errorf("200 without X-RateLimit-Remaining (%q)", hdr.Get("X-RateLimit-Remaining"))
				}
			}
		}
		if st != 429 {
			t.Skip("no 429 within 300 requests (the rate limit is set higher); its shape was not checked")
		}
		n, err := strconv.Atoi(hdr.Get("Retry-After"))
		if err != nil || n < 0 || n > 60 || !strings.Contains(body, "Too Many Attempts.") {
			t.Errorf("429: Retry-After %q, body %s; want 0-60 s and Too Many Attempts.", hdr.Get("Retry-After"), body)
		}
	})
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// raw sends one request and returns the status and the body (trimmed).
func raw(t *testing.T, ctx context.Context, method, url, token string) (int, string) {
	st, body, _ := rawH(t, ctx, method, url, token)
	return st, body
}

func rawH(t *testing.T, ctx context.Context, method, url, token string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(b)), resp.Header
}

// rawBody sends one request with a JSON body.
func rawBody(t *testing.T, ctx context.Context, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(b))
}
