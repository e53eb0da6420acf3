package coolify_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/providertest"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

const token = "tok-SECRET-c00l1fy-7f3a9"

type bundle struct {
	sim *sim.Sim
	c   *coolify.Client
	fx  sim.SlotFixture
}

func setup(t *testing.T, delay time.Duration) bundle {
	t.Helper()
	s, fx := providertest.StartSeeded(t, sim.Options{DeleteDelay: delay, CoolifyToken: token})
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

func newClient(s *sim.Sim, tok string, confirm ...time.Duration) *coolify.Client {
	total := 300 * time.Millisecond
	if len(confirm) > 0 {
		total = confirm[0]
	}
	return coolify.New(coolify.Options{
		BaseURL: s.CoolifyURL(), Token: tok,
		Confirm:     providers.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Total: total},
		RateRetries: 2, MaxRetryAfter: time.Second,
	})
}

func ctxT(t *testing.T) context.Context { return providertest.Ctx(t, 15*time.Second) }

func checkErr(t *testing.T, err error, code providers.Code, status int, uncertain bool) {
	t.Helper()
	providertest.CheckErr(t, err, token, code, status, uncertain)
}

// statusCases are the answers every read can meet, by injected fault.
var statusCases = []struct {
	name   string
	fault  sim.Fault
	code   providers.Code
	status int
}{
	{"400 invalid token", sim.Fault{Status: 400}, providers.CodeUnauthorized, 400},
	{"401", sim.Fault{Status: 401}, providers.CodeUnauthorized, 401},
	{"403", sim.Fault{Status: 403}, providers.CodeForbidden, 403},
	{"422", sim.Fault{Status: 422}, providers.CodeUnprocessable, 422},
	{"429 persists", sim.Fault{Status: 429, Header: map[string]string{"Retry-After": "0"}}, providers.CodeRateLimited, 429},
	{"500", sim.Fault{Status: 500}, providers.CodeServer, 500},
	{"503", sim.Fault{Status: 503}, providers.CodeServer, 503},
	{"reset", sim.Fault{Reset: true}, providers.CodeTransport, 0},
}

func TestGetLookups(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	gets := []struct {
		endpoint string
		id       string
		get      func(ctx context.Context, id string) (string, providers.Lookup, error)
	}{
		{sim.EndpointGetDatabase, b.fx.DBUUID, func(ctx context.Context, id string) (string, providers.Lookup, error) {
			d, l, err := b.c.GetDatabase(ctx, id)
			return d.UUID + "|" + d.Status, l, err
		}},
		{sim.EndpointGetApplication, b.fx.AppUUID, func(ctx context.Context, id string) (string, providers.Lookup, error) {
			a, l, err := b.c.GetApplication(ctx, id)
			return a.UUID + "|" + a.Status, l, err
		}},
		{sim.EndpointGetProject, b.fx.ProjectUUID, func(ctx context.Context, id string) (string, providers.Lookup, error) {
			p, l, err := b.c.GetProject(ctx, id)
			return p.UUID + "|running:healthy", l, err
		}},
	}
	for _, g := range gets {
		t.Run(g.endpoint, func(t *testing.T) {
			got, l, err := g.get(ctx, g.id)
			checkErr(t, err, "", 0, false)
			if l != providers.Found || got != g.id+"|running:healthy" {
				t.Fatalf("found: %q %v", got, l)
			}
			_, l, err = g.get(ctx, "zzzzzzzzzzzzzzzzzzzzzzzz")
			checkErr(t, err, providers.CodeNotFound, 404, false)
			if l != providers.Absent {
				t.Fatalf("404 lookup = %v", l)
			}
			for _, sc := range statusCases {
				f := sc.fault
				f.Endpoint, f.Resource = g.endpoint, g.id
				id := b.sim.AddFault(f)
				before := len(b.sim.Requests())
				_, l, err := g.get(ctx, g.id)
				b.sim.RemoveFault(id)
				checkErr(t, err, sc.code, sc.status, false)
				if l != providers.Unknown {
					t.Fatalf("%s: lookup %v, want unknown", sc.name, l)
				}
				want := 1
				if sc.status == 429 {
					want = 3 // first try + RateRetries
				}
				n := len(b.sim.Requests()) - before
				if sc.fault.Reset && n == 2 {
					n = 1 // net/http replays a GET once on a dropped kept-alive connection
				}
				if n != want {
					t.Fatalf("%s: %d requests, want %d", sc.name, n, want)
				}
			}
		})
	}
}

