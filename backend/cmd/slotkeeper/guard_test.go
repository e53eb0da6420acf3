package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// apiError is the error shape of docs/api.md.
type apiError struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// TestRegisterRefusesTheConfusedDeputy: the attacks of issue 16, each a
// plain request against the demo on the simulators. Before, every one was
// accepted (201) and the slot's teardown or release then deleted or
// overwrote another slot's resources with the server's tokens. Now each is
// refused with its code, naming the field (and the owning slot), nothing is
// appended and no provider DELETE or push is ever sent.
func TestRegisterRefusesTheConfusedDeputy(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// First run: the demo pool, plus two slot worlds nobody registered.
	s := startServe(t, data, "127.0.0.1:0", "--deadline-reset=false")
	var list struct {
		Slots    []projections.SlotView `json:"slots"`
		Position events.Position        `json:"position"`
	}
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 {
		t.Fatalf("list: %d", code)
	}
	demo := map[string]projections.SlotView{}
	var scope []string
	for _, v := range list.Slots {
		demo[v.Name] = v
		scope = append(scope, v.ProjectUUID)
	}
	var mine, other sim.SlotFixture
	if code := s.call(t, "POST", "/api/sim/slots", map[string]string{"name": "mine"}, &mine); code != 201 {
		t.Fatalf("seed: %d", code)
	}
	if code := s.call(t, "POST", "/api/sim/slots", map[string]string{"name": "other"}, &other); code != 201 {
		t.Fatalf("seed: %d", code)
	}
	s.stop(t)

	// Second run: both new projects are in the Coolify scope.
	scope = append(scope, mine.ProjectUUID, other.ProjectUUID)
	s = startServe(t, data, "127.0.0.1:0", "--deadline-reset=false", "--coolify-projects", strings.Join(scope, ","))
	var outside sim.SlotFixture
	if code := s.call(t, "POST", "/api/sim/slots", map[string]string{"name": "outside"}, &outside); code != 201 {
		t.Fatalf("seed: %d", code)
	}
	if code := s.call(t, "DELETE", "/api/sim/requests", nil, nil); code != 204 {
		t.Fatalf("forget requests: %d", code)
	}
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 {
		t.Fatal(code)
	}
	before := list.Position

	own := func() slots.RegisterCmd {
		return slots.RegisterCmd{
			Name: "intruder", ProjectUUID: mine.ProjectUUID, AppUUID: mine.AppUUID, DBUUID: mine.DBUUID,
			Repo:         events.RepoRef{Project: mine.Repo.Project, Slug: mine.Repo.Slug},
			TemplateRepo: events.RepoRef{Project: mine.Template.Project, Slug: mine.Template.Slug}, TemplateRef: "main",
		}
	}
	aurora, birch, cedar := demo["aurora"], demo["birch"], demo["cedar"]
	attacks := []struct {
		name   string
		mut    func(c *slots.RegisterCmd)
		status int
		field  string
		owner  string
	}{
		{"another occupied slot's project, app, db and repo", func(c *slots.RegisterCmd) {
			c.ProjectUUID, c.AppUUID, c.DBUUID, c.Repo = aurora.ProjectUUID, aurora.AppUUID, aurora.DBUUID, aurora.Repo
		}, 409, "project_uuid", "aurora"},
		{"another slot's database only", func(c *slots.RegisterCmd) { c.DBUUID = aurora.DBUUID }, 409, "db_uuid", "aurora"},
		{"repo is the shared template", func(c *slots.RegisterCmd) {
			c.Repo, c.TemplateRepo = aurora.TemplateRepo, events.RepoRef{Project: mine.Repo.Project, Slug: mine.Repo.Slug}
		}, 409, "repo", "aurora"},
		{"template is another slot's repo, repo a third's", func(c *slots.RegisterCmd) {
			c.Repo, c.TemplateRepo = cedar.Repo, birch.Repo
		}, 409, "repo", "cedar"},
		{"template is another slot's repo", func(c *slots.RegisterCmd) { c.TemplateRepo = birch.Repo }, 409, "template_repo", "birch"},
		{"a project outside the scope (the simulators do not hold it)", func(c *slots.RegisterCmd) {
			c.ProjectUUID = "nosuchproject0000000000"
		}, 403, "project_uuid", ""},
		{"a repository project outside the scope", func(c *slots.RegisterCmd) { c.Repo.Project = "LOOT" }, 403, "repo.project", ""},
		{"an application of another project", func(c *slots.RegisterCmd) { c.AppUUID = other.AppUUID }, 422, "app_uuid", ""},
		{"a database of another project", func(c *slots.RegisterCmd) { c.DBUUID = outside.DBUUID }, 422, "db_uuid", ""},
		{"an application that does not exist", func(c *slots.RegisterCmd) { c.AppUUID = "nosuchapplication0000000" }, 422, "app_uuid", ""},
		{"a repository that does not exist", func(c *slots.RegisterCmd) { c.Repo.Slug = "nosuchrepo" }, 422, "repo", ""},
		{"a 6-character id the Coolify client refuses", func(c *slots.RegisterCmd) { c.AppUUID = "abc123" }, 400, "app_uuid", ""},
	}
	for _, a := range attacks {
		c := own()
		a.mut(&c)
		var e apiError
		code := s.call(t, "POST", "/api/slots", c, &e)
		if code != a.status || e.Error.Details["field"] != a.field || a.owner != "" && e.Error.Details["owner"] != a.owner {
			t.Errorf("%s: %d %+v, want %d field %s owner %q", a.name, code, e.Error, a.status, a.field, a.owner)
		}
	}

	// A provider that cannot answer: 502, nothing recorded.
	var fault struct{ ID int }
	if code := s.call(t, "POST", "/api/sim/faults", sim.Fault{Server: "coolify", Endpoint: sim.EndpointGetApplication, Status: 503}, &fault); code != 201 {
		t.Fatalf("fault: %d", code)
	}
	var e apiError
	if code := s.call(t, "POST", "/api/slots", own(), &e); code != http.StatusBadGateway || e.Error.Code != "upstream" {
		t.Errorf("lookup failed: %d %+v, want 502 upstream", code, e.Error)
	}
	s.call(t, "DELETE", "/api/sim/faults", nil, nil)
	// Nor when the repository's default branch cannot be read (the branch
	// a reset overwrites defaults to it).
	if code := s.call(t, "POST", "/api/sim/faults", sim.Fault{Server: "bitbucket", Endpoint: sim.EndpointDefaultBranch, Status: 500}, &fault); code != 201 {
		t.Fatalf("fault: %d", code)
	}
	if code := s.call(t, "POST", "/api/slots", own(), &e); code != http.StatusBadGateway {
		t.Errorf("default branch unreadable: %d %+v, want 502", code, e.Error)
	}
	s.call(t, "DELETE", "/api/sim/faults", nil, nil)

	// Promote copies the code out: only into a project inside the scope.
	if code := s.call(t, "POST", "/api/slots/cedar/promote", slots.PromoteCmd{Project: "LOOT", Name: "copy"}, &e); code != 403 || e.Error.Details["field"] != "project" {
		t.Errorf("promote out of scope: %d %+v, want 403 naming project", code, e.Error)
	}
	if code := s.call(t, "GET", "/api/slots/cedar/plan?kind=promote&project=LOOT&name=copy", nil, &e); code != 403 {
		t.Errorf("plan of a promote out of scope: %d, want 403", code)
	}
	// The refused slot does not exist: nothing to tear down or release.
	if code := s.call(t, "POST", "/api/slots/intruder/teardown", nil, &e); code != 404 {
		t.Errorf("teardown of the refused slot: %d, want 404", code)
	}

	// Nothing the refused requests asked for is in the log. The log may
	// move meanwhile, by the server's own consumers (deadline warnings,
	// checkpoints: actor system:…), so look at who wrote each event.
	var audit struct {
		Entries []projections.AuditEntry `json:"entries"`
	}
	if code := s.call(t, "GET", fmt.Sprintf("/api/audit?after=%d&limit=1000&plumbing=true", before), nil, &audit); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	for _, e := range audit.Entries {
		if !strings.HasPrefix(e.Actor, "system:") {
			t.Errorf("refused requests moved the log: %+v", e)
		}
	}
	var reqs struct{ Requests []sim.Request }
	if code := s.call(t, "GET", "/api/sim/requests", nil, &reqs); code != 200 || len(reqs.Requests) == 0 {
		t.Fatalf("requests: %d %d (register looks resources up, so some GETs are expected)", code, len(reqs.Requests))
	}
	for _, r := range reqs.Requests {
		if r.Method != http.MethodGet {
			t.Errorf("a refused registration sent %s %s", r.Method, r.Path)
		}
	}

	// The slot with its own resources is welcome.
	var v projections.SlotView
	if code := s.call(t, "POST", "/api/slots", own(), &v); code != 201 || v.Branch != sim.DefaultBranch {
		t.Fatalf("register own world: %d, branch %q (want the repository's default)", code, v.Branch)
	}
}
