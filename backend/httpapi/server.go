// Package httpapi is Slotkeeper's HTTP face: the REST API, the live SSE
// stream, health and metrics endpoints, the simulator controls and the
// embedded dashboard. It sees only interfaces (slots.Commands,
// projections.ReadModel, a head and a waiter); backend/cmd wires the
// concrete pieces. The wire contract is docs/api.md.
package httpapi

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Header is the part of events.Store the API needs: where the log ends.
type Header interface {
	Head(ctx context.Context) (events.Position, error)
}

// Waiter blocks until the read model has applied everything up to pos
// (the projections runner implements it).
type Waiter interface {
	WaitFor(ctx context.Context, pos events.Position) error
}

// Deps are the pieces the API serves. Commands, Reads, Log and Hub are
// required; the rest are optional.
type Deps struct {
	Commands slots.Commands
	Reads    projections.ReadModel
	// Log and Waiter give read-your-writes: after a command the answer waits
	// until the read model reached the log's head. Without them it does not
	// wait.
	Log    Header
	Waiter Waiter
	// History is the log GET /api/slots/{name}?at= and /changes fold
	// from (issue 28); it defaults to Log when Log can read streams.
	History projections.StreamReader
	Hub     *Hub
	// Metrics defaults to the hub's.
	Metrics *Metrics
	Logger  *slog.Logger
	// Sim is mounted under /api/sim/ when the simulators run.
	Sim http.Handler
	// SPA is the built dashboard (frontend/dist); nil serves a notice.
	SPA fs.FS
	// Ready reports whether the read model has caught up (GET /readyz).
	Ready func(ctx context.Context) error
	// Writable, if set, says whether the event store takes writes now:
	// nil, or an error wrapping events.ErrStoreChanged or
	// events.ErrUnavailable. A state change is then refused at once with
	// its 503, instead of each request waiting out the store client's
	// retries.
	Writable func() error
	// StoreChanged, if set, is non-nil (wrapping events.ErrStoreChanged)
	// once the event store is not the one the process started on: every
	// authenticated route is then refused with store_changed, reads too,
	// since what the process holds (views, accounts, tokens) is the old
	// log's.
	StoreChanged func() error
	// WaitTimeout bounds the read-your-writes wait (default 5 s).
	WaitTimeout time.Duration
	// RequestTimeout bounds every non-stream request (default 30 s).
	RequestTimeout time.Duration
	// Consumers reports what the process's consumers could not do (parked
	// events, stopped consumers): GET /api/admin/consumers, and the count
	// of parked events on /readyz. nil: nothing to report.
	Consumers func() consumer.Report
	// BodyReadTimeout bounds reading a request body (default 10 s; → 408).
	BodyReadTimeout time.Duration
	// WriteTimeout is the Listener's bound on writing a response (default
	// DefaultWriteTimeout). The backup download has no whole-response
	// bound (its size is the store's): each of its writes must finish
	// within WriteTimeout instead.
	WriteTimeout time.Duration
	// Reconcile serves /api/reconcile (nil: 404).
	Reconcile Reconciler
	// ReconcileActions serves the actions on findings (nil: 404).
	ReconcileActions ReconcileActions
	// Backup serves GET /api/admin/backup (nil: 404; embedded store only).
	Backup BackupFunc
	// Waitlist serves /api/waitlist (nil: 404).
	Waitlist Waitlist
	// Insights serves /api/insights (nil: 404).
	Insights Insights
	// PullRequests serves /api/pr-repos and /api/hooks/bitbucket (nil:
	// 404).
	PullRequests *pullrequests.Service

	// Auth signs people in and resolves tokens; required unless NoAuth.
	Auth *auth.Service
	// NoAuth switches authentication off: every request is an anonymous
	// admin. Only for benchmarks that measure what authentication costs.
	NoAuth bool
	// OIDC, if set, adds sign-in through an OpenID Connect provider.
	OIDC OIDC
	// AutoLogin, if set, signs loopback browsers in (the loopback demo).
	AutoLogin AutoLogin
	// Security is the Host/Origin/cookie/proxy configuration.
	Security Security
	// Links are the providers' web roots the dashboard links resources to.
	Links ProviderLinks
	// Limits are the job engine's timeouts the dashboard counts down to.
	Limits JobLimits
	// CommandsPerSecond and CommandBurst limit state changes per subject
	// (defaults 10 and 30; negative: no limit).
	CommandsPerSecond float64
	CommandBurst      int
	// MaxStreamsPerSubject caps live streams per user or token (default
	// 16; negative: no cap).
	MaxStreamsPerSubject int
	// MaxReplaysPerSubject and MaxReplays cap the as-of and changes
	// answers (each replays a slot's or a job's history) running at once
	// per user or token (default 2; one more → 429) and in all (default 8;
	// one more → 503), both with Retry-After. Negative: no cap.
	MaxReplaysPerSubject, MaxReplays int
	// HookBodyBudget bounds the bytes of the Bitbucket hook's bodies being
	// read at once (default DefaultHookBodyBudget, 16 MiB; beyond → 503):
	// the hook is public, so its bodies are bounded in all, not only each.
	HookBodyBudget int64
}

