package slots_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// fakeChecker answers lookups from maps: a missing key is absent, an
// entry of "unknown" could not be checked, "refused" is an id the client
// refuses. Environments are per project.
type fakeChecker struct {
	env   map[string]int64 // project, app or db uuid → environment
	repos map[string]bool
	bad   map[string]string // uuid or PROJECT/slug → "unknown" | "refused"
	calls int
}

func (f *fakeChecker) look(id string) (slots.ResourceState, error) {
	f.calls++
	switch f.bad[id] {
	case "unknown":
		return slots.ResourceUnknown, errors.New("HTTP 503")
	case "refused":
		return slots.ResourceUnknown, fmt.Errorf("%w: too short", slots.ErrRefusedID)
	}
	if _, ok := f.env[id]; ok || f.repos[id] {
		return slots.ResourceFound, nil
	}
	return slots.ResourceAbsent, nil
}

func (f *fakeChecker) CoolifyProject(_ context.Context, id string) ([]int64, slots.ResourceState, error) {
	st, err := f.look(id)
	return []int64{f.env[id]}, st, err
}
func (f *fakeChecker) CoolifyApp(_ context.Context, id string) (int64, slots.ResourceState, error) {
	st, err := f.look(id)
	return f.env[id], st, err
}
func (f *fakeChecker) CoolifyDB(_ context.Context, id string) (int64, slots.ResourceState, error) {
	st, err := f.look(id)
	return f.env[id], st, err
}
func (f *fakeChecker) Repo(_ context.Context, r events.RepoRef) (string, slots.ResourceState, error) {
	st, err := f.look(r.Project + "/" + r.Slug)
	return "trunk", st, err
}

func worldCmd(name string) slots.RegisterCmd {
	return slots.RegisterCmd{
		Name: name, ProjectUUID: "proj-" + name, AppUUID: "app-" + name, DBUUID: "db-" + name,
		Repo:         events.RepoRef{Project: "SLOT", Slug: "slot-" + name},
		TemplateRepo: events.RepoRef{Project: "TPL", Slug: "template"}, TemplateRef: "main",
	}
}

func newWorld(names ...string) *fakeChecker {
	f := &fakeChecker{env: map[string]int64{}, repos: map[string]bool{"TPL/template": true}, bad: map[string]string{}}
	for i, n := range names {
		c := worldCmd(n)
		for _, id := range []string{c.ProjectUUID, c.AppUUID, c.DBUUID} {
			f.env[id] = int64(i + 1)
		}
		f.repos[c.Repo.Project+"/"+c.Repo.Slug] = true
	}
	return f
}

