//go:build live

package conformance

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
)

// TestCoolifyLive runs the Coolify cases against a real Coolify (`make
// test-live`, or `go test -tags live ./backend/providers/conformance`). It
// needs, and fails without:
//
//	SLOTKEEPER_LIVE_COOLIFY_URL              API base ending in /api/v1
//	SLOTKEEPER_LIVE_COOLIFY_TOKEN            token (read, write) of the team owning the project
//	SLOTKEEPER_LIVE_COOLIFY_PROJECT          uuid of a scratch project
//	SLOTKEEPER_LIVE_COOLIFY_SERVER           uuid of the server scratch resources are created on
//	SLOTKEEPER_LIVE_COOLIFY_OTHER_TEAM_TOKEN token of another team (read)
//
// optional: SLOTKEEPER_LIVE_COOLIFY_ENVIRONMENT (default "production"), and
// SLOTKEEPER_LIVE_COOLIFY_PROVOKE_429=1 to burst GET /version until the
// throttle answers (it throttles this host's IP for up to a minute).
//
// It creates, in the scratch project only, a stopped application from a
// Docker image (never deployed) with one persistent storage and one env
// var, and a PostgreSQL database (never started), and deletes each when
// its case ends. The Docker volume of the deleted storage was never
// created (nothing deployed), so nothing is left on the server.
func TestCoolifyLive(t *testing.T) {
	env := map[string]string{}
	var missing []string
	for _, k := range []string{"URL", "TOKEN", "PROJECT", "SERVER", "OTHER_TEAM_TOKEN"} {
		name := "SLOTKEEPER_LIVE_COOLIFY_" + k
		if env[k] = os.Getenv(name); env[k] == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("the live Coolify suite needs %s (see docs/providers.md, \"Running the live conformance suite\")", strings.Join(missing, ", "))
	}
	envName := os.Getenv("SLOTKEEPER_LIVE_COOLIFY_ENVIRONMENT")
	if envName == "" {
		envName = "production"
	}
	base := strings.TrimRight(env["URL"], "/")
	api := &liveAPI{base: base, token: env["TOKEN"]}
	client := coolify.New(coolify.Options{BaseURL: base, Token: env["TOKEN"]})
	target := CoolifyTarget{
		URL: base, Token: env["TOKEN"], OtherTeamToken: env["OTHER_TEAM_TOKEN"], Project: env["PROJECT"],
		// Issue 32: a scratch database is created (and started: the
		// client creates with instant_deploy) on SERVER, then deleted with
		// its volumes; NO_SENSITIVE_TOKEN (optional) is a token of the
		// same team without read:sensitive.
		ServerUUID: env["SERVER"], NoSensitiveToken: os.Getenv("SLOTKEEPER_LIVE_COOLIFY_NO_SENSITIVE_TOKEN"),
		Scratch: func(t *testing.T) Scratch {
			name := "slotkeeper-conformance-" + randHex()
			var sc Scratch
			var app struct{ UUID string }
			api.post(t, "/applications/dockerimage", map[string]any{
				"project_uuid": env["PROJECT"], "server_uuid": env["SERVER"], "environment_name": envName,
				"docker_registry_image_name": "nginx", "docker_registry_image_tag": "alpine", "ports_exposes": "80",
				"name": name, "instant_deploy": false,
			}, &app)
			sc.App = app.UUID
			t.Cleanup(func() {
				remove(t, "application", func(ctx context.Context) (providers.DeleteOutcome, error) {
					return client.DeleteApplication(ctx, sc.App)
				})
			})
			var st struct{ UUID, Name string }
			api.post(t, "/applications/"+sc.App+"/storages", map[string]any{"type": "persistent", "name": "data", "mount_path": "/slotkeeper-data"}, &st)
			sc.Storage, sc.StorageName = st.UUID, st.Name // Coolify prefixes the name with the app's uuid (AC:4898)
			var ev struct{ UUID string }
			api.post(t, "/applications/"+sc.App+"/envs", map[string]any{"key": "SLOTKEEPER_CONFORMANCE", "value": "1"}, &ev)
			sc.Env = ev.UUID
			var db struct{ UUID string }
			api.post(t, "/databases/postgresql", map[string]any{
				"project_uuid": env["PROJECT"], "server_uuid": env["SERVER"], "environment_name": envName,
				"name": name + "-db", "instant_deploy": false,
			}, &db)
			sc.DB = db.UUID
			t.Cleanup(func() {
				remove(t, "database", func(ctx context.Context) (providers.DeleteOutcome, error) { return client.DeleteDatabase(ctx, sc.DB) })
			})
			if sc.App == "" || sc.Storage == "" || sc.DB == "" {
				t.Fatalf("scratch resources without uuids: %+v", sc)
			}
			return sc
		},
		// A real Coolify's API cannot show the server's Docker volumes.
		DockerVolume: func(string) (bool, bool) { return false, false },
	}
	if os.Getenv("SLOTKEEPER_LIVE_COOLIFY_PROVOKE_429") == "1" {
		target.Provoke429 = func(*testing.T) func() { return func() {} } // the case's own burst provokes it
	}
	Coolify(t, target)
}

// remove deletes a scratch resource and waits for Coolify's own 404.
func remove(t *testing.T, what string, del func(context.Context) (providers.DeleteOutcome, error)) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := del(ctx); err != nil {
		t.Errorf("clean-up: the scratch %s may be left in the scratch project: %v", what, err)
	}
}

type liveAPI struct{ base, token string }

func (a *liveAPI) post(t *testing.T, path string, body, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != 200 && resp.StatusCode != 201 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, rb)
	}
	if err := json.Unmarshal(rb, out); err != nil {
		t.Fatalf("POST %s: %v: %s", path, err, rb)
	}
}

func randHex() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
