package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"
)

// Security is the browser-facing part of the configuration: where the
// server is reached, and which proxies may name the client.
type Security struct {
	// BaseURL is the public URL (scheme://host[:port]). Its origin is the
	// only Origin a state change may come from, its host is allowed as
	// Host, and https makes the session cookie Secure.
	BaseURL string
	// ListenAddr is --addr; its host is allowed as Host (as are
	// "localhost" and IP literals).
	ListenAddr string
	// ExtraHosts are further allowed Host names.
	ExtraHosts []string
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed for the
	// client address (echo's IPExtractor). Empty: the TCP peer is the client.
	TrustedProxies []*net.IPNet
}

// CSP is the Content-Security-Policy of every answer. The dashboard is
// one module script and stylesheets from /assets (React sets inline styles
// through the CSSOM, which style-src does not govern), so 'self' suffices.
const CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'"

// guard is the browser hardening around every request: security headers,
// the Host allow-list (421, against DNS rebinding), and for state changes
// the Origin check (403) and the JSON Content-Type (415) that together keep
// other web pages from sending commands.
type guard struct {
	origin string          // scheme://host[:port] of BaseURL, "" if none
	hosts  map[string]bool // allowed Host names (lower case, no port)
	secure bool
}

func newGuard(sec Security) guard {
	g := guard{hosts: map[string]bool{}}
	if u, err := url.Parse(sec.BaseURL); err == nil && u.Host != "" {
		g.origin = strings.ToLower(u.Scheme + "://" + u.Host)
		g.hosts[strings.ToLower(u.Hostname())] = true
		g.secure = u.Scheme == "https"
	}
	if h, _, err := net.SplitHostPort(sec.ListenAddr); err == nil && h != "" {
		g.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	// Loopback names are always allowed: a rebinding attack always sends
	// the attacker's own name, never "localhost", and with a wildcard
	// --addr the machine's own browser reaches the server by that name.
	g.hosts["localhost"] = true
	for _, h := range sec.ExtraHosts {
		g.hosts[strings.ToLower(h)] = true
	}
	return g
}

func isLoopbackName(h string) bool {
	h = strings.Trim(strings.ToLower(h), "[]")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed: a name in the allow-list, or an IP literal. An IP literal
// cannot be rebound (DNS rebinding needs a name the attacker controls), and
// load balancers probe by address.
func (g guard) hostAllowed(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.Trim(strings.ToLower(h), "[]")
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	return g.hosts[h]
}

// originAllowed: the configured base URL's origin, or the origin of the
// request's own allowed Host (the same page that was served).
func (g guard) originAllowed(origin, host string) bool {
	o := strings.ToLower(origin)
	if o == "" || o == "null" {
		return false
	}
	if g.origin != "" && o == g.origin {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host) && g.hostAllowed(host)
}

func (s *Server) guard(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		h := c.Response().Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		if !s.g.hostAllowed(req.Host) {
			return &Error{Code: CodeMisdirected, Message: "this server does not answer for host " + quoteHost(req.Host) + " (set --base-url)"}
		}
		if !isStateChange(req.Method) {
			return next(c)
		}
		if req.Header.Get("Sec-Fetch-Site") == "cross-site" {
			return &Error{Code: CodeForbidden, Message: "cross-site requests may not change anything", Details: map[string]any{"reason": "origin"}}
		}
		if o := req.Header.Get("Origin"); o != "" && !s.g.originAllowed(o, req.Host) {
			return &Error{Code: CodeForbidden, Message: "requests from another origin may not change anything", Details: map[string]any{"reason": "origin"}}
		}
		if strings.HasPrefix(req.URL.Path, "/api/") {
			if err := requireJSON(req); err != nil {
				return err
			}
		}
		return next(c)
	}
}

// requireJSON: a state change must say Content-Type: application/json,
// also with an empty body — an HTML form or a no-cors fetch cannot.
func requireJSON(req *http.Request) error {
	ct := req.Header.Get(echo.HeaderContentType)
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != echo.MIMEApplicationJSON {
		return &Error{Code: CodeUnsupportedMedia, Message: "Content-Type must be application/json (also with an empty body)",
			Details: map[string]any{"content_type": truncate(ct, 100)}}
	}
	return nil
}

func quoteHost(h string) string { return "\"" + truncate(h, 100) + "\"" }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// loopbackClient reports whether the client (as the IP extractor sees it,
// so a trusted proxy's X-Forwarded-For counts) is on loopback.
func (s *Server) loopbackClient(c echo.Context) bool {
	ip := net.ParseIP(c.RealIP())
	return ip != nil && ip.IsLoopback()
}
