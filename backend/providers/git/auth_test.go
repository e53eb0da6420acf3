package git_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

const projToken = "projTOKEN-BearerOnly-91c2"

func newPusher(t *testing.T, o git.Options) *git.Pusher {
	t.Helper()
	p, err := git.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func noToken(t *testing.T, err error, tok string) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), tok) {
		t.Fatalf("token in error: %v", err)
	}
}

// TestProjectTokenOnlyAsBearer: a Bitbucket Data Center project token is
// refused as Basic with the old default user x-token-auth (and with any
// user) and works as Bearer, for ls-remote and for a push; the refused push
// changes nothing.
func TestProjectTokenOnlyAsBearer(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	if err := b.sim.AddBitbucketToken(sim.BitbucketToken{Token: projToken, Kind: sim.TokenProject, Project: "SLOT", ProjectPerm: sim.PermWrite}); err != nil {
		t.Fatal(err)
	}
	dst, err := b.sim.AddRepo("SLOT", "copy")
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"x-token-auth", b.sim.BitbucketUser()} {
		basic := newPusher(t, git.Options{Token: projToken, Auth: git.AuthBasic, Username: user})
		_, err := basic.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
		checkErr(t, err, providers.CodeUnauthorized, false)
		noToken(t, err, projToken)
		_, err = basic.PushNew(ctx, b.fx.Repo.CloneURL, "main", dst.CloneURL, "main")
		checkErr(t, err, providers.CodeUnauthorized, false)
		noToken(t, err, projToken)
	}
	if head, _ := b.sim.RepoHeadSHA("SLOT", "copy", "main"); head != "" {
		t.Fatalf("refused push moved the branch to %s", head)
	}

	bearer := newPusher(t, git.Options{Token: projToken}) // bearer is the default
	if m := bearer.AuthMode(); m != "bearer" {
		t.Fatalf("auth mode %q", m)
	}
	sha, err := bearer.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	if err != nil || sha != b.fx.RepoHead {
		t.Fatalf("bearer ls-remote: %q %v", sha, err)
	}
	if sha, err = bearer.PushNew(ctx, b.fx.Repo.CloneURL, "main", dst.CloneURL, "main"); err != nil || sha != b.fx.RepoHead {
		t.Fatalf("bearer push: %q %v", sha, err)
	}
	// The project token reaches only its project: the template lies in TPL.
	_, err = bearer.RemoteSHA(ctx, b.fx.Template.CloneURL, "main")
	checkErr(t, err, providers.CodeUnauthorized, false)
}

// TestPersonalTokenBasicWithItsOwner: a personal token also works as Basic,
// but only with its owner's username.
func TestPersonalTokenBasicWithItsOwner(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	owner := newPusher(t, git.Options{Token: token, Auth: git.AuthBasic, Username: b.sim.BitbucketUser()})
	if m := owner.AuthMode(); m != "basic as user "+b.sim.BitbucketUser() {
		t.Fatalf("auth mode %q", m)
	}
	if sha, err := owner.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main"); err != nil || sha != b.fx.RepoHead {
		t.Fatalf("basic as owner: %q %v", sha, err)
	}
	other := newPusher(t, git.Options{Token: token, Auth: git.AuthBasic, Username: "x-token-auth"})
	_, err := other.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main")
	checkErr(t, err, providers.CodeUnauthorized, false)
}

// TestReadTokenCannotPush: a token with repository read gets 401 on push
// (Bitbucket's answer for a missing permission), not uncertain, nothing
// changed.
func TestReadTokenCannotPush(t *testing.T) {
	b := setup(t)
	ctx := ctxT(t)
	if err := b.sim.AddBitbucketToken(sim.BitbucketToken{Token: projToken, Kind: sim.TokenRepository, Project: "SLOT", Repo: b.fx.Repo.Slug, RepoPerm: sim.PermRead}); err != nil {
		t.Fatal(err)
	}
	p := newPusher(t, git.Options{Token: projToken})
	if sha, err := p.RemoteSHA(ctx, b.fx.Repo.CloneURL, "main"); err != nil || sha != b.fx.RepoHead {
		t.Fatalf("read: %q %v", sha, err)
	}
	_, err := p.ForcePushWithLease(ctx, b.fx.Repo.CloneURL, "main", b.fx.Repo.CloneURL, "other", "")
	checkErr(t, err, providers.CodeUnauthorized, false)
	if head, _ := b.sim.RepoHeadSHA("SLOT", b.fx.Repo.Slug, "other"); head != "" {
		t.Fatal("pushed without write permission")
	}
}

// TestBearerTokenNeverInArgv: while a push hangs at the server, no process
// on the machine has the token in its command line; the git processes hold
// it in their environment (proving the scan saw them).
func TestBearerTokenNeverInArgv(t *testing.T) {
	b := setup(t)
	wctx := ctxT(t)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Hang: true})
	ctx, cancel := context.WithCancel(wctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := b.p.ForcePushWithLease(ctx, b.fx.Template.CloneURL, "main", b.fx.Repo.CloneURL, "main", b.fx.RepoHead)
		errc <- err
	}()
	if _, err := b.sim.WaitFor(wctx, func(r sim.Request) bool { return r.Endpoint == sim.EndpointGitReceivePack }); err != nil {
		t.Fatal(err)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	inEnv := 0
	for _, dir := range procs {
		if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil && bytes.Contains(cmdline, []byte(token)) {
			t.Errorf("token in argv of %s: %q", dir, cmdline)
		}
		if env, err := os.ReadFile(filepath.Join(dir, "environ")); err == nil && bytes.Contains(env, []byte("Authorization: Bearer "+token)) {
			inEnv++
		}
	}
	if inEnv == 0 {
		t.Fatal("no git process seen holding the Bearer header in its environment: the scan proves nothing")
	}
	cancel()
	err := <-errc
	checkErr(t, err, providers.CodeCanceled, true)
	b.checkNoTokenInArgv(t)
}

// TestNewRefusesIncompleteAuth: basic without a user, bearer with one, and
// a token that could split the header are refused, without quoting it.
func TestNewRefusesIncompleteAuth(t *testing.T) {
	for _, o := range []git.Options{
		{Token: token, Auth: git.AuthBasic},
		{Token: token, Auth: "Basic"}, // normalised, then refused: no user
		{Token: token, Username: "alice"},
		{Token: token, Auth: "digest"},
		{Token: token + "\r\nX-Evil: 1"},
	} {
		p, err := git.New(o)
		if err == nil {
			p.Close()
			t.Fatalf("%+v accepted", o.Auth)
		}
		noToken(t, err, token)
	}
	if a, err := git.ParseAuth("Basic"); err != nil || a != git.AuthBasic {
		t.Fatalf("ParseAuth: %q %v", a, err)
	}
}
