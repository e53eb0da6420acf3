package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// OIDC is sign-in through an OpenID Connect provider (authorization code
// + PKCE). backend/auth implements it; the API only routes to it.
type OIDC interface {
	// Begin answers GET /api/auth/oidc/login: it keeps the state, nonce and
	// PKCE verifier (in a short-lived cookie) and returns the provider's
	// authorization URL to redirect to.
	Begin(w http.ResponseWriter, r *http.Request) (string, error)
	// Finish answers the provider's redirect to /api/auth/oidc/callback:
	// it checks state, exchanges the code with the verifier, verifies the
	// ID token and returns the account (created at first sign-in, its role
	// from the mapped claims).
	Finish(ctx context.Context, w http.ResponseWriter, r *http.Request) (auth.User, error)
}

// AutoLogin is the loopback demo's account: the one a loopback browser
// may sign in as without a password, by asking (POST /api/auth/demo, the
// sign-in page's "Continue as demo-admin"). It returns the account, or
// false.
type AutoLogin func(ctx context.Context) (auth.User, bool)

type subjectAnswer struct {
	SignedIn bool         `json:"signed_in"` // true; false is notSignedIn
	Subject  auth.Subject `json:"subject"`
	CSRF     string       `json:"csrf"`
	Methods  []string     `json:"methods,omitempty"`
	// PasswordChange: the subject is a local account with a password a
	// person knows, so the account page offers a change. Not for tokens,
	// single sign-on accounts or the demo's demo-admin (its password was
	// never shown to anyone).
	PasswordChange bool `json:"password_change,omitempty"`
	// Links are the providers' web addresses, so the dashboard can link a
	// resource id to its page; only a signed-in subject gets them.
	Links *ProviderLinks `json:"links,omitempty"`
	// Limits are the job engine's timeouts, so the job page can say when a
	// hanging step will time out (issue 35); only a signed-in subject gets them.
	Limits *JobLimits `json:"limits,omitempty"`
}

// JobLimits are the engine's --step-timeout and --job-timeout in
// milliseconds (zero: not known to this process).
type JobLimits struct {
	StepTimeoutMS int64 `json:"step_timeout_ms,omitempty"`
	JobTimeoutMS  int64 `json:"job_timeout_ms,omitempty"`
}

// limits is what a signed-in answer carries as Limits (nil when unset).
func (s *Server) limits() *JobLimits {
	if s.d.Limits == (JobLimits{}) {
		return nil
	}
	l := s.d.Limits
	return &l
}

// ProviderLinks are the providers' web roots (no API path, no credentials):
// Coolify's dashboard and Bitbucket's root. Empty: not linked.
type ProviderLinks struct {
	Coolify   string `json:"coolify,omitempty"`
	Bitbucket string `json:"bitbucket,omitempty"`
}

// links is what a signed-in answer carries as Links (nil when unset).
func (s *Server) links() *ProviderLinks {
	if s.d.Links == (ProviderLinks{}) {
		return nil
	}
	l := s.d.Links
	return &l
}

// methods are the sign-in methods the request may use: "demo" only for a
// loopback client with a loopback Host in the loopback demo.
func (s *Server) methods(c echo.Context) []string {
	m := []string{"local"}
	if s.d.OIDC != nil {
		m = append(m, "oidc")
	}
	if s.demoOffered(c) {
		m = append(m, "demo")
	}
	return m
}

// passwordChange reports whether sub is a local account with a known
// password (subjectAnswer.PasswordChange).
func (s *Server) passwordChange(ctx context.Context, sub auth.Subject) bool {
	id, ok := strings.CutPrefix(sub.ID, "user:")
	if !ok || s.d.Auth == nil {
		return false
	}
	if s.d.AutoLogin != nil {
		if demo, ok := s.d.AutoLogin(ctx); ok && demo.ID == id {
			return false
		}
	}
	u, ok := s.d.Auth.Dir.User(id)
	return ok && u.Source == "local"
}

