package httpapi

import (
	"crypto/subtle"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/auth"
)

// route is one line of the route table: the method and echo path, the
// permission a caller needs, and the handler. Routes are registered only
// from this table, so a route cannot exist without a policy; TestPolicy
// walks echo's registered routes × every role to prove it.
type route struct {
	Method, Path string
	Perm         auth.Permission
	h            echo.HandlerFunc
}

// routes is the route table with its policy (DESIGN.md invariant 12).
// Ownership rules finer than a route (a member extends and releases only
// their own slot; occupying for someone else) are checked in the handlers
// with the permissions PermOccupyForOthers, PermExtendAny, PermReleaseAny.
func (s *Server) routes() []route {
	rs := []route{
		{"POST", "/api/auth/login", auth.PermPublic, s.login},
		{"POST", "/api/auth/logout", auth.PermPublic, s.logout},
		{"GET", "/api/auth/me", auth.PermPublic, s.me},
		{"POST", "/api/auth/demo", auth.PermPublic, s.demoLogin},
		{"POST", "/api/auth/password", auth.PermRead, s.changePassword},

		{"GET", "/api/slots", auth.PermRead, s.listSlots},
		{"POST", "/api/slots", auth.PermRegister, s.register},
		{"GET", "/api/slots/:name", auth.PermRead, s.getSlot},
		{"POST", "/api/slots/:name/occupy", auth.PermOccupy, s.occupy},
		{"GET", "/api/occupants", auth.PermOccupyForOthers, s.occupants},
		{"POST", "/api/slots/:name/extend", auth.PermExtend, s.extend},
		{"POST", "/api/slots/:name/deadline", auth.PermExtend, s.setDeadline},
		{"POST", "/api/slots/:name/release", auth.PermRelease, s.release},
		{"POST", "/api/slots/:name/teardown", auth.PermTeardown, s.teardown},
		{"POST", "/api/slots/:name/promote", auth.PermPromote, s.promote},
		{"GET", "/api/slots/:name/plan", auth.PermRead, s.plan},
		{"GET", "/api/slots/:name/changes", auth.PermRead, s.slotChanges},
		{"GET", "/api/slots/:name/jobs", auth.PermRead, s.slotJobs},
		{"GET", "/api/slots/:name/jobs/latest", auth.PermRead, s.latestJob},
		{"GET", "/api/jobs", auth.PermRead, s.listJobs},
		{"GET", "/api/jobs/:id", auth.PermRead, s.getJob},
		{"GET", "/api/jobs/:id/events", auth.PermRead, s.jobEvents},
		{"POST", "/api/jobs/:id/cancel", auth.PermJobControl, s.cancel},
		{"POST", "/api/jobs/:id/resume", auth.PermJobControl, s.resume},
		{"GET", "/api/audit", auth.PermRead, s.audit},
		{"GET", "/api/resources/remaining", auth.PermRead, s.remaining},
		{"GET", "/api/freshness", auth.PermRead, s.freshness},
		{"GET", streamRoute, auth.PermRead, s.stream},
		{"GET", "/api/reconcile", auth.PermRead, s.getReconcile},
		{"POST", "/api/reconcile/run", auth.PermReconcile, s.runReconcile},
		{"GET", "/api/reconcile/adopt/plan", auth.PermRead, s.planAdopt},
		{"POST", "/api/reconcile/adopt", auth.PermReconcileAct, s.adopt},
		{"GET", "/api/reconcile/delete/plan", auth.PermRead, s.planDeleteOrphan},
		{"POST", "/api/reconcile/delete", auth.PermReconcileAct, s.deleteOrphan},

		{"GET", "/api/waitlist", auth.PermRead, s.getWaitlist},
		{"POST", "/api/waitlist", auth.PermWaitlist, s.joinWaitlist},
		{"DELETE", "/api/waitlist/:id", auth.PermWaitlist, s.leaveWaitlist}, // others' entries: PermWaitlistManage
		{"POST", "/api/waitlist/:id/accept", auth.PermWaitlist, s.acceptOffer},
		{"POST", "/api/waitlist/:id/decline", auth.PermWaitlist, s.declineOffer},
		{"POST", "/api/waitlist/:id/reorder", auth.PermWaitlistManage, s.reorderWaitlist},
		{"GET", "/api/insights", auth.PermRead, s.getInsights},
		// The pull-request flow (issue 34): the linked repositories, and
		// Bitbucket's deliveries, authenticated by their signature alone.
		{"GET", "/api/pr-repos", auth.PermRead, s.listPRRepos},
		{"POST", "/api/pr-repos", auth.PermRegister, s.linkPRRepo},
		{"DELETE", "/api/pr-repos/:project/:slug", auth.PermRegister, s.unlinkPRRepo},
		{"POST", hookRoute, auth.PermSigned, s.bitbucketHook},
		{"GET", "/api/hooks/bitbucket/deliveries", auth.PermRegister, s.bitbucketDeliveries},
		// Every pull request of the read model (waiting ones first).
		{"GET", "/api/pull-requests", auth.PermRead, s.listPullRequests},
		// The contract holds no secret, but like every other /api read it
		// is for callers with a subject: a CI script has its token anyway,
		// and anonymous callers learn nothing about the surface.
		{"GET", "/api/openapi.json", auth.PermRead, s.openapi},

		{"GET", "/api/admin/users", auth.PermUsers, s.listUsers},
		{"POST", "/api/admin/users", auth.PermUsers, s.createUser},
		{"PUT", "/api/admin/users/:id/role", auth.PermUsers, s.setRole},
		{"GET", "/api/admin/tokens", auth.PermTokens, s.listTokens},
		{"POST", "/api/admin/tokens", auth.PermTokens, s.issueToken},
		{"DELETE", "/api/admin/tokens/:id", auth.PermTokens, s.revokeToken},
		{"GET", backupRoute, auth.PermBackup, s.backup},
		// Operational state, like /metrics: an admin (or loopback).
		{"GET", "/api/admin/consumers", auth.PermMetrics, s.consumers},

		{"GET", "/healthz", auth.PermPublic, s.healthz},
		{"HEAD", "/healthz", auth.PermPublic, s.healthz},
		{"GET", "/readyz", auth.PermPublic, s.readyz},
		{"HEAD", "/readyz", auth.PermPublic, s.readyz},
		// /metrics: an admin, or any caller on loopback (see authorize).
		{"GET", "/metrics", auth.PermMetrics, s.metrics},
		{"HEAD", "/metrics", auth.PermMetrics, s.metrics},
		// The dashboard itself is public; everything it shows comes from
		// the API above.
		{"GET", "/*", auth.PermPublic, s.spa},
		{"HEAD", "/*", auth.PermPublic, s.spa},
	}
	if s.d.OIDC != nil {
		rs = append(rs,
			route{"GET", "/api/auth/oidc/login", auth.PermPublic, s.oidcLogin},
			route{"GET", "/api/auth/oidc/callback", auth.PermPublic, s.oidcCallback})
	}
	if s.d.Sim != nil {
		sim := echo.WrapHandler(s.d.Sim)
		rs = append(rs, route{"GET", "/api/sim/*", auth.PermRead, sim})
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			rs = append(rs, route{m, "/api/sim/*", auth.PermSimControl, sim})
		}
		// The simulated Bitbucket's deliveries, signed by the server (the
		// Simulator page's pull requests; docs/pull-requests.md).
		rs = append(rs, route{"POST", "/api/hooks/bitbucket/simulated", auth.PermSimControl, s.simulatedBitbucketHook})
	}
	return rs
}

