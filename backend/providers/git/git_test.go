package git_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/providertest"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

const token = "gitTOKEN-Sup3rS3cret-77aa"

type bundle struct {
	sim  *sim.Sim
	p    *git.Pusher
	fx   sim.SlotFixture
	argv string // file where the git wrapper logs every argv
}

// setup runs git through a wrapper that logs its arguments, so tests can
// prove the token never reaches a command line.
func setup(t *testing.T) bundle {
	t.Helper()
	s, fx := providertest.StartSeeded(t, sim.Options{BitbucketToken: token})
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	argv := filepath.Join(dir, "argv.log")
	wrapper := filepath.Join(dir, "git")
	script := "#!/bin/sh\necho \"$@\" >> " + argv + "\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	p, err := git.New(git.Options{Token: token, GitPath: wrapper, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return bundle{sim: s, p: p, fx: fx, argv: argv}
}

func ctxT(t *testing.T) context.Context { return providertest.Ctx(t, 20*time.Second) }

func (b bundle) checkNoTokenInArgv(t *testing.T) {
	t.Helper()
	log, err := os.ReadFile(b.argv)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) == 0 || strings.Contains(string(log), token) {
		t.Fatalf("argv log empty or holds the token:\n%s", log)
	}
}

func checkErr(t *testing.T, err error, code providers.Code, uncertain bool) *providers.Error {
	t.Helper()
	pe, ok := providers.AsError(err)
	if !ok || pe.Code != code || pe.Uncertain != uncertain {
		t.Fatalf("got %#v (%v); want code %s uncertain %v", pe, err, code, uncertain)
	}
	if strings.Contains(err.Error(), token) {
		t.Fatalf("token leaked: %v", err)
	}
	return pe
}

func TestRemoteSHA(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	sha, err := b.p.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	if err != nil || sha != b.fx.RepoHead {
		t.Fatalf("sha %q err %v, want %s", sha, err, b.fx.RepoHead)
	}
	sha, err = b.p.RemoteSHA(ctx, b.fx.Repo.CloneURL, "no-such-branch")
	if err != nil || sha != "" {
		t.Fatalf("missing branch: %q %v", sha, err)
	}
	_, err = b.p.RemoteSHA(ctx, b.sim.CloneURL("SLOT", "nope"), "main")
	checkErr(t, err, providers.CodeNotFound, false)

	bad, err := git.New(git.Options{Token: "wrong-" + token})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_, err = bad.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	checkErr(t, err, providers.CodeUnauthorized, false)

	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitInfoRefs, Status: 503, Times: 1})
	_, err = b.p.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	if pe := checkErr(t, err, providers.CodeServer, false); pe.Status != 503 {
		t.Fatalf("status %d", pe.Status)
	}
	b.checkNoTokenInArgv(t)
}

func TestForcePushWithLease(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	sha, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, b.fx.TemplateRef, b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
	if err != nil || sha != b.fx.TemplateHead {
		t.Fatalf("push: %q %v", sha, err)
	}
	if head, _ := b.sim.RepoHeadSHA("SLOT", b.fx.Repo.Slug, "main"); head != b.fx.TemplateHead {
		t.Fatalf("remote head %s, want template %s", head, b.fx.TemplateHead)
	}
	var pushes int
	for _, r := range b.sim.Requests() {
		if r.Endpoint == sim.EndpointGitReceivePack && r.Status == 200 {
			pushes++
		}
	}
	if pushes != 1 {
		t.Fatalf("%d receive-pack requests", pushes)
	}
	b.checkNoTokenInArgv(t)
}

// TestLeaseRefusesWhenRemoteMoved: someone pushed after we read the sha;
// the force push must refuse and leave their commit in place.
func TestLeaseRefusesWhenRemoteMoved(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	expected, err := b.p.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := b.sim.CommitFile("SLOT", b.fx.Repo.Slug, "main", "late.txt", "pushed by someone else\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", expected)
	pe := checkErr(t, err, providers.CodeConflict, false)
	if !strings.Contains(pe.Message, "stale info") {
		t.Fatalf("message %q", pe.Message)
	}
	if head, _ := b.sim.RepoHeadSHA("SLOT", b.fx.Repo.Slug, "main"); head != moved {
		t.Fatalf("remote changed to %s despite the lease", head)
	}
	// Expecting "absent" on a branch that is absent pushes.
	empty, err := b.sim.AddRepo("SLOT", "empty")
	if err != nil {
		t.Fatal(err)
	}
	if sha, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", empty.CloneURL, "main", ""); err != nil || sha != b.fx.TemplateHead {
		t.Fatalf("lease on absent branch: %q %v", sha, err)
	}
	// Expecting "absent" on an existing branch is refused.
	_, err = b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", "")
	checkErr(t, err, providers.CodeConflict, false)
}

