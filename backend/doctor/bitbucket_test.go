package doctor_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

const (
	token     = "doctorTOKEN-never-print-5c1e"
	projToken = "doctorPROJ-never-print-77d0"
	readToken = "doctorREAD-never-print-1a2b"
	repoToken = "doctorREPO-never-print-9f9f"
)

func startSim(t *testing.T) (*sim.Sim, sim.SlotFixture) {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{BitbucketToken: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range []sim.BitbucketToken{
		{Token: projToken, Kind: sim.TokenProject, Project: "TPL", ProjectPerm: sim.PermAdmin},
		{Token: readToken, Kind: sim.TokenProject, Project: "SLOT", ProjectPerm: sim.PermWrite},
		{Token: repoToken, Kind: sim.TokenRepository, Project: "SLOT", Repo: fx.Repo.Slug, RepoPerm: sim.PermAdmin},
	} {
		if err := s.AddBitbucketToken(tk); err != nil {
			t.Fatal(err)
		}
	}
	return s, fx
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func client(s *sim.Sim, tok string) *bitbucket.Client {
	return bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: tok, RateRetries: -1})
}

func pusher(t *testing.T, o git.Options) *git.Pusher {
	t.Helper()
	p, err := git.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// find returns the result named check, failing the test if absent, and
// checks that no token is printed with any result.
func find(t *testing.T, rs []doctor.Result, check string) doctor.Result {
	t.Helper()
	var buf bytes.Buffer
	doctor.Print(&buf, rs)
	for _, tok := range []string{token, projToken, readToken, repoToken} {
		if strings.Contains(buf.String(), tok) {
			t.Fatalf("a token is printed:\n%s", buf.String())
		}
	}
	for _, r := range rs {
		if r.Check == check {
			return r
		}
	}
	t.Fatalf("no result %q in:\n%s", check, buf.String())
	return doctor.Result{}
}

func wantFail(t *testing.T, r doctor.Result, definite bool, fix string) {
	t.Helper()
	if r.OK || r.Definite != definite || !strings.Contains(r.Fix, fix) {
		t.Fatalf("%+v; want a failure (definite %v) whose fix says %q", r, definite, fix)
	}
}

func TestBitbucketProjects(t *testing.T) {
	s, _ := startSim(t)
	ctx := ctxT(t)
	rs := doctor.BitbucketProjects(client(s, token), []string{"SLOT", "TPL"})(ctx)
	if failed, _ := doctor.Failed(rs); len(failed) != 0 || len(rs) != 4 {
		t.Fatalf("admin token: %+v", rs)
	}
	if r := find(t, rs, "bitbucket: permission on SLOT"); !strings.Contains(r.Detail, "REPO_CREATE") {
		t.Fatalf("%+v", r)
	}
	rs = doctor.BitbucketProjects(client(s, token), nil)(ctx)
	if len(rs) != 1 || !rs[0].OK {
		t.Fatalf("no projects: %+v", rs)
	}

	t.Run("unknown project", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, token), []string{"SLOT", "NOPE"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: project NOPE"), true, "create project NOPE")
		if !find(t, rs, "bitbucket: permission on SLOT").OK {
			t.Fatal("SLOT should still pass")
		}
	})
	t.Run("write but not admin", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, readToken), []string{"SLOT"})(ctx)
		if !find(t, rs, "bitbucket: project SLOT").OK {
			t.Fatal("the project is visible")
		}
		wantFail(t, find(t, rs, "bitbucket: permission on SLOT"), true, "Project admin on SLOT")
	})
	t.Run("templates-only project needs no admin", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, readToken), []string{"SLOT"}, "SLOT")(ctx)
		if failed, _ := doctor.Failed(rs); len(failed) != 0 {
			t.Fatalf("%+v", rs)
		}
	})
	t.Run("repository token", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, repoToken), []string{"SLOT"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: permission on SLOT"), true, "repository tokens cannot create")
	})
	t.Run("project token of another project", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, projToken), []string{"SLOT", "TPL"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: project SLOT"), true, "no access to SLOT")
		if !find(t, rs, "bitbucket: permission on TPL").OK {
			t.Fatal("TPL should pass")
		}
	})
	t.Run("refused token", func(t *testing.T) {
		rs := doctor.BitbucketProjects(client(s, "wrong-"+token), []string{"SLOT"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: project SLOT"), true, "refused the token")
	})
	t.Run("wrong base URL", func(t *testing.T) {
		s.AddFault(sim.Fault{Endpoint: sim.EndpointBBGetProject, Foreign404: true, Times: 1})
		rs := doctor.BitbucketProjects(client(s, token), []string{"SLOT"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: project SLOT"), true, "--bitbucket-url")
	})
	t.Run("server error is not definite", func(t *testing.T) {
		s.AddFault(sim.Fault{Endpoint: sim.EndpointBBListProjects, Status: 503, Times: 2})
		rs := doctor.BitbucketProjects(client(s, token), []string{"SLOT"})(ctx)
		wantFail(t, find(t, rs, "bitbucket: permission on SLOT"), false, "repeated")
		if _, definite := doctor.Failed(rs); definite {
			t.Fatal("a 503 is not a misconfiguration")
		}
	})
	// Every check is read-only: no request but GETs reached Bitbucket.
	for _, r := range s.Requests() {
		if r.Method != "GET" {
			t.Fatalf("doctor sent %s %s", r.Method, r.Path)
		}
	}
}

func TestGitAuth(t *testing.T) {
	s, fx := startSim(t)
	ctx := ctxT(t)
	tpl := doctor.Template{Name: "TPL/template", URL: fx.Template.CloneURL, Branch: fx.TemplateRef}

	rs := doctor.GitAuth(pusher(t, git.Options{Token: token}), []doctor.Template{tpl})(ctx)
	if failed, _ := doctor.Failed(rs); len(failed) != 0 {
		t.Fatalf("bearer: %+v", rs)
	}
	if r := find(t, rs, "git: auth"); !strings.HasPrefix(r.Detail, "token sent as bearer") {
		t.Fatalf("mode not named: %+v", r)
	}
	if r := find(t, rs, "git: template TPL/template"); !strings.Contains(r.Detail, fx.TemplateHead[:12]) {
		t.Fatalf("%+v", r)
	}
	// A project token works as Bearer, never as Basic.
	rs = doctor.GitAuth(pusher(t, git.Options{Token: projToken}), []doctor.Template{tpl})(ctx)
	if !find(t, rs, "git: template TPL/template").OK {
		t.Fatalf("project token as bearer: %+v", rs)
	}

	t.Run("project token as basic", func(t *testing.T) {
		p := pusher(t, git.Options{Token: projToken, Auth: git.AuthBasic, Username: "x-token-auth"})
		rs := doctor.GitAuth(p, []doctor.Template{tpl})(ctx)
		if r := find(t, rs, "git: auth"); !strings.Contains(r.Detail, "basic as user x-token-auth") {
			t.Fatalf("%+v", r)
		}
		wantFail(t, find(t, rs, "git: template TPL/template"), true, "--git-auth bearer")
	})
	t.Run("refused bearer", func(t *testing.T) {
		rs := doctor.GitAuth(pusher(t, git.Options{Token: "wrong-" + token}), []doctor.Template{tpl})(ctx)
		wantFail(t, find(t, rs, "git: template TPL/template"), true, "--bitbucket-token")
	})
	t.Run("missing repository", func(t *testing.T) {
		missing := doctor.Template{Name: "TPL/gone", URL: s.CloneURL("TPL", "gone"), Branch: "main"}
		rs := doctor.GitAuth(pusher(t, git.Options{Token: token}), []doctor.Template{missing})(ctx)
		wantFail(t, find(t, rs, "git: template TPL/gone"), true, "does not exist")
	})
	t.Run("missing branch", func(t *testing.T) {
		nob := doctor.Template{Name: "TPL/template", URL: fx.Template.CloneURL, Branch: "nope"}
		rs := doctor.GitAuth(pusher(t, git.Options{Token: token}), []doctor.Template{nob})(ctx)
		wantFail(t, find(t, rs, "git: template TPL/template"), true, "push branch nope")
	})
	t.Run("server error is not definite", func(t *testing.T) {
		s.AddFault(sim.Fault{Endpoint: sim.EndpointGitInfoRefs, Status: 503, Times: 1})
		rs := doctor.GitAuth(pusher(t, git.Options{Token: token}), []doctor.Template{tpl})(ctx)
		wantFail(t, find(t, rs, "git: template TPL/template"), false, "repeated")
	})
	for _, r := range s.Requests() {
		if r.Endpoint == sim.EndpointGitReceivePack {
			t.Fatal("the git check pushed")
		}
	}
}