// Server is the echo application.
type Server struct {
	d      Deps
	e      *echo.Echo
	log    *slog.Logger
	met    *Metrics
	g      guard
	policy map[string]auth.Permission // "METHOD path" → permission
	// queries: "METHOD path" → the query parameters its operation in
	// openapi.json declares (query.go).
	queries map[string]queryRule

	cmdLimit *auth.Limiter
	streams  *inflight // live streams
	replays  *inflight // as-of and changes answers
	// hookBodies is the budget of the hook's bodies being read.
	hookBodies *byteBudget

	histOnce sync.Once
	hist     *projections.History // the as-of answers' checkpoints (asof.go)
}

// New builds the server and its routes.
func New(d Deps) (*Server, error) {
	if d.Commands == nil || d.Reads == nil || d.Hub == nil {
		return nil, errors.New("httpapi: Commands, Reads and Hub are required")
	}
	if d.Auth == nil && !d.NoAuth {
		return nil, errors.New("httpapi: Auth is required (NoAuth only for benchmarks)")
	}
	if d.CommandsPerSecond == 0 {
		d.CommandsPerSecond = 10
	}
	if d.CommandBurst == 0 {
		d.CommandBurst = 30
	}
	if d.MaxStreamsPerSubject == 0 {
		d.MaxStreamsPerSubject = 16
	}
	if d.MaxReplaysPerSubject == 0 {
		d.MaxReplaysPerSubject = 2
	}
	if d.MaxReplays == 0 {
		d.MaxReplays = 8
	}
	if d.HookBodyBudget <= 0 {
		d.HookBodyBudget = DefaultHookBodyBudget
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if h, ok := d.Log.(projections.StreamReader); ok && d.History == nil {
		d.History = h
	}
	if d.PullRequests != nil {
		// Each delivery recorded is a notice on the live stream: the admin
		// page's list of deliveries loads again (docs/pull-requests.md).
		hub := d.Hub
		d.PullRequests.OnDelivery(func(n uint64) {
			hub.Notice(NoticeDeliveries, append(strconv.AppendUint([]byte(`{"received":`), n, 10), '}'))
		})
	}
	if d.Metrics == nil {
		d.Metrics = d.Hub.met
	}
	if d.WaitTimeout <= 0 {
		d.WaitTimeout = 5 * time.Second
	}
	if d.RequestTimeout <= 0 {
		d.RequestTimeout = 30 * time.Second
	}
	if d.BodyReadTimeout <= 0 {
		d.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if d.WriteTimeout <= 0 {
		d.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{d: d, e: echo.New(), log: d.Logger, met: d.Metrics, g: newGuard(d.Security),
		streams: newInflight(d.MaxStreamsPerSubject, 0), replays: newInflight(d.MaxReplaysPerSubject, d.MaxReplays),
		hookBodies: &byteBudget{max: d.HookBodyBudget}}
	if d.CommandsPerSecond > 0 {
		s.cmdLimit = auth.NewLimiter(time.Duration(float64(time.Second)/d.CommandsPerSecond), d.CommandBurst, nil)
	}
	e := s.e
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	if len(d.Security.TrustedProxies) > 0 {
		opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
		for _, n := range d.Security.TrustedProxies {
			opts = append(opts, echo.TrustIPRange(n))
		}
		e.IPExtractor = echo.ExtractIPFromXFFHeader(opts...)
	} else {
		e.IPExtractor = echo.ExtractIPDirect()
	}
	// One chain, in this order: the body deadline (first, so that no
	// refusal below leaves a body unbounded); recover; log and count;
	// request id and timeout; browser hardening (headers, Host, Origin,
	// Content-Type); who is asking; may they (policy table, CSRF, rate);
	// does the query hold only what the route declares (query.go).
	e.Use(s.bodyDeadline)
	e.Use(middleware.Recover())
	e.Use(s.observe)
	e.Use(s.requestContext)
	e.Use(s.guard)
	e.Use(s.authenticate)
	e.Use(s.authorize)
	e.Use(s.checkQuery)
	// gzip for the dashboard's files only: never on the API (the stream
	// must not be buffered, and JSON answers are small).
	e.Use(middleware.GzipWithConfig(middleware.GzipConfig{Skipper: func(c echo.Context) bool {
		p := c.Request().URL.Path
		return strings.HasPrefix(p, "/api/") || p == "/metrics" || p == "/healthz" || p == "/readyz"
	}}))
	rules, err := contractQueries()
	if err != nil {
		return nil, err
	}
	s.queries = rules
	s.registerRoutes()
	for key := range s.policy {
		if _, ok := rules[key]; !ok {
			return nil, errors.New("httpapi: route " + key + " has no operation in openapi.json")
		}
	}
	return s, nil
}

func (s *Server) metrics(c echo.Context) error {
	promhttp.HandlerFor(s.d.Metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}

// ServeHTTP makes the server an http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.e.ServeHTTP(w, r) }

// Echo exposes the echo instance (for tests and for adding routes).
func (s *Server) Echo() *echo.Echo { return s.e }

const streamRoute = "/api/stream"

// requestContext assigns the correlation id (always generated here; a
// caller's X-Request-Id is kept only as its client request id, so nobody
// can splice a request into another's audit trail) and bounds every request
// but the stream with a timeout. (echo's Timeout middleware is deliberately
// not used: it buffers responses and would break the stream.)
func (s *Server) requestContext(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := newRequestID()
		c.Set(ctxRequestID, id)
		c.Response().Header().Set(HeaderRequestID, id)
		if cid := req.Header.Get(HeaderRequestID); validRequestID(cid) {
			c.Set(ctxClientRequestID, cid)
		}
		// The hook takes Bitbucket's payloads up to their own limit, as
		// it does when they come chunked (its bodies share a budget).
		limit := int64(MaxBodyBytes)
		if c.Path() == hookRoute {
			limit = pullrequests.MaxBody
		}
		if req.ContentLength > limit {
			return &Error{Code: CodeTooLarge, Message: "body larger than " + strconv.FormatInt(limit, 10) + " bytes", Details: map[string]any{"limit": limit}}
		}
		if c.Path() != streamRoute && c.Path() != backupRoute {
			ctx, cancel := context.WithTimeout(req.Context(), s.d.RequestTimeout)
			defer cancel()
			c.SetRequest(req.WithContext(ctx))
		}
		return next(c)
	}
}

// observe logs each request with its correlation id and counts it.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err) // render now so the status is known below
		}
		route := c.Path()
		if route == "" || route == "/*" {
			route = "other"
		}
		status := c.Response().Status
		method := c.Request().Method
		s.met.requests.WithLabelValues(method, route, http.StatusText(status)).Inc()
		if route != streamRoute {
			s.met.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
		}
		level := slog.LevelDebug
		if method != http.MethodGet && method != http.MethodHead {
			level = slog.LevelInfo
		}
		if status >= 500 {
			level = slog.LevelWarn
		}
		s.log.Log(c.Request().Context(), level, "http request",
			slog.String("correlation_id", requestID(c)),
			slog.String("method", method), slog.String("path", c.Request().URL.Path),
			slog.Int("status", status), slog.Duration("took", time.Since(start)),
			slog.String("actor", actorOf(c).Name), slog.String("actor_id", actorOf(c).ID))
		return nil
	}
}

