package bitbucket_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/providertest"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

const token = "bbTOKEN-S3CRET-4e1d-0042"

type bundle struct {
	sim *sim.Sim
	c   *bitbucket.Client
	fx  sim.SlotFixture
}

func setup(t *testing.T, delay time.Duration) bundle {
	t.Helper()
	s, fx := providertest.StartSeeded(t, sim.Options{DeleteDelay: delay, BitbucketToken: token})
	s.AddBitbucketProject("PROMO") // Bitbucket creates repositories only in existing projects
	return bundle{sim: s, fx: fx, c: newClient(s, token, confirmBound(delay))}
}

// confirmBound is how long a test client confirms a delete: a simulator
// whose queued deletes never end (an hour) must make it give up, which a
// short bound does soon; any other must see the delete confirmed, which
// a loaded machine must not miss by running out a short bound first (300
// ms did, with -race beside a CPU hog: issue 36 item 7).
func confirmBound(delay time.Duration) time.Duration {
	if delay >= time.Hour {
		return 300 * time.Millisecond
	}
	return time.Minute
}

func newClient(s *sim.Sim, tok string, confirm ...time.Duration) *bitbucket.Client {
	total := 300 * time.Millisecond
	if len(confirm) > 0 {
		total = confirm[0]
	}
	return bitbucket.New(bitbucket.Options{
		BaseURL: s.BitbucketURL(), Token: tok,
		Confirm:     providers.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Total: total},
		RateRetries: 2, MaxRetryAfter: time.Second, PageLimit: 2,
	})
}

func ctxT(t *testing.T) context.Context { return providertest.Ctx(t, 15*time.Second) }

func checkErr(t *testing.T, err error, code providers.Code, status int, uncertain bool) {
	t.Helper()
	providertest.CheckErr(t, err, token, code, status, uncertain)
}

var statusCases = []struct {
	name   string
	fault  sim.Fault
	code   providers.Code
	status int
}{
	{"400", sim.Fault{Status: 400}, providers.CodeUnprocessable, 400},
	{"401", sim.Fault{Status: 401}, providers.CodeUnauthorized, 401},
	{"403", sim.Fault{Status: 403}, providers.CodeForbidden, 403},
	{"422", sim.Fault{Status: 422}, providers.CodeUnprocessable, 422},
	{"429", sim.Fault{Status: 429, Header: map[string]string{"Retry-After": "0"}}, providers.CodeRateLimited, 429},
	{"500", sim.Fault{Status: 500}, providers.CodeServer, 500},
	{"503", sim.Fault{Status: 503}, providers.CodeServer, 503},
	{"reset", sim.Fault{Reset: true}, providers.CodeTransport, 0},
}

func TestGetRepoTriState(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	r, l, err := b.c.GetRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, "", 0, false)
	if l != providers.Found || r.Slug != b.fx.Repo.Slug || r.Project != "SLOT" || r.CloneURL != b.fx.Repo.CloneURL {
		t.Fatalf("found: %+v %v", r, l)
	}
	_, l, err = b.c.GetRepo(ctx, "SLOT", "nope")
	checkErr(t, err, providers.CodeNotFound, 404, false)
	if l != providers.Absent || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("absent: %v %v", l, err)
	}
	for _, sc := range statusCases {
		t.Run(sc.name, func(t *testing.T) {
			f := sc.fault
			f.Endpoint, f.Resource = sim.EndpointGetRepo, "SLOT/"+b.fx.Repo.Slug
			id := b.sim.AddFault(f)
			defer b.sim.RemoveFault(id)
			_, l, err := b.c.GetRepo(ctx, "SLOT", b.fx.Repo.Slug)
			checkErr(t, err, sc.code, sc.status, false)
			if l != providers.Unknown {
				t.Fatalf("lookup %v, want unknown", l)
			}
		})
	}
	// A wrong token is unknown, never absent (seed failure #4).
	_, l, err = newClient(b.sim, "nope-"+token).GetRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, providers.CodeUnauthorized, 401, false)
	if l != providers.Unknown || !strings.Contains(err.Error(), "Authentication failed") {
		t.Fatalf("wrong token: %v %v", l, err)
	}
}

