package coolify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// foreign404s are 404 answers that are not Coolify's own "does not exist"
// (a JSON object with a message): they say nothing about the resource.
var foreign404s = []struct {
	name  string
	fault sim.Fault
}{
	{"ingress HTML", sim.Fault{Foreign404: true}},
	{"other JSON", sim.Fault{Status: 404, Body: `{"error":"not found","status":404}`}},
	{"JSON without message", sim.Fault{Status: 404, Body: `{"message":""}`}},
	{"plain text", sim.Fault{Status: 404, Body: "404 page not found"}},
}

// TestForeign404IsNeverAbsent: a 404 without Coolify's own body makes a
// lookup Unknown, a delete an uncertain failure (never AlreadyAbsent), and
// does not confirm a queued delete.
func TestForeign404IsNeverAbsent(t *testing.T) {
	b := setup(t, time.Hour) // queued deletes never complete
	ctx := ctxT(t)
	gets := map[string]func(context.Context, string) (providers.Lookup, error){
		sim.EndpointGetDatabase: func(ctx context.Context, id string) (providers.Lookup, error) {
			_, l, err := b.c.GetDatabase(ctx, id)
			return l, err
		},
		sim.EndpointGetApplication: func(ctx context.Context, id string) (providers.Lookup, error) {
			_, l, err := b.c.GetApplication(ctx, id)
			return l, err
		},
		sim.EndpointGetProject: func(ctx context.Context, id string) (providers.Lookup, error) {
			_, l, err := b.c.GetProject(ctx, id)
			return l, err
		},
	}
	dels := map[string]func(context.Context) (providers.DeleteOutcome, error){
		sim.EndpointDeleteDatabase: func(ctx context.Context) (providers.DeleteOutcome, error) {
			return b.c.DeleteDatabase(ctx, b.fx.DBUUID)
		},
		sim.EndpointDeleteApplication: func(ctx context.Context) (providers.DeleteOutcome, error) {
			return b.c.DeleteApplication(ctx, b.fx.AppUUID)
		},
		sim.EndpointDeleteEnv: func(ctx context.Context) (providers.DeleteOutcome, error) {
			return b.c.DeleteEnv(ctx, b.fx.AppUUID, b.fx.EnvUUIDs[0])
		},
		sim.EndpointDeleteStorage: func(ctx context.Context) (providers.DeleteOutcome, error) {
			return b.c.DeleteStorage(ctx, b.fx.AppUUID, b.fx.StorageUUIDs[0])
		},
		sim.EndpointDeleteProject: func(ctx context.Context) (providers.DeleteOutcome, error) {
			return b.c.DeleteProject(ctx, b.fx.ProjectUUID)
		},
	}
	for _, fc := range foreign404s {
		for ep, get := range gets {
			t.Run("lookup/"+fc.name+"/"+ep, func(t *testing.T) {
				f := fc.fault
				f.Endpoint = ep
				id := b.sim.AddFault(f)
				defer b.sim.RemoveFault(id)
				// Even for an id that really does not exist: the answer
				// did not come from Coolify.
				for _, uuid := range []string{b.fx.DBUUID, "zzzzzzzzzzzzzzzzzzzzzzzz"} {
					l, err := get(ctx, uuid)
					checkErr(t, err, providers.CodeForeign, 404, false)
					if l != providers.Unknown {
						t.Fatalf("lookup %v, want unknown", l)
					}
				}
			})
		}
		for ep, del := range dels {
			t.Run("delete/"+fc.name+"/"+ep, func(t *testing.T) {
				f := fc.fault
				f.Endpoint = ep
				id := b.sim.AddFault(f)
				defer b.sim.RemoveFault(id)
				out, err := del(ctx)
				checkErr(t, err, providers.CodeForeign, 404, true)
				if out != 0 {
					t.Fatalf("outcome %v, want none", out)
				}
			})
		}
	}
	if !b.sim.HasDatabase(b.fx.DBUUID) || !b.sim.HasApp(b.fx.AppUUID) || !b.sim.HasProject(b.fx.ProjectUUID) || !b.sim.HasEnv(b.fx.EnvUUIDs[0]) || !b.sim.HasStorage(b.fx.StorageUUIDs[0]) {
		t.Fatal("a foreign 404 fault let a delete through")
	}
}

// TestForeign404DoesNotConfirmDelete: once the delete is queued, an
// ingress answering 404 to every GET is not the resource being gone.
func TestForeign404DoesNotConfirmDelete(t *testing.T) {
	b := setup(t, time.Hour)
	b.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Foreign404: true})
	out, err := b.c.DeleteDatabase(ctxT(t), b.fx.DBUUID)
	checkErr(t, err, providers.CodeNotConfirmed, 404, true)
	if out != 0 || !strings.Contains(err.Error(), "last check") {
		t.Fatalf("outcome %v (%v), want not confirmed", out, err)
	}
	polls := 0
	for _, r := range b.sim.Requests() {
		if r.Endpoint == sim.EndpointGetDatabase && r.Status == 404 {
			polls++
		}
	}
	if polls < 2 {
		t.Fatalf("%d confirming GETs; a foreign 404 must not end the polling", polls)
	}
}

// TestBaseURLWithoutAPIPath: a base URL missing /api/v1 reaches the web
// application, which answers HTML 404 to everything: nothing is absent and
// nothing is deleted.
func TestBaseURLWithoutAPIPath(t *testing.T) {
	b := setup(t, 0)
	ctx := ctxT(t)
	c := coolify.New(coolify.Options{BaseURL: strings.TrimSuffix(b.sim.CoolifyURL(), "/api/v1"), Token: token,
		Confirm: providers.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond, Total: 300 * time.Millisecond}})
	_, l, err := c.GetDatabase(ctx, b.fx.DBUUID)
	checkErr(t, err, providers.CodeForeign, 404, false)
	if l != providers.Unknown {
		t.Fatalf("lookup %v", l)
	}
	out, err := c.DeleteDatabase(ctx, b.fx.DBUUID)
	checkErr(t, err, providers.CodeForeign, 404, true)
	if out != 0 {
		t.Fatalf("delete outcome %v", out)
	}
	out, err = c.DeleteProject(ctx, b.fx.ProjectUUID)
	checkErr(t, err, providers.CodeForeign, 404, true)
	if out != 0 || !b.sim.HasDatabase(b.fx.DBUUID) || !b.sim.HasProject(b.fx.ProjectUUID) {
		t.Fatalf("delete project outcome %v", out)
	}
}