// register adds the table's routes to e and keeps their policy.
func (s *Server) registerRoutes() {
	s.policy = map[string]auth.Permission{}
	for _, r := range s.routes() {
		s.e.Add(r.Method, r.Path, r.h)
		s.policy[r.Method+" "+r.Path] = r.Perm
	}
}

// Request-scoped auth values.
const (
	ctxSubject = "slotkeeper.subject"
	ctxSession = "slotkeeper.session" // the session id (cookie), when signed in by cookie
	ctxCSRF    = "slotkeeper.csrf"
)

// SessionCookie is the name of the session cookie.
const SessionCookie = "slotkeeper_session"

// HeaderCSRF carries the session's CSRF token on state changes.
const HeaderCSRF = "X-CSRF-Token"

// subjectOf returns the authenticated subject of the request.
func subjectOf(c echo.Context) (auth.Subject, bool) {
	s, ok := c.Get(ctxSubject).(auth.Subject)
	return s, ok
}

// anonymousAdmin is every request's subject when authentication is
// switched off (Deps.NoAuth, benchmarks only).
var anonymousAdmin = auth.Subject{ID: "none:anonymous", Name: DefaultActor, Role: auth.RoleAdmin}

// authenticate finds the subject of a request: a bearer token, else the
// session cookie. A bearer token that is unknown, expired or revoked is a
// 401 at once (a script should fail loudly); a stale cookie is just no
// session.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.d.NoAuth {
			c.Set(ctxSubject, anonymousAdmin)
			return next(c)
		}
		req := c.Request()
		if h := req.Header.Get(echo.HeaderAuthorization); h != "" {
			tok, ok := bearer(h)
			if !ok {
				return errf(CodeUnauthenticated, "Authorization must be \"Bearer <token>\"")
			}
			sub, ok := s.d.Auth.TokenSubject(tok)
			if !ok {
				return errf(CodeUnauthenticated, "the API token is unknown, expired or revoked")
			}
			c.Set(ctxSubject, sub)
			return next(c)
		}
		if ck, err := req.Cookie(SessionCookie); err == nil && ck.Value != "" {
			if sub, sess, ok := s.d.Auth.SessionSubject(req.Context(), ck.Value); ok {
				c.Set(ctxSubject, sub)
				c.Set(ctxSession, ck.Value)
				c.Set(ctxCSRF, sess.CSRF)
			}
		}
		return next(c)
	}
}

