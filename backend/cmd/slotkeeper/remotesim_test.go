package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Issue 33 item 4: the --sim-url proxy forwarded the caller's
// Authorization and session cookie to the simulator process (plain http
// across the compose network) and passed /api/sim/../api/v1/… on
// unnormalised. It now sends no credential, refuses a path with a dot
// segment or an encoded separator (400), and forwards only the control
// API's routes (else 404), none of them reaching the simulator.
func TestSimProxyForwardsOnlyTheControlAPIWithoutCredentials(t *testing.T) {
	type seen struct {
		method, path string
		header       http.Header
	}
	var mu sync.Mutex
	var got []seen
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.Header.Clone()})
		mu.Unlock()
		w.Header().Set("Set-Cookie", "sim=1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer backend.Close()
	proxy := httptest.NewServer(newRemoteSim(backend.URL).controlProxy())
	defer proxy.Close()
	send := func(method, rawPath string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, proxy.URL+"/", strings.NewReader(`{"kind":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = rawPath // sent exactly as written
		req.Header.Set("Authorization", "Bearer sk-secret-token")
		req.Header.Set("Cookie", "slotkeeper_session=sess-secret; other=1")
		req.Header.Set("X-CSRF-Token", "csrf-secret")
		req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
		req.Header.Set("X-Api-Key", "key-secret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/api/sim/faults", "/sim/faults"},
		{"POST", "/api/sim/faults", "/sim/faults"},
		{"DELETE", "/api/sim/faults/3", "/sim/faults/3"},
		{"GET", "/api/sim/requests", "/sim/requests"},
		{"GET", "/api/sim/state", "/sim/state"},
		{"DELETE", "/api/sim/coolify/volumes/vol-1", "/sim/coolify/volumes/vol-1"},
		{"POST", "/api/sim/slots", "/sim/slots"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		resp := send(c.method, c.path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Set-Cookie") != "" {
			t.Fatalf("%s %s: %d, Set-Cookie %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
		mu.Lock()
		if len(got) != 1 || got[0].path != c.want || got[0].method != c.method {
			t.Fatalf("%s %s reached the simulator as %+v", c.method, c.path, got)
		}
		for name, vs := range got[0].header {
			for _, v := range vs {
				if strings.Contains(v, "secret") {
					t.Errorf("%s %s: the simulator got %s: %s", c.method, c.path, name, v)
				}
			}
		}
		if got[0].header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type dropped", c.method, c.path)
		}
		mu.Unlock()
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/api/sim/../api/v1/applications", http.StatusBadRequest},
		{"GET", "/api/sim/faults/../../api/v1/applications", http.StatusBadRequest},
		{"GET", "/api/sim/%2e%2e/api/v1/applications", http.StatusBadRequest},
		{"GET", "/api/sim/faults%2f..%2f..%2fapi%2fv1", http.StatusBadRequest},
		{"GET", "/api/sim/faults/.%2E/x", http.StatusBadRequest},
		{"GET", "/api/sim/faults/..%5c..%5capi", http.StatusBadRequest},
		{"GET", "/api/sim//faults", http.StatusBadRequest},
		{"GET", "/api/sim/api/v1/applications", http.StatusNotFound},
		{"GET", "/api/sim/rest/api/1.0/projects", http.StatusNotFound},
		{"PUT", "/api/sim/faults", http.StatusNotFound},
		{"DELETE", "/api/sim/state", http.StatusNotFound},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		if resp := send(c.method, c.path); resp.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.status)
		}
		mu.Lock()
		if len(got) != 0 {
			t.Errorf("%s %s reached the simulator: %+v", c.method, c.path, got)
		}
		mu.Unlock()
	}
}
