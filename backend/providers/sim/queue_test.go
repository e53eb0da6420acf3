package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestBuildQueue: the simulated Coolify's deployments follow its clock as
// the real one's queue does (REAL-BEHAVIOUR.md "build queue",
// "health checks"): at most concurrent_builds (2) in progress per server,
// the rest queued in order with commit "HEAD" until they start, each
// finishing after its app's build time; an app without a health check
// runs as running:unknown, with one as running:healthy.
func TestBuildQueue(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	s, err := sim.Start(context.Background(), sim.Options{Clock: fc, BuildDuration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken(), RateRetries: -1})
	p := s.AddProject("queue")
	var apps []string
	var deps []providers.Deployment
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		app, err := s.AddApp(p, "app-"+n)
		if err != nil {
			t.Fatal(err)
		}
		apps = append(apps, app)
	}
	s.EnableHealthCheck(apps[1], true)
	s.SetBuildDuration(apps[4], 3*time.Minute)
	for _, app := range apps {
		d, err := c.Deploy(ctx, app)
		if err != nil || d.Skipped {
			t.Fatalf("deploy %s: %+v %v", app, d, err)
		}
		deps = append(deps, d)
	}
	status := func() []string {
		var out []string
		for _, d := range deps {
			got, _, err := c.GetDeployment(ctx, d.UUID)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, got.Status)
		}
		return out
	}
	want := func(at string, w ...string) {
		t.Helper()
		got := status()
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s: statuses %v, want %v", at, got, w)
			}
		}
	}
	want("at first", "in_progress", "in_progress", "queued", "queued", "queued")
	if d, _, _ := c.GetDeployment(ctx, deps[2].UUID); d.Commit != "HEAD" {
		t.Errorf("a queued deployment's commit is %q, want HEAD until it starts", d.Commit)
	}
	q, err := c.ActiveDeployments(ctx)
	if err != nil || len(q) != 5 || q[0].UUID != deps[0].UUID || q[4].UUID != deps[4].UUID {
		t.Fatalf("GET /deployments: %+v %v, want all five, oldest first", q, err)
	}
	fc.Advance(time.Minute)
	want("after one build round", "finished", "finished", "in_progress", "in_progress", "queued")
	fc.Advance(time.Minute)
	want("after two", "finished", "finished", "finished", "finished", "in_progress")
	fc.Advance(2 * time.Minute)
	want("before the long build ends", "finished", "finished", "finished", "finished", "in_progress")
	fc.Advance(time.Minute)
	want("at its end", "finished", "finished", "finished", "finished", "finished")
	for i, w := range map[int]string{0: "running:unknown", 1: "running:healthy"} {
		if a, _, _ := c.GetApplication(ctx, apps[i]); a.Status != w {
			t.Errorf("app %d: %s, want %s", i, a.Status, w)
		}
	}
}

// TestSkippedDeployAndDatabaseStart: a deploy of an app whose deployment
// is queued answers a fresh uuid that 404s (DeployController.php:539-553);
// a new database reads "exited" until it started, and stays so when its
// start fails (StartPostgresql.php:221-230) — both set through the
// control API too.
func TestSkippedDeployAndDatabaseStart(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	s, err := sim.Start(context.Background(), sim.Options{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	c := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken(), RateRetries: -1})
	p := s.AddProject("skip")
	app, err := s.AddApp(p, "app-skip")
	if err != nil {
		t.Fatal(err)
	}
	ctl := httptest.NewServer(s.ControlHandler())
	defer ctl.Close()
	post := func(path string, body any) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(ctl.URL+path, "application/json", bytes.NewReader(b))
		if err != nil || resp.StatusCode != http.StatusNoContent {
			t.Fatalf("POST %s: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	post("/coolify/builds", map[string]any{"app": app, "seconds": 600})
	first, err := c.Deploy(ctx, app)
	if err != nil || first.Skipped {
		t.Fatal(first, err)
	}
	second, err := c.Deploy(ctx, app)
	if err != nil || !second.Skipped || second.UUID == first.UUID {
		t.Fatalf("second deploy %+v %v, want skipped with a fresh uuid", second, err)
	}
	if _, l, _ := c.GetDeployment(ctx, second.UUID); l != providers.Absent {
		t.Errorf("the skipped uuid is %v, want 404", l)
	}
	list, err := c.ListDeployments(ctx, app)
	if err != nil || len(list) != 1 || list[0].UUID != first.UUID || list[0].Status != "in_progress" {
		t.Errorf("the app's deployments %+v %v, want only the first, in progress", list, err)
	}
	resp, err := http.Post(ctl.URL+"/coolify/builds", "application/json", bytes.NewReader([]byte(`{"seconds": -1}`)))
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a negative build time: %v %v, want 400", resp, err)
	}
	resp.Body.Close()

	post("/coolify/database-start", map[string]any{"seconds": 30})
	post("/coolify/database-start", map[string]any{"project": p, "fail": true})
	for _, tc := range []struct {
		fail bool
		want string
	}{{true, "exited"}, {false, "running:healthy"}} {
		if !tc.fail {
			post("/coolify/database-start", map[string]any{"project": p, "fail": false})
		}
		db, err := c.CreateDatabase(ctx, providers.DatabaseSpec{Engine: "postgresql", Name: "db-start", ProjectUUID: p, EnvironmentName: "production", ServerUUID: sim.ServerUUID})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := c.GetDatabase(ctx, db.UUID); got.Status != "exited" {
			t.Errorf("a new database reads %s, want exited until it started", got.Status)
		}
		fc.Advance(time.Minute)
		if got, _, _ := c.GetDatabase(ctx, db.UUID); got.Status != tc.want {
			t.Errorf("a minute on (start fails %v): %s, want %s", tc.fail, got.Status, tc.want)
		}
	}
}
