package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig configures sign-in through an OpenID Connect provider.
type OIDCConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is <base-url>/api/auth/oidc/callback; empty: derived from
	// the request's Host (tests).
	RedirectURL string
	// Scopes requested besides "openid" (default profile, email).
	Scopes []string
	// RolesClaim is the ID token claim listing groups or roles ("groups").
	RolesClaim string
	// RoleMap maps a claim value to a role; the highest mapped role wins.
	RoleMap map[string]Role
	// DefaultRole is the role of users no value maps (RoleNone: refused).
	DefaultRole Role
	// SecureCookie marks the short-lived flow cookie Secure (https).
	SecureCookie bool
}

// OIDC runs the authorization code flow with PKCE. The state, nonce and
// PKCE verifier travel in a short-lived HttpOnly cookie scoped to the
// callback path, so any process behind a balancer can finish a flow.
type OIDC struct {
	cfg OIDCConfig
	dir *Directory

	mu       sync.Mutex
	provider *oidc.Provider // discovered at first use, so a provider outage does not stop the server
}

// NewOIDC returns the flow for cfg, creating accounts in dir.
func NewOIDC(cfg OIDCConfig, dir *Directory) *OIDC {
	if cfg.RolesClaim == "" {
		cfg.RolesClaim = "groups"
	}
	if cfg.Scopes == nil {
		cfg.Scopes = []string{"profile", "email"}
	}
	return &OIDC{cfg: cfg, dir: dir}
}

const oidcCookie = "slotkeeper_oidc"

func (o *OIDC) discover(ctx context.Context) (*oidc.Provider, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.provider != nil {
		return o.provider, nil
	}
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	o.provider = p
	return p, nil
}

func (o *OIDC) oauth(p *oidc.Provider, r *http.Request) *oauth2.Config {
	redirect := o.cfg.RedirectURL
	if redirect == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + "/api/auth/oidc/callback"
	}
	return &oauth2.Config{
		ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: append([]string{oidc.ScopeOpenID}, o.cfg.Scopes...),
	}
}

// Begin starts a flow: it sets the flow cookie and returns the provider's
// authorization URL.
func (o *OIDC) Begin(w http.ResponseWriter, r *http.Request) (string, error) {
	p, err := o.discover(r.Context())
	if err != nil {
		return "", err
	}
	state, nonce, verifier := NewSecret(24), NewSecret(24), oauth2.GenerateVerifier()
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: state + "." + nonce + "." + verifier, Path: "/api/auth/oidc/", MaxAge: 600,
		HttpOnly: true, Secure: o.cfg.SecureCookie, SameSite: http.SameSiteLaxMode,
	})
	return o.oauth(p, r).AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// ErrOIDC is a refused OIDC sign-in; its text never holds a secret.
var ErrOIDC = errors.New("auth: oidc sign-in refused")

// Finish checks the provider's redirect (state), exchanges the code with
// the PKCE verifier, verifies the ID token (signature, issuer, audience,
// expiry, nonce), maps its claims to a role and returns the account.
func (o *OIDC) Finish(ctx context.Context, w http.ResponseWriter, r *http.Request) (User, error) {
	ck, err := r.Cookie(oidcCookie)
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: "/api/auth/oidc/", MaxAge: -1, HttpOnly: true, Secure: o.cfg.SecureCookie, SameSite: http.SameSiteLaxMode})
	if err != nil {
		return User{}, fmt.Errorf("%w: no flow in progress (cookie missing)", ErrOIDC)
	}
	parts := strings.SplitN(ck.Value, ".", 3)
	q := r.URL.Query()
	// Every part must be there and as long as Begin makes them (issue 33:
	// a planted cookie "S.." with an empty nonce and verifier matched an
	// attacker's own flow started without either, signing the victim in as
	// the attacker). oauth2.GenerateVerifier is 43 characters, NewSecret(24)
	// 32.
	if len(parts) != 3 || len(parts[0]) < 32 || len(parts[1]) < 32 || len(parts[2]) < 43 {
		return User{}, fmt.Errorf("%w: the flow cookie lacks its state, nonce or PKCE verifier", ErrOIDC)
	}
	if subtle.ConstantTimeCompare([]byte(parts[0]), []byte(q.Get("state"))) != 1 {
		return User{}, fmt.Errorf("%w: state does not match", ErrOIDC)
	}
	if e := q.Get("error"); e != "" {
		return User{}, fmt.Errorf("%w: provider answered %q", ErrOIDC, truncateText(e, 64))
	}
	p, err := o.discover(ctx)
	if err != nil {
		return User{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	tok, err := o.oauth(p, r).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(parts[2]))
	if err != nil {
		return User{}, fmt.Errorf("%w: code exchange failed", ErrOIDC)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return User{}, fmt.Errorf("%w: no id_token", ErrOIDC)
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return User{}, fmt.Errorf("%w: id token: %v", ErrOIDC, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(parts[1])) != 1 {
		return User{}, fmt.Errorf("%w: nonce does not match", ErrOIDC)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return User{}, fmt.Errorf("%w: claims: %v", ErrOIDC, err)
	}
	role := o.role(claims[o.cfg.RolesClaim])
	if role == RoleNone {
		return User{}, fmt.Errorf("%w: no role maps from claim %q", ErrOIDC, o.cfg.RolesClaim)
	}
	name, _ := claims["preferred_username"].(string)
	if name == "" {
		name, _ = claims["email"].(string)
	}
	if name == "" {
		name = idt.Subject
	}
	return o.dir.EnsureOIDCUser(ctx, idt.Issuer, idt.Subject, name, role)
}

// role maps a claim (a list of strings, or one string) to the highest
// mapped role, else the default.
func (o *OIDC) role(claim any) Role {
	var vals []string
	switch v := claim.(type) {
	case string:
		vals = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				vals = append(vals, s)
			}
		}
	}
	best := RoleNone
	for _, v := range vals {
		if r, ok := o.cfg.RoleMap[v]; ok && r > best {
			best = r
		}
	}
	if best == RoleNone {
		return o.cfg.DefaultRole
	}
	return best
}

func truncateText(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
