// Package git is the providers.Pusher on the git command line.
//
// Every git process runs through exec.CommandContext with WaitDelay, in its
// own process group that cancellation kills, so a cancelled push dies with
// its helpers. Credentials reach git only through the environment (a Bearer
// header as GIT_CONFIG_VALUE_0, or a Basic password through an askpass
// helper script): never in argv, in a URL, or in an error. Each call
// runs with an isolated configuration (no system or user config, HOME set to
// a private directory, no terminal prompts).
package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

var _ providers.Pusher = (*Pusher)(nil)

// Auth says how the token reaches the git host.
type Auth string

const (
	// AuthBearer sends "Authorization: Bearer <token>" on every request.
	// Bitbucket Data Center's project and repository HTTP access tokens
	// work only this way ("In Git and API calls, you can use the project
	// and repository level token only with Bearer authentication. Don't use
	// this token with a username in Basic authentication." — Atlassian,
	// HTTP access tokens, Bitbucket DC 8.5/8.16/9.1); personal tokens too.
	AuthBearer Auth = "bearer"
	// AuthBasic sends the token as the Basic password with Username: only a
	// personal HTTP access token with its owner's username (same page).
	AuthBasic Auth = "basic"
)

// ParseAuth reads "bearer" or "basic".
func ParseAuth(s string) (Auth, error) {
	switch a := Auth(strings.ToLower(strings.TrimSpace(s))); a {
	case AuthBearer, AuthBasic:
		return a, nil
	}
	return "", fmt.Errorf("git auth %q: want bearer or basic", s)
}

// Options configure New.
type Options struct {
	// Token is the git host's HTTP access token. Empty: no credentials.
	Token string
	// Auth is how Token is sent; default AuthBearer.
	Auth Auth
	// Username goes with Token under AuthBasic (required there: the
	// personal token's owner) and must be empty under AuthBearer.
	Username string
	// GitPath is the git binary; default: "git" on PATH.
	GitPath string
	// WaitDelay bounds how long a cancelled git's output pipes are waited
	// for after it is killed. Default 200ms.
	WaitDelay time.Duration
	// TempDir holds the per-call scratch repositories; default os.TempDir().
	TempDir string
}

// Pusher runs git. Safe for concurrent use; Close removes its helper files.
type Pusher struct {
	opts    Options
	gitPath string
	home    string // private HOME with the askpass script
	askpass string
	authEnv []string // the credential part of every git child's environment

	cleaning sync.WaitGroup // background removals of scratch repositories

	agentMu  sync.Mutex
	gitAgent string // git's own User-Agent, e.g. "git/2.39.5"; "" until learned
}

// New prepares the private directory and askpass helper. Errors never
// quote the token.
func New(o Options) (*Pusher, error) {
	if o.Auth == "" {
		o.Auth = AuthBearer
	}
	a, err := ParseAuth(string(o.Auth))
	if err != nil {
		return nil, err
	}
	o.Auth = a
	if err := checkAuth(o); err != nil {
		return nil, err
	}
	if o.WaitDelay <= 0 {
		o.WaitDelay = 200 * time.Millisecond
	}
	if o.GitPath == "" {
		o.GitPath = "git"
	}
	gp, err := exec.LookPath(o.GitPath)
	if err != nil {
		return nil, fmt.Errorf("git: %w", err)
	}
	home, err := os.MkdirTemp(o.TempDir, "slotkeeper-git-")
	if err != nil {
		return nil, err
	}
	// The script prints values from its environment; the token itself is
	// never written to disk.
	askpass := filepath.Join(home, "askpass.sh")
	script := "#!/bin/sh\ncase \"$1\" in\n[Uu]sername*) printf '%s\\n' \"$SLOTKEEPER_GIT_USER\" ;;\n*) printf '%s\\n' \"$SLOTKEEPER_GIT_TOKEN\" ;;\nesac\n"
	if err := os.WriteFile(askpass, []byte(script), 0o700); err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	return &Pusher{opts: o, gitPath: gp, home: home, askpass: askpass, authEnv: authEnv(o)}, nil
}

