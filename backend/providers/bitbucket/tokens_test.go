package bitbucket_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestCreateInUnknownProject: Bitbucket answers 404 NoSuchProjectException;
// the error names the project (not the repository), is definite and says
// what to do, and nothing is created.
func TestCreateInUnknownProject(t *testing.T) {
	b := setup(t, 0)
	_, out, err := b.c.CreateRepo(ctxT(t), "NOPE", "x")
	checkErr(t, err, providers.CodeNotFound, 404, false)
	pe, _ := providers.AsError(err)
	if out != 0 || pe.Resource != "NOPE" || !strings.Contains(pe.Message, "project NOPE does not exist") {
		t.Fatalf("outcome %v, error %+v", out, pe)
	}
	if b.sim.HasRepo("NOPE", "x") {
		t.Fatal("created")
	}
}

// TestMissingPermissionIs401: a token without the permission gets 401 (not
// 403), and the message says it is the permission, not the token.
func TestMissingPermissionIs401(t *testing.T) {
	b := setup(t, 0)
	const ro = "readonlyTOKEN-4471"
	if err := b.sim.AddBitbucketToken(sim.BitbucketToken{Token: ro, Kind: sim.TokenProject, Project: "SLOT", ProjectPerm: sim.PermRead}); err != nil {
		t.Fatal(err)
	}
	c := newClient(b.sim, ro)
	ctx := ctxT(t)
	_, _, err := c.CreateRepo(ctx, "SLOT", "new")
	providersCheck(t, err, ro, providers.CodeUnauthorized, 401)
	if !strings.Contains(err.Error(), "lacks the permission") {
		t.Fatalf("message: %v", err)
	}
	_, err = c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
	providersCheck(t, err, ro, providers.CodeUnauthorized, 401)
	if !b.sim.HasRepo("SLOT", b.fx.Repo.Slug) {
		t.Fatal("deleted without permission")
	}
	if _, _, err := c.GetRepo(ctx, "SLOT", b.fx.Repo.Slug); err != nil {
		t.Fatalf("read: %v", err)
	}
}

func providersCheck(t *testing.T, err error, tok string, code providers.Code, status int) {
	t.Helper()
	pe, ok := providers.AsError(err)
	if !ok || pe.Code != code || pe.Status != status || pe.Uncertain || strings.Contains(err.Error(), tok) {
		t.Fatalf("got %v; want %s %d, certain, without the token", err, code, status)
	}
}

// TestProjectReads: the doctor's read-only calls.
func TestProjectReads(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	if l, err := b.c.Project(ctx, "SLOT"); l != providers.Found || err != nil {
		t.Fatalf("SLOT: %v %v", l, err)
	}
	l, err := b.c.Project(ctx, "NOPE")
	checkErr(t, err, providers.CodeNotFound, 404, false)
	if l != providers.Absent {
		t.Fatalf("NOPE: %v", l)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointBBGetProject, Foreign404: true, Times: 1})
	if l, err := b.c.Project(ctx, "SLOT"); l != providers.Unknown || providers.CodeOf(err) != providers.CodeForeign {
		t.Fatalf("foreign 404: %v %v", l, err)
	}
	// Page size 2 (newClient): three projects take two pages.
	keys, err := b.c.ProjectsWithPermission(ctx, "REPO_CREATE")
	if err != nil || !slices.Equal(keys, []string{"PROMO", "SLOT", "TPL"}) {
		t.Fatalf("REPO_CREATE: %v %v", keys, err)
	}
	_, err = b.c.ProjectsWithPermission(ctx, "REPO_WRITE")
	checkErr(t, err, providers.CodeUnprocessable, 400, false)
}
