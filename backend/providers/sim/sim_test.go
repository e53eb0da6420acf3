package sim_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/internal/providertest"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

func startSim(t *testing.T, opts sim.Options) *sim.Sim {
	t.Helper()
	return providertest.Start(t, opts)
}

func do(t *testing.T, ctx context.Context, method, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitCtx(t *testing.T) context.Context { return providertest.Ctx(t, 10*time.Second) }

func TestSeedAndCoolifyDeleteIsQueued(t *testing.T) {
	s := startSim(t, sim.Options{DeleteDelay: time.Hour})
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Envs(fx.AppUUID)) != 3 || len(s.Storages(fx.AppUUID)) != 2 {
		t.Fatalf("seed: envs %v storages %v", s.Envs(fx.AppUUID), s.Storages(fx.AppUUID))
	}
	if fx.RepoHead == "" || fx.TemplateHead == "" || fx.RepoHead == fx.TemplateHead {
		t.Fatalf("heads: %q %q", fx.RepoHead, fx.TemplateHead)
	}
	ctx := waitCtx(t)
	if code, body := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, ""); code != 401 || !strings.Contains(body, "Unauthenticated.") {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, body := do(t, ctx, "DELETE", s.CoolifyURL()+"/databases/"+fx.DBUUID, s.CoolifyToken()); code != 200 || !strings.Contains(body, "deletion request queued") {
		t.Fatalf("delete: %d %s", code, body)
	}
	// Queued: still there until the delay passes.
	if code, _ := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, s.CoolifyToken()); code != 200 || !s.HasDatabase(fx.DBUUID) {
		t.Fatalf("queued delete removed the db at once: %d", code)
	}
	if code, body := do(t, ctx, "DELETE", s.CoolifyURL()+"/projects/"+fx.ProjectUUID, s.CoolifyToken()); code != 400 || !strings.Contains(body, "Project has resources") {
		t.Fatalf("project delete: %d %s", code, body)
	}
	// A second slot reuses the template.
	fx2, err := s.SeedSlot("b")
	if err != nil || fx2.TemplateHead != fx.TemplateHead {
		t.Fatalf("second seed: %v %q", err, fx2.TemplateHead)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[1].Endpoint != sim.EndpointDeleteDatabase || reqs[1].Resource != fx.DBUUID || reqs[1].Status != 200 || reqs[1].Completed.IsZero() {
		t.Fatalf("recorded: %+v", reqs)
	}
}

func TestAsyncDeleteCompletes(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	ctx := waitCtx(t)
	do(t, ctx, "DELETE", s.CoolifyURL()+"/applications/"+fx.AppUUID, s.CoolifyToken())
	if err := s.Wait(ctx, func() bool { return !s.HasApp(fx.AppUUID) }); err != nil {
		t.Fatal("app never deleted")
	}
	if len(s.Envs(fx.AppUUID)) != 0 || len(s.Storages(fx.AppUUID)) != 0 {
		t.Fatal("app delete left envs or storages")
	}
}

func TestHangIsRecordedAsAborted(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, _ := s.SeedSlot("a")
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Resource: fx.DBUUID, Hang: true})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, nil)
		_, err := http.DefaultClient.Do(req)
		errc <- err
	}()
	wctx := waitCtx(t)
	if _, err := s.WaitFor(wctx, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetDatabase }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("hung request returned")
	}
	r, err := s.WaitFor(wctx, func(r sim.Request) bool { return r.WasAborted() })
	if err != nil {
		t.Fatal(err)
	}
	if r.Fault == 0 || r.Status != 0 {
		t.Fatalf("aborted record: %+v", r)
	}
}

func TestFaultTimesAndReset(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, _ := s.SeedSlot("a")
	ctx := waitCtx(t)
	s.AddFault(sim.Fault{Method: "GET", PathPattern: "/api/v1/databases/*", Status: 503, Times: 2})
	url := s.CoolifyURL() + "/databases/" + fx.DBUUID
	for i, want := range []int{503, 503, 200} {
		if code, _ := do(t, ctx, "GET", url, s.CoolifyToken()); code != want {
			t.Fatalf("call %d: %d, want %d", i, code, want)
		}
	}
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGetRepo, Reset: true, Times: 1})
	req, _ := http.NewRequestWithContext(ctx, "GET", s.BitbucketURL()+"/rest/api/1.0/projects/SLOT/repos/slot-a", nil)
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("reset fault answered")
	}
	if code, body := do(t, ctx, "GET", s.BitbucketURL()+"/rest/api/latest/projects/SLOT/repos/slot-a", s.BitbucketToken()); code != 200 || !strings.Contains(body, `"slug":"slot-a"`) {
		t.Fatalf("get repo: %d %s", code, body)
	}
}