// checkAuth refuses a mode without what it needs, and a token or user name
// that could split the header or the askpass answer.
func checkAuth(o Options) error {
	if !headerSafe(o.Token) {
		return errors.New("git: the token holds spaces or control characters (value not shown)")
	}
	switch {
	case o.Auth == AuthBasic && o.Token != "" && o.Username == "":
		return errors.New("git: basic auth needs the user name of the personal token's owner")
	case o.Auth == AuthBearer && o.Username != "":
		return errors.New("git: a user name is sent only with basic auth; bearer sends the token alone")
	case !headerSafe(o.Username):
		return errors.New("git: the user name holds spaces or control characters")
	}
	return nil
}

func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// authEnv is how the token reaches git. Bearer: one http.extraHeader in
// git's environment-borne configuration (GIT_CONFIG_COUNT/KEY_n/VALUE_n,
// git ≥ 2.31), never -c, which would put it in argv; the askpass helper
// then has nothing to say (a 401 ends in "Authentication failed"). curl
// sends a custom Authorization header only to the original host on a
// redirect (since 7.58.0). Basic: the askpass helper answers the user name
// and the token from the environment.
func authEnv(o Options) []string {
	switch {
	case o.Token == "":
		return nil
	case o.Auth == AuthBearer:
		return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader", "GIT_CONFIG_VALUE_0=Authorization: Bearer " + o.Token}
	}
	return []string{"SLOTKEEPER_GIT_USER=" + o.Username, "SLOTKEEPER_GIT_TOKEN=" + o.Token}
}

// AuthMode says how the token is sent, for logs and doctor ("bearer",
// "basic as user alice", "none"); it never holds the token.
func (p *Pusher) AuthMode() string {
	switch {
	case p.opts.Token == "":
		return "none"
	case p.opts.Auth == AuthBasic:
		return "basic as user " + p.opts.Username
	}
	return string(AuthBearer)
}

// Close waits for scratch clean-ups and removes the private directory.
func (p *Pusher) Close() error {
	p.cleaning.Wait()
	return os.RemoveAll(p.home)
}

// cleanup removes a scratch repository. After a cancel it does so in the
// background: a cancelled call must return at once, not after deleting a
// pack directory.
func (p *Pusher) cleanup(ctx context.Context, dir string) {
	if dir == "" {
		return
	}
	if ctx.Err() == nil {
		os.RemoveAll(dir)
		return
	}
	p.cleaning.Add(1)
	go func() {
		defer p.cleaning.Done()
		os.RemoveAll(dir)
	}()
}

// env is the whole environment of a git child: nothing inherited but PATH.
func (p *Pusher) env() []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + p.home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=" + p.askpass,
		"SSH_ASKPASS=" + p.askpass,
		"GIT_AUTHOR_NAME=slotkeeper", "GIT_AUTHOR_EMAIL=slotkeeper@localhost",
		"GIT_COMMITTER_NAME=slotkeeper", "GIT_COMMITTER_EMAIL=slotkeeper@localhost",
	}, p.authEnv...)
}

// result of one git run.
type result struct {
	stdout, stderr string
	err            error
}

// run starts git only if ctx is still live; the process group dies with ctx.
func (p *Pusher) run(ctx context.Context, dir string, args ...string) result {
	if err := ctx.Err(); err != nil {
		return result{err: err}
	}
	// credential.helper= disables any helper; askpass is the only source.
	// No automatic gc/maintenance: they detach, outlive git and hold its
	// output pipes open past WaitDelay.
	full := append([]string{
		"-c", "credential.helper=", "-c", "core.askPass=" + p.askpass,
		"-c", "protocol.allow=never", "-c", "protocol.http.allow=always", "-c", "protocol.https.allow=always",
		"-c", "gc.auto=0", "-c", "maintenance.auto=false",
	}, p.callConfig(ctx)...)
	return p.exec(ctx, dir, append(full, args...))
}

