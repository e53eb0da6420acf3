// Package sim runs simulated Coolify and Bitbucket Data Center servers on
// loopback HTTP ports. They speak the same paths, status codes and error
// bodies as the real services (DESIGN.md "Providers — facts"), keep state,
// delete asynchronously after a configurable delay, and serve git smart HTTP
// from local bare repositories through the real `git http-backend`.
//
// Every request passes through a recorder (arrival, completion or abortion,
// status, and the job tag, request id and user agent the caller sent) and a
// fault injector (status, latency, hang, connection reset, a foreign HTML
// 404, fail the next N calls), both driven from Go (AddFault, WaitFor …) or
// over HTTP (ControlHandler). The real provider clients are tested against it,
// and the demo server runs on it.
package sim

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// Endpoint names, usable in Fault.Endpoint and seen in Request.Endpoint.
const (
	EndpointGetDatabase       = "coolify.GetDatabase"
	EndpointDeleteDatabase    = "coolify.DeleteDatabase"
	EndpointGetApplication    = "coolify.GetApplication"
	EndpointDeleteApplication = "coolify.DeleteApplication"
	EndpointListEnvs          = "coolify.ListEnvs"
	EndpointDeleteEnv         = "coolify.DeleteEnv"
	EndpointListStorages      = "coolify.ListStorages"
	EndpointDeleteStorage     = "coolify.DeleteStorage"
	EndpointGetProject        = "coolify.GetProject"
	EndpointDeleteProject     = "coolify.DeleteProject"
	EndpointListProjects      = "coolify.ListProjects"
	EndpointListDatabases     = "coolify.ListDatabases"
	EndpointListApplications  = "coolify.ListApplications"
	EndpointVersion           = "coolify.Version"
	EndpointTeam              = "coolify.Team"
	// EndpointAbilityProbe is GET /enable or /deploy (405 with the ability).
	EndpointAbilityProbe = "coolify.AbilityProbe"

	EndpointGetRepo    = "bitbucket.GetRepo"
	EndpointCreateRepo = "bitbucket.CreateRepo"
	EndpointDeleteRepo = "bitbucket.DeleteRepo"
	EndpointListRepos  = "bitbucket.ListRepos"
	// EndpointDefaultBranch is GET …/repos/{slug}/default-branch.
	EndpointDefaultBranch = "bitbucket.DefaultBranch"

	// Git smart HTTP, served by the Bitbucket server under /scm/.
	EndpointGitInfoRefs    = "git.InfoRefs"    // GET …/info/refs?service=…
	EndpointGitUploadPack  = "git.UploadPack"  // POST …/git-upload-pack (fetch)
	EndpointGitReceivePack = "git.ReceivePack" // POST …/git-receive-pack (push)
)

// Options configure Start. The zero value is usable.
type Options struct {
	// DeleteDelay is how long a queued Coolify delete or a scheduled
	// Bitbucket delete takes before the resource is gone (GET → 404).
	// Zero means immediately after the delete answers.
	DeleteDelay time.Duration
	// GitRoot is the directory holding the bare repositories
	// (GitRoot/PROJECT/slug.git). Empty: a temporary directory removed by
	// Close.
	GitRoot string
	// StateDir, if set, makes the simulated state survive a restart: Start
	// loads StateDir/state.json (a JSON snapshot of the Coolify and
	// Bitbucket resources; not faults, not recorded requests, not tokens)
	// and every change rewrites it atomically. The bare repositories live
	// in StateDir/git unless GitRoot says otherwise. One Sim at a time per
	// directory. A snapshot Start cannot read is an error (ErrBadState).
	StateDir string
	// MaxRecorded bounds the request recorder (oldest dropped first).
	// Default 100,000.
	MaxRecorded int
	// CoolifyToken and BitbucketToken override the generated tokens.
	CoolifyToken   string
	BitbucketToken string
	// Addr, if set, serves everything on this one address (the simulators
	// as their own process, `slotkeeper sim`): Coolify under /api/v1,
	// the control API (ControlHandler) under /sim/, Bitbucket REST and git
	// on the rest. Empty: two random loopback ports, no control API.
	Addr string
	// PublicURL, with Addr, is the base URL clients use (e.g.
	// http://sim:9090 inside a compose network); default http://<Addr>.
	PublicURL string
	// Clock is the simulated services' time: deployments queue, build and
	// finish, new databases start, and the Coolify throttle's window
	// passes as it moves (tests pass a clock.Fake and drive it). Nil: the
	// wall clock.
	Clock clock.Clock
	// BuildDuration is how long a deployment builds once it left the
	// server's queue, unless SetDeployDelay or SetBuildDuration says
	// otherwise. Zero: it finishes at the next look.
	BuildDuration time.Duration
}