func bearer(h string) (string, bool) {
	const p = "Bearer "
	if len(h) <= len(p) || !equalFoldASCII(h[:len(p)], p) {
		return "", false
	}
	return h[len(p):], true
}

func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// isStateChange: every method but GET, HEAD and OPTIONS changes state.
func isStateChange(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

// authorize applies the route's policy: 401 without a subject, 403 naming
// the missing permission, the CSRF token for cookie sessions on state
// changes, and the per-subject command rate.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		path := c.Path()
		perm, ok := s.policy[c.Request().Method+" "+path]
		if !ok {
			if !s.isRoute(c.Request().Method, path) {
				return next(c) // echo's own 404 / 405: nothing runs
			}
			// Registered outside the table: refuse rather than guess.
			return &Error{Code: CodeForbidden, Message: "route has no policy entry", Details: map[string]any{"route": path}}
		}
		if perm == auth.PermPublic || perm == auth.PermSigned {
			return next(c) // PermSigned: the handler checks the signature
		}
		if perm == auth.PermMetrics && s.loopbackClient(c) {
			return next(c)
		}
		if s.d.StoreChanged != nil {
			// Not even a read: the read model and the accounts are the
			// old log's.
			if err := s.d.StoreChanged(); err != nil {
				return err
			}
		}
		sub, ok := subjectOf(c)
		if !ok {
			return errf(CodeUnauthenticated, "sign in or send an API token (Authorization: Bearer …)")
		}
		if !sub.Role.Has(perm) {
			return forbidden(sub, perm)
		}
		if isStateChange(c.Request().Method) {
			if err := s.checkCSRF(c); err != nil {
				return err
			}
			if s.cmdLimit != nil {
				if ok, wait := s.cmdLimit.Allow(sub.ID); !ok {
					return &Error{Code: CodeTooMany, Message: "too many commands; slow down", RetryAfter: auth.RetryAfter(wait)}
				}
			}
			if s.d.Writable != nil {
				if err := s.d.Writable(); err != nil {
					return err
				}
			}
		}
		return next(c)
	}
}

// forbidden is the 403 that names the missing permission and the lowest
// role holding it.
func forbidden(sub auth.Subject, perm auth.Permission) *Error {
	need := auth.MinRole(perm)
	return &Error{Code: CodeForbidden,
		Message: fmt.Sprintf("missing permission %s (needs role %s; you are %s)", perm, need, sub.Role),
		Details: map[string]any{"permission": string(perm), "role_needed": need.String(), "role": sub.Role.String()}}
}

// checkCSRF: a state change by a cookie session must carry the session's
// synchronizer token in X-CSRF-Token. Token and anonymous requests need
// none (a browser never sends a bearer token by itself).
func (s *Server) checkCSRF(c echo.Context) error {
	want, ok := c.Get(ctxCSRF).(string)
	if !ok {
		return nil
	}
	got := c.Request().Header.Get(HeaderCSRF)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return &Error{Code: CodeForbidden, Message: "missing or wrong " + HeaderCSRF + " header (GET /api/auth/me returns the token)",
			Details: map[string]any{"reason": "csrf"}}
	}
	return nil
}

// isRoute reports whether method and path are a registered route (routes
// added outside the table, e.g. through Echo(), included). Requests that
// match none are echo's 404 and 405 answers.
func (s *Server) isRoute(method, path string) bool {
	if path == "" {
		return false
	}
	for _, r := range s.e.Routes() {
		if r.Method == method && r.Path == path {
			return true
		}
	}
	return false
}