// exec runs git with exactly args, in its own process group, with the
// private environment.
func (p *Pusher) exec(ctx context.Context, dir string, args []string) result {
	cmd := exec.CommandContext(ctx, p.gitPath, args...)
	cmd.Dir = dir
	cmd.Env = p.env()
	cmd.WaitDelay = p.opts.WaitDelay
	killGroup(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		// git itself exited 0; a detached descendant kept the pipes open.
		err = nil
	}
	return result{stdout: out.String(), stderr: errb.String(), err: err}
}

// callConfig ties every HTTP request of one git run to the job attempt in
// ctx, as the HTTP clients do: git's own User-Agent followed by ours, the
// X-Slotkeeper-Job header and a fresh X-Request-Id per git run (its
// requests share it). Through -c, not GIT_TRACE; the values are
// header-safe and never hold a credential.
func (p *Pusher) callConfig(ctx context.Context) []string {
	cfg := []string{
		"-c", "http.userAgent=" + p.agent(ctx) + " " + providers.UserAgent(ctx),
		"-c", "http.extraHeader=" + providers.HeaderRequestID + ": " + providers.NewRequestID(ctx),
	}
	if tag, ok := providers.CallTagFrom(ctx); ok {
		cfg = append(cfg, "-c", "http.extraHeader="+providers.HeaderJob+": "+tag.String())
	}
	return cfg
}

// agent returns git's own User-Agent ("git/<version>"), learned once from
// `git version`: servers tell git clients by it, so ours only follows it.
// Until that succeeds it is "git".
func (p *Pusher) agent(ctx context.Context) string {
	p.agentMu.Lock()
	defer p.agentMu.Unlock()
	if p.gitAgent != "" {
		return p.gitAgent
	}
	r := p.exec(ctx, "", []string{"version"})
	v, ok := strings.CutPrefix(r.stdout, "git version ")
	v, _, _ = strings.Cut(strings.TrimSpace(v), " ")
	v = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' {
			return c
		}
		return -1
	}, v)
	if r.err != nil || !ok || v == "" {
		return "git"
	}
	p.gitAgent = "git/" + v
	return p.gitAgent
}

// RemoteSHA returns the sha of refs/heads/<branch> at remoteURL, or "" when
// the branch does not exist (git ls-remote).
func (p *Pusher) RemoteSHA(ctx context.Context, remoteURL, branch string) (string, error) {
	const op = "git.RemoteSHA"
	if perr := validate(op, remoteURL, branch); perr != nil {
		return "", perr
	}
	return p.remoteSHA(ctx, op, remoteURL, branch)
}

func (p *Pusher) remoteSHA(ctx context.Context, op, remoteURL, branch string) (string, error) {
	ref := "refs/heads/" + branch
	r := p.run(ctx, "", "ls-remote", "--refs", remoteURL, ref)
	if r.err != nil {
		return "", p.fail(ctx, op, remoteURL, r, false)
	}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		sha, name, ok := strings.Cut(line, "\t")
		if ok && name == ref {
			return sha, nil
		}
	}
	return "", nil
}

// ForcePushWithLease fetches srcRef from srcURL and pushes it to dstURL's
// dstBranch with --force-with-lease=refs/heads/<dstBranch>:<expectedOld>
// (expectedOld "" means: the branch must not exist). If the remote moved,
// git refuses and nothing changes: CodeConflict. Returns the pushed sha.
func (p *Pusher) ForcePushWithLease(ctx context.Context, srcURL, srcRef, dstURL, dstBranch, expectedOld string) (string, error) {
	const op = "git.ForcePushWithLease"
	if perr := validateSrc(op, srcURL, srcRef); perr != nil {
		return "", perr
	}
	if perr := validate(op, dstURL, dstBranch); perr != nil {
		return "", perr
	}
	if expectedOld != "" {
		if err := providers.ValidateSHA(expectedOld); err != nil {
			return "", providers.Invalid(op, dstURL, err)
		}
	}
	dir, sha, err := p.fetch(ctx, op, srcURL, srcRef)
	defer p.cleanup(ctx, dir)
	if err != nil {
		return "", err
	}
	lease := "--force-with-lease=refs/heads/" + dstBranch + ":" + expectedOld
	return sha, p.push(ctx, op, dir, dstURL, dstBranch, lease)
}