// askpassScript answers git's prompts: the default token's owner, then the
// token (a personal token works as Basic only with its owner's name).
const askpassScript = "#!/bin/sh\ncase \"$1\" in\n[Uu]sername*) echo \"$SIM_USER\" ;;\n*) echo \"$SIM_TOKEN\" ;;\nesac\n"

func TestGitSmartHTTP(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, _ := s.SeedSlot("a")
	dir := t.TempDir()
	askpass := filepath.Join(dir, "askpass.sh")
	os.WriteFile(askpass, []byte(askpassScript), 0o700)
	env := append(os.Environ(), "GIT_ASKPASS="+askpass, "SIM_TOKEN="+s.BitbucketToken(), "SIM_USER="+s.BitbucketUser(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("ls-remote", fx.Repo.CloneURL, "refs/heads/main"); !strings.HasPrefix(got, fx.RepoHead) {
		t.Fatalf("ls-remote: %q want %s", got, fx.RepoHead)
	}
	// Push the template over the slot repo (the reset step, by hand).
	run("init", "--bare", "-q", filepath.Join(dir, "work.git"))
	run("--git-dir", filepath.Join(dir, "work.git"), "fetch", "-q", fx.Template.CloneURL, "main:refs/heads/tpl")
	run("--git-dir", filepath.Join(dir, "work.git"), "push", "-q", "--force-with-lease=refs/heads/main:"+fx.RepoHead, fx.Repo.CloneURL, "refs/heads/tpl:refs/heads/main")
	if head, _ := s.RepoHeadSHA("SLOT", fx.Repo.Slug, "main"); head != fx.TemplateHead {
		t.Fatalf("after push head %s want %s", head, fx.TemplateHead)
	}
	var sawPush bool
	for _, r := range s.Requests() {
		sawPush = sawPush || (r.Endpoint == sim.EndpointGitReceivePack && r.Status == 200 && r.Resource == "SLOT/slot-a")
	}
	if !sawPush {
		t.Fatalf("no receive-pack recorded: %+v", s.Requests())
	}
}

func TestControlHandler(t *testing.T) {
	s := startSim(t, sim.Options{})
	srv := httptest.NewServer(http.StripPrefix("", s.ControlHandler()))
	defer srv.Close()
	ctx := waitCtx(t)
	post := func(path, body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("/api/sim/slots", `{"name":"x"}`); code != 201 || !strings.Contains(body, "project_uuid") {
		t.Fatalf("seed: %d %s", code, body)
	}
	if code, _ := post("/api/sim/slots", `{"name":"../x"}`); code != 400 {
		t.Fatalf("bad seed name: %d", code)
	}
	if code, _ := post("/api/sim/faults", `{"endpoint":"coolify.GetDatabase","status":500,"latency_ms":1,"bogus":1}`); code != 400 {
		t.Fatalf("unknown field accepted: %d", code)
	}
	if code, body := post("/api/sim/faults", `{"endpoint":"coolify.GetDatabase","status":500,"latency_ms":1}`); code != 201 || !strings.Contains(body, `"id":1`) {
		t.Fatalf("add fault: %d %s", code, body)
	}
	code, body := do(t, ctx, "GET", srv.URL+"/api/sim/faults", "")
	var fl struct{ Faults []sim.Fault }
	json.Unmarshal([]byte(body), &fl)
	if code != 200 || len(fl.Faults) != 1 || fl.Faults[0].Latency != time.Millisecond {
		t.Fatalf("list faults: %d %s", code, body)
	}
	if code, _ := do(t, ctx, "DELETE", srv.URL+"/api/sim/faults", ""); code != 204 || len(s.Faults()) != 0 {
		t.Fatal("clear faults")
	}
	if code, body := do(t, ctx, "GET", srv.URL+"/api/sim/state", ""); code != 200 || !strings.Contains(body, "slot-x") {
		t.Fatalf("state: %d %s", code, body)
	}
	if code, body := do(t, ctx, "GET", srv.URL+"/requests", ""); code != 200 || !strings.Contains(body, `"requests":[]`) {
		t.Fatalf("requests: %d %s", code, body)
	}
	// A hang set over HTTP holds a real request; removing it by id works.
	code, body = post("/api/sim/faults", `{"endpoint":"coolify.GetProject","hang":true}`)
	var added struct{ ID int }
	json.Unmarshal([]byte(body), &added)
	if code != 201 || added.ID == 0 {
		t.Fatalf("add hang: %d %s", code, body)
	}
	mark := time.Now()
	// The client gives up once the simulator holds its request (before: a
	// 20 ms deadline, which could pass before the request arrived).
	if _, err := providertest.CancelInFlight(t, ctx, s, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetProject },
		func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", s.CoolifyURL()+"/projects/abcdefghijk", nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}); err == nil {
		t.Fatal("hang answered")
	}
	if _, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.WasAborted() }); err != nil {
		t.Fatal(err)
	}
	code, body = do(t, ctx, "GET", srv.URL+"/api/sim/requests?after="+mark.Format(time.RFC3339Nano), "")
	if code != 200 || !strings.Contains(body, `"endpoint":"coolify.GetProject"`) || !strings.Contains(body, `"aborted":"`) {
		t.Fatalf("requests after: %d %s", code, body)
	}
	if code, _ := do(t, ctx, "GET", srv.URL+"/api/sim/requests?after=yesterday", ""); code != 400 {
		t.Fatalf("bad after: %d", code)
	}
	if code, _ := do(t, ctx, "DELETE", srv.URL+"/api/sim/faults/"+strconv.Itoa(added.ID), ""); code != 204 || len(s.Faults()) != 0 {
		t.Fatalf("remove fault: %d", code)
	}
	if code, _ := do(t, ctx, "DELETE", srv.URL+"/api/sim/faults/"+strconv.Itoa(added.ID), ""); code != 404 {
		t.Fatalf("remove again: %d", code)
	}
	if code, _ := do(t, ctx, "DELETE", srv.URL+"/api/sim/requests", ""); code != 204 || len(s.Requests()) != 0 {
		t.Fatal("forget requests")
	}
}

