package bitbucket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// foreign404s are 404 answers without Bitbucket's own "no such repository
// / project" (errors[] naming a NoSuch…Exception).
var foreign404s = []struct {
	name  string
	fault sim.Fault
}{
	{"ingress HTML", sim.Fault{Foreign404: true}},
	{"errors without exceptionName", sim.Fault{Status: 404, Body: `{"errors":[{"context":null,"message":"Not found.","exceptionName":null}]}`}},
	{"other exception", sim.Fault{Status: 404, Body: `{"errors":[{"message":"x","exceptionName":"com.example.Other"}]}`}},
	{"other JSON", sim.Fault{Status: 404, Body: `{"message":"Not found."}`}},
}

// TestForeign404IsNeverAbsent: GetRepo is Unknown, DeleteRepo an uncertain
// failure (never AlreadyAbsent), and a foreign 404 never confirms a
// scheduled delete.
func TestForeign404IsNeverAbsent(t *testing.T) {
	b := setup(t, time.Hour) // scheduled deletes never complete
	ctx := ctxT(t)
	for _, fc := range foreign404s {
		t.Run(fc.name, func(t *testing.T) {
			for _, slug := range []string{b.fx.Repo.Slug, "nope"} {
				f := fc.fault
				f.Endpoint = sim.EndpointGetRepo
				id := b.sim.AddFault(f)
				_, l, err := b.c.GetRepo(ctx, "SLOT", slug)
				b.sim.RemoveFault(id)
				checkErr(t, err, providers.CodeForeign, 404, false)
				if l != providers.Unknown {
					t.Fatalf("lookup of %s: %v, want unknown", slug, l)
				}
			}
			f := fc.fault
			f.Endpoint = sim.EndpointDeleteRepo
			id := b.sim.AddFault(f)
			out, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
			b.sim.RemoveFault(id)
			checkErr(t, err, providers.CodeForeign, 404, true)
			if out != 0 || !b.sim.HasRepo("SLOT", b.fx.Repo.Slug) {
				t.Fatalf("delete outcome %v", out)
			}
		})
	}
	// The delete is scheduled (202), then every confirming GET meets an
	// ingress's 404: not confirmed, however often it is asked.
	id := b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetRepo, Foreign404: true})
	out, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
	b.sim.RemoveFault(id)
	checkErr(t, err, providers.CodeNotConfirmed, 404, true)
	if out != 0 {
		t.Fatalf("outcome %v, want not confirmed", out)
	}
	// Bitbucket's own answers keep their meaning: 204 and a missing project.
	if out, err := b.c.DeleteRepo(ctx, "NOPROJ", "gone"); err != nil || out != providers.AlreadyAbsent {
		t.Fatalf("204: %v %v", out, err)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteRepo, Status: 404, Body: `{"errors":[{"context":null,"message":"Project NOPROJ does not exist.","exceptionName":"com.atlassian.bitbucket.project.NoSuchProjectException"}]}`, Times: 1})
	if out, err := b.c.DeleteRepo(ctx, "NOPROJ", "gone"); err != nil || out != providers.AlreadyAbsent {
		t.Fatalf("NoSuchProjectException: %v %v", out, err)
	}
}

// TestBaseURLWithWrongPath: a base URL with a wrong context path meets the
// server's generic 404 (no exception name) everywhere: nothing is absent.
func TestBaseURLWithWrongPath(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	c := bitbucket.New(bitbucket.Options{BaseURL: b.sim.BitbucketURL() + "/bitbucket", Token: token})
	_, l, err := c.GetRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, providers.CodeForeign, 404, false)
	if l != providers.Unknown {
		t.Fatalf("lookup %v", l)
	}
	out, err := c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, providers.CodeForeign, 404, true)
	if out != 0 || !b.sim.HasRepo("SLOT", b.fx.Repo.Slug) {
		t.Fatalf("delete outcome %v", out)
	}
}

// TestFindCommentPagesAndForeign404: the look-up of a PR's comment by its
// marker follows the activities' pages (PageLimit 2 here) to the oldest
// match, as it is now; a proxy's 404 is CodeForeign and Bitbucket's own
// (no such PR) CodeNotFound — both errors, never "no comment", so no
// caller posts a duplicate on a failed look.
func TestFindCommentPagesAndForeign404(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	d, err := b.sim.OpenPR("APPS", "shop", "feature/find")
	if err != nil {
		t.Fatal(err)
	}
	marked := func(text string) bool { return strings.HasSuffix(text, "\nslotkeeper:x") }
	var first bitbucket.Comment
	for i, text := range []string{"a person's comment", "ours\nslotkeeper:x", "another person's", "a later copy\nslotkeeper:x", "more"} {
		c, err := b.c.AddComment(ctx, "APPS", "shop", d.ID, text)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			first = c
		}
	}
	if _, err := b.c.EditComment(ctx, "APPS", "shop", d.ID, first.ID, first.Version, "edited\nslotkeeper:x"); err != nil {
		t.Fatal(err)
	}
	got, found, err := b.c.FindComment(ctx, "APPS", "shop", d.ID, marked)
	if err != nil || !found || got.ID != first.ID || got.Version != first.Version+1 {
		t.Fatalf("found %+v %v %v; want comment %d at version %d", got, found, err, first.ID, first.Version+1)
	}
	if _, found, err := b.c.FindComment(ctx, "APPS", "shop", d.ID, func(string) bool { return false }); err != nil || found {
		t.Fatalf("no match: found=%v %v", found, err)
	}
	for _, fc := range foreign404s {
		f := fc.fault
		f.Endpoint = sim.EndpointPRActivities
		f.Skip = 1 // the second page
		id := b.sim.AddFault(f)
		_, found, err := b.c.FindComment(ctx, "APPS", "shop", d.ID, marked)
		b.sim.RemoveFault(id)
		checkErr(t, err, providers.CodeForeign, 404, false)
		if found {
			t.Fatalf("%s: found on a failed look", fc.name)
		}
	}
	_, found, err = b.c.FindComment(ctx, "APPS", "shop", 999, marked)
	checkErr(t, err, providers.CodeNotFound, 404, false)
	if found {
		t.Fatal("found on a missing PR")
	}
}