// PushNew pushes srcBranch of srcURL to dstURL's dstBranch, never forced.
// If dst already has the branch at another commit it returns CodeConflict
// without pushing; at the same commit it succeeds (a retry). A plain push
// also refuses any non-fast-forward, so a race cannot overwrite either.
func (p *Pusher) PushNew(ctx context.Context, srcURL, srcBranch, dstURL, dstBranch string) (string, error) {
	const op = "git.PushNew"
	if perr := validate(op, srcURL, srcBranch); perr != nil {
		return "", perr
	}
	if perr := validate(op, dstURL, dstBranch); perr != nil {
		return "", perr
	}
	dir, sha, err := p.fetch(ctx, op, srcURL, srcBranch)
	defer p.cleanup(ctx, dir)
	if err != nil {
		return "", err
	}
	cur, err := p.remoteSHA(ctx, op, dstURL, dstBranch)
	switch {
	case err != nil:
		return "", err
	case cur == sha:
		return sha, nil
	case cur != "":
		return "", &providers.Error{Op: op, Resource: dstURL, Code: providers.CodeConflict,
			Message: fmt.Sprintf("branch %s already exists at %s", dstBranch, cur)}
	}
	return sha, p.push(ctx, op, dir, dstURL, dstBranch)
}

const srcRefName = "refs/slotkeeper/src"

// fetch copies src's ref into a scratch bare repository and returns it and
// the fetched sha.
func (p *Pusher) fetch(ctx context.Context, op, srcURL, srcRef string) (string, string, error) {
	dir, err := os.MkdirTemp(p.opts.TempDir, "slotkeeper-push-")
	if err != nil {
		return "", "", &providers.Error{Op: op, Resource: srcURL, Code: providers.CodeGit, Message: "scratch dir", Err: err}
	}
	if r := p.run(ctx, dir, "init", "--bare", "--quiet", "."); r.err != nil {
		return dir, "", p.fail(ctx, op, srcURL, r, false)
	}
	full := srcRef
	if !strings.HasPrefix(full, "refs/") {
		full = "refs/heads/" + srcRef
	}
	if r := p.run(ctx, dir, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", srcURL, "+"+full+":"+srcRefName); r.err != nil {
		return dir, "", p.fail(ctx, op, srcURL, r, false)
	}
	r := p.run(ctx, dir, "rev-parse", "--verify", srcRefName+"^{commit}")
	if r.err != nil {
		return dir, "", p.fail(ctx, op, srcURL, r, false)
	}
	return dir, strings.TrimSpace(r.stdout), nil
}

// push sends the fetched ref to dst. Once git has started pushing, a
// failure without a definite answer (killed, connection lost) is Uncertain:
// the remote may have taken the update.
func (p *Pusher) push(ctx context.Context, op, dir, dstURL, dstBranch string, flags ...string) error {
	args := append([]string{"push", "--porcelain"}, flags...)
	args = append(args, dstURL, srcRefName+":refs/heads/"+dstBranch)
	r := p.run(ctx, dir, args...)
	if r.err == nil {
		return nil
	}
	if rejected(r.stdout) != "" {
		return &providers.Error{Op: op, Resource: dstURL, Code: providers.CodeConflict,
			Message: "push rejected: " + rejected(r.stdout), Err: r.err}
	}
	return p.fail(ctx, op, dstURL, r, true)
}

// rejected returns the reason of a refused ref in porcelain output
// ("!\t<src>:<dst>\t[rejected] (stale info)"), or "".
func rejected(porcelain string) string {
	for _, line := range strings.Split(porcelain, "\n") {
		if strings.HasPrefix(line, "!\t") {
			parts := strings.SplitN(line, "\t", 3)
			if len(parts) == 3 && (strings.Contains(parts[2], "stale info") || strings.Contains(parts[2], "fetch first") || strings.Contains(parts[2], "non-fast-forward") || strings.Contains(parts[2], "already exists")) {
				return parts[2]
			}
		}
	}
	return ""
}