func TestFaultMatching(t *testing.T) {
	s := startSim(t, sim.Options{})
	a, _ := s.SeedSlot("a")
	bfx, _ := s.SeedSlot("b")
	ctx := waitCtx(t)
	tok := s.CoolifyToken()
	// Per resource: only slot a's database fails.
	s.AddFault(sim.Fault{Resource: a.DBUUID, Status: 500})
	if code, _ := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+a.DBUUID, tok); code != 500 {
		t.Fatalf("resource fault: %d", code)
	}
	if code, _ := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+bfx.DBUUID, tok); code != 200 {
		t.Fatalf("other resource: %d", code)
	}
	s.ClearFaults()
	// Prefix pattern and server filter.
	s.AddFault(sim.Fault{Server: "bitbucket", PathPattern: "/rest/api/1.0/projects/SLOT/**", Status: 403})
	if code, body := do(t, ctx, "GET", s.BitbucketURL()+"/rest/api/1.0/projects/SLOT/repos/slot-a", s.BitbucketToken()); code != 403 || !strings.Contains(body, `"errors"`) {
		t.Fatalf("prefix fault: %d %s", code, body)
	}
	if code, _ := do(t, ctx, "GET", s.BitbucketURL()+"/rest/api/1.0/projects/TPL/repos/template", s.BitbucketToken()); code != 200 {
		t.Fatalf("outside prefix: %d", code)
	}
	s.ClearFaults()
	// Pure latency passes through; a client that gives up mid-latency is
	// recorded as aborted.
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGetProject, Latency: 5 * time.Millisecond, Times: 1})
	if code, _ := do(t, ctx, "GET", s.CoolifyURL()+"/projects/"+a.ProjectUUID, tok); code != 200 {
		t.Fatalf("latency: %d", code)
	}
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGetProject, Latency: time.Hour, Times: 1})
	reqs := s.Requests()
	before := reqs[len(reqs)-1].Seq
	if _, err := providertest.CancelInFlight(t, ctx, s, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetProject && r.Seq > before },
		func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, "GET", s.CoolifyURL()+"/projects/"+a.ProjectUUID, nil)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			return err
		}); err == nil {
		t.Fatal("hour of latency answered")
	}
	if _, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGetProject && r.WasAborted() }); err != nil {
		t.Fatal(err)
	}
	// Unknown routes get the server's 404 body; the bitbucket one too.
	if code, body := do(t, ctx, "GET", s.CoolifyURL()+"/nope", tok); code != 404 || !strings.Contains(body, "message") {
		t.Fatalf("unknown route: %d %s", code, body)
	}
	if code, body := do(t, ctx, "GET", s.BitbucketURL()+"/rest/api/1.0/projects/SLOT/repos/slot-a", "wrong"); code != 401 || !strings.Contains(body, "Authentication failed") {
		t.Fatalf("bitbucket 401: %d %s", code, body)
	}
}