// demoOffered: the loopback demo signs in without a password only a
// loopback client that reached a loopback name (the Host check keeps
// rebinding pages out).
func (s *Server) demoOffered(c echo.Context) bool {
	return s.d.AutoLogin != nil && s.loopbackClient(c) && isLoopbackName(hostOnly(c.Request().Host))
}

// setSession starts a session for u (method: password, oidc or demo),
// ending the request's old one (the id is rotated at every sign-in), and
// sets the cookie.
func (s *Server) setSession(c echo.Context, userID, method string) (string, error) {
	ctx := c.Request().Context()
	if err := s.rotate(c); err != nil {
		return "", err
	}
	sid, csrf, err := s.d.Auth.StartSession(ctx, userID, method)
	if err != nil {
		return "", err
	}
	s.writeCookie(c, sid, int(s.d.Auth.Sessions.Lifetime(method)/time.Second))
	return csrf, nil
}

// rotate ends the session the request came with, if any: a sign-in never
// keeps a session id that existed before it (session fixation).
func (s *Server) rotate(c echo.Context) error {
	if ck, err := c.Request().Cookie(SessionCookie); err == nil {
		return s.d.Auth.Sessions.End(c.Request().Context(), ck.Value, "rotated")
	}
	return nil
}

func (s *Server) writeCookie(c echo.Context, value string, maxAge int) {
	c.SetCookie(&http.Cookie{
		Name: SessionCookie, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: s.g.secure, SameSite: http.SameSiteLaxMode,
	})
}

type loginBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
}

// signInRefused is the answer to a password check refused before hashing
// (issue 33): 429 while the source or account is limited, 503 while the
// process already runs its HashConcurrency password hashes; nil otherwise.
func signInRefused(err error) *Error {
	var le *auth.LimitedError
	var be *auth.BusyError
	switch {
	case errors.As(err, &le):
		return &Error{Code: CodeTooMany, Message: "too many sign-in attempts; wait and try again", RetryAfter: auth.RetryAfter(le.RetryAfter)}
	case errors.As(err, &be):
		return &Error{Code: CodeUnavailable, Message: "too many sign-ins at once; try again in a moment", RetryAfter: auth.RetryAfter(be.RetryAfter)}
	}
	return nil
}

func (s *Server) login(c echo.Context) error {
	if s.d.NoAuth {
		return errf(CodeNotFound, "authentication is off")
	}
	var b loginBody
	if err := decodeBody(c, &b, false); err != nil {
		return err
	}
	u, sid, csrf, err := s.d.Auth.Login(c.Request().Context(), b.Name, b.Password, c.RealIP())
	if e := signInRefused(err); e != nil {
		return e
	}
	switch {
	case err != nil:
		s.log.InfoContext(c.Request().Context(), "sign-in refused", slog.String("correlation_id", requestID(c)), slog.String("client", c.RealIP()))
		return errf(CodeUnauthenticated, "unknown user or wrong password")
	}
	if err := s.rotate(c); err != nil { // only a successful sign-in ends the old session
		return err
	}
	s.writeCookie(c, sid, int(s.d.Auth.Sessions.Options().Absolute/time.Second))
	sub := u.Subject()
	c.Set(ctxSubject, sub)
	s.log.InfoContext(c.Request().Context(), "signed in", slog.String("correlation_id", requestID(c)), slog.String("user", u.Name), slog.String("user_id", sub.ID))
	return c.JSON(http.StatusOK, subjectAnswer{SignedIn: true, Subject: sub, CSRF: csrf, Links: s.links(), Limits: s.limits(), PasswordChange: s.passwordChange(c.Request().Context(), sub)})
}

// logout ends the session and clears the cookie. A signed-in cookie
// session must send its CSRF token (else any page could sign people out).
func (s *Server) logout(c echo.Context) error {
	if sid, ok := c.Get(ctxSession).(string); ok {
		if err := s.checkCSRF(c); err != nil {
			return err
		}
		if err := s.d.Auth.Sessions.End(c.Request().Context(), sid, "logout"); err != nil {
			return err
		}
	}
	s.writeCookie(c, "", -1)
	return c.NoContent(http.StatusNoContent)
}

