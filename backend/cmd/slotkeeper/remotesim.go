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

// ProjectsNamed implements demo.Projects through GET /sim/state.
func (r *remoteSim) ProjectsNamed(name string) []string {
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, r.base+"/sim/state", nil)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var st sim.StateDump
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil
	}
	var ids []string
	for _, p := range st.Coolify.Projects {
		if p["name"] == name {
			if id, ok := p["uuid"].(string); ok {
				ids = append(ids, id)
			}
		}
	}
	return ids
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