// Sim is a running pair of simulated servers. Its methods are safe for
// concurrent use.
type Sim struct {
	ready    *readyState // the ready-slot reset's state (coolify_ready.go), under mu
	opts     Options
	stateDir string // "" = state kept in memory only
	gitRoot  string
	ownsRoot bool
	gitHome  string
	gitPath  string

	rec    *recorder
	faults faults

	mu    sync.Mutex // guards the state below
	cool  coolState
	bb    bbState
	tmpl  *RepoFixture // seeded template repo, created once
	pulls prState      // pull requests, comments, build statuses (pullrequests.go), own lock
	gitMu sync.Mutex   // serialises plumbing writes to bare repos

	coolSrv, bbSrv *http.Server
	coolURL, bbURL string
	closing        chan struct{}
	closeOnce      sync.Once
	timers         sync.WaitGroup
}

// Start starts both servers on 127.0.0.1 random ports. ctx bounds only the
// start-up; call Close to stop.
func Start(ctx context.Context, opts Options) (*Sim, error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return nil, fmt.Errorf("sim: git not found: %w", err)
	}
	// Paths are made absolute once here: git http-backend and the pusher run
	// in other working directories, so a relative root (the default --data
	// is ./data) would name a directory that does not exist for them.
	for _, p := range []*string{&opts.StateDir, &opts.GitRoot} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		*p = abs
	}
	s := &Sim{
		opts:    opts,
		gitPath: gitPath,
		rec:     newRecorder(cmp.Or(max(opts.MaxRecorded, 0), 100_000)),
		closing: make(chan struct{}),
	}
	s.cool.init()
	s.bb.init()
	if s.opts.CoolifyToken == "" {
		s.opts.CoolifyToken = "coolify-sim-" + newUUID()
	}
	if s.opts.BitbucketToken == "" {
		s.opts.BitbucketToken = "bbsim" + newUUID() + newUUID()
	}
	s.cool.tokens[s.opts.CoolifyToken] = coolToken{Team: RootTeam, Abilities: []string{"root"}}
	if opts.StateDir != "" {
		if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
			return nil, fmt.Errorf("sim: state directory: %w", err)
		}
		s.stateDir = opts.StateDir
		if opts.GitRoot == "" {
			opts.GitRoot = filepath.Join(opts.StateDir, gitSubdir)
		}
	}
	if opts.GitRoot == "" {
		d, err := os.MkdirTemp("", "slotkeeper-sim-git-")
		if err != nil {
			return nil, err
		}
		s.gitRoot, s.ownsRoot = d, true
	} else {
		if err := os.MkdirAll(opts.GitRoot, 0o755); err != nil {
			return nil, err
		}
		s.gitRoot = opts.GitRoot
	}
	if s.gitHome, err = os.MkdirTemp("", "slotkeeper-sim-home-"); err != nil {
		s.removeDirs()
		return nil, err
	}
	if s.stateDir != "" {
		if err := s.loadState(); err != nil {
			s.removeDirs()
			return nil, err
		}
	}

	var lc net.ListenConfig
	if opts.Addr != "" {
		ln, err := lc.Listen(ctx, "tcp", opts.Addr)
		if err != nil {
			s.removeDirs()
			return nil, err
		}
		base := strings.TrimRight(opts.PublicURL, "/")
		if base == "" {
			base = "http://" + ln.Addr().String()
		}
		s.coolURL, s.bbURL = base+"/api/v1", base
		mux := http.NewServeMux()
		mux.Handle("/api/", s.record("coolify", s.coolifyMux())) // the catch-all answers the rest of /api
		mux.Handle("/sim/", http.StripPrefix("/sim", s.ControlHandler()))
		mux.Handle("/", s.record("bitbucket", s.bitbucketMux()))
		s.coolSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		s.bbSrv = s.coolSrv
		go s.coolSrv.Serve(ln)
		return s, nil
	}
	cl, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		s.removeDirs()
		return nil, err
	}
	bl, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		cl.Close()
		s.removeDirs()
		return nil, err
	}
	s.coolURL = "http://" + cl.Addr().String() + "/api/v1"
	s.bbURL = "http://" + bl.Addr().String()
	s.coolSrv = &http.Server{Handler: s.record("coolify", s.coolifyMux()), ReadHeaderTimeout: 10 * time.Second}
	s.bbSrv = &http.Server{Handler: s.record("bitbucket", s.bitbucketMux()), ReadHeaderTimeout: 10 * time.Second}
	go s.coolSrv.Serve(cl)
	go s.bbSrv.Serve(bl)
	return s, nil
}