// me says who is asking. It is a read and never writes: the demo's
// sign-in is an explicit POST /api/auth/demo (issue 25: a cookieless GET
// used to start a session and append an event every time, so any page,
// even an <img>, could grow the log without bound).
//
// A request with no credential at all (no session cookie; a bearer token
// is checked, and refused with 401, before this runs) is answered 200
// {"signed_in":false,"methods":[…]} (issue 27): "nobody" is the answer to
// "who am I", so a first visit's console shows no error. It tells no more
// than the 401 did (the methods were its details) and grants nothing:
// every other route still refuses such a request with 401. A session
// cookie that no longer works stays 401, like a refused token: the client
// learns that its session ended. Never stored by a cache (the signed-in
// answer holds the CSRF token).
func (s *Server) me(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	sub, ok := subjectOf(c)
	if !ok {
		if ck, err := c.Request().Cookie(SessionCookie); err == nil && ck.Value != "" {
			return &Error{Code: CodeUnauthenticated, Message: "not signed in: the session ended", Details: map[string]any{"methods": s.methods(c)}}
		}
		return c.JSON(http.StatusOK, notSignedIn{Methods: s.methods(c)})
	}
	csrf, _ := c.Get(ctxCSRF).(string)
	return c.JSON(http.StatusOK, subjectAnswer{SignedIn: true, Subject: sub, CSRF: csrf, Methods: s.methods(c), Links: s.links(), Limits: s.limits(),
		PasswordChange: s.passwordChange(c.Request().Context(), sub)})
}

// notSignedIn is GET /api/auth/me's answer to a request with no credential.
type notSignedIn struct {
	SignedIn bool     `json:"signed_in"` // always false
	Methods  []string `json:"methods"`
}

// demoLogin signs a loopback browser in as the demo's account: the sign-in
// page's "Continue as demo-admin" (and the dashboard's first visit in a
// browser, once). A state change like any other: the guard's Origin,
// Sec-Fetch-Site and Content-Type rules apply, so no cross-site page can
// cause it; session starts are limited per client address like failed
// sign-ins (each one appends SessionStarted).
func (s *Server) demoLogin(c echo.Context) error {
	if !s.demoOffered(c) {
		return errf(CodeNotFound, "the demo sign-in is only offered by the loopback demo, to loopback browsers")
	}
	if err := decodeBody(c, &noBody{}, true); err != nil {
		return err
	}
	u, ok := s.d.AutoLogin(c.Request().Context())
	if !ok {
		return errf(CodeNotFound, "the demo account does not exist")
	}
	if wait := s.d.Auth.AllowSessionStart(c.RealIP()); wait > 0 {
		return &Error{Code: CodeTooMany, Message: "too many sign-ins from this address; wait and try again", RetryAfter: auth.RetryAfter(wait)}
	}
	csrf, err := s.setSession(c, u.ID, "demo")
	if err != nil {
		return err
	}
	sub := u.Subject()
	c.Set(ctxSubject, sub)
	s.log.InfoContext(c.Request().Context(), "signed in (demo on loopback)", slog.String("correlation_id", requestID(c)), slog.String("user", u.Name))
	return c.JSON(http.StatusOK, subjectAnswer{SignedIn: true, Subject: sub, CSRF: csrf, Methods: s.methods(c), Links: s.links(), Limits: s.limits()})
}

func hostOnly(h string) string {
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		return h[:i]
	}
	return h
}

type passwordBody struct {
	Current string `json:"current"`
	New     string `json:"new"`
}

