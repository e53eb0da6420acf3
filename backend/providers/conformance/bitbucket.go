package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/httpc"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// BitbucketTarget names the Bitbucket Data Center under test.
type BitbucketTarget struct {
	// URL is the server root (--bitbucket-url), Token the HTTP access token
	// (--bitbucket-token).
	URL, Token string
	// Project is the key of an existing scratch project the token may
	// create and delete repositories in (Project admin).
	Project string
	// GitAuth and GitUser are how git sends the token (--git-auth,
	// --git-user); empty GitAuth is bearer.
	GitAuth git.Auth
	GitUser string
	// ForkUser is the user slug of a personal token's owner: set, the
	// suite also forks its scratch repository into that user's personal
	// project (~user) and opens a pull request from the fork. Leave it
	// empty for a project or repository token (no personal project).
	ForkUser string
	// Timeout bounds the whole suite; default 5 minutes (a real delete is
	// scheduled and confirmed by polling).
	Timeout time.Duration
}

// Bitbucket runs the Bitbucket half of the suite against target. It
// creates repositories named slotkeeper-conformance-<random> in
// target.Project only, and deletes them when it ends.
func Bitbucket(t *testing.T, target BitbucketTarget) {
	timeout := target.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	b := &bbSuite{t: t, tg: target, hc: httpc.NewHTTPClient(),
		c: bitbucket.New(bitbucket.Options{BaseURL: target.URL, Token: target.Token})}
	prefix := "slotkeeper-conformance-" + randomHex(4)
	name := func(n string) string { return prefix + "-" + n }
	t.Cleanup(func() { b.removeScratch(name("a")) })

	t.Run("missing repository: 404 NoSuchRepositoryException, read as absent", func(t *testing.T) {
		status, e := b.raw(ctx, t, "GET", b.repoPath(name("never")), b.bearer(), "")
		wantError(t, status, e, 404, "com.atlassian.bitbucket.repository.NoSuchRepositoryException")
		_, l, err := b.c.GetRepo(ctx, target.Project, name("never"))
		if l != providers.Absent || providers.CodeOf(err) != providers.CodeNotFound {
			t.Fatalf("client reads %v %v; want Absent", l, err)
		}
	})
	t.Run("401: an unknown token, in Bitbucket's error body", func(t *testing.T) {
		bad := "slotkeeper-conformance-invalid-" + randomHex(16)
		status, e := b.raw(ctx, t, "GET", b.repoPath(name("never")), "Bearer "+bad, "")
		wantError(t, status, e, 401, "")
		_, l, err := bitbucket.New(bitbucket.Options{BaseURL: target.URL, Token: bad}).GetRepo(ctx, target.Project, name("never"))
		if l != providers.Unknown || providers.CodeOf(err) != providers.CodeUnauthorized || strings.Contains(err.Error(), bad) {
			t.Fatalf("client reads %v %v; want Unknown, unauthorized, no token", l, err)
		}
	})
	t.Run("create in an unknown project: 404 NoSuchProjectException, nothing created", func(t *testing.T) {
		unknown := "SKNONE" + strings.ToUpper(randomHex(4))
		status, e := b.raw(ctx, t, "POST", "/rest/api/1.0/projects/"+unknown+"/repos", b.bearer(), `{"name":"`+name("x")+`","scmId":"git"}`)
		want := providers.CodeNotFound
		if status == http.StatusUnauthorized {
			// A project or repository token reaches only its own project:
			// any other, existing or not, is 401 AuthorisationException.
			wantError(t, status, e, 401, "com.atlassian.bitbucket.AuthorisationException")
			want = providers.CodeUnauthorized
		} else {
			wantError(t, status, e, 404, "com.atlassian.bitbucket.project.NoSuchProjectException")
		}
		_, out, err := b.c.CreateRepo(ctx, unknown, name("x"))
		pe, _ := providers.AsError(err)
		if out != 0 || pe == nil || pe.Code != want || pe.Uncertain {
			t.Fatalf("client reads %v %v; want a definite %s", out, err, want)
		}
		if want == providers.CodeNotFound && (pe.Resource != unknown || !strings.Contains(pe.Message, "does not exist")) {
			t.Fatalf("the not-found names %q (%s); want the project %s", pe.Resource, pe.Message, unknown)
		}
	})

	var repo providers.Repo
	t.Run("create: 201 with the slug and an http clone link", func(t *testing.T) {
		var out providers.CreateOutcome
		var err error
		repo, out, err = b.c.CreateRepo(ctx, target.Project, name("a"))
		if err != nil || out != providers.Created || repo.Slug != name("a") || repo.CloneURL == "" {
			t.Fatalf("create: %+v %v %v", repo, out, err)
		}
	})
	if repo.Slug == "" {
		return // nothing below can run without the scratch repository
	}
	t.Run("create again: 409, read as existed", func(t *testing.T) {
		status, e := b.raw(ctx, t, "POST", "/rest/api/1.0/projects/"+target.Project+"/repos", b.bearer(), `{"name":"`+name("a")+`","scmId":"git"}`)
		wantError(t, status, e, 409, "")
		_, out, err := b.c.CreateRepo(ctx, target.Project, name("a"))
		if out != providers.Existed || providers.CodeOf(err) != providers.CodeConflict {
			t.Fatalf("client reads %v %v; want Existed, conflict", out, err)
		}
	})
	t.Run("git: push and ls-remote with the configured auth", func(t *testing.T) {
		b.gitCases(ctx, t, repo)
	})
	t.Run("delete: 202 scheduled, then GET 404", func(t *testing.T) {
		status, _ := b.raw(ctx, t, "DELETE", b.repoPath(name("a")), b.bearer(), "")
		if status != http.StatusAccepted {
			t.Fatalf("DELETE answered %d; want 202 (scheduled)", status)
		}
		// Bitbucket deletes asynchronously: GET may answer 200 for a while.
		for {
			_, l, err := b.c.GetRepo(ctx, target.Project, name("a"))
			if l == providers.Absent {
				break
			}
			if l == providers.Unknown || ctx.Err() != nil {
				t.Fatalf("after the delete: %v %v", l, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		status, e := b.raw(ctx, t, "GET", b.repoPath(name("a")), b.bearer(), "")
		wantError(t, status, e, 404, "com.atlassian.bitbucket.repository.NoSuchRepositoryException")
	})
	t.Run("delete of a missing repository: 204, read as already absent", func(t *testing.T) {
		status, _ := b.raw(ctx, t, "DELETE", b.repoPath(name("never")), b.bearer(), "")
		if status != http.StatusNoContent {
			t.Fatalf("DELETE answered %d; want 204", status)
		}
		out, err := b.c.DeleteRepo(ctx, target.Project, name("never"))
		if err != nil || out != providers.AlreadyAbsent {
			t.Fatalf("client reads %v %v; want AlreadyAbsent", out, err)
		}
	})
}

type bbSuite struct {
	t  *testing.T
	tg BitbucketTarget
	hc *http.Client
	c  *bitbucket.Client
}

func (b *bbSuite) bearer() string { return "Bearer " + b.tg.Token }

func (b *bbSuite) repoPath(slug string) string {
	return "/rest/api/1.0/projects/" + b.tg.Project + "/repos/" + slug
}

// bbErr is Bitbucket's error body.
type bbErr struct {
	Errors []map[string]any `json:"errors"`
}

// raw sends one request as Bitbucket's documented API, to check the answer
// itself rather than our client's reading of it. The token is only ever in
// the Authorization header.
func (b *bbSuite) raw(ctx context.Context, t *testing.T, method, path, authz, body string) (int, bbErr) {
	t.Helper()
	status, raw := b.send(ctx, t, method, path, authz, body)
	var e bbErr
	if status >= 400 && json.Unmarshal(raw, &e) != nil {
		t.Fatalf("%s %s: %d with a body that is not Bitbucket's JSON: %.200s", method, path, status, raw)
	}
	return status, e
}

// send is the one request of raw and rawJSON: the status and the body (at
// most 1 MiB).
func (b *bbSuite) send(ctx context.Context, t *testing.T, method, path, authz, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(b.tg.URL, "/")+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, raw
}

// wantError checks the status and Bitbucket's error shape
// {"errors":[{"context","message","exceptionName"}]}, and the exception
// when given.
func wantError(t *testing.T, status int, e bbErr, want int, exception string) {
	t.Helper()
	if status != want {
		t.Fatalf("status %d; want %d", status, want)
	}
	if len(e.Errors) == 0 {
		t.Fatalf("%d without errors[]", status)
	}
	for _, k := range []string{"context", "message", "exceptionName"} {
		if _, ok := e.Errors[0][k]; !ok {
			t.Fatalf("errors[0] lacks %q: %v", k, e.Errors[0])
		}
	}
	if m, _ := e.Errors[0]["message"].(string); m == "" {
		t.Fatalf("errors[0] without a message: %v", e.Errors[0])
	}
	if got, _ := e.Errors[0]["exceptionName"].(string); exception != "" && got != exception {
		t.Fatalf("exceptionName %q; want %q", got, exception)
	}
}

// gitCases pushes one commit into the empty scratch repository and reads it
// back, through the pusher with the configured auth. The source is a
// loopback simulator holding one commit, which accepts the same token and
// mode (the pusher sends its credentials to every remote it talks to).
func (b *bbSuite) gitCases(ctx context.Context, t *testing.T, repo providers.Repo) {
	src, err := sim.Start(ctx, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	user := b.tg.GitUser
	if b.tg.GitAuth != git.AuthBasic {
		user = "conformance"
	}
	if err := src.AddBitbucketToken(sim.BitbucketToken{Token: b.tg.Token, Kind: sim.TokenPersonal, User: user, ProjectPerm: sim.PermRead}); err != nil {
		t.Fatal(err)
	}
	srcRepo, err := src.AddRepo("SRC", "source")
	if err != nil {
		t.Fatal(err)
	}
	head, err := src.CommitFile("SRC", "source", "main", "README.md", "slotkeeper conformance\n")
	if err != nil {
		t.Fatal(err)
	}
	p, err := git.New(git.Options{Token: b.tg.Token, Auth: b.tg.GitAuth, Username: b.tg.GitUser})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if sha, err := p.RemoteSHA(ctx, repo.CloneURL, "main"); err != nil || sha != "" {
		t.Fatalf("ls-remote of the empty repository: %q %v", sha, err)
	}
	sha, err := p.PushNew(ctx, srcRepo.CloneURL, "main", repo.CloneURL, "main")
	if err != nil || sha != head {
		t.Fatalf("push (%s): %q %v; want %s", p.AuthMode(), sha, err, head)
	}
	if got, err := p.RemoteSHA(ctx, repo.CloneURL, "main"); err != nil || got != head {
		t.Fatalf("ls-remote after the push: %q %v; want %s", got, err, head)
	}
	// A reset's force-push: refused on a stale lease (nothing changes),
	// done on the current one.
	next, err := src.CommitFile("SRC", "source", "main", "README.md", "slotkeeper conformance, second commit\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.ForcePushWithLease(ctx, srcRepo.CloneURL, "main", repo.CloneURL, "main", strings.Repeat("0", 40))
	if providers.CodeOf(err) != providers.CodeConflict || strings.Contains(err.Error(), b.tg.Token) {
		t.Fatalf("stale lease: %v; want conflict (and no token)", err)
	}
	if got, err := p.RemoteSHA(ctx, repo.CloneURL, "main"); err != nil || got != head {
		t.Fatalf("after the refused push: %q %v; want %s", got, err, head)
	}
	if sha, err := p.ForcePushWithLease(ctx, srcRepo.CloneURL, "main", repo.CloneURL, "main", head); err != nil || sha != next {
		t.Fatalf("force-push with the current lease: %q %v; want %s", sha, err, next)
	}
	// A branch one commit ahead of main, for the pull-request cases.
	prHead, err := src.CommitFile("SRC", "source", "main", "CHANGE.md", "slotkeeper conformance, a change to review\n")
	if err != nil {
		t.Fatal(err)
	}
	if sha, err := p.PushNew(ctx, srcRepo.CloneURL, "main", repo.CloneURL, "pr-source"); err != nil || sha != prHead {
		t.Fatalf("push the pull request's branch: %q %v; want %s", sha, err, prHead)
	}
	t.Run("pull request: comment add, list, edit, read; build status", func(t *testing.T) {
		b.prCases(ctx, t, repo, prHead)
	})
	if b.tg.ForkUser != "" {
		t.Run("fork into the personal project; a pull request from the fork", func(t *testing.T) {
			b.forkCases(ctx, t, repo, p, src, srcRepo)
		})
	}
}

// forkCases are a PR from a fork (docs/pull-requests.md, "Pull requests
// from forks"): the scratch repository forked into the token owner's
// personal project (forkRepository: the target "Defaults to the current
// user's personal project", whose key is ~ and the user's slug); a branch
// pushed to the fork by the clone URL Slotkeeper builds for it
// (/scm/~user/slug.git); a PR from it to the scratch repository, read back
// with fromRef.repository the fork (type PERSONAL, origin the scratch
// repository); and the PR's head fetched from the fork and pushed elsewhere,
// as push_pr_head does. The fork is deleted at the end.
func (b *bbSuite) forkCases(ctx context.Context, t *testing.T, repo providers.Repo, p *git.Pusher, src *sim.Sim, srcRepo sim.RepoFixture) {
	status, fork, raw := b.rawJSON(ctx, t, "POST", b.repoPath(repo.Slug), `{}`)
	proj, _ := fork["project"].(map[string]any)
	key, _ := proj["key"].(string)
	slug, _ := fork["slug"].(string)
	origin, _ := fork["origin"].(map[string]any)
	if status != http.StatusCreated || !strings.EqualFold(key, "~"+b.tg.ForkUser) || proj["type"] != "PERSONAL" || slug == "" || origin["slug"] != repo.Slug {
		t.Fatalf("fork: %d %s; want 201, in project ~%s (PERSONAL), origin %s", status, raw, b.tg.ForkUser, repo.Slug)
	}
	forkPath := "/rest/api/1.0/projects/" + key + "/repos/" + slug
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if status, _ := b.send(cctx, t, "DELETE", forkPath, b.bearer(), ""); status != http.StatusAccepted && status != http.StatusNoContent {
			t.Errorf("cleanup: delete the fork %s/%s: %d", key, slug, status)
		}
	})
	// The clone URL as Slotkeeper builds it (serve's RepoURL): the project
	// key lower-cased, so /scm/~user/slug.git.
	forkURL := strings.TrimRight(b.tg.URL, "/") + "/scm/" + strings.ToLower(key) + "/" + slug + ".git"
	change, err := src.CommitFile("SRC", "source", "main", "FORK.md", "slotkeeper conformance, a change in a fork\n")
	if err != nil {
		t.Fatal(err)
	}
	if sha, err := p.PushNew(ctx, srcRepo.CloneURL, "main", forkURL, "from-fork"); err != nil || sha != change {
		t.Fatalf("push to the fork by %s: %q %v; want %s", forkURL, sha, err, change)
	}
	ref := func(project, slug, branch string) string {
		return `{"id":"refs/heads/` + branch + `","repository":{"slug":"` + slug + `","project":{"key":"` + project + `"}}}`
	}
	status, pr, raw := b.rawJSON(ctx, t, "POST", b.repoPath(repo.Slug)+"/pull-requests",
		`{"title":"slotkeeper conformance from a fork","fromRef":`+ref(key, slug, "from-fork")+`,"toRef":`+ref(b.tg.Project, repo.Slug, "main")+`}`)
	id, _ := pr["id"].(float64)
	if status != http.StatusCreated || id <= 0 {
		t.Fatalf("create the pull request from the fork: %d %s", status, raw)
	}
	status, _, raw = b.rawJSON(ctx, t, "GET", b.repoPath(repo.Slug)+"/pull-requests/"+strconv.FormatInt(int64(id), 10), "")
	var e struct {
		FromRef, ToRef struct {
			LatestCommit string `json:"latestCommit"`
			Repository   struct {
				Slug    string `json:"slug"`
				Project struct {
					Key  string `json:"key"`
					Type string `json:"type"`
				} `json:"project"`
				Origin *struct {
					Slug string `json:"slug"`
				} `json:"origin"`
			} `json:"repository"`
		}
	}
	if err := json.Unmarshal(raw, &e); status != http.StatusOK || err != nil {
		t.Fatalf("read the pull request back: %d %v %s", status, err, raw)
	}
	fr, to := e.FromRef.Repository, e.ToRef.Repository
	if fr.Project.Key != key || fr.Project.Type != "PERSONAL" || fr.Slug != slug || fr.Origin == nil || fr.Origin.Slug != repo.Slug ||
		!strings.EqualFold(to.Project.Key, b.tg.Project) || to.Slug != repo.Slug || e.FromRef.LatestCommit != change {
		t.Fatalf("the pull request's refs: %s; want fromRef the fork (PERSONAL, origin %s) at %s, toRef %s/%s", raw, repo.Slug, change, b.tg.Project, repo.Slug)
	}
	// push_pr_head's fetch: the head from the fork, pushed over a branch of
	// the scratch repository with a lease.
	if sha, err := p.ForcePushWithLease(ctx, forkURL, "from-fork", repo.CloneURL, "fork-head", ""); err != nil || sha != change {
		t.Fatalf("fetch the head from the fork and push it: %q %v; want %s", sha, err, change)
	}
}

// prCases are the pull-request flow's calls (issue 34,
// docs/pull-requests.md) on a PR the suite opens from pr-source to main
// in its scratch repository: the comment posted, found again by its marker
// in the PR's activities, edited at its version (a stale one is 409), read
// back; a build status stored and replaced under one key; and a PR that
// does not exist answered with Bitbucket's own 404.
func (b *bbSuite) prCases(ctx context.Context, t *testing.T, repo providers.Repo, head string) {
	ref := func(branch string) string {
		return `{"id":"refs/heads/` + branch + `","repository":{"slug":"` + repo.Slug + `","project":{"key":"` + b.tg.Project + `"}}}`
	}
	status, pr, _ := b.rawJSON(ctx, t, "POST", b.repoPath(repo.Slug)+"/pull-requests", `{"title":"slotkeeper conformance","fromRef":`+ref("pr-source")+`,"toRef":`+ref("main")+`}`)
	id, _ := pr["id"].(float64)
	if status != http.StatusCreated || id <= 0 {
		t.Fatalf("create the pull request: %d %v; want 201 with an id", status, pr)
	}
	prID := int64(id)
	marker := "slotkeeper:conformance-" + randomHex(4)
	hasMarker := func(text string) bool { return strings.HasSuffix(strings.TrimSpace(text), marker) }

	if _, found, err := b.c.FindComment(ctx, b.tg.Project, repo.Slug, prID, hasMarker); err != nil || found {
		t.Fatalf("look-up before any comment: found=%v %v; want none", found, err)
	}
	c, err := b.c.AddComment(ctx, b.tg.Project, repo.Slug, prID, "Slotkeeper: queued\n\n"+marker)
	if err != nil || c.ID <= 0 {
		t.Fatalf("add comment: %+v %v", c, err)
	}
	got, found, err := b.c.FindComment(ctx, b.tg.Project, repo.Slug, prID, hasMarker)
	if err != nil || !found || got.ID != c.ID || got.Version != c.Version {
		t.Fatalf("look-up by the marker: %+v found=%v %v; want comment %d at version %d", got, found, err, c.ID, c.Version)
	}
	edited, err := b.c.EditComment(ctx, b.tg.Project, repo.Slug, prID, c.ID, c.Version, "Slotkeeper: ready\n\n"+marker)
	if err != nil || edited.ID != c.ID || edited.Version <= c.Version {
		t.Fatalf("edit at version %d: %+v %v; want a newer version", c.Version, edited, err)
	}
	_, err = b.c.EditComment(ctx, b.tg.Project, repo.Slug, prID, c.ID, c.Version, "Slotkeeper: stale\n\n"+marker)
	if pe, ok := providers.AsError(err); !ok || pe.Status != http.StatusConflict {
		t.Fatalf("edit at the stale version %d: %v; want 409", c.Version, err)
	}
	if rc, err := b.c.GetComment(ctx, b.tg.Project, repo.Slug, prID, c.ID); err != nil || rc.Version != edited.Version {
		t.Fatalf("read back: %+v %v; want version %d", rc, err, edited.Version)
	}
	if got, found, err := b.c.FindComment(ctx, b.tg.Project, repo.Slug, prID, hasMarker); err != nil || !found || got.ID != c.ID || got.Version != edited.Version || !strings.Contains(got.Text, "ready") {
		t.Fatalf("look-up after the edit: %+v found=%v %v; want the comment as it is now", got, found, err)
	}
	status, e := b.raw(ctx, t, "GET", b.repoPath(repo.Slug)+"/pull-requests/999999/activities", b.bearer(), "")
	wantError(t, status, e, 404, "com.atlassian.bitbucket.pull.NoSuchPullRequestException")
	if _, _, err := b.c.FindComment(ctx, b.tg.Project, repo.Slug, 999999, hasMarker); providers.CodeOf(err) != providers.CodeNotFound {
		t.Fatalf("look-up on a missing PR: %v; want not_found (never \"no comment\")", err)
	}

	key := "slotkeeper-conformance-" + randomHex(4)
	for _, state := range []string{"INPROGRESS", "SUCCESSFUL"} {
		err := b.c.SetBuildStatus(ctx, b.tg.Project, repo.Slug, head, bitbucket.BuildStatus{Key: key, State: state, URL: "https://slotkeeper.invalid/conformance", Name: "Slotkeeper conformance", Description: state})
		if err != nil {
			t.Fatalf("build status %s: %v", state, err)
		}
	}
	status, bs, _ := b.rawJSON(ctx, t, "GET", b.repoPath(repo.Slug)+"/commits/"+head+"/builds?key="+key, "")
	if status != http.StatusOK || bs["state"] != "SUCCESSFUL" || bs["key"] != key {
		t.Fatalf("build status read back: %d %v; want %s SUCCESSFUL (the same key replaced)", status, bs, key)
	}
}

// rawJSON is raw with the token, answering the body as JSON.
func (b *bbSuite) rawJSON(ctx context.Context, t *testing.T, method, path, body string) (int, map[string]any, []byte) {
	t.Helper()
	status, raw := b.send(ctx, t, method, path, b.bearer(), body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return status, m, raw
}

// removeScratch deletes the suite's own repositories, pass or fail.
func (b *bbSuite) removeScratch(slugs ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, s := range slugs {
		if _, err := b.c.DeleteRepo(ctx, b.tg.Project, s); err != nil {
			b.t.Errorf("cleanup: delete scratch repository %s/%s: %v", b.tg.Project, s, err)
		}
	}
}

func randomHex(n int) string {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		panic(err)
	}
	return hex.EncodeToString(buf)
}