// Close stops both servers (releasing hung requests) and, when the git root
// was temporary, removes it.
func (s *Sim) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.coolSrv.Shutdown(ctx)
		s.bbSrv.Shutdown(ctx)
		s.coolSrv.Close()
		s.bbSrv.Close()
		s.timers.Wait()
		s.removeDirs()
	})
	return nil
}

func (s *Sim) removeDirs() {
	if s.ownsRoot {
		os.RemoveAll(s.gitRoot)
	}
	if s.gitHome != "" {
		os.RemoveAll(s.gitHome)
	}
}

// CoolifyURL is the Coolify API base URL, including "/api/v1".
func (s *Sim) CoolifyURL() string { return s.coolURL }

// BitbucketURL is the Bitbucket base URL (REST under /rest/api/1.0 and
// /rest/api/latest, git under /scm/).
func (s *Sim) BitbucketURL() string { return s.bbURL }

// CoolifyToken is the bearer token the Coolify server accepts.
func (s *Sim) CoolifyToken() string { return s.opts.CoolifyToken }

// BitbucketToken is the default HTTP access token: a personal token of
// BitbucketUser with admin on every project, accepted on REST and git as
// "Authorization: Bearer" or as the Basic password with BitbucketUser
// (AddBitbucketToken adds project and repository tokens).
func (s *Sim) BitbucketToken() string { return s.opts.BitbucketToken }

// GitRoot is the directory holding the bare repositories.
func (s *Sim) GitRoot() string { return s.gitRoot }

// CloneURL is the HTTP clone URL of a repository (no credentials).
func (s *Sim) CloneURL(project, slug string) string {
	return s.bbURL + "/scm/" + strings.ToLower(project) + "/" + slug + ".git"
}

// after runs f after d unless the simulator closes first. Async deletes use it.
func (s *Sim) after(d time.Duration, f func()) {
	s.timers.Add(1)
	go func() {
		defer s.timers.Done()
		if d > 0 {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-s.closing:
				return
			}
		}
		f()
		s.stateChanged()
	}()
}

// --- request plumbing: recorder and fault injection ---

type recKey struct{}

// maxBufferedBody bounds what a delayed or hung request may send.
const maxBufferedBody = 64 << 20

// statusWriter remembers the status written; it passes Flush and Hijack on.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush lets git http-backend's streamed answers through.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// record wraps a server's whole handler: every request gets a record, and
// the record learns whether the client went away before the handler ended.
func (s *Sim) record(server string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rq := &Request{Server: server, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Arrived: time.Now(),
			Job: r.Header.Get(providers.HeaderJob), RequestID: r.Header.Get(providers.HeaderRequestID), UserAgent: r.UserAgent()}
		s.rec.start(rq)
		// The request context is cancelled when the client goes away, and
		// also after ServeHTTP returns; stop() tells the two apart.
		stop := context.AfterFunc(r.Context(), func() {
			now := time.Now()
			s.rec.update(func() {
				if rq.Completed.IsZero() && rq.Aborted.IsZero() {
					rq.Aborted = now
				}
			})
		})
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), recKey{}, rq)))
		// Before ServeHTTP returns, only a vanished client cancels the
		// request context. Check Err too: Done closes before AfterFuncs are
		// notified, so stop() alone can win that race.
		clientGone := !stop() || r.Context().Err() != nil
		now := time.Now()
		s.rec.update(func() {
			rq.Status = sw.status
			switch {
			case !rq.Aborted.IsZero():
			case clientGone:
				rq.Aborted = now
			default:
				rq.Completed = now
			}
		})
	})
}