func (s *Server) readyz(c echo.Context) error {
	// The dependencies' reason first: the hub also closes when the event
	// store changed under the process, and that is what to report.
	if s.d.Ready != nil {
		if err := s.d.Ready(c.Request().Context()); err != nil {
			return &Error{Code: CodeUnavailable, Message: "not ready: " + err.Error()}
		}
	}
	if s.d.Hub.Closed() {
		return errf(CodeUnavailable, "shutting down")
	}
	ans := map[string]any{"status": "ready", "position": s.d.Hub.Head()}
	if s.d.Consumers != nil {
		// Only the count: /readyz is public, the details are an admin's.
		ans["parked_events"] = s.d.Consumers().ParkedTotal
	}
	return c.JSON(http.StatusOK, ans)
}

// consumers answers GET /api/admin/consumers: the events this process's
// consumers parked and the consumers that stopped (backend/consumer).
func (s *Server) consumers(c echo.Context) error {
	var r consumer.Report
	if s.d.Consumers != nil {
		r = s.d.Consumers()
	} else {
		r = (*consumer.Health)(nil).Report()
	}
	return c.JSON(http.StatusOK, r)
}

// spa serves the embedded dashboard; unknown paths get index.html so that
// client-side routes survive a reload.
func (s *Server) spa(c echo.Context) error {
	p := strings.TrimPrefix(c.Request().URL.Path, "/")
	if strings.HasPrefix(p, "api/") {
		return errf(CodeNotFound, "no such route")
	}
	if strings.Contains(c.Request().URL.Path, "..") {
		return errf(CodeInvalid, "path must not contain '..'")
	}
	if s.d.SPA == nil {
		return c.HTML(http.StatusOK, noDashboard)
	}
	if p != "" && fs.ValidPath(p) {
		if st, err := fs.Stat(s.d.SPA, p); err == nil && !st.IsDir() {
			if strings.HasPrefix(p, "assets/") {
				c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=31536000, immutable")
			}
			http.ServeFileFS(c.Response(), c.Request(), s.d.SPA, p)
			return nil
		}
	}
	// A missing asset is a 404, not the dashboard: a browser would run
	// index.html as a script or stylesheet, and a stale page should fail
	// visibly.
	if strings.HasPrefix(p, "assets/") {
		return errf(CodeNotFound, "no such asset")
	}
	if _, err := fs.Stat(s.d.SPA, "index.html"); err != nil {
		return c.HTML(http.StatusOK, noDashboard)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-cache")
	http.ServeFileFS(c.Response(), c.Request(), s.d.SPA, "index.html")
	return nil
}

const noDashboard = `<!doctype html><title>Slotkeeper</title><p>The dashboard is not built into this binary (run <code>make build</code>). The API is at <a href="/api/slots">/api/slots</a>, the live stream at <a href="/api/stream">/api/stream</a>.</p>`