func TestCreateRepo(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	r, out, err := b.c.CreateRepo(ctx, "PROMO", "My_App.v2")
	checkErr(t, err, "", 0, false)
	// The slug is Bitbucket's (lower-cased), read from the body.
	if out != providers.Created || r.Slug != "my_app.v2" || r.Name != "My_App.v2" || !b.sim.HasRepo("PROMO", "my_app.v2") || r.CloneURL != b.sim.CloneURL("PROMO", "my_app.v2") {
		t.Fatalf("created: %+v %v", r, out)
	}
	_, out, err = b.c.CreateRepo(ctx, "PROMO", "My_App.v2")
	checkErr(t, err, providers.CodeConflict, 409, false)
	if out != providers.Existed || !strings.Contains(err.Error(), "already taken") {
		t.Fatalf("409: %v %v", out, err)
	}
	// A 201 whose body names another slug: the body wins.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateRepo, Status: 201, Times: 1,
		Body: `{"slug":"server-chosen","name":"x","project":{"key":"PROMO"},"links":{"clone":[{"name":"http","href":"http://h/scm/promo/server-chosen.git"}]}}`})
	r, out, err = b.c.CreateRepo(ctx, "PROMO", "x")
	checkErr(t, err, "", 0, false)
	if out != providers.Created || r.Slug != "server-chosen" {
		t.Fatalf("slug not read from body: %+v", r)
	}
	// A 201 without a slug is uncertain, not success.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateRepo, Status: 201, Body: `{}`, Times: 1})
	_, out, err = b.c.CreateRepo(ctx, "PROMO", "y")
	checkErr(t, err, providers.CodeServer, 201, true)
	if out != 0 {
		t.Fatalf("outcome %v", out)
	}
	for _, sc := range statusCases {
		t.Run(sc.name, func(t *testing.T) {
			f := sc.fault
			f.Endpoint = sim.EndpointCreateRepo
			id := b.sim.AddFault(f)
			defer b.sim.RemoveFault(id)
			name := "z-" + sc.name
			_, out, err := b.c.CreateRepo(ctx, "PROMO", name)
			checkErr(t, err, sc.code, sc.status, sc.status >= 500 || sc.status == 0)
			if out != 0 || b.sim.HasRepo("PROMO", name) {
				t.Fatalf("outcome %v", out)
			}
		})
	}
}

func TestDeleteRepo(t *testing.T) {
	b := setup(t, 20*time.Millisecond)
	ctx := ctxT(t)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetRepo, Status: 500, Times: 1}) // transient while confirming
	out, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, "", 0, false)
	if out != providers.Deleted || b.sim.HasRepo("SLOT", b.fx.Repo.Slug) {
		t.Fatalf("delete: %v", out)
	}
	reqs := b.sim.Requests()
	if reqs[0].Endpoint != sim.EndpointDeleteRepo || reqs[0].Status != 202 || reqs[len(reqs)-1].Status != 404 || reqs[len(reqs)-1].Endpoint != sim.EndpointGetRepo {
		t.Fatalf("requests %+v", reqs)
	}
	b.sim.ResetRequests()
	out, err = b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
	checkErr(t, err, "", 0, false)
	if out != providers.AlreadyAbsent || len(b.sim.Requests()) != 1 || b.sim.Requests()[0].Status != 204 {
		t.Fatalf("204: %v %+v", out, b.sim.Requests())
	}
}

func TestDeleteRepoNotConfirmedAndFaults(t *testing.T) {
	b := setup(t, time.Hour)
	ctx := ctxT(t)
	out, err := b.c.DeleteRepo(ctx, "TPL", "template")
	checkErr(t, err, providers.CodeNotConfirmed, 0, true)
	if out != 0 {
		t.Fatalf("outcome %v", out)
	}
	for _, sc := range statusCases {
		t.Run(sc.name, func(t *testing.T) {
			f := sc.fault
			f.Endpoint = sim.EndpointDeleteRepo
			id := b.sim.AddFault(f)
			defer b.sim.RemoveFault(id)
			out, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug)
			checkErr(t, err, sc.code, sc.status, sc.status >= 500 || sc.status == 0)
			if out != 0 || !b.sim.HasRepo("SLOT", b.fx.Repo.Slug) {
				t.Fatalf("outcome %v", out)
			}
		})
	}
}

