package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

// TestReadyzCostsAFewRequestsAMinute: /readyz's probes used to spend 48
// Coolify requests a minute per process (4 every 5 s) out of a budget of
// 200 shared by every process and job of the user (issue 32). A passing
// provider probe now runs once a minute, with the ready reset's checks
// included; a failing one runs every round (a recovery shows at once), and
// a token without read:sensitive makes the process not ready, naming it.
func TestReadyzCostsAFewRequestsAMinute(t *testing.T) {
	s := startSim(t)
	app, err := s.EnsureTemplateApp()
	if err != nil {
		t.Fatal(err)
	}
	templates := func(context.Context) []events.SlotTemplate {
		return []events.SlotTemplate{{ServerUUID: sim.ServerUUID, EnvFromApp: app}}
	}
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	newReadiness := func(tok string) *readiness {
		paas := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: tok})
		git := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken()})
		return &readiness{interval: 5 * time.Second, clock: fc, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			probes: providerProbes(paas, git, slots.Scope{}, templates)}
	}
	count := func() int {
		n := 0
		for _, r := range s.Requests() {
			if r.Server == "coolify" {
				n++
			}
		}
		return n
	}
	ctx := context.Background()
	r := newReadiness(s.CoolifyToken())
	// Two minutes of rounds, every 5 s.
	for i := 0; i < 24; i++ {
		r.round(ctx)
		if err := r.err(); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		fc.Advance(5 * time.Second)
	}
	perMinute := float64(count()) / 2
	t.Logf("/readyz: %.0f Coolify requests a minute per process (was 48)", perMinute)
	if perMinute > 6 {
		t.Fatalf("/readyz spends %.0f Coolify requests a minute", perMinute)
	}
	nosens := newReadiness(s.AddCoolifyToken(sim.RootTeam, "", "read", "write", "deploy"))
	nosens.round(ctx)
	if err := nosens.err(); err == nil || !strings.Contains(err.Error(), "read:sensitive") {
		t.Fatalf("/readyz with a token without read:sensitive: %v", err)
	}
}

// TestDoctorChecksWhatAReadyResetNeeds: with a slot registered with a
// template that copies env values, `slotkeeper doctor` fails a token
// without read:sensitive, naming the fix (issue 32); the root token passes.
func TestDoctorChecksWhatAReadyResetNeeds(t *testing.T) {
	s := startSim(t)
	project := s.AddProject("pool")
	app, err := s.EnsureTemplateApp()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	st, err := boltstore.Open(data, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Append(context.Background(), "slot-one", events.NoStream(), events.New(events.SlotRegistered{
		Slot: "one", ProjectUUID: project, Template: &events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: app},
	}, events.Metadata{Actor: "test"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(tok string) (int, string) {
		var out, errb strings.Builder
		code := runWith(context.Background(), append([]string{"doctor", "--data", data},
			realArgs(s, s.CoolifyURL(), tok, "--coolify-projects", project)...), noEnv, &out, &errb, nil)
		return code, out.String() + errb.String()
	}
	if _, out := run(s.CoolifyToken()); !strings.Contains(out, "PASS coolify: env values of template application "+app) ||
		!strings.Contains(out, "PASS coolify: server "+sim.ServerUUID) {
		t.Errorf("root token:\n%s", out)
	}
	code, out := run(s.AddCoolifyToken(sim.RootTeam, "", "read", "write", "deploy"))
	if code != exitFailed || !strings.Contains(out, "FAIL coolify: env values of template application "+app) || !strings.Contains(out, "fix: make a token that also has the read:sensitive ability") {
		t.Errorf("token without read:sensitive: exit %d\n%s", code, out)
	}
}
