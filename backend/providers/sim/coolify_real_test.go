package sim_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// doT is do with the body trimmed (Coolify's JSON has no trailing newline).
func doT(t *testing.T, ctx context.Context, method, url, token string) (int, string) {
	t.Helper()
	code, body := do(t, ctx, method, url, token)
	return code, strings.TrimSpace(body)
}

// TestCoolifyTeamsAndVolumes: lists and lookups are the token's team's;
// a queued app delete whose server cleanup fails deletes the rows and
// leaves the Docker volumes, visible through the control API; the
// catch-all answers the rest of /api.
func TestCoolifyTeamsAndVolumes(t *testing.T) {
	s := startSim(t, sim.Options{})
	ctx := waitCtx(t)
	fx, err := s.SeedSlot("t1")
	if err != nil {
		t.Fatal(err)
	}
	base := s.CoolifyURL()
	other := s.AddCoolifyToken(4, "Four", "read", "write")
	if code, body := doT(t, ctx, "GET", base+"/applications", other); code != 200 || body != "[]" {
		t.Fatalf("another team's list: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "GET", base+"/applications/"+fx.AppUUID, other); code != 404 || body != `{"message":"Application not found."}` {
		t.Fatalf("another team's lookup: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "DELETE", base+"/applications/"+fx.AppUUID+"/envs/"+fx.EnvUUIDs[0], other); code != 404 || body != `{"message":"Application not found."}` {
		t.Fatalf("another team's env delete: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "GET", base+"/team", other); code != 200 || !strings.Contains(body, `"name":"Four"`) {
		t.Fatalf("team: %d %s", code, body)
	}
	if code, body := doT(t, ctx, "GET", strings.TrimSuffix(base, "/v1")+"/applications/"+fx.AppUUID, s.CoolifyToken()); code != 404 || body != `{"message":"Not found.","docs":"https://coolify.io/docs"}` {
		t.Fatalf("catch-all: %d %s", code, body)
	}
	vol := s.DockerVolumes()
	if len(vol) != 1 {
		t.Fatalf("volumes %+v", vol)
	}
	s.FailServerCleanup(true)
	if code, body := doT(t, ctx, "DELETE", base+"/applications/"+fx.AppUUID+"?delete_volumes=true", s.CoolifyToken()); code != 200 {
		t.Fatalf("delete app: %d %s", code, body)
	}
	if err := s.Wait(ctx, func() bool { return !s.HasApp(fx.AppUUID) }); err != nil {
		t.Fatalf("the queued delete never ended: %v", err)
	}
	if code, body := doT(t, ctx, "GET", base+"/applications/"+fx.AppUUID, s.CoolifyToken()); code != 404 {
		t.Fatalf("after the delete: %d %s", code, body)
	}
	if !s.HasDockerVolume(vol[0].Name) {
		t.Fatal("the failed server cleanup removed the Docker volume")
	}
	rec := httptest.NewRecorder()
	s.ControlHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/coolify/volumes", nil))
	var got struct{ Volumes []sim.DockerVolume }
	if json.Unmarshal(rec.Body.Bytes(), &got); len(got.Volumes) != 1 || got.Volumes[0].Name != vol[0].Name {
		t.Fatalf("control API volumes: %s", rec.Body.String())
	}
}