func TestListReposPages(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	for i := range 4 {
		if _, err := b.sim.AddRepo("SLOT", fmt.Sprintf("extra-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	repos, err := b.c.ListRepos(ctx, "SLOT")
	checkErr(t, err, "", 0, false)
	if len(repos) != 5 || repos[0].Slug != "extra-0" || repos[4].Slug != "slot-a" {
		t.Fatalf("repos %+v", repos)
	}
	if n := len(b.sim.Requests()); n != 3 { // pages of 2
		t.Fatalf("%d page requests, want 3", n)
	}
	// A fault on the second page fails the whole list.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListRepos, PathPattern: "/rest/api/1.0/projects/SLOT/repos", Status: 503, Times: 1})
	_, err = b.c.ListRepos(ctx, "SLOT")
	checkErr(t, err, providers.CodeServer, 503, false)
	// A page that does not advance is an error, not a loop.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListRepos, Status: 200, Times: 1, Body: `{"values":[],"isLastPage":false,"nextPageStart":0}`})
	_, err = b.c.ListRepos(ctx, "SLOT")
	checkErr(t, err, providers.CodeServer, 200, false)
	_, err = b.c.ListRepos(ctx, "NOPE")
	checkErr(t, err, providers.CodeNotFound, 404, false)
	b.sim.AddBitbucketProject("EMPTY")
	repos, err = b.c.ListRepos(ctx, "EMPTY")
	if err != nil || len(repos) != 0 {
		t.Fatalf("empty project: %v %v", repos, err)
	}
}

func TestCancelAbortsInFlightCreate(t *testing.T) {
	b := setup(t, 0)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateRepo, Hang: true})
	wctx := ctxT(t)
	at, err := providertest.CancelInFlight(t, wctx, b.sim,
		func(r sim.Request) bool { return r.Endpoint == sim.EndpointCreateRepo },
		func(ctx context.Context) error { _, _, err := b.c.CreateRepo(ctx, "PROMO", "new"); return err })
	checkErr(t, err, providers.CodeCanceled, 0, true)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	r, werr := b.sim.WaitFor(wctx, func(r sim.Request) bool { return r.Done() })
	if werr != nil || !r.WasAborted() {
		t.Fatalf("not aborted: %+v", r)
	}
	if after := b.sim.RequestsAfter(at); len(after) != 0 {
		t.Fatalf("requests after cancel: %+v", after)
	}
}

func TestInvalidInputSendsNothing(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	badProjects := []string{"", "1ABC", "A/B", "A..B", "~user", "ÄBC", "A B", strings.Repeat("A", 129)}
	badSlugs := []string{"", "..", "a/b", "../x", "Upper", "a b", "x.git", ".hidden", "-x", "a\x00b", "a%2fb", "ѕlot" /* Cyrillic ѕ */, strings.Repeat("a", 129)}
	for _, p := range badProjects {
		_, _, e1 := b.c.GetRepo(ctx, p, "ok")
		_, e2 := b.c.DeleteRepo(ctx, p, "ok")
		_, _, e3 := b.c.CreateRepo(ctx, p, "ok")
		_, e4 := b.c.ListRepos(ctx, p)
		for _, err := range []error{e1, e2, e3, e4} {
			if providers.CodeOf(err) != providers.CodeInvalid {
				t.Fatalf("project %q: %v", p, err)
			}
		}
	}
	for _, s := range badSlugs {
		_, _, e1 := b.c.GetRepo(ctx, "SLOT", s)
		_, e2 := b.c.DeleteRepo(ctx, "SLOT", s)
		for _, err := range []error{e1, e2} {
			if providers.CodeOf(err) != providers.CodeInvalid {
				t.Fatalf("slug %q: %v", s, err)
			}
		}
		if s == "Upper" {
			continue // a fine name for CreateRepo
		}
		if _, _, err := b.c.CreateRepo(ctx, "SLOT", s); providers.CodeOf(err) != providers.CodeInvalid {
			t.Fatalf("name %q: %v", s, err)
		}
	}
	if reqs := b.sim.Requests(); len(reqs) != 0 {
		t.Fatalf("invalid input reached the server: %+v", reqs)
	}
}

func TestHangEveryMethod(t *testing.T) {
	b := setup(t, 0)
	methods := []struct {
		endpoint string
		mutating bool
		call     func(ctx context.Context) error
	}{
		{sim.EndpointGetRepo, false, func(ctx context.Context) error { _, _, err := b.c.GetRepo(ctx, "SLOT", b.fx.Repo.Slug); return err }},
		{sim.EndpointCreateRepo, true, func(ctx context.Context) error { _, _, err := b.c.CreateRepo(ctx, "SLOT", "fresh"); return err }},
		{sim.EndpointDeleteRepo, true, func(ctx context.Context) error { _, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug); return err }},
		{sim.EndpointListRepos, false, func(ctx context.Context) error { _, err := b.c.ListRepos(ctx, "SLOT"); return err }},
	}
	for _, m := range methods {
		t.Run(m.endpoint, func(t *testing.T) {
			b.sim.ResetRequests()
			id := b.sim.AddFault(sim.Fault{Endpoint: m.endpoint, Hang: true})
			defer b.sim.RemoveFault(id)
			// The deadline passes once the hung request is in the
			// simulator (before: a 40 ms one, which could pass first).
			_, err := providertest.ExpireInFlight(t, ctxT(t), b.sim, func(r sim.Request) bool { return r.Endpoint == m.endpoint }, m.call)
			returned := time.Now()
			checkErr(t, err, providers.CodeCanceled, 0, m.mutating)
			r, werr := b.sim.WaitFor(ctxT(t), func(r sim.Request) bool { return r.Done() })
			if werr != nil || !r.WasAborted() || r.Endpoint != m.endpoint {
				t.Fatalf("not aborted: %+v %v", r, werr)
			}
			if n := len(b.sim.Requests()); n != 1 || len(b.sim.RequestsAfter(returned)) != 0 {
				t.Fatalf("%d requests", n)
			}
		})
	}
	if !b.sim.HasRepo("SLOT", b.fx.Repo.Slug) || b.sim.HasRepo("SLOT", "fresh") {
		t.Fatal("an aborted call changed state")
	}
}