func TestWrongTokenIsUnauthorizedAndNotLeaked(t *testing.T) {
	b := setup(t, 0)
	bad := newClient(b.sim, "WRONG-"+token)
	_, l, err := bad.GetDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, providers.CodeUnauthorized, 401, false)
	if l != providers.Unknown || !strings.Contains(err.Error(), "Unauthenticated.") {
		t.Fatalf("lookup %v err %v", l, err)
	}
}

func TestRateLimitRetriedThenFound(t *testing.T) {
	b := setup(t, 0)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Status: 429, Header: map[string]string{"Retry-After": "0"}, Times: 1})
	_, l, err := b.c.GetDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, "", 0, false)
	reqs := b.sim.Requests()
	if l != providers.Found || len(reqs) != 2 || reqs[0].Status != 429 || reqs[1].Status != 200 {
		t.Fatalf("lookup %v requests %+v", l, reqs)
	}
}

func TestRetryAfterHTTPDate(t *testing.T) {
	b := setup(t, 0)
	past := time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListEnvs, Status: 429, Header: map[string]string{"Retry-After": past}, Times: 2})
	envs, err := b.c.ListEnvs(ctxT(t), b.fx.AppUUID)
	checkErr(t, err, "", 0, false)
	if len(normalEnvs(envs)) != 3 || len(b.sim.Requests()) != 3 {
		t.Fatalf("envs %d, requests %d", len(envs), len(b.sim.Requests()))
	}
}

func TestRetryAfterTooLongOrCanceled(t *testing.T) {
	b := setup(t, 0)
	// Longer than MaxRetryAfter: give up at once, no second request.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Status: 429, Header: map[string]string{"Retry-After": "60"}, Times: 1})
	_, _, err := b.c.GetDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, providers.CodeRateLimited, 429, false)
	if n := len(b.sim.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
	// The credential's budget is spent until the Retry-After has passed:
	// a call whose deadline comes first is rate limited at once
	// (retryable), and sends nothing. The deadline is before the budget
	// opens (60 s) but far enough that a loaded machine never reaches it
	// before the call starts: a 30 ms one could pass first, and the call
	// was then canceled (nothing sent, but coded canceled) instead.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Status: 429, Header: map[string]string{"Retry-After": "1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, _, err = b.c.GetDatabase(ctx, b.fx.DBUUID)
	checkErr(t, err, providers.CodeRateLimited, 429, false)
	if n := len(b.sim.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
	// Within the bound and no deadline, but ctx is cancelled during the
	// wait: canceled, no retry.
	ctx, cancel = context.WithCancel(context.Background())
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	go func() {
		if fc.BlockUntil(ctx, 1) == nil { // the Retry-After wait
			cancel()
		}
	}()
	c := coolify.New(coolify.Options{BaseURL: b.sim.CoolifyURL(), Token: token, Clock: fc})
	_, _, err = c.GetDatabase(ctx, b.fx.DBUUID)
	checkErr(t, err, providers.CodeCanceled, 0, false)
	if n := len(b.sim.Requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

func TestDeleteQueuedConfirmed(t *testing.T) {
	for _, kind := range []string{"database", "application"} {
		t.Run(kind, func(t *testing.T) {
			b := setup(t, 20*time.Millisecond)
			del, endpoint, id, has := b.c.DeleteDatabase, sim.EndpointDeleteDatabase, b.fx.DBUUID, b.sim.HasDatabase
			getEndpoint := sim.EndpointGetDatabase
			if kind == "application" {
				del, endpoint, id, has, getEndpoint = b.c.DeleteApplication, sim.EndpointDeleteApplication, b.fx.AppUUID, b.sim.HasApp, sim.EndpointGetApplication
			}
			// Confirmation survives transient 503s.
			b.sim.AddFault(sim.Fault{Endpoint: getEndpoint, Status: 503, Times: 2})
			out, err := del(ctxT(t), id)
			checkErr(t, err, "", 0, false)
			if out != providers.Deleted || has(id) {
				t.Fatalf("outcome %v, still there %v", out, has(id))
			}
			reqs := b.sim.Requests()
			first, last := reqs[0], reqs[len(reqs)-1]
			if first.Endpoint != endpoint || first.Status != 200 || !strings.Contains(first.Query, "delete_volumes=true") {
				t.Fatalf("first request %+v", first)
			}
			if last.Endpoint != getEndpoint || last.Status != 404 || len(reqs) < 4 {
				t.Fatalf("confirmation requests %+v", reqs)
			}
			// Deleting again: the provider says 404 → already absent, no poll.
			b.sim.ResetRequests()
			out, err = del(ctxT(t), id)
			checkErr(t, err, "", 0, false)
			if out != providers.AlreadyAbsent || len(b.sim.Requests()) != 1 {
				t.Fatalf("second delete %v, %d requests", out, len(b.sim.Requests()))
			}
		})
	}
}

func TestDeleteNotConfirmed(t *testing.T) {
	b := setup(t, time.Hour) // queued forever
	out, err := b.c.DeleteDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, providers.CodeNotConfirmed, 0, true)
	if out != 0 || !b.sim.HasDatabase(b.fx.DBUUID) {
		t.Fatalf("outcome %v", out)
	}
	// A definite refusal while confirming stops the polling.
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetApplication, Status: 403})
	_, err = b.c.DeleteApplication(ctxT(t), b.fx.AppUUID)
	checkErr(t, err, providers.CodeForbidden, 403, true)
	if n := len(b.sim.RequestsAfter(time.Time{})); n < 3 {
		t.Fatalf("%d requests", n)
	}
}

