package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestForeign404DoesNotRetire: a Coolify base URL missing /api/v1, or an
// ingress answering HTML 404 to everything, must not make a teardown
// record the slot's resources "already absent" and retire it while they
// all still exist (issue 12 item 2).
func TestForeign404DoesNotRetire(t *testing.T) {
	t.Parallel()
	cases := map[string]func(w *world){
		"base URL without /api/v1": func(w *world) {
			w.deps.PaaS = coolify.New(coolify.Options{
				BaseURL: strings.TrimSuffix(w.sim.CoolifyURL(), "/api/v1"), Token: w.sim.CoolifyToken(), RateRetries: -1,
				Confirm: providers.Backoff{Initial: 2 * time.Millisecond, Max: 20 * time.Millisecond, Total: time.Second},
			})
		},
		"ingress 404 on every endpoint": func(w *world) {
			w.sim.AddFault(sim.Fault{Server: "coolify", Foreign404: true})
		},
	}
	for name, misroute := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, nil)
			fx := w.seed("lost")
			misroute(w)
			w.startEngine(w.engineConfig())
			res := startJob(t, w, events.KindTeardown, "lost")
			j := w.waitEnded(res.JobID)
			if j.Status != slots.StatusFailed {
				t.Fatalf("teardown %s, want failed:%s", j.Status, history(w.jobEvents(res.JobID)))
			}
			for _, ev := range w.jobEvents(res.JobID) {
				if strings.Contains(string(ev.Data), `"already_absent":true`) {
					t.Errorf("%s records a resource already absent: %s", ev.Type, ev.Data)
				}
			}
			if !w.sim.HasDatabase(fx.DBUUID) || !w.sim.HasApp(fx.AppUUID) || !w.sim.HasProject(fx.ProjectUUID) {
				t.Fatal("a Coolify resource is gone although no request reached Coolify's API")
			}
			checkTeardown(t, w, fx, res.JobID, false) // not retired; remaining names all it holds
		})
	}
}
