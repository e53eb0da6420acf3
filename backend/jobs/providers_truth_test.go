package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
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
		// A URL ending in /api reaches Coolify's catch-all, which answers
		// JSON {"message":"Not found.","docs":…} (routes/api.php:431-433)
		// to every path: it read as "absent" before issue 22.
		"base URL ending in /api, not /api/v1": func(w *world) {
			w.deps.PaaS = coolify.New(coolify.Options{
				BaseURL: strings.TrimSuffix(w.sim.CoolifyURL(), "/v1"), Token: w.sim.CoolifyToken(), RateRetries: -1,
				Confirm: providers.Backoff{Initial: 2 * time.Millisecond, Max: 20 * time.Millisecond, Total: time.Second},
			})
		},
		// A token of another team gets Coolify's genuine "… not found."
		// for every live resource of the slot (issue 22 item 2).
		"token of another team": func(w *world) {
			w.deps.PaaS = coolify.New(coolify.Options{
				BaseURL: w.sim.CoolifyURL(), Token: w.sim.AddCoolifyToken(3, "Other Team", "root"), RateRetries: -1,
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
			if j.Status != events.StatusFailed {
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

// TestProviderCallsNameTheJobAttempt: every request a job makes — Coolify
// REST and git smart HTTP — carries the job id and the attempt that made
// it, in X-Slotkeeper-Job, the User-Agent and the request id, so a
// provider's own logs tie each call to a job (issue 12 item 11). The first
// attempt fails on a 500; the resumed second one must say attempt 2.
func TestProviderCallsNameTheJobAttempt(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	w.seed("tagged")
	w.occupy("tagged")
	w.sim.ResetRequests()
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteEnv, Status: 500, Times: 1})
	id := startJob(t, w, events.KindReset, "tagged").JobID
	if j := w.waitEnded(id); j.Status != events.StatusFailed {
		t.Fatalf("first attempt %s, want failed", j.Status)
	}
	if _, err := w.svc.Resume(context.Background(), bob, id); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(id, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed %s: %s", j.Status, j.LastError)
	}
	seen := map[string]bool{}
	last := 0
	for _, r := range w.sim.Requests() {
		n := 0
		fmt.Sscanf(strings.TrimPrefix(r.Job, id+"/"), "%d", &n)
		ua := fmt.Sprintf(" (job %s; attempt %d)", id, n)
		if n < 1 || r.Job != fmt.Sprintf("%s/%d", id, n) || !strings.HasSuffix(r.UserAgent, ua) || !strings.HasPrefix(r.RequestID, r.Job+"/") {
			t.Errorf("%s %s (%s): job %q, user agent %q, request id %q", r.Method, r.Path, r.Endpoint, r.Job, r.UserAgent, r.RequestID)
			continue
		}
		if n < last {
			t.Errorf("%s %s names attempt %d after attempt %d had called", r.Method, r.Path, n, last)
		}
		last = n
		seen[fmt.Sprintf("%s/%d", r.Server, n)] = true
		seen[r.Endpoint] = true
	}
	for _, want := range []string{"coolify/1", "coolify/2", "bitbucket/2", sim.EndpointDeleteEnv, sim.EndpointGitUploadPack, sim.EndpointGitReceivePack} {
		if !seen[want] {
			t.Errorf("no tagged request for %s (seen %v)", want, seen)
		}
	}
}