func TestDeleteQueuedFailures(t *testing.T) {
	cases := []struct {
		name      string
		fault     sim.Fault
		code      providers.Code
		status    int
		uncertain bool
	}{
		{"400", sim.Fault{Status: 400}, providers.CodeUnauthorized, 400, false},
		{"401", sim.Fault{Status: 401}, providers.CodeUnauthorized, 401, false},
		{"403", sim.Fault{Status: 403}, providers.CodeForbidden, 403, false},
		{"422", sim.Fault{Status: 422}, providers.CodeUnprocessable, 422, false},
		{"429", sim.Fault{Status: 429, Header: map[string]string{"Retry-After": "0"}}, providers.CodeRateLimited, 429, false},
		{"500", sim.Fault{Status: 500}, providers.CodeServer, 500, true},
		{"502", sim.Fault{Status: 502}, providers.CodeServer, 502, true},
		{"reset", sim.Fault{Reset: true}, providers.CodeTransport, 0, true},
	}
	b := setup(t, 0)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fault
			f.Endpoint = sim.EndpointDeleteDatabase
			id := b.sim.AddFault(f)
			defer b.sim.RemoveFault(id)
			out, err := b.c.DeleteDatabase(ctxT(t), b.fx.DBUUID)
			checkErr(t, err, tc.code, tc.status, tc.uncertain)
			if out != 0 || !b.sim.HasDatabase(b.fx.DBUUID) {
				t.Fatalf("outcome %v, db gone %v", out, !b.sim.HasDatabase(b.fx.DBUUID))
			}
		})
	}
}

