package doctor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestResetNeeds: the checks before destroying, against the simulated
// Coolify through the real client: a root token passes; a token without
// read:sensitive fails definitely with that fix; a locked template value
// fails as locked (whatever the token); an unreachable server fails, not
// definitely (it may come back).
func TestResetNeeds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := sim.Start(ctx, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	app, err := s.EnsureTemplateApp()
	if err != nil {
		t.Fatal(err)
	}
	tmpl := []events.SlotTemplate{{ServerUUID: sim.ServerUUID, EnvFromApp: app}}
	client := func(tok string) *coolify.Client {
		return coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: tok, RateRetries: -1})
	}
	run := func(tok string) []doctor.Result {
		return doctor.Run(ctx, doctor.ResetNeeds(client(tok), tmpl))
	}
	failed := func(rs []doctor.Result) []doctor.Result { f, _ := doctor.Failed(rs); return f }

	if f := failed(run(s.CoolifyToken())); len(f) != 0 {
		t.Fatalf("root token: %+v", f)
	}
	f := failed(run(s.AddCoolifyToken(sim.RootTeam, "", "read", "write", "deploy")))
	if len(f) != 1 || !f[0].Definite || !strings.Contains(f[0].Detail, "read:sensitive") || f[0].Fix != doctor.SensitiveFix {
		t.Fatalf("token without read:sensitive: %+v", f)
	}
	f = failed(run(s.AddCoolifyToken(sim.RootTeam, "", "read", "read:sensitive")))
	if len(f) != 1 || !strings.Contains(f[0].Detail, "lacks the write ability") {
		t.Fatalf("read-only token: %+v", f)
	}
	if err := s.LockEnv(app, "APP_ENV"); err != nil {
		t.Fatal(err)
	}
	f = failed(run(s.CoolifyToken()))
	if len(f) != 1 || !strings.Contains(f[0].Detail, "APP_ENV locked") || !strings.Contains(f[0].Fix, "unlock") || strings.Contains(f[0].Fix, "read:sensitive") {
		t.Fatalf("locked var with a root token: %+v", f)
	}
	s.SetServerReachable(false)
	f = failed(doctor.Run(ctx, doctor.ResetNeeds(client(s.CoolifyToken()), []events.SlotTemplate{{ServerUUID: sim.ServerUUID}})))
	if len(f) != 1 || f[0].Definite || !strings.Contains(f[0].Detail, "cannot reach") {
		t.Fatalf("unreachable server: %+v", f)
	}
}
