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

// controlProxy serves /api/sim/… from the remote /sim/….
func (r *remoteSim) controlProxy() http.Handler {
	u, _ := url.Parse(r.base)
	return &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(u)
		pr.Out.URL.Path = "/sim/" + strings.TrimPrefix(strings.TrimPrefix(pr.In.URL.Path, "/api/sim"), "/")
		pr.Out.URL.RawPath = ""
	}}
}
