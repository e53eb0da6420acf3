package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestCoolifySim runs the Coolify cases against the simulator: what the
// simulator claims about Coolify is what the client's reading needs.
func TestCoolifySim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Builds last an hour, so a deployment stays queued or in progress
	// (the skipped-deploy case needs one that is).
	s, err := sim.Start(ctx, sim.Options{DeleteDelay: 50 * time.Millisecond, BuildDuration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	project := s.AddProject("conformance-scratch")
	n := 0
	Coolify(t, CoolifyTarget{
		URL: s.CoolifyURL(), Token: s.CoolifyToken(),
		OtherTeamToken: s.AddCoolifyToken(9, "Other Team", "read", "write"),
		Project:        project,
		Scratch: func(t *testing.T) Scratch {
			n++
			name := "scratch-" + string(rune('a'+n))
			var sc Scratch
			var err error
			if sc.App, err = s.AddApp(project, name); err != nil {
				t.Fatal(err)
			}
			sc.StorageName = name + "-data"
			if sc.Storage, err = s.AddStorage(sc.App, sc.StorageName, "persistent", "/data"); err != nil {
				t.Fatal(err)
			}
			if sc.Env, err = s.AddEnv(sc.App, "SCRATCH", "1"); err != nil {
				t.Fatal(err)
			}
			if sc.DB, err = s.AddDatabase(project, name+"-db"); err != nil {
				t.Fatal(err)
			}
			return sc
		},
		DockerVolume:     func(name string) (bool, bool) { return s.HasDockerVolume(name), true },
		ServerUUID:       sim.ServerUUID,
		NoSensitiveToken: s.AddCoolifyToken(sim.RootTeam, "", "read", "write"),
		Provoke429: func(t *testing.T) func() {
			s.SetCoolifyRateLimit(1)
			return func() { s.SetCoolifyRateLimit(0) }
		},
	})
}