// changePassword lets a signed-in local account replace its password
// (e.g. the printed initial one). Every session of the account ends; the
// caller gets a fresh one.
func (s *Server) changePassword(c echo.Context) error {
	var b passwordBody
	if err := decodeBody(c, &b, false); err != nil {
		return err
	}
	sub, _ := subjectOf(c)
	id, isUser := strings.CutPrefix(sub.ID, "user:")
	if !isUser {
		return errf(CodeInvalid, "only accounts have passwords (this is an API token)")
	}
	if !s.passwordChange(c.Request().Context(), sub) {
		return errf(CodeInvalid, "this account has no password to change (the demo's account, or one that signs in through its identity provider)")
	}
	err := s.d.Auth.ChangePassword(c.Request().Context(), id, b.Current, b.New, c.RealIP())
	if e := signInRefused(err); e != nil {
		return e
	}
	switch {
	case errors.Is(err, auth.ErrBadCredentials):
		return apperr.Refuse(CodeInvalid, apperr.ReasonWrongPassword, "field", "current").With(map[string]any{"field": "current"})
	case errors.Is(err, auth.ErrNotFound):
		return errf(CodeInvalid, "this account signs in through its identity provider")
	case err != nil:
		return err
	}
	s.caughtUp(c)
	csrf, err := s.setSession(c, id, "password")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, subjectAnswer{SignedIn: true, Subject: sub, CSRF: csrf, Links: s.links(), Limits: s.limits()})
}

// ---- OIDC ----

func (s *Server) oidcLogin(c echo.Context) error {
	u, err := s.d.OIDC.Begin(c.Response(), c.Request())
	if err != nil {
		return &Error{Code: CodeUpstream, Message: "the identity provider cannot be reached", Err: err}
	}
	return c.Redirect(http.StatusFound, u)
}

func (s *Server) oidcCallback(c echo.Context) error {
	u, err := s.d.OIDC.Finish(c.Request().Context(), c.Response(), c.Request())
	if err != nil {
		return &Error{Code: CodeUnauthenticated, Message: "sign-in with the identity provider failed", Err: err}
	}
	if _, err := s.setSession(c, u.ID, "oidc"); err != nil {
		return err
	}
	s.log.InfoContext(c.Request().Context(), "signed in (oidc)", slog.String("user", u.Name))
	return c.Redirect(http.StatusFound, "/")
}

// ---- admin: users and tokens ----

func (s *Server) listUsers(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"users": s.d.Auth.Dir.Users()})
}

type createUserBody struct {
	Name     string    `json:"name"`
	Role     auth.Role `json:"role"`
	Password string    `json:"password,omitempty"`
}

// createdUser is a new account; Password only when it was generated
// (shown this once).
type createdUser struct {
	auth.User
	Password string `json:"password,omitempty"`
}

func (s *Server) createUser(c echo.Context) error {
	sub, _ := subjectOf(c)
	return do(s, c, command[createUserBody, createdUser]{
		run: func(ctx context.Context, _ slots.Actor, _ string, b createUserBody) (createdUser, error) {
			u, pw, err := s.d.Auth.Dir.CreateUser(ctx, sub, b.Name, b.Role, b.Password)
			return createdUser{User: u, Password: pw}, err
		},
		answer: answerJSON[createUserBody, createdUser](http.StatusCreated),
	})
}

type roleBody struct {
	Role auth.Role `json:"role"`
}

func (s *Server) setRole(c echo.Context) error {
	sub, _ := subjectOf(c)
	return do(s, c, command[roleBody, struct{}]{
		target: pathParam("id"),
		run: func(ctx context.Context, _ slots.Actor, id string, b roleBody) (struct{}, error) {
			return struct{}{}, s.d.Auth.Dir.SetRole(ctx, sub, id, b.Role)
		},
		answer: func(c echo.Context, id string, _ roleBody, _ struct{}) error {
			u, _ := s.d.Auth.Dir.User(id)
			return c.JSON(http.StatusOK, u)
		},
	})
}

// tokenView is a token as listed: never the token itself.
type tokenView struct {
	auth.Token
	State string `json:"state"` // active | expired | revoked
}

