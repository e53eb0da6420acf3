package httpapi

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// TestOIDCSignIn runs the authorization code flow with PKCE against a real
// OIDC provider (mockoidc) on loopback: login redirects to the provider,
// its redirect back creates the account with the role its groups map to and
// starts a session; a user whose groups map to nothing is refused and
// nothing is appended; logout ends the session.
func TestOIDCSignIn(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	t.Cleanup(func() { _ = m.Shutdown() })
	cfg := m.Config()
	b.deps = func(d *Deps) {
		d.OIDC = auth.NewOIDC(auth.OIDCConfig{
			Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			Scopes:  []string{"profile", "email", "groups"},
			RoleMap: map[string]auth.Role{"engineering": auth.RoleMember, "sre": auth.RoleOperator},
		}, d.Auth.Dir)
	}
	b.start(t, HubOptions{})

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Transport: b.tr}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := client.Get(b.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, string(data)
	}

	m.QueueUser(&mockoidc.MockUser{Subject: "sub-sam", PreferredUsername: "sam", Email: "sam@corp.internal", Groups: []string{"engineering", "sre"}})
	resp, _ := get("/api/auth/oidc/login")
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/" {
		t.Fatalf("flow ended at %s with %d", resp.Request.URL, resp.StatusCode)
	}
	resp, body := get("/api/auth/me")
	if resp.StatusCode != 200 || !strings.Contains(body, `"name":"sam"`) || !strings.Contains(body, `"role":"operator"`) || !strings.Contains(body, `"oidc"`) {
		t.Fatalf("me after OIDC sign-in: %d %s", resp.StatusCode, body)
	}
	u, ok := b.auth.Dir.UserByName("sam")
	if !ok || u.Source != "oidc" {
		t.Fatalf("account: %+v %v", u, ok)
	}

	srvURL, _ := url.Parse(b.srv.URL)
	sessionOf := func() string {
		for _, ck := range jar.Cookies(srvURL) {
			if ck.Name == SessionCookie {
				return ck.Value
			}
		}
		return ""
	}
	first := sessionOf()

	// A second sign-in with fewer groups lowers the role, and rotates the
	// session: a new id, the old one refused.
	m.QueueUser(&mockoidc.MockUser{Subject: "sub-sam", PreferredUsername: "sam", Groups: []string{"engineering"}})
	get("/api/auth/oidc/login")
	if _, body := get("/api/auth/me"); !strings.Contains(body, `"role":"member"`) {
		t.Fatalf("role after regrouping: %s", body)
	}
	if second := sessionOf(); second == "" || second == first {
		t.Fatal("a second sign-in kept the session id")
	}
	if a := b.do(t, "GET", "/api/auth/me", nil, "Authorization", "", "Cookie", SessionCookie+"="+first); a.status != 401 {
		t.Fatalf("the session before the second sign-in: %d", a.status)
	}

	// No mapped group: refused, nothing appended, no session.
	jar2, _ := cookiejar.New(nil)
	client.Jar = jar2
	h := b.head(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "sub-eve", PreferredUsername: "eve", Groups: []string{"marketing"}})
	resp, body = get("/api/auth/oidc/login")
	if resp.StatusCode != 401 || strings.Contains(body, "sub-eve") {
		t.Fatalf("unmapped user: %d %s", resp.StatusCode, body)
	}
	if after := b.head(t); after != h {
		t.Fatalf("a refused OIDC sign-in appended: %d → %d", h, after)
	}
	if resp, body := get("/api/auth/me"); (resp.StatusCode != 401 && resp.StatusCode != 200) || strings.Contains(body, `"subject"`) {
		t.Fatalf("me after a refused sign-in: %d %s", resp.StatusCode, body)
	}

	// A forged callback (no flow cookie, made-up state) is refused.
	if resp, _ := get("/api/auth/oidc/callback?code=x&state=y"); resp.StatusCode != 401 {
		t.Fatalf("forged callback: %d", resp.StatusCode)
	}
}

// Issue 33 item 7: a planted flow cookie with an empty nonce and PKCE
// verifier ("S..") let an attacker sign a victim in as the attacker (login
// CSRF): the attacker starts a flow of their own at the provider without
// nonce or code challenge, and sends the victim to the callback with that
// code and state S. The callback now refuses a flow cookie without its
// nonce and verifier, before the code is exchanged.
func TestOIDCRefusesAFlowCookieWithoutNonceOrVerifier(t *testing.T) {
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	t.Cleanup(func() { _ = m.Shutdown() })
	cfg := m.Config()
	b.deps = func(d *Deps) {
		d.OIDC = auth.NewOIDC(auth.OIDCConfig{
			Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
			Scopes: []string{"profile", "email", "groups"}, RoleMap: map[string]auth.Role{"sre": auth.RoleOperator},
		}, d.Auth.Dir)
	}
	b.start(t, HubOptions{})
	noRedirect := &http.Client{Transport: b.tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	state := strings.Repeat("s", 32) // the attacker's, as long as a real one
	for _, planted := range []string{state + "..", state + ".." + strings.Repeat("v", 43), state + "." + strings.Repeat("n", 32) + "."} {
		// The attacker's own flow at the provider: no nonce, no challenge.
		m.QueueUser(&mockoidc.MockUser{Subject: "sub-mallory", PreferredUsername: "mallory", Groups: []string{"sre"}})
		q := url.Values{"scope": {"openid profile email groups"}, "state": {state}, "client_id": {cfg.ClientID},
			"response_type": {"code"}, "redirect_uri": {b.srv.URL + "/api/auth/oidc/callback"}}
		resp, err := noRedirect.Get(m.AuthorizationEndpoint() + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || loc.Query().Get("code") == "" {
			t.Fatalf("the provider's redirect: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
		// The victim's browser: the planted cookie, then the callback.
		req, _ := http.NewRequest("GET", loc.String(), nil)
		req.AddCookie(&http.Cookie{Name: "slotkeeper_oidc", Value: planted})
		resp, err = noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, ck := range resp.Cookies() {
			if ck.Name == SessionCookie && ck.Value != "" {
				t.Fatalf("cookie %q: the victim was signed in as the attacker (%d)", planted, resp.StatusCode)
			}
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("cookie %q: %d, want 401", planted, resp.StatusCode)
		}
	}
}