func TestBitbucketRepoLifecycle(t *testing.T) {
	s := startSim(t, sim.Options{DeleteDelay: time.Hour})
	s.AddBitbucketProject("PROMO")
	ctx := waitCtx(t)
	tok := s.BitbucketToken()
	post := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, "POST", s.BitbucketURL()+"/rest/api/1.0/projects/PROMO/repos", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(`{"name":"My Repo","scmId":"git"}`); code != 201 || !strings.Contains(body, `"slug":"my-repo"`) {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := post(`{"name":"My Repo","scmId":"git"}`); code != 409 || !strings.Contains(body, "already taken") {
		t.Fatalf("duplicate: %d %s", code, body)
	}
	url := s.BitbucketURL() + "/rest/api/1.0/projects/PROMO/repos/my-repo"
	if code, _ := do(t, ctx, "DELETE", url, tok); code != 202 {
		t.Fatalf("delete: %d", code)
	}
	if code, _ := do(t, ctx, "GET", url, tok); code != 200 || !s.HasRepo("PROMO", "my-repo") {
		t.Fatal("scheduled delete removed the repo at once")
	}
	if code, _ := do(t, ctx, "DELETE", s.BitbucketURL()+"/rest/api/1.0/projects/PROMO/repos/nope", tok); code != 204 {
		t.Fatalf("delete absent: %d", code)
	}
}

func TestRecorderBounded(t *testing.T) {
	s := startSim(t, sim.Options{MaxRecorded: 3})
	ctx := waitCtx(t)
	for range 5 {
		do(t, ctx, "GET", s.CoolifyURL()+"/projects", s.CoolifyToken())
	}
	reqs := s.Requests()
	if len(reqs) != 3 || reqs[0].Seq != 3 || reqs[2].Seq != 5 {
		t.Fatalf("recorded %+v", reqs)
	}
}

// TestLatencyOnPostSeesCancel: a client giving up during a delayed POST is
// recorded as aborted at once, not when the delay ends.
func TestLatencyOnPostSeesCancel(t *testing.T) {
	s := startSim(t, sim.Options{})
	s.AddFault(sim.Fault{Endpoint: sim.EndpointCreateRepo, Latency: time.Hour})
	ctx := waitCtx(t)
	// Give up only once the simulator holds the request: a client that
	// gives up before the request arrives (a loaded machine) tests nothing.
	short, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		if _, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.Endpoint == sim.EndpointCreateRepo }); err == nil {
			cancel()
		}
	}()
	req, _ := http.NewRequestWithContext(short, "POST", s.BitbucketURL()+"/rest/api/1.0/projects/P/repos", strings.NewReader(`{"name":"x"}`))
	req.Header.Set("Authorization", "Bearer "+s.BitbucketToken())
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("answered")
	}
	if _, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.WasAborted() }); err != nil {
		t.Fatal(err)
	}
	if s.HasRepo("P", "x") {
		t.Fatal("aborted create still created")
	}
}

// TestRelativeStateDirServesGit is the demo's own failure: `make run` passes
// the relative default --data, so the simulators' git root was relative and
// git http-backend (which runs in another working directory) found no
// repository; every reset then failed at force_push_template.
func TestRelativeStateDirServesGit(t *testing.T) {
	t.Chdir(t.TempDir())
	s := startSim(t, sim.Options{StateDir: filepath.Join("data", "sim")})
	if !filepath.IsAbs(s.GitRoot()) {
		t.Fatalf("git root %q is relative", s.GitRoot())
	}
	fx, _ := s.SeedSlot("a")
	home := t.TempDir()
	askpass := filepath.Join(home, "askpass.sh")
	os.WriteFile(askpass, []byte(askpassScript), 0o700)
	cmd := exec.Command("git", "ls-remote", fx.Repo.CloneURL, "refs/heads/main")
	cmd.Dir = home // like the pusher: not the server's working directory
	cmd.Env = append(os.Environ(), "GIT_ASKPASS="+askpass, "SIM_TOKEN="+s.BitbucketToken(), "SIM_USER="+s.BitbucketUser(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), fx.RepoHead) {
		t.Fatalf("ls-remote through the simulator: %v\n%s", err, out)
	}
}