var httpStatus = regexp.MustCompile(`returned error: (\d{3})`)

// fail classifies a failed git run from ctx and git's own words.
func (p *Pusher) fail(ctx context.Context, op, remote string, r result, mutating bool) *providers.Error {
	msg := lastLines(r.stderr, 3)
	if p.opts.Token != "" {
		msg = strings.ReplaceAll(msg, p.opts.Token, "[redacted]")
	}
	e := &providers.Error{Op: op, Resource: remote, Code: providers.CodeGit, Message: msg, Err: r.err}
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		e.Code, e.Err, e.Uncertain = providers.CodeCanceled, errors.Join(ctx.Err(), r.err), mutating
		return e
	case !errors.As(r.err, &exitErr):
		return e // could not start git at all: nothing was sent
	}
	low := strings.ToLower(r.stderr)
	if m := httpStatus.FindStringSubmatch(r.stderr); m != nil {
		e.Status, _ = strconv.Atoi(m[1])
	}
	switch {
	case strings.Contains(low, "authentication failed") || e.Status == 401:
		e.Code, e.Status = providers.CodeUnauthorized, max(e.Status, 401)
	case e.Status == 403:
		e.Code = providers.CodeForbidden
	case strings.Contains(low, "not found") || e.Status == 404:
		e.Code, e.Status = providers.CodeNotFound, max(e.Status, 404)
	case e.Status >= 500:
		e.Code, e.Uncertain = providers.CodeServer, mutating
	case strings.Contains(low, "couldn't find remote ref"):
		e.Code = providers.CodeNotFound
	case strings.Contains(low, "unable to access") || strings.Contains(low, "connection") || strings.Contains(low, "empty reply") || strings.Contains(low, "rpc failed") || strings.Contains(low, "the remote end hung up"):
		e.Code, e.Uncertain = providers.CodeTransport, mutating
	default:
		e.Uncertain = mutating
	}
	return e
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// validate checks a remote URL and a branch before git sees them.
func validate(op, remote, branch string) *providers.Error {
	if err := validateURL(remote); err != nil {
		return providers.Invalid(op, "remote", err)
	}
	if err := providers.ValidateBranch(branch); err != nil {
		return providers.Invalid(op, remote, err)
	}
	return nil
}

// validateSrc allows a branch name or a full refs/heads/… or refs/tags/… ref.
func validateSrc(op, remote, ref string) *providers.Error {
	if err := validateURL(remote); err != nil {
		return providers.Invalid(op, "remote", err)
	}
	name := ref
	for _, pfx := range []string{"refs/heads/", "refs/tags/"} {
		if n, ok := strings.CutPrefix(ref, pfx); ok {
			name = n
		}
	}
	if strings.HasPrefix(name, "refs/") {
		return providers.Invalid(op, remote, fmt.Errorf("ref %q: want a branch, refs/heads/… or refs/tags/…", ref))
	}
	if err := providers.ValidateBranch(name); err != nil {
		return providers.Invalid(op, remote, err)
	}
	return nil
}

// validateURL accepts http(s) URLs with a host, no credentials, no query or
// fragment, and only printable ASCII.
func validateURL(raw string) error {
	for i := 0; i < len(raw); i++ {
		if raw[i] <= 0x20 || raw[i] >= 0x7f {
			return errors.New("remote URL: only printable ASCII without spaces")
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("remote URL: unparsable")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("remote URL: want http or https")
	case u.User != nil:
		return errors.New("remote URL: must not carry credentials")
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return errors.New("remote URL: want scheme://host/path only")
	case strings.Contains(u.Path, "/../") || strings.HasSuffix(u.Path, "/.."):
		return errors.New("remote URL: no \"..\" segments")
	}
	return nil
}
