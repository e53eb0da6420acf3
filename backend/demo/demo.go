// Package demo seeds the demo slot pool that `slotkeeper serve` shows when
// it runs on the simulators with an empty log: eight slots whose resources
// exist in the simulated Coolify and Bitbucket, five of them occupied with
// deadlines minutes away, so that the board is alive from the first second
// (deadlines pass, resets run, countdowns tick).
package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Simulator creates a slot's resources (implemented by *sim.Sim).
type Simulator interface {
	SeedSlot(name string) (sim.SlotFixture, error)
}

// Slot is one slot of the pool: who holds it and for how long (an empty
// Occupant leaves it vacant).
type Slot struct {
	Name     string
	Occupant string
	For      time.Duration
}

// Pool is the demo pool.
var Pool = []Slot{
	{"aurora", "alice", 3 * time.Minute},
	{"birch", "bob", 7 * time.Minute},
	{"cedar", "", 0},
	{"dune", "chen", 12 * time.Minute},
	{"ember", "", 0},
	{"fjord", "dana", 25 * time.Minute},
	{"glacier", "", 0},
	{"harbor", "eli", 45 * time.Minute},
}

// PRRepo is the application repository the demo links to the pool (its
// pull requests get slots): the Simulator page opens pull requests on it,
// and the simulated Bitbucket creates it with the first one.
const PRRepo = "DEMO/webshop"

// Actor is who the seeding events are attributed to.
const Actor = "system:demo"

// templateApps is a simulator that also holds the template application a
// ready reset copies env vars from (*sim.Sim).
type templateApps interface {
	EnsureTemplateApp() (string, error)
}

// SeedWorld creates each slot's resources in the simulator (the slots are
// not registered yet, so the scope can be set from them first), and the
// template application their template copies env vars from.
func SeedWorld(sm Simulator, pool []Slot) ([]sim.SlotFixture, error) {
	fxs := make([]sim.SlotFixture, 0, len(pool))
	tmplApp := ""
	if ta, ok := sm.(templateApps); ok {
		var err error
		if tmplApp, err = ta.EnsureTemplateApp(); err != nil {
			return nil, fmt.Errorf("demo: simulate the template application: %w", err)
		}
	}
	for _, s := range pool {
		fx, err := sm.SeedSlot(s.Name)
		if err != nil {
			return nil, fmt.Errorf("demo: simulate slot %s: %w", s.Name, err)
		}
		fx.TemplateApp = tmplApp
		fxs = append(fxs, fx)
	}
	return fxs, nil
}

// Template is the demo slots' template (issue 23): a fresh database of the
// same engine, the template application's env vars plus DATABASE_URL, the
// template deployed and healthy.
func Template(fx sim.SlotFixture) *events.SlotTemplate {
	if fx.TemplateApp == "" {
		return nil
	}
	return &events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: fx.TemplateApp, Volumes: []string{sim.SlotVolumeMount}}
}

// Register registers the seeded slots (fxs, in pool's order) and occupies
// the occupied ones from now.
func Register(ctx context.Context, cmds slots.Commands, fxs []sim.SlotFixture, pool []Slot, now time.Time) error {
	for i, s := range pool {
		fx := fxs[i]
		a := slots.Actor{Name: Actor, CorrelationID: "demo-seed-" + s.Name}
		err := cmds.Register(ctx, a, slots.RegisterCmd{
			Name: s.Name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
			Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
			TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug},
			TemplateRef:  fx.TemplateRef, Branch: sim.DefaultBranch,
			Template: Template(fx),
		})
		if err != nil {
			return fmt.Errorf("demo: register slot %s: %w", s.Name, err)
		}
		if s.Occupant == "" {
			continue
		}
		a.Name = s.Occupant
		if err := cmds.Occupy(ctx, a, s.Name, slots.OccupyCmd{By: s.Occupant, Until: now.Add(s.For)}); err != nil {
			return fmt.Errorf("demo: occupy slot %s: %w", s.Name, err)
		}
	}
	return nil
}