// TestCancelAbortsInFlightDelete: a hung delete is aborted by ctx; the
// recorder shows the abortion and nothing is sent afterwards.
func TestCancelAbortsInFlightDelete(t *testing.T) {
	b := setup(t, 0)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteApplication, Hang: true})
	wctx := ctxT(t)
	canceledAt, err := providertest.CancelInFlight(t, wctx, b.sim,
		func(r sim.Request) bool { return r.Endpoint == sim.EndpointDeleteApplication },
		func(ctx context.Context) error { _, err := b.c.DeleteApplication(ctx, b.fx.AppUUID); return err })
	checkErr(t, err, providers.CodeCanceled, 0, true)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("not context.Canceled: %v", err)
	}
	r, err := b.sim.WaitFor(wctx, func(r sim.Request) bool { return r.Done() })
	if err != nil || !r.WasAborted() {
		t.Fatalf("in-flight request not aborted: %+v %v", r, err)
	}
	if after := b.sim.RequestsAfter(canceledAt); len(after) != 0 {
		t.Fatalf("requests after cancel: %+v", after)
	}
	// A call with a dead ctx sends nothing.
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.c.DeleteDatabase(dead, b.fx.DBUUID); providers.CodeOf(err) != providers.CodeCanceled {
		t.Fatalf("dead ctx: %v", err)
	}
	if n := len(b.sim.Requests()); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
}

// TestCancelDuringConfirmation: ctx ends while polling for the 404.
func TestCancelDuringConfirmation(t *testing.T) {
	b := setup(t, time.Hour)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Hang: true})
	// The deadline passes once the confirmation GET hangs in the simulator
	// (before: 50 ms for the delete and the GET, which a loaded machine
	// could spend on the delete alone).
	_, err := providertest.ExpireInFlight(t, ctxT(t), b.sim, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetDatabase },
		func(ctx context.Context) error { _, err := b.c.DeleteDatabase(ctx, b.fx.DBUUID); return err })
	checkErr(t, err, providers.CodeCanceled, 0, true)
	r, werr := b.sim.WaitFor(ctxT(t), func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetDatabase && r.Done() })
	if werr != nil || !r.WasAborted() {
		t.Fatalf("confirmation GET not aborted: %+v", r)
	}
}

func TestEnvsAndStorages(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	envs, err := b.c.ListEnvs(ctx, b.fx.AppUUID)
	checkErr(t, err, "", 0, false)
	// The listing holds the normal vars, then their preview copies
	// (AC:3223).
	if n := normalEnvs(envs); len(n) != 3 || len(envs) != 6 || envs[0].Key != "APP_ENV" || envs[0].Preview || !envs[3].Preview || envs[3].Key != "APP_ENV" {
		t.Fatalf("envs %+v", envs)
	}
	sts, err := b.c.ListStorages(ctx, b.fx.AppUUID)
	checkErr(t, err, "", 0, false)
	if len(sts) != 2 || sts[0].Kind != "persistent" || sts[0].Name != "data-a" || sts[1].Kind != "file" || sts[1].Name != "/etc/app/config.yml" {
		t.Fatalf("storages %+v", sts)
	}
	for _, e := range envs {
		out, err := b.c.DeleteEnv(ctx, b.fx.AppUUID, e.UUID)
		checkErr(t, err, "", 0, false)
		if out != providers.Deleted || b.sim.HasEnv(e.UUID) {
			t.Fatalf("env delete %v", out)
		}
	}
	for _, s := range sts {
		out, err := b.c.DeleteStorage(ctx, b.fx.AppUUID, s.UUID)
		checkErr(t, err, "", 0, false)
		if out != providers.Deleted || b.sim.HasStorage(s.UUID) {
			t.Fatalf("storage delete %v", out)
		}
	}
	if out, err := b.c.DeleteEnv(ctx, b.fx.AppUUID, envs[0].UUID); err != nil || out != providers.AlreadyAbsent {
		t.Fatalf("env again: %v %v", out, err)
	}
	if out, err := b.c.DeleteStorage(ctx, b.fx.AppUUID, sts[0].UUID); err != nil || out != providers.AlreadyAbsent {
		t.Fatalf("storage again: %v %v", out, err)
	}
	_, err = b.c.ListEnvs(ctx, "zzzzzzzzzzzzzzzzzzzzzzzz")
	checkErr(t, err, providers.CodeNotFound, 404, false)
	_, err = b.c.ListStorages(ctx, "zzzzzzzzzzzzzzzzzzzzzzzz")
	checkErr(t, err, providers.CodeNotFound, 404, false)
}

