package jobs_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// stampedTransport notes the simulated time of every request the Coolify
// client sends, so the bench can say how many fall in any simulated minute
// (Coolify's budget is 200 a minute per user, REAL-BEHAVIOUR.md "rate
// limit keying").
type stampedTransport struct {
	c  *waitClock
	mu sync.Mutex
	at []time.Time
}

func (s *stampedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if waitRead(r) {
		s.mu.Lock()
		s.at = append(s.at, s.c.Now())
		s.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// waitRead: a read the deploy step's waits make (the deployment, the
// queue, the application, the database). Only these are stamped: the
// reset's other calls take no simulated time on the fake clock (it moves
// only while every job waits), so they would all fall in one simulated
// instant.
func waitRead(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	p := strings.TrimPrefix(r.URL.Path, "/api/v1")
	return strings.HasPrefix(p, "/deployments") ||
		strings.Count(p, "/") == 2 && (strings.HasPrefix(p, "/applications/") || strings.HasPrefix(p, "/databases/"))
}

// peakPerMinute is the most requests in any 60 simulated seconds.
func (s *stampedTransport) peakPerMinute() int {
	s.mu.Lock()
	at := append([]time.Time(nil), s.at...)
	s.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	peak, lo := 0, 0
	for hi := range at {
		for at[hi].Sub(at[lo]) >= time.Minute {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

// BenchmarkMondayMorning (issue 32): eight ready resets at once against
// the simulators on a fake clock, every build 60 simulated seconds,
// concurrent_builds 2 (Coolify's default): how many were ready with no
// resume, requests per reset, the 429s seen and the peak requests in a
// simulated minute (the waits' reads), and the simulated time against the least possible —
// four build rounds, 240 s. Run with the engine's default 4 workers and
// with 8 (a wait holds its worker).
func BenchmarkMondayMorning(b *testing.B) {
	for _, workers := range []int{8, 4} {
		mondayMorning(b, workers)
	}
}

func mondayMorning(b *testing.B, workers int) {
	const n, build = 8, 60 * time.Second
	w := newWaitWorld(b)
	// Coolify's default budget, 200 requests a minute per user
	// (REAL-BEHAVIOUR.md "rate limit keying"), on the simulated clock; the
	// client's budget (httpc.Budget) waits on the same clock, so a call
	// waiting for the budget sleeps like a poll.
	w.sim.SetCoolifyRateLimit(200)
	w.fc.mu.Lock()
	w.fc.longest = budgetMax
	w.fc.mu.Unlock()
	st := &stampedTransport{c: w.fc}
	paas := coolify.New(coolify.Options{BaseURL: w.sim.CoolifyURL(), Token: w.sim.CoolifyToken(), RateRetries: -1, Clock: w.fc,
		HTTP: &http.Client{Transport: st, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
	w.deps.PaaS = paas
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("monday-%d", i)
		w.seedWait(names[i], build, nil)
	}
	cfg := w.config()
	cfg.Workers = workers
	w.startEngine(cfg)
	w.sim.ResetRequests()
	st.mu.Lock()
	st.at = nil
	st.mu.Unlock()
	t0 := w.fc.Now()
	ids := make([]string, n)
	for i, s := range names {
		ids[i] = w.start(s)
	}
	ready, resumes := 0, 0
	var end time.Time
	for _, id := range ids {
		j := w.waitEnded(id)
		resumes += j.Resumes
		if j.Status == events.StatusSucceeded && j.Resumes == 0 {
			ready++
		}
		for _, ev := range w.jobEvents(id) {
			if ev.Type == "JobSucceeded" && ev.Meta.Time.After(end) {
				end = ev.Meta.Time
			}
		}
	}
	coolReqs, waitReqs, deploys, limited := 0, 0, 0, 0
	for _, r := range w.sim.Requests() {
		if r.Status == http.StatusTooManyRequests {
			limited++
		}
		if r.Server != "coolify" {
			continue
		}
		coolReqs++
		switch r.Endpoint {
		case sim.EndpointDeploy:
			deploys++
		case sim.EndpointGetDeployment, sim.EndpointActiveDeployments, sim.EndpointListDeployments, sim.EndpointGetApplication, sim.EndpointGetDatabase:
			waitReqs++
		}
	}
	budget := paas.Budget()
	took := end.Sub(t0)
	least := time.Duration((n+1)/2) * build
	fmt.Printf("monday-morning workers=%d ready-without-resume %d/%d (resumes %d, POST /deploy %d)\n", workers, ready, n, resumes, deploys)
	fmt.Printf("monday-morning workers=%d coolify requests per reset %.1f (of which polls and reads while waiting %.1f); 429s seen %d (client: %d); calls that waited for the 200/min budget %d; peak wait reads per simulated minute %d for all eight\n",
		workers, float64(coolReqs)/n, float64(waitReqs)/n, limited, budget.Limited, budget.Waited, st.peakPerMinute())
	fmt.Printf("monday-morning workers=%d simulated time %s vs least possible %s (4 build rounds of %s at concurrent_builds 2): ratio %.2f\n",
		workers, took.Round(time.Second), least, build, float64(took)/float64(least))
}