// markAborted records that the client went away (e.g. a body read failed).
func (s *Sim) markAborted(r *http.Request) {
	rq, _ := r.Context().Value(recKey{}).(*Request)
	if rq == nil {
		return
	}
	now := time.Now()
	s.rec.update(func() {
		if rq.Aborted.IsZero() && rq.Completed.IsZero() {
			rq.Aborted = now
		}
	})
}

// route wraps one route's handler: it names the endpoint and resource in the
// record, applies faults, and checks authentication.
func (s *Sim) route(server, endpoint string, resource func(*http.Request) string, auth func(http.ResponseWriter, *http.Request) bool, errBody func(status int) string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := ""
		if resource != nil {
			res = resource(r)
		}
		rq, _ := r.Context().Value(recKey{}).(*Request)
		job, _, _ := strings.Cut(r.Header.Get(providers.HeaderJob), "/")
		f, hit := s.faults.take(server, r.Method, r.URL.Path, endpoint, res, job)
		if rq != nil {
			s.rec.update(func() {
				rq.Endpoint, rq.Resource = endpoint, res
				if hit {
					rq.Fault = f.ID
				}
			})
		}
		if hit && f.AfterHandler {
			// The request takes effect, then its answer is lost: the
			// handler writes to nowhere and the fault answers instead.
			if auth == nil || auth(discardWriter{}, r) {
				h(discardWriter{}, r)
			}
			s.applyFault(w, r, f, errBody)
			return
		}
		if hit && s.applyFault(w, r, f, errBody) {
			return
		}
		if auth != nil && !auth(w, r) {
			return
		}
		h(w, r)
	})
}

// applyFault carries out f; it reports whether the request was answered.
func (s *Sim) applyFault(w http.ResponseWriter, r *http.Request, f Fault, errBody func(int) string) bool {
	if (f.Latency > 0 || f.Hang) && r.Body != nil && r.Body != http.NoBody {
		// net/http notices a vanished client only once the body has been
		// read: buffer it first, so a cancel during a hang or a delay is
		// seen at once (the handler then reads the copy).
		buf, err := io.ReadAll(io.LimitReader(r.Body, maxBufferedBody))
		if err != nil {
			s.markAborted(r)
			return true
		}
		r.Body = io.NopCloser(bytes.NewReader(buf))
	}
	if f.Latency > 0 {
		t := time.NewTimer(f.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return true
		case <-s.closing:
			t.Stop()
			return true
		}
	}
	switch {
	case f.Hang:
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return true
	case f.Reset:
		hj, ok := w.(interface{ Unwrap() http.ResponseWriter })
		var conn net.Conn
		if ok {
			if h, ok := hj.Unwrap().(http.Hijacker); ok {
				conn, _, _ = h.Hijack()
			}
		}
		if conn == nil {
			panic(http.ErrAbortHandler)
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // RST rather than FIN: a real reset
		}
		conn.Close()
		return true
	case f.Foreign404:
		foreign404(w)
		return true
	case f.Status != 0:
		for k, v := range f.Header {
			w.Header().Set(k, v)
		}
		body := f.Body
		if body == "" {
			body = errBody(f.Status)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.Status)
		io.WriteString(w, body)
		return true
	}
	return false
}

// foreignNotFound is the page a misrouting ingress answers (nginx's default
// 404): HTML, nothing a provider client may read as "does not exist".
const foreignNotFound = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// foreign404 answers a 404 that is not the simulated service's own.
func foreign404(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, foreignNotFound)
}

// bearer extracts the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	return strings.TrimSpace(tok), ok
}

func (s *Sim) repoDir(project, slug string) string {
	return filepath.Join(s.gitRoot, strings.ToUpper(project), slug+".git")
}

// discardWriter is where a handler writes whose answer a fault replaces.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