func TestPushNew(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	dst, err := b.sim.AddRepo("PROMO", "promoted")
	if err != nil {
		t.Fatal(err)
	}
	sha, err := b.p.PushNew(ctx, b.fx.Repo.CloneURL, "main", dst.CloneURL, "main")
	if err != nil || sha != b.fx.RepoHead {
		t.Fatalf("push new: %q %v", sha, err)
	}
	if head, _ := b.sim.RepoHeadSHA("PROMO", "promoted", "main"); head != b.fx.RepoHead {
		t.Fatalf("dst head %s", head)
	}
	// A retry of the same push is fine.
	if sha, err := b.p.PushNew(ctx, b.fx.Repo.CloneURL, "main", dst.CloneURL, "main"); err != nil || sha != b.fx.RepoHead {
		t.Fatalf("retry: %q %v", sha, err)
	}
	// A destination that already has other history is never overwritten.
	b.sim.ResetRequests()
	_, err = b.p.PushNew(ctx, b.fx.Repo.CloneURL, "main", b.fx.Template.CloneURL, "main")
	checkErr(t, err, providers.CodeConflict, false)
	if head, _ := b.sim.RepoHeadSHA("TPL", "template", "main"); head != b.fx.TemplateHead {
		t.Fatalf("template overwritten: %s", head)
	}
	for _, r := range b.sim.Requests() {
		if r.Endpoint == sim.EndpointGitReceivePack {
			t.Fatalf("pushed to an existing branch: %+v", r)
		}
	}
	b.checkNoTokenInArgv(t)
}

func TestPushServerErrorIsUncertain(t *testing.T) {
	b := setup(t)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Status: 500})
	_, err := b.p.ForcePushWithLease(ctxT(t), b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
	checkErr(t, err, providers.CodeServer, true)
	b.sim.ClearFaults()
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Reset: true})
	_, err = b.p.ForcePushWithLease(ctxT(t), b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
	checkErr(t, err, providers.CodeTransport, true)
	if head, _ := b.sim.RepoHeadSHA("SLOT", b.fx.Repo.Slug, "main"); head != b.fx.RepoHead {
		t.Fatalf("head moved: %s", head)
	}
}

// TestCancelKillsHungPush: the push hangs in receive-pack; cancelling ctx
// kills git and its helpers (the sim sees the connection go), and nothing
// is sent afterwards.
func TestCancelKillsHungPush(t *testing.T) {
	b := setup(t)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Hang: true})
	wctx := ctxT(t)
	at, err := providertest.CancelInFlight(t, wctx, b.sim,
		func(r sim.Request) bool { return r.Endpoint == sim.EndpointGitReceivePack },
		func(ctx context.Context) error {
			_, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
			return err
		})
	checkErr(t, err, providers.CodeCanceled, true)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	r, werr := b.sim.WaitFor(wctx, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGitReceivePack && r.Done() })
	if werr != nil || !r.WasAborted() {
		t.Fatalf("receive-pack not aborted: %+v %v", r, werr)
	}
	if after := b.sim.RequestsAfter(at); len(after) != 0 {
		t.Fatalf("requests after cancel: %+v", after)
	}
	if head, _ := b.sim.RepoHeadSHA("SLOT", b.fx.Repo.Slug, "main"); head != b.fx.RepoHead {
		t.Fatalf("head moved: %s", head)
	}
	// A dead ctx starts no git at all.
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.p.RemoteSHA(dead, b.fx.Repo.CloneURL, "main"); providers.CodeOf(err) != providers.CodeCanceled {
		t.Fatalf("dead ctx: %v", err)
	}
}

