package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// remoteSim is the control API of simulators running as their own process
// (`slotkeeper sim`, serve --sim-url): the demo seeds its pool through it
// and the dashboard's fault controls reach it through a proxy.
type remoteSim struct {
	base string // e.g. http://sim:9090
	hc   *http.Client
}

func newRemoteSim(base string) *remoteSim {
	return &remoteSim{base: strings.TrimRight(base, "/"), hc: &http.Client{Timeout: 30 * time.Second}}
}

// SeedSlot implements demo.Simulator through POST /sim/slots.
func (r *remoteSim) SeedSlot(name string) (sim.SlotFixture, error) {
	var fx sim.SlotFixture
	body, _ := json.Marshal(map[string]string{"name": name})
	resp, err := r.hc.Post(r.base+"/sim/slots", "application/json", bytes.NewReader(body))
	if err != nil {
		return fx, fmt.Errorf("the simulators' control API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fx, fmt.Errorf("the simulators' control API answered %d to seeding %s", resp.StatusCode, name)
	}
	return fx, json.NewDecoder(resp.Body).Decode(&fx)
}

// Projects implements slots.SimulatedProjects through GET /sim/projects:
// what the simulators hold now is the demo's scope (issue 38).
func (r *remoteSim) Projects(ctx context.Context) (coolify, bitbucket []string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/sim/projects", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("the simulators' control API: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("the simulators' control API answered %d to listing their projects", resp.StatusCode)
	}
	var l sim.ProjectList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, nil, fmt.Errorf("the simulators' project list: %w", err)
	}
	return l.Coolify, l.Bitbucket, nil
}

// simForwardHeaders are the request headers controlProxy sends on; every
// other one stays here (issue 33: the caller's Authorization and session
// cookie used to reach the simulator process, over plain http).
var simForwardHeaders = []string{"Accept", "Content-Type"}

// controlProxy serves /api/sim/… from the remote /sim/…: only the control
// API's routes, only with a clean path (no dot segment, no encoded
// separator or dot, no empty segment: 400), and without any credential
// of the caller. The caller was authenticated and authorised by the API
// (policy table: read for GET, sim_control otherwise); the simulator's
// control API has no authentication of its own.
func (r *remoteSim) controlProxy() http.Handler {
	u, _ := url.Parse(r.base)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.URL.Path = "/sim/" + strings.TrimPrefix(pr.In.URL.Path, "/api/sim/")
			pr.Out.URL.RawPath = ""
			h := http.Header{}
			for _, k := range simForwardHeaders {
				if v := pr.In.Header.Values(k); len(v) > 0 {
					h[k] = v
				}
			}
			pr.Out.Header = h
		},
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del("Set-Cookie") // the simulator sets no cookie of the dashboard's
			return nil
		},
	}
	mux := http.NewServeMux()
	for _, route := range sim.ControlRoutes {
		method, path, _ := strings.Cut(route, " ")
		mux.Handle(method+" /api/sim"+path, rp)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not a route of the simulators' control API", http.StatusNotFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !cleanSimPath(req.URL) {
			http.Error(w, "the path must not hold dot segments, empty segments or encoded separators", http.StatusBadRequest)
			return
		}
		mux.ServeHTTP(w, req)
	})
}

// cleanSimPath reports whether u's path is one ServeMux would not clean
// or redirect and that means what it says: under /api/sim/, no "." or
// ".." segment, no empty segment, no backslash, and nothing percent-encoded
// but what a name may hold (an encoded "/", "\" or "." could turn into a
// separator or a dot segment further on).
func cleanSimPath(u *url.URL) bool {
	raw := u.EscapedPath()
	rest, ok := strings.CutPrefix(raw, "/api/sim/")
	if !ok || strings.Contains(raw, "\\") {
		return false
	}
	lower := strings.ToLower(rest)
	for _, enc := range []string{"%2f", "%5c", "%2e", "%00"} {
		if strings.Contains(lower, enc) {
			return false
		}
	}
	for _, seg := range strings.Split(u.Path[len("/api/sim/"):], "/") {
		if seg == "" || seg == "." || seg == ".." || strings.Contains(seg, "\\") {
			return false
		}
	}
	return true
}