// A cancel while waiting between confirmation polls is CodeCanceled (the
// caller gave up), never CodeNotConfirmed, and sends nothing more. The first
// poll is answered at once and the next is an hour away on a fake clock:
// the context ends once that wait is armed, so always between polls
// (before: a real two-second deadline, which a loaded machine could reach
// before the first poll).
func TestCancelBetweenPolls(t *testing.T) {
	b := setup(t, time.Hour)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	slow := bitbucket.New(bitbucket.Options{BaseURL: b.sim.BitbucketURL(), Token: token, Clock: fc,
		Confirm: providers.Backoff{Initial: time.Hour, Max: time.Hour, Total: 2 * time.Hour}})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go func() {
		if fc.BlockUntil(ctx, 1) == nil { // the wait for the next poll
			cancel()
		}
	}()
	_, err := slow.DeleteRepo(ctx, b.fx.Repo.Project, b.fx.Repo.Slug)
	checkErr(t, err, providers.CodeCanceled, 0, true)
	reqs := b.sim.Requests()
	if len(reqs) != 2 || reqs[0].Endpoint != sim.EndpointDeleteRepo || reqs[1].Endpoint != sim.EndpointGetRepo || !reqs[1].Done() {
		t.Fatalf("want one delete and one completed confirmation GET, got %+v", reqs)
	}
}

// TestDefaultBranch: a repository's default branch is read from
// …/default-branch; a missing repository is Absent, a 5xx Unknown.
func TestDefaultBranch(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	name, l, err := b.c.DefaultBranch(ctx, "SLOT", b.fx.Repo.Slug)
	if err != nil || l != providers.Found || name != sim.DefaultBranch {
		t.Fatalf("default branch %q %v %v", name, l, err)
	}
	if _, l, err := b.c.DefaultBranch(ctx, "SLOT", "nope"); l != providers.Absent {
		t.Fatalf("missing repo: %v %v", l, err)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDefaultBranch, Status: 503})
	if _, l, err := b.c.DefaultBranch(ctx, "SLOT", b.fx.Repo.Slug); l != providers.Unknown {
		t.Fatalf("5xx: %v %v", l, err)
	}
	if _, _, err := b.c.DefaultBranch(ctx, "SLOT", "../x"); providers.CodeOf(err) != providers.CodeInvalid {
		t.Fatalf("bad slug: %v", err)
	}
}