func TestInvalidInputRunsNothing(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	good := b.fx.Repo.CloneURL
	badBranches := []string{"", "-f", "--upload-pack=x", "a..b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b", "a@{1}", "@", ".hidden", "a/.x", "a.lock", "a/", "a.", "a//b", "ветка", "a\x7fb", "a\nb"}
	badURLs := []string{"", "-u", "file:///etc", "ext::sh -c id", "http://user:pw@127.0.0.1/x.git", "http://127.0.0.1/x.git?a=b", "http://127.0.0.1/a/../x.git", "ssh://127.0.0.1/x", "http://127.0.0.1/x y.git", "/local/path"}
	for _, br := range badBranches {
		_, e1 := b.p.RemoteSHA(ctx, good, br)
		_, e2 := b.p.ForcePushWithLease(ctx, good, "main", good, br, b.fx.RepoHead)
		_, e3 := b.p.ForcePushWithLease(ctx, good, br, good, "main", b.fx.RepoHead)
		_, e4 := b.p.PushNew(ctx, good, br, good, "main")
		for _, err := range []error{e1, e2, e3, e4} {
			if providers.CodeOf(err) != providers.CodeInvalid {
				t.Fatalf("branch %q: %v", br, err)
			}
		}
	}
	for _, u := range badURLs {
		_, e1 := b.p.RemoteSHA(ctx, u, "main")
		_, e2 := b.p.PushNew(ctx, good, "main", u, "main")
		for _, err := range []error{e1, e2} {
			if providers.CodeOf(err) != providers.CodeInvalid || strings.Contains(err.Error(), "pw@") {
				t.Fatalf("url %q: %v", u, err)
			}
		}
	}
	for _, old := range []string{"abc", "HEAD", strings.Repeat("g", 40), "-" + strings.Repeat("a", 39)} {
		if _, err := b.p.ForcePushWithLease(ctx, good, "main", good, "main", old); providers.CodeOf(err) != providers.CodeInvalid {
			t.Fatalf("expected %q: %v", old, err)
		}
	}
	if reqs := b.sim.Requests(); len(reqs) != 0 {
		t.Fatalf("invalid input reached the server: %+v", reqs)
	}
	if log, _ := os.ReadFile(b.argv); len(log) != 0 {
		t.Fatalf("git ran on invalid input:\n%s", log)
	}
}

// TestCancelDuringFetch: cancelled while fetching the source, nothing is
// pushed and the error is not uncertain.
func TestCancelDuringFetch(t *testing.T) {
	b := setup(t)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitUploadPack, Hang: true})
	// Cancel once the fetch hangs in upload-pack (a fixed timeout could end
	// before git got there on a loaded machine).
	_, err := providertest.CancelInFlight(t, ctxT(t), b.sim, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGitUploadPack }, func(ctx context.Context) error {
		_, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
		return err
	})
	checkErr(t, err, providers.CodeCanceled, false)
	r, werr := b.sim.WaitFor(ctxT(t), func(r sim.Request) bool { return r.Endpoint == sim.EndpointGitUploadPack && r.Done() })
	if werr != nil || !r.WasAborted() {
		t.Fatalf("fetch not aborted: %+v %v", r, werr)
	}
	for _, r := range b.sim.Requests() {
		if r.Resource == "SLOT/"+b.fx.Repo.Slug {
			t.Fatalf("destination contacted: %+v", r)
		}
	}
}

// TestCallsCarryJobTag: every smart-HTTP request of a tagged push names the
// job attempt (X-Slotkeeper-Job, User-Agent) and carries a request id, one
// per git run; the token stays out of argv and of the request log.
func TestCallsCarryJobTag(t *testing.T) {
	b := setup(t)
	ctx := providers.WithCallTag(ctxT(t), providers.CallTag{Job: "job-7", Attempt: 3})
	if _, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	endpoints := map[string]bool{}
	for _, r := range b.sim.Requests() {
		endpoints[r.Endpoint] = true
		// git's own agent first (servers tell git clients by it), ours after.
		if r.Job != "job-7/3" || !strings.HasPrefix(r.UserAgent, "git/") || !strings.HasSuffix(r.UserAgent, " slotkeeper/dev (job job-7; attempt 3)") || !strings.HasPrefix(r.RequestID, "job-7/3/") {
			t.Errorf("%s %s: job %q, user agent %q, request id %q", r.Method, r.Path, r.Job, r.UserAgent, r.RequestID)
		}
		ids[r.RequestID] = true
	}
	if !endpoints[sim.EndpointGitUploadPack] || !endpoints[sim.EndpointGitReceivePack] {
		t.Fatalf("fetch and push not both seen: %v", endpoints)
	}
	if len(ids) < 2 {
		t.Errorf("one request id for the fetch and the push runs: %v", ids)
	}
	b.checkNoTokenInArgv(t)
	log, _ := os.ReadFile(b.argv)
	if !strings.Contains(string(log), "http.extraHeader=X-Slotkeeper-Job: job-7/3") {
		t.Errorf("no job header in argv:\n%s", log)
	}
	if strings.Contains(string(log), "GIT_TRACE") {
		t.Errorf("GIT_TRACE in argv:\n%s", log)
	}
}