func viewToken(t auth.Token, now time.Time) tokenView {
	st := "active"
	switch {
	case t.RevokedAt != nil:
		st = "revoked"
	case !now.Before(t.ExpiresAt):
		st = "expired"
	}
	return tokenView{Token: t, State: st}
}

func (s *Server) listTokens(c echo.Context) error {
	now := time.Now()
	ts := s.d.Auth.Dir.Tokens()
	out := make([]tokenView, len(ts))
	for i, t := range ts {
		out[i] = viewToken(t, now)
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": out})
}

type issueTokenBody struct {
	Name    string    `json:"name"`
	Role    auth.Role `json:"role"`
	Expires string    `json:"expires"` // a Go duration, e.g. "720h"; default 720h
}

type issuedToken struct {
	tokenView
	Token string `json:"token"` // shown this once
}

func (s *Server) issueToken(c echo.Context) error {
	sub, _ := subjectOf(c)
	ttl := 720 * time.Hour
	return do(s, c, command[issueTokenBody, issuedToken]{
		allow: func(_ echo.Context, _ string, b *issueTokenBody, _ *slots.Actor) error {
			if b.Expires != "" {
				d, err := time.ParseDuration(b.Expires)
				if err != nil {
					return invalidField("expires", "expires must be a duration such as \"720h\"")
				}
				ttl = d
			}
			return nil
		},
		run: func(ctx context.Context, _ slots.Actor, _ string, b issueTokenBody) (issuedToken, error) {
			t, secret, err := s.d.Auth.Dir.IssueToken(ctx, sub, b.Name, b.Role, ttl)
			return issuedToken{tokenView: viewToken(t, time.Now()), Token: secret}, err
		},
		answer: answerJSON[issueTokenBody, issuedToken](http.StatusCreated),
	})
}

func (s *Server) revokeToken(c echo.Context) error {
	sub, _ := subjectOf(c)
	return do(s, c, command[noBody, struct{}]{
		target:   pathParam("id"),
		optional: true,
		run: func(ctx context.Context, _ slots.Actor, id string, _ noBody) (struct{}, error) {
			return struct{}{}, s.d.Auth.Dir.RevokeToken(ctx, sub, id)
		},
		answer: func(c echo.Context, _ string, _ noBody, _ struct{}) error { return c.NoContent(http.StatusNoContent) },
	})
}

// ---- the stream, health, metrics ----

// stream serves the live stream with a cap per subject, so one token or
// one person cannot hold the server's whole stream budget.
func (s *Server) stream(c echo.Context) error {
	sub, _ := subjectOf(c)
	leave, full := s.streams.enter(sub.ID)
	if full != capNone {
		return &Error{Code: CodeTooMany, Message: "too many live streams for this user or token", RetryAfter: 5,
			Details: map[string]any{"limit": s.d.MaxStreamsPerSubject}}
	}
	defer leave()
	if sid, ok := c.Get(ctxSession).(string); ok {
		ctx, cancel := context.WithCancel(c.Request().Context())
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		go s.endWithSession(ctx, cancel, sid)
	}
	return s.d.Hub.ServeStream(c)
}

// endWithSession ends a cookie session's live stream when the session
// ends (logout in any process, a password change, idle or absolute
// expiry): an open stream must not outlive its sign-in. The browser's
// reconnect is then refused with 401 and the dashboard shows the sign-in
// page. Checked at every change of the directory (a logout ends the
// stream at once) and, for expiry, on a ticker of the sessions' recording
// interval, at most a minute (a stream may outlive an idle expiry by that
// much; a shorter tick would wake every open stream more often).
func (s *Server) endWithSession(ctx context.Context, cancel context.CancelFunc, sid string) {
	every := min(s.d.Auth.Sessions.Options().Record, time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		changed := s.d.Auth.Dir.Changed()
		if !s.d.Auth.Sessions.Alive(sid) {
			cancel()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-t.C:
		}
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}
