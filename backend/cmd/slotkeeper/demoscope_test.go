package main

import (
	"context"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// registerFixture is the register command of a world the simulators seeded.
func registerFixture(name string, fx sim.SlotFixture) slots.RegisterCmd {
	return slots.RegisterCmd{
		Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
	}
}

// TestDemoScopeFollowsTheSimulators (issue 38): `make run` with no scope
// flags, then a slot world seeded after start through /api/sim/slots
// registers (before: 403 outside_scope, the demo's scope was the pool's
// projects as of start), and the next reconciliation covers its project.
// Nothing the simulators do not hold is in scope: a Coolify project they
// never created and a Bitbucket project they do not have are refused 403
// outside_scope, for register and for promote, appending nothing.
func TestDemoScopeFollowsTheSimulators(t *testing.T) {
	t.Parallel()
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--deadline-reset=false", "--reconcile-every", "0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}

	var fx sim.SlotFixture
	if code := s.call(t, "POST", "/api/sim/slots", map[string]string{"name": "newslot"}, &fx); code != 201 {
		t.Fatalf("seed: %d", code)
	}
	var list struct {
		Position events.Position `json:"position"`
	}
	s.call(t, "GET", "/api/slots", nil, &list)
	before := list.Position

	// Outside the simulators: refused, nothing appended.
	var e apiError
	out := registerFixture("stranger", fx)
	out.ProjectUUID = "nosuchproject0000000000"
	if code := s.call(t, "POST", "/api/slots", out, &e); code != 403 || e.Error.Details["field"] != "project_uuid" {
		t.Errorf("a project the simulators do not hold: %d %+v, want 403 project_uuid", code, e.Error)
	}
	out = registerFixture("stranger", fx)
	out.Repo.Project = "LOOT"
	if code := s.call(t, "POST", "/api/slots", out, &e); code != 403 || e.Error.Details["field"] != "repo.project" {
		t.Errorf("a Bitbucket project the simulators do not hold: %d %+v, want 403 repo.project", code, e.Error)
	}
	if code := s.call(t, "POST", "/api/slots/cedar/promote", slots.PromoteCmd{Project: "LOOT", Name: "copy"}, &e); code != 403 || e.Error.Details["field"] != "project" {
		t.Errorf("promote outside the simulators: %d %+v, want 403 project", code, e.Error)
	}
	s.call(t, "GET", "/api/slots", nil, &list)
	if list.Position != before {
		t.Fatalf("refusals appended: position %d → %d", before, list.Position)
	}

	// The world the simulators seeded after start: in scope.
	var v projections.SlotView
	if code := s.call(t, "POST", "/api/slots", registerFixture("newslot", fx), &v); code != 201 || v.Name != "newslot" {
		t.Fatalf("register the seeded world: %d %+v", code, v)
	}

	// The next reconciliation covers the new slot's project.
	reconcileNow(t, s, frames)
	var rep struct {
		Run struct {
			State string   `json:"state"`
			Scope []string `json:"scope"`
		} `json:"run"`
	}
	if code := s.call(t, "GET", "/api/reconcile", nil, &rep); code != 200 || rep.Run.State != "done" {
		t.Fatalf("reconcile: %d %+v", code, rep.Run)
	}
	if !slices.Contains(rep.Run.Scope, "coolify:"+fx.ProjectUUID) || !slices.Contains(rep.Run.Scope, "bitbucket:SLOT") {
		t.Errorf("reconcile scope %v lacks the new slot's project", rep.Run.Scope)
	}
}