func TestEnvStorageFaults(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	env, st := b.fx.EnvUUIDs[0], b.fx.StorageUUIDs[0]
	for _, sc := range statusCases {
		for _, ep := range []string{sim.EndpointListEnvs, sim.EndpointListStorages, sim.EndpointDeleteEnv, sim.EndpointDeleteStorage} {
			f := sc.fault
			f.Endpoint = ep
			id := b.sim.AddFault(f)
			var err error
			mutating := false
			switch ep {
			case sim.EndpointListEnvs:
				_, err = b.c.ListEnvs(ctx, b.fx.AppUUID)
			case sim.EndpointListStorages:
				_, err = b.c.ListStorages(ctx, b.fx.AppUUID)
			case sim.EndpointDeleteEnv:
				_, err = b.c.DeleteEnv(ctx, b.fx.AppUUID, env)
				mutating = true
			case sim.EndpointDeleteStorage:
				_, err = b.c.DeleteStorage(ctx, b.fx.AppUUID, st)
				mutating = true
			}
			b.sim.RemoveFault(id)
			uncertain := mutating && (sc.status >= 500 || sc.status == 0)
			t.Run(sc.name+"/"+ep, func(t *testing.T) { checkErr(t, err, sc.code, sc.status, uncertain) })
		}
	}
	if !b.sim.HasEnv(env) || !b.sim.HasStorage(st) {
		t.Fatal("a failed delete removed something")
	}
}

