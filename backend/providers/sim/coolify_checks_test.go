package sim_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestCoolifyServerUnreachable: through the control API the server becomes
// unreachable; GET /servers/{uuid} says so; a queued database delete then
// removes the row (404) and leaves its container and volume on the server
// (DeleteResourceJob.php:57-100, 130), visible through the control API;
// the throttle's headers come on every answer.
func TestCoolifyServerUnreachable(t *testing.T) {
	s := startSim(t, sim.Options{})
	ctx := waitCtx(t)
	fx, err := s.SeedSlot("u1")
	if err != nil {
		t.Fatal(err)
	}
	ctl := s.ControlHandler()
	rec := httptest.NewRecorder()
	ctl.ServeHTTP(rec, httptest.NewRequest("PUT", "/coolify/server", strings.NewReader(`{"reachable":false}`)))
	if rec.Code != 204 {
		t.Fatalf("PUT server: %d %s", rec.Code, rec.Body.String())
	}
	base := s.CoolifyURL()
	code, body := doT(t, ctx, "GET", base+"/servers/"+sim.ServerUUID, s.CoolifyToken())
	var srv struct {
		Settings struct{ IsReachable, IsUsable bool } `json:"settings"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &srv) != nil || srv.Settings.IsReachable || strings.Contains(body, `"is_reachable":true`) {
		t.Fatalf("GET server: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "GET", base+"/servers/nosuchserver000000000000", s.CoolifyToken()); code != 404 || body != `{"message":"Server not found."}` {
		t.Fatalf("missing server: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "DELETE", base+"/databases/"+fx.DBUUID, s.CoolifyToken()); code != 200 {
		t.Fatalf("delete database: %d %s", code, body)
	}
	if err := s.Wait(ctx, func() bool { return !s.HasDatabase(fx.DBUUID) }); err != nil {
		t.Fatal(err)
	}
	if !s.HasDockerVolume("postgres-data-" + fx.DBUUID) {
		t.Fatalf("volumes %+v: the database's volume should be left", s.DockerVolumes())
	}
	rec = httptest.NewRecorder()
	ctl.ServeHTTP(rec, httptest.NewRequest("GET", "/coolify/containers", nil))
	var got struct{ Containers []sim.DockerContainer }
	json.Unmarshal(rec.Body.Bytes(), &got)
	left := false
	for _, c := range got.Containers {
		left = left || (c.Name == fx.DBUUID && c.Left)
	}
	if !left {
		t.Fatalf("control API containers: %s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	ctl.ServeHTTP(rec, httptest.NewRequest("PUT", "/coolify/rate-limit", strings.NewReader(`{"per_minute":5}`)))
	if rec.Code != 204 {
		t.Fatalf("PUT rate-limit: %d", rec.Code)
	}
	h := headOf(t, base+"/version", s.CoolifyToken())
	if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("throttle headers %v", h)
	}
}

// headOf GETs url and returns the answer's headers.
func headOf(t *testing.T, url, token string) http.Header {
	t.Helper()
	req, err := http.NewRequestWithContext(waitCtx(t), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header
}