// TestRegisterGuards: scope, ownership and the providers' answers each
// refuse a registration with their own code, naming the field (and the
// owning slot), and append nothing.
func TestRegisterGuards(t *testing.T) {
	t.Parallel()
	world := newWorld("alpha", "beta", "gamma", "foreign")
	world.bad["proj-unknown"] = "unknown"
	world.env["proj-unknown"] = 9
	svc, st := setup(t, slots.Config{
		Scope:     slots.Scope{CoolifyProjects: []string{"proj-alpha", "proj-beta", "proj-gamma", "proj-unknown"}, BitbucketProjects: []string{"SLOT", "tpl"}},
		Resources: world,
	})
	ctx := context.Background()
	if err := svc.Register(ctx, alice, worldCmd("alpha")); err != nil {
		t.Fatal(err)
	}
	before := head(t, st)
	cases := []struct {
		name  string
		mut   func(c *slots.RegisterCmd)
		code  slots.Code
		field string
		owner string
	}{
		{"foreign coolify project", func(c *slots.RegisterCmd) { c.ProjectUUID = "proj-foreign" }, slots.CodeForbidden, "project_uuid", ""},
		{"foreign bitbucket project", func(c *slots.RegisterCmd) { c.Repo.Project = "OTHER" }, slots.CodeForbidden, "repo.project", ""},
		{"foreign template project", func(c *slots.RegisterCmd) { c.TemplateRepo.Project = "OTHER" }, slots.CodeForbidden, "template_repo.project", ""},
		{"occupied slot's project", func(c *slots.RegisterCmd) { c.ProjectUUID = "proj-alpha" }, slots.CodeConflict, "project_uuid", "alpha"},
		{"occupied slot's app", func(c *slots.RegisterCmd) { c.AppUUID = "app-alpha" }, slots.CodeConflict, "app_uuid", "alpha"},
		{"occupied slot's db", func(c *slots.RegisterCmd) { c.DBUUID = "db-alpha" }, slots.CodeConflict, "db_uuid", "alpha"},
		{"occupied slot's repo", func(c *slots.RegisterCmd) { c.Repo = events.RepoRef{Project: "slot", Slug: "slot-alpha"} }, slots.CodeConflict, "repo", "alpha"},
		{"repo is the shared template", func(c *slots.RegisterCmd) {
			c.Repo = events.RepoRef{Project: "TPL", Slug: "template"}
			c.TemplateRepo = events.RepoRef{Project: "SLOT", Slug: "slot-gamma"}
		}, slots.CodeConflict, "repo", "alpha"},
		{"template is another slot's repo", func(c *slots.RegisterCmd) { c.TemplateRepo = events.RepoRef{Project: "SLOT", Slug: "slot-alpha"} }, slots.CodeConflict, "template_repo", "alpha"},
		{"template is the own repo", func(c *slots.RegisterCmd) { c.TemplateRepo = c.Repo }, slots.CodeUnprocessable, "template_repo", ""},
		{"absent app", func(c *slots.RegisterCmd) { c.AppUUID = "app-nowhere" }, slots.CodeUnprocessable, "app_uuid", ""},
		{"absent repo", func(c *slots.RegisterCmd) { c.Repo.Slug = "slot-nowhere" }, slots.CodeUnprocessable, "repo", ""},
		{"app of another project", func(c *slots.RegisterCmd) { c.AppUUID = "app-gamma" }, slots.CodeUnprocessable, "app_uuid", ""},
		{"db of another project", func(c *slots.RegisterCmd) { c.DBUUID = "db-gamma" }, slots.CodeUnprocessable, "db_uuid", ""},
		{"provider cannot tell", func(c *slots.RegisterCmd) { c.ProjectUUID = "proj-unknown" }, slots.CodeUpstream, "project_uuid", ""},
		{"client refuses the id", func(c *slots.RegisterCmd) { world.bad["app-beta"] = "refused" }, slots.CodeInvalid, "app_uuid", ""},
	}
	for _, tc := range cases {
		c := worldCmd("beta")
		tc.mut(&c)
		e := wantCode(t, svc.Register(ctx, alice, c), tc.code)
		if e.Details["field"] != tc.field || tc.owner != "" && e.Details["owner"] != tc.owner {
			t.Errorf("%s: details %v, want field %s owner %q", tc.name, e.Details, tc.field, tc.owner)
		}
	}
	delete(world.bad, "app-beta")
	_, err := svc.Promote(ctx, alice, "alpha", slots.PromoteCmd{Project: "ELSEWHERE", Name: "copy"})
	wantCode(t, err, slots.CodeForbidden)
	_, err = svc.PlanJob(ctx, "alpha", events.KindPromote, map[string]string{"project": "ELSEWHERE", "name": "copy"})
	wantCode(t, err, slots.CodeForbidden)
	if after := head(t, st); after != before {
		t.Fatalf("refused registrations appended events: head %d → %d", before, after)
	}
	if err := svc.Register(ctx, alice, worldCmd("beta")); err != nil {
		t.Fatalf("a slot with its own resources: %v", err)
	}
	// No branch given: the repository's default branch, as the provider
	// reports it.
	if st, err := slots.LoadSlot(ctx, st, "beta"); err != nil || st.Reg.Branch != "trunk" {
		t.Fatalf("branch %q (%v), want the repository's default, trunk", st.Reg.Branch, err)
	}
	if _, err := svc.Promote(ctx, alice, "beta", slots.PromoteCmd{Project: "slot", Name: "copy"}); err != nil {
		t.Fatalf("promote inside the scope: %v", err)
	}
}

// TestPromotePlanChecksTheTarget: the promote plan looks the target
// repository up (issue 14) and says exists / free / could not check; a
// reset plan looks nothing up.
func TestPromotePlanChecksTheTarget(t *testing.T) {
	t.Parallel()
	world := newWorld("alpha")
	world.repos["NEW/taken"] = true
	world.bad["NEW/flaky"] = "unknown"
	svc, _ := setup(t, slots.Config{Resources: world})
	ctx := context.Background()
	if err := svc.Register(ctx, alice, worldCmd("alpha")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"taken": slots.TargetExists, "fresh": slots.TargetFree, "flaky": slots.TargetUnknown} {
		p, err := svc.PlanJob(ctx, "alpha", events.KindPromote, map[string]string{"project": "NEW", "name": name})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Target == nil || p.Target.State != want || p.Target.Repo != (events.RepoRef{Project: "NEW", Slug: name}) {
			t.Fatalf("%s: target %+v, want state %s", name, p.Target, want)
		}
		if want == slots.TargetUnknown && p.Target.Error == "" {
			t.Fatalf("%s: could not check, but says not why", name)
		}
	}
	calls := world.calls
	if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	p, err := svc.PlanJob(ctx, "alpha", events.KindReset, nil)
	if err != nil || p.Target != nil || world.calls != calls {
		t.Fatalf("reset plan: target %+v, err %v, lookups %d → %d", p.Target, err, calls, world.calls)
	}
}