func TestDeleteProject(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	_, err := b.c.DeleteProject(ctx, b.fx.ProjectUUID)
	checkErr(t, err, providers.CodeNotEmpty, 400, false)
	if !strings.Contains(err.Error(), "Project has resources") || !b.sim.HasProject(b.fx.ProjectUUID) {
		t.Fatalf("err %v", err)
	}
	for _, del := range []func(context.Context, string) (providers.DeleteOutcome, error){b.c.DeleteDatabase} {
		if _, err := del(ctx, b.fx.DBUUID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.c.DeleteApplication(ctx, b.fx.AppUUID); err != nil {
		t.Fatal(err)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteProject, Status: 500, Times: 1})
	_, err = b.c.DeleteProject(ctx, b.fx.ProjectUUID)
	checkErr(t, err, providers.CodeServer, 500, true)
	out, err := b.c.DeleteProject(ctx, b.fx.ProjectUUID)
	if err != nil || out != providers.Deleted || b.sim.HasProject(b.fx.ProjectUUID) {
		t.Fatalf("delete empty project: %v %v", out, err)
	}
	if out, err := b.c.DeleteProject(ctx, b.fx.ProjectUUID); err != nil || out != providers.AlreadyAbsent {
		t.Fatalf("again: %v %v", out, err)
	}
}

// TestInvalidIDsSendNothing: bad ids never reach a URL.
func TestInvalidIDsSendNothing(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	bad := []string{"", "short", "../etc/passwd", "abc/def0123456", "ABCDEFGHIJKLMNOP", "abc..defghijk", "abcdefgh%2f", "abcdefgh\x00ijkl", "аbcdefghijkl" /* Cyrillic а */, "abcdefghij klmn", "-abcdefghijk", strings.Repeat("a", 65)}
	for _, id := range bad {
		calls := map[string]error{}
		_, _, calls["GetDatabase"] = b.c.GetDatabase(ctx, id)
		_, calls["DeleteDatabase"] = b.c.DeleteDatabase(ctx, id)
		_, _, calls["GetApplication"] = b.c.GetApplication(ctx, id)
		_, calls["DeleteApplication"] = b.c.DeleteApplication(ctx, id)
		_, calls["ListEnvs"] = b.c.ListEnvs(ctx, id)
		_, calls["DeleteEnv"] = b.c.DeleteEnv(ctx, b.fx.AppUUID, id)
		_, calls["ListStorages"] = b.c.ListStorages(ctx, id)
		_, calls["DeleteStorage"] = b.c.DeleteStorage(ctx, id, b.fx.StorageUUIDs[0])
		_, _, calls["GetProject"] = b.c.GetProject(ctx, id)
		_, calls["DeleteProject"] = b.c.DeleteProject(ctx, id)
		for name, err := range calls {
			if providers.CodeOf(err) != providers.CodeInvalid || !errors.Is(err, providers.ErrInvalid) {
				t.Fatalf("%s(%q): %v", name, id, err)
			}
		}
	}
	if reqs := b.sim.Requests(); len(reqs) != 0 {
		t.Fatalf("invalid input reached the server: %+v", reqs)
	}
}

// TestHangEveryMethod: each method, held open by the server, returns
// canceled at its deadline; the recorder shows the request aborted and
// nothing after it.
func TestHangEveryMethod(t *testing.T) {
	b := setup(t, 0)
	env, st := b.fx.EnvUUIDs[0], b.fx.StorageUUIDs[0]
	methods := []struct {
		endpoint string
		mutating bool
		call     func(ctx context.Context) error
	}{
		{sim.EndpointGetDatabase, false, func(ctx context.Context) error { _, _, err := b.c.GetDatabase(ctx, b.fx.DBUUID); return err }},
		{sim.EndpointDeleteDatabase, true, func(ctx context.Context) error { _, err := b.c.DeleteDatabase(ctx, b.fx.DBUUID); return err }},
		{sim.EndpointGetApplication, false, func(ctx context.Context) error { _, _, err := b.c.GetApplication(ctx, b.fx.AppUUID); return err }},
		{sim.EndpointDeleteApplication, true, func(ctx context.Context) error { _, err := b.c.DeleteApplication(ctx, b.fx.AppUUID); return err }},
		{sim.EndpointListEnvs, false, func(ctx context.Context) error { _, err := b.c.ListEnvs(ctx, b.fx.AppUUID); return err }},
		{sim.EndpointDeleteEnv, true, func(ctx context.Context) error { _, err := b.c.DeleteEnv(ctx, b.fx.AppUUID, env); return err }},
		{sim.EndpointListStorages, false, func(ctx context.Context) error { _, err := b.c.ListStorages(ctx, b.fx.AppUUID); return err }},
		{sim.EndpointDeleteStorage, true, func(ctx context.Context) error { _, err := b.c.DeleteStorage(ctx, b.fx.AppUUID, st); return err }},
		{sim.EndpointGetProject, false, func(ctx context.Context) error { _, _, err := b.c.GetProject(ctx, b.fx.ProjectUUID); return err }},
		{sim.EndpointDeleteProject, true, func(ctx context.Context) error { _, err := b.c.DeleteProject(ctx, b.fx.ProjectUUID); return err }},
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
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("not a deadline: %v", err)
			}
			r, werr := b.sim.WaitFor(ctxT(t), func(r sim.Request) bool { return r.Done() })
			if werr != nil || !r.WasAborted() || r.Endpoint != m.endpoint {
				t.Fatalf("not aborted: %+v %v", r, werr)
			}
			if n := len(b.sim.Requests()); n != 1 || len(b.sim.RequestsAfter(returned)) != 0 {
				t.Fatalf("%d requests", n)
			}
		})
	}
	if !b.sim.HasDatabase(b.fx.DBUUID) || !b.sim.HasApp(b.fx.AppUUID) || !b.sim.HasEnv(env) || !b.sim.HasStorage(st) || !b.sim.HasProject(b.fx.ProjectUUID) {
		t.Fatal("a hung, aborted delete still deleted")
	}
}

// TestRedirectNotFollowed: a 3xx is reported, never followed (a redirected
// DELETE or a token carried elsewhere is never wanted).
func TestRedirectNotFollowed(t *testing.T) {
	b := setup(t, 0)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Status: 307, Header: map[string]string{"Location": "/api/v1/projects/" + b.fx.ProjectUUID}, Times: 1})
	_, err := b.c.DeleteDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, providers.CodeServer, 307, false)
	if n := len(b.sim.Requests()); n != 1 {
		t.Fatalf("redirect followed: %d requests", n)
	}
}

