package main

import (
	"flag"
	"net"
	"os"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
)

// AuthConfig is the sign-in, session and browser-hardening part of serve's
// configuration (kept apart from config.go; docs/auth.md has the table).
type AuthConfig struct {
	SessionIdle     time.Duration
	SessionMax      time.Duration
	DemoAutologin   bool
	TrustedProxies  string // comma-separated CIDRs
	CommandsPerSec  float64
	StreamsPerSubj  int
	OIDCIssuer      string
	OIDCClientID    string
	OIDCSecretFile  string
	OIDCRolesClaim  string
	OIDCRoleMap     string // "group=role,…"
	OIDCDefaultRole string
	OIDCScopes      string
	OIDCRecheck     time.Duration

	proxies []*net.IPNet
	roleMap map[string]auth.Role
}

// authFlags declares the auth flags of serve on fs, bound to c.
func authFlags(fs *flag.FlagSet, c *AuthConfig) {
	fs.DurationVar(&c.SessionIdle, "session-idle", 12*time.Hour, "a browser session unused this long ends")
	fs.DurationVar(&c.SessionMax, "session-max", 7*24*time.Hour, "a browser session ends this long after sign-in, used or not")
	fs.BoolVar(&c.DemoAutologin, "demo-autologin", true, "in the demo (simulators, demo pool) bound only to loopback, sign loopback browsers in as demo-admin")
	fs.StringVar(&c.TrustedProxies, "trusted-proxies", "", "comma-separated CIDRs of reverse proxies whose X-Forwarded-For names the client")
	fs.Float64Var(&c.CommandsPerSec, "commands-per-second", 10, "state changes per user or token per second (burst 3x; 0: no limit)")
	fs.IntVar(&c.StreamsPerSubj, "streams-per-subject", 16, "live streams per user or token (0: no cap)")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "OpenID Connect issuer URL (empty: no OIDC sign-in)")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", "", "OIDC client id")
	fs.StringVar(&c.OIDCSecretFile, "oidc-client-secret-file", "", "file holding the OIDC client secret")
	fs.StringVar(&c.OIDCRolesClaim, "oidc-roles-claim", "groups", "ID token claim listing the user's groups or roles")
	fs.StringVar(&c.OIDCRoleMap, "oidc-role-map", "", "group=role,… (the highest mapped role wins; unmapped users are refused unless --oidc-default-role)")
	fs.StringVar(&c.OIDCDefaultRole, "oidc-default-role", "", "role of OIDC users no group maps (empty: refused)")
	fs.StringVar(&c.OIDCScopes, "oidc-scopes", "profile,email", "scopes requested besides openid (add groups if the provider needs it for the roles claim)")
	fs.DurationVar(&c.OIDCRecheck, "oidc-recheck", time.Hour, "a single sign-on session ends this long after sign-in, so the identity provider's groups set the role again: the bound on a removed group keeping its role")
}

// validate checks the auth settings and fills the parsed forms.
func (c *AuthConfig) validate() error {
	if c.SessionIdle <= 0 {
		return cfgErr("session-idle", "%s: must be positive", c.SessionIdle)
	}
	if c.SessionMax < c.SessionIdle {
		return cfgErr("session-max", "%s is shorter than --session-idle %s", c.SessionMax, c.SessionIdle)
	}
	if c.OIDCRecheck < time.Minute || c.OIDCRecheck > c.SessionMax {
		return cfgErr("oidc-recheck", "%s: use 1m up to --session-max (%s)", c.OIDCRecheck, c.SessionMax)
	}
	c.proxies = nil
	for _, s := range strings.Split(c.TrustedProxies, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			if ip := net.ParseIP(s); ip != nil && ip.To4() != nil {
				s += "/32"
			} else {
				s += "/128"
			}
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return cfgErr("trusted-proxies", "%q is not a CIDR", s)
		}
		c.proxies = append(c.proxies, n)
	}
	if c.CommandsPerSec < 0 {
		return cfgErr("commands-per-second", "%v: must not be negative", c.CommandsPerSec)
	}
	if c.StreamsPerSubj < 0 {
		return cfgErr("streams-per-subject", "%d: must not be negative", c.StreamsPerSubj)
	}
	c.roleMap = map[string]auth.Role{}
	for _, kv := range strings.Split(c.OIDCRoleMap, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		g, r, ok := strings.Cut(kv, "=")
		role, err := auth.ParseRole(r)
		if !ok || g == "" || err != nil {
			return cfgErr("oidc-role-map", "%q: use group=role with role viewer, member, operator or admin", kv)
		}
		c.roleMap[g] = role
	}
	if c.OIDCDefaultRole != "" {
		if _, err := auth.ParseRole(c.OIDCDefaultRole); err != nil {
			return cfgErr("oidc-default-role", "%v", err)
		}
	}
	if c.OIDCIssuer != "" {
		if err := httpURL(c.OIDCIssuer); err != nil {
			return cfgErr("oidc-issuer", "%v", err)
		}
		if c.OIDCClientID == "" {
			return cfgErr("oidc-client-id", "required with --oidc-issuer")
		}
		if c.OIDCSecretFile != "" {
			if _, err := os.Stat(c.OIDCSecretFile); err != nil {
				return cfgErr("oidc-client-secret-file", "%v", err)
			}
		}
	}
	return nil
}

// loopbackOnly reports whether addr binds only loopback addresses.
func loopbackOnly(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil || h == "" {
		return false
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// oidc builds the OIDC flow the settings describe (nil without an issuer).
func (c *AuthConfig) oidc(baseURL string, dir *auth.Directory) (*auth.OIDC, error) {
	if c.OIDCIssuer == "" {
		return nil, nil
	}
	secret := ""
	if c.OIDCSecretFile != "" {
		b, err := os.ReadFile(c.OIDCSecretFile)
		if err != nil {
			return nil, cfgErr("oidc-client-secret-file", "%v", err)
		}
		secret = strings.TrimSpace(string(b))
	}
	var scopes []string
	for _, s := range strings.Split(c.OIDCScopes, ",") {
		if s = strings.TrimSpace(s); s != "" && s != "openid" {
			scopes = append(scopes, s)
		}
	}
	def, _ := auth.ParseRole(c.OIDCDefaultRole)
	base := strings.TrimRight(baseURL, "/")
	return auth.NewOIDC(auth.OIDCConfig{
		Issuer: c.OIDCIssuer, ClientID: c.OIDCClientID, ClientSecret: secret,
		RedirectURL: base + "/api/auth/oidc/callback", Scopes: scopes,
		RolesClaim: c.OIDCRolesClaim, RoleMap: c.roleMap, DefaultRole: def,
		SecureCookie: strings.HasPrefix(base, "https://"),
	}, dir), nil
}