// TestForeign404Fault: the fault answers an HTML 404 like a misrouting
// ingress, on any endpoint of either server, and so does the Coolify server
// for a path outside its API (a base URL without /api/v1); the control API
// installs it by name.
func TestForeign404Fault(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, _ := s.SeedSlot("a")
	ctx := waitCtx(t)
	isForeign := func(what string, code int, body string) {
		t.Helper()
		if code != 404 || !strings.Contains(body, "<html>") || strings.Contains(body, "message") || strings.Contains(body, "errors") {
			t.Fatalf("%s: %d %q, want an HTML 404", what, code, body)
		}
	}
	s.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Foreign404: true, Times: 1})
	code, body := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, s.CoolifyToken())
	isForeign("coolify fault", code, body)
	if code, _ := do(t, ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, s.CoolifyToken()); code != 200 {
		t.Fatalf("after the fault: %d", code)
	}
	base := strings.TrimSuffix(s.CoolifyURL(), "/api/v1")
	code, body = do(t, ctx, "DELETE", base+"/databases/"+fx.DBUUID, s.CoolifyToken())
	isForeign("coolify without /api/v1", code, body)
	if !s.HasDatabase(fx.DBUUID) {
		t.Fatal("a request outside the API deleted the database")
	}

	srv := httptest.NewServer(s.ControlHandler())
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/faults", strings.NewReader(`{"server":"bitbucket","method":"DELETE","foreign_404":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("add fault over HTTP: %v %v", resp, err)
	}
	resp.Body.Close()
	code, body = do(t, ctx, "DELETE", s.BitbucketURL()+"/rest/api/1.0/projects/"+fx.Repo.Project+"/repos/"+fx.Repo.Slug, s.BitbucketToken())
	isForeign("bitbucket fault", code, body)
	if !s.HasRepo(fx.Repo.Project, fx.Repo.Slug) {
		t.Fatal("a foreign 404 deleted the repository")
	}
}

// TestRecorderKeepsCallHeaders: the request log keeps the job tag, request
// id and user agent of every request, and never the Authorization header.
func TestRecorderKeepsCallHeaders(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, _ := s.SeedSlot("a")
	s.ResetRequests()
	ctx := waitCtx(t)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.CoolifyURL()+"/databases/"+fx.DBUUID, nil)
	req.Header.Set("Authorization", "Bearer "+s.CoolifyToken())
	req.Header.Set("X-Slotkeeper-Job", "job-1/2")
	req.Header.Set("X-Request-Id", "job-1/2/abc")
	req.Header.Set("User-Agent", "slotkeeper/dev (job job-1; attempt 2)")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r, err := s.WaitFor(ctx, func(r sim.Request) bool { return r.Done() })
	if err != nil {
		t.Fatal(err)
	}
	if r.Job != "job-1/2" || r.RequestID != "job-1/2/abc" || r.UserAgent != "slotkeeper/dev (job job-1; attempt 2)" {
		t.Fatalf("recorded %+v", r)
	}
	b, _ := json.Marshal(s.Requests())
	if strings.Contains(string(b), s.CoolifyToken()) {
		t.Fatalf("token in the request log: %s", b)
	}
}