// TestCancelBetweenPolls: ctx ends while waiting to poll again; no further
// GET is sent.
func TestCancelBetweenPolls(t *testing.T) {
	// The first confirmation GET is answered at once and the next is an hour
	// away on a fake clock: the context ends once that wait is armed, so
	// always between polls (before: a real two-second deadline, which a
	// loaded machine could reach before the first GET).
	b := setup(t, time.Hour)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	slow := coolify.New(coolify.Options{BaseURL: b.sim.CoolifyURL(), Token: token, Clock: fc,
		Confirm: providers.Backoff{Initial: time.Hour, Max: time.Hour, Total: 2 * time.Hour}})
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	go func() {
		if fc.BlockUntil(ctx, 1) == nil { // the wait for the next poll
			cancel()
		}
	}()
	_, err := slow.DeleteDatabase(ctx, b.fx.DBUUID)
	checkErr(t, err, providers.CodeCanceled, 0, true)
	reqs := b.sim.Requests()
	if len(reqs) != 2 || reqs[1].Endpoint != sim.EndpointGetDatabase || !reqs[1].Done() {
		t.Fatalf("want one delete and one completed confirmation GET, got %+v", reqs)
	}
}

func TestListAll(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	dbs, err := b.c.ListDatabases(ctx)
	checkErr(t, err, "", 0, false)
	apps, err := b.c.ListApplications(ctx)
	checkErr(t, err, "", 0, false)
	projects, err := b.c.ListProjects(ctx)
	checkErr(t, err, "", 0, false)
	if len(dbs) != 1 || dbs[0].UUID != b.fx.DBUUID || len(apps) != 1 || apps[0].UUID != b.fx.AppUUID || len(projects) != 1 || projects[0].UUID != b.fx.ProjectUUID {
		t.Fatalf("lists: %+v %+v %+v", dbs, apps, projects)
	}
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListDatabases, Status: 401, Times: 1})
	_, err = b.c.ListDatabases(ctx)
	checkErr(t, err, providers.CodeUnauthorized, 401, false)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListApplications, Status: 503, Times: 1})
	_, err = b.c.ListApplications(ctx)
	checkErr(t, err, providers.CodeServer, 503, false)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointListProjects, Status: 200, Body: "not json", Times: 1})
	_, err = b.c.ListProjects(ctx)
	checkErr(t, err, providers.CodeServer, 200, false)
}

// TestMembershipIsReported: an application and a database name the
// environment they live in, and their project lists it; a resource of
// another project names another environment.
func TestMembershipIsReported(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	other, err := b.sim.SeedSlot("other")
	if err != nil {
		t.Fatal(err)
	}
	p, l, err := b.c.GetProject(ctx, b.fx.ProjectUUID)
	if l != providers.Found || err != nil || len(p.Environments) != 1 {
		t.Fatalf("GetProject = %+v %v %v, want one environment", p, l, err)
	}
	a, _, err := b.c.GetApplication(ctx, b.fx.AppUUID)
	if err != nil || a.EnvironmentID != p.Environments[0] {
		t.Fatalf("application environment %d (%v), want %d", a.EnvironmentID, err, p.Environments[0])
	}
	d, _, err := b.c.GetDatabase(ctx, b.fx.DBUUID)
	if err != nil || d.EnvironmentID != p.Environments[0] {
		t.Fatalf("database environment %d (%v), want %d", d.EnvironmentID, err, p.Environments[0])
	}
	od, _, err := b.c.GetDatabase(ctx, other.DBUUID)
	if err != nil || od.EnvironmentID == p.Environments[0] || od.EnvironmentID == 0 {
		t.Fatalf("other project's database environment %d (%v), want another one", od.EnvironmentID, err)
	}
}

// normalEnvs drops the preview copies from a listing.
func normalEnvs(envs []providers.EnvVar) []providers.EnvVar {
	var out []providers.EnvVar
	for _, e := range envs {
		if !e.Preview {
			out = append(out, e)
		}
	}
	return out
}