// TestFaultAimedAtJobOrSlot: a fault with Job hits only the calls that job
// makes (its X-Slotkeeper-Job, any attempt), and one with Resources only
// the calls on those resources — so the Simulator page's fault for one
// slot is not taken by another slot's deadline reset (issue 35 item 4).
func TestFaultAimedAtJobOrSlot(t *testing.T) {
	s := startSim(t, sim.Options{})
	a, _ := s.SeedSlot("a")
	b, _ := s.SeedSlot("b")
	ctx := waitCtx(t)
	get := func(db, job string) int {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.CoolifyURL()+"/databases/"+db, nil)
		req.Header.Set("Authorization", "Bearer "+s.CoolifyToken())
		if job != "" {
			req.Header.Set("X-Slotkeeper-Job", job)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	s.AddFault(sim.Fault{Job: "job-b", Status: 503})
	if got := get(a.DBUUID, "job-a/1"); got != 200 {
		t.Fatalf("another job's call: %d, want 200", got)
	}
	if got := get(a.DBUUID, ""); got != 200 {
		t.Fatalf("an untagged call: %d, want 200", got)
	}
	if got := get(b.DBUUID, "job-b/2"); got != 503 {
		t.Fatalf("the job's call: %d, want 503", got)
	}
	s.ClearFaults()
	s.AddFault(sim.Fault{Resources: []string{b.DBUUID, b.AppUUID}, Status: 500})
	if got := get(a.DBUUID, "job-a/1"); got != 200 {
		t.Fatalf("another slot's database: %d, want 200", got)
	}
	if got := get(b.DBUUID, "job-a/1"); got != 500 {
		t.Fatalf("the slot's database: %d, want 500", got)
	}
	// A call on a part of the slot's application (a storage, whose own id
	// is the request's resource) is aimed at the slot too: the app's id is
	// in its path.
	s.ClearFaults()
	s.AddFault(sim.Fault{Resources: []string{b.AppUUID}, Endpoint: sim.EndpointDeleteStorage, Status: 403})
	del := func(app string) int {
		req, _ := http.NewRequestWithContext(ctx, "DELETE", s.CoolifyURL()+"/applications/"+app+"/storages/no-such-storage", nil)
		req.Header.Set("Authorization", "Bearer "+s.CoolifyToken())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := del(a.AppUUID); got == 403 {
		t.Fatal("another slot's storage delete took the fault")
	}
	if got := del(b.AppUUID); got != 403 {
		t.Fatalf("the slot's storage delete: %d, want 403", got)
	}
}

// TestForkPullRequest: a PR from a fork — in a personal project (~DANA) —
// is delivered as Bitbucket does: fromRef.repository the fork (key "~DANA",
// type PERSONAL; the target as its origin), toRef.repository the
// target; the branch exists in the fork only and is fetched over git by the
// fork's clone URL (/scm/~dana/…). A force-push rewrites the branch; a
// dropped fork answers git 404. The control API opens one with "fork".
func TestForkPullRequest(t *testing.T) {
	s := startSim(t, sim.Options{})
	d, err := s.OpenForkPR("APPS", "shop", "~dana", "feature/f")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		PullRequest struct {
			FromRef, ToRef struct {
				LatestCommit string
				Repository   struct {
					Slug    string
					Project struct{ Key, Type string }
					Origin  *struct {
						Slug    string
						Project struct{ Key string }
					}
				}
			}
		}
	}
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatal(err)
	}
	from, to := p.PullRequest.FromRef.Repository, p.PullRequest.ToRef.Repository
	if from.Project.Key != "~DANA" || from.Project.Type != "PERSONAL" || from.Slug != "shop" || from.Origin == nil ||
		from.Origin.Project.Key != "APPS" || to.Project.Key != "APPS" || to.Origin != nil || p.PullRequest.FromRef.LatestCommit != d.Head {
		t.Fatalf("payload refs: from %+v to %+v", from, to)
	}
	if h, _ := s.RepoHeadSHA("APPS", "shop", "feature/f"); h != "" {
		t.Fatal("the fork's branch is in the target repository")
	}
	if h, _ := s.RepoHeadSHA("~DANA", "shop", "feature/f"); h != d.Head {
		t.Fatalf("fork branch at %s, want %s", h, d.Head)
	}
	ls := func() (string, error) {
		cmd := exec.Command("git", "-c", "http.extraHeader=Authorization: Bearer "+s.BitbucketToken(), "ls-remote", s.CloneURL("~DANA", "shop"), "refs/heads/feature/f")
		cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if !strings.HasSuffix(s.CloneURL("~DANA", "shop"), "/scm/~dana/shop.git") {
		t.Fatalf("clone URL %s", s.CloneURL("~DANA", "shop"))
	}
	if out, err := ls(); err != nil || !strings.HasPrefix(out, d.Head) {
		t.Fatalf("ls-remote of the fork: %v %s", err, out)
	}
	d2, err := s.ForcePushPR("APPS", "shop", d.ID)
	if err != nil || d2.Head == d.Head || d2.EventKey != "pr:from_ref_updated" {
		t.Fatalf("force-push: %+v %v", d2, err)
	}
	if !strings.Contains(string(d2.Payload), `"previousFromHash":"`+d.Head+`"`) {
		t.Fatalf("force-push delivery without the previous head: %s", d2.Payload)
	}
	if !s.DropRepo("~DANA", "shop") {
		t.Fatal("drop the fork")
	}
	if out, err := ls(); err == nil || !strings.Contains(strings.ToLower(out), "not found") {
		t.Fatalf("ls-remote of a deleted fork: %v %s", err, out)
	}

	srv := httptest.NewServer(s.ControlHandler())
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/api/sim/pull-requests", `{"project":"APPS","repo":"cart","branch":"feature/g","fork":"~dana"}`)
	if code != 201 || !strings.Contains(body, `"event_key":"pr:opened"`) || !s.HasRepo("~DANA", "cart") {
		t.Fatalf("open from a fork over the control API: %d %s", code, body)
	}
	if code, _ := post("/api/sim/pull-requests", `{"project":"APPS","repo":"cart","branch":"feature/h","fork":"~../x"}`); code != 400 {
		t.Fatalf("a bad fork key: %d", code)
	}
	if code, body := post("/api/sim/pull-requests/APPS/cart/1/force-push", `{}`); code != 201 || !strings.Contains(body, "pr:from_ref_updated") {
		t.Fatalf("force-push over the control API: %d %s", code, body)
	}
}

// TestRepositoryIsOneRepresentation: a repository is the same JSON in a
// pull request's payload and in the REST answer for it (Bitbucket's
// "consistent representations in all the payloads where they appear"):
// the target, and a fork in a personal project with its origin. The
// personal project is named after its owner, has no "public", and the
// fork is browsed under /users/dana. A fork still names its origin after
// a restart on the same state directory.
func TestRepositoryIsOneRepresentation(t *testing.T) {
	dir := t.TempDir()
	ctx := waitCtx(t)
	s, err := sim.Start(context.Background(), sim.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.OpenForkPR("APPS", "shop", "~dana", "feature/f")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		PullRequest struct {
			FromRef, ToRef struct{ Repository json.RawMessage }
		}
	}
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		t.Fatal(err)
	}
	rest := func(s *sim.Sim, project string) map[string]any {
		t.Helper()
		code, body := do(t, ctx, "GET", s.BitbucketURL()+"/rest/api/1.0/projects/"+project+"/repos/shop", s.BitbucketToken())
		var v map[string]any
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			t.Fatalf("GET %s/shop: %d %s", project, code, body)
		}
		return v
	}
	parse := func(raw json.RawMessage) map[string]any {
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	to, from := parse(p.PullRequest.ToRef.Repository), parse(p.PullRequest.FromRef.Repository)
	if got := rest(s, "APPS"); !reflect.DeepEqual(to, got) {
		t.Errorf("toRef.repository\n%v\nREST\n%v", to, got)
	}
	fork := rest(s, "~DANA")
	if !reflect.DeepEqual(from, fork) {
		t.Errorf("fromRef.repository\n%v\nREST\n%v", from, fork)
	}
	proj, _ := fork["project"].(map[string]any)
	_, public := proj["public"]
	self := fork["links"].(map[string]any)["self"].([]any)[0].(map[string]any)["href"]
	if proj["key"] != "~DANA" || proj["type"] != "PERSONAL" || proj["name"] != "Dana Developer" || public || proj["id"] == nil ||
		self != s.BitbucketURL()+"/users/dana/repos/shop/browse" {
		t.Errorf("the fork's project %v, self link %v", proj, self)
	}
	if o, _ := fork["origin"].(map[string]any); o == nil || !reflect.DeepEqual(o, to) {
		t.Errorf("the fork's origin %v, want the target %v", fork["origin"], to)
	}
	if to["id"] == fork["id"] || to["name"] != "shop" {
		t.Errorf("target id %v name %v, fork id %v", to["id"], to["name"], fork["id"])
	}
	s.Close()

	s2, err := sim.Start(context.Background(), sim.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if o, _ := rest(s2, "~DANA")["origin"].(map[string]any); o == nil || o["slug"] != "shop" || o["project"].(map[string]any)["key"] != "APPS" {
		t.Errorf("after a restart the fork's origin is %v", o)
	}
}
