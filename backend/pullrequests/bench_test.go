package pullrequests_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// BenchmarkPROpenedToURL: a pull request opened → its app URL on the PR,
// against the simulators (real git, the real engine), split per phase from
// the log's own times: accepted (the delivery's PRChanged) → slot taken →
// job queued → head pushed → deployed and running → URL posted. The
// baseline, measured in the same run on the same slots, is the pr_deploy
// job alone (DeployPR directly: queued → succeeded), so the flow's own
// cost is the difference. SLOTKEEPER_BENCH_PRS sets the number of PRs
// (default 5).
func BenchmarkPROpenedToURL(b *testing.B) {
	n := 5
	if v, err := strconv.Atoi(os.Getenv("SLOTKEEPER_BENCH_PRS")); err == nil && v > 0 {
		n = v
	}
	for range b.N {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("bp%d", i)
		}
		w := newWorld(b, names...)
		phases := map[string][]time.Duration{}
		var total, base []time.Duration
		for i := range n {
			d, err := w.sim.OpenPR("APPS", "shop", fmt.Sprintf("feature/b%d", i))
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			w.deliver(d, secret)
			phases["delivery accepted (answered)"] = append(phases["delivery accepted (answered)"], time.Since(t0))
			w.waitPR(d.ID, ready)
			stream := events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, d.ID)
			at := map[string]time.Time{}
			var job string
			for _, ev := range w.read(stream) {
				if _, ok := at[ev.Type]; !ok {
					at[ev.Type] = ev.Meta.Time
				}
				if p, _ := events.Decode(ev); p != nil {
					if q, ok := p.(events.PRDeployQueued); ok {
						job = q.JobID
					}
					if c, ok := p.(events.PRCommentPosted); ok && c.Phase == "ready" {
						at["ready"] = ev.Meta.Time
					}
				}
			}
			for _, ev := range w.read(events.JobStream(job)) {
				if _, ok := at[ev.Type]; !ok {
					at[ev.Type] = ev.Meta.Time
				}
			}
			for _, ph := range benchPhases[1:] {
				phases[ph.name] = append(phases[ph.name], at[ph.to].Sub(at[ph.from]))
			}
			total = append(total, at["ready"].Sub(at["PRChanged"]))
		}
		// Baseline: the job alone, a new head on each slot now held.
		for i := range n {
			head, err := w.sim.CommitFile("APPS", "shop", fmt.Sprintf("feature/b%d", i), "base.txt", "baseline")
			if err != nil {
				b.Fatal(err)
			}
			st, _ := slots.LoadSlot(context.Background(), w.store, names[i])
			res, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bench"}, names[i],
				slots.DeployPRCmd{Source: events.RepoRef{Project: "APPS", Slug: "shop"}, Branch: fmt.Sprintf("feature/b%d", i), Head: head, Occupant: st.Occupant, OccupantID: st.OccupantID})
			if err != nil {
				b.Fatal(err)
			}
			evs := w.waitJobEnd(res.JobID)
			base = append(base, evs[len(evs)-1].Meta.Time.Sub(evs[0].Meta.Time))
		}
		for _, ph := range benchPhases {
			fmt.Printf("pr-flow: %-44s median %8.1f ms\n", ph.name, ms(median(phases[ph.name])))
		}
		tm, bm := median(total), median(base)
		fmt.Printf("pr-flow: opened → URL on the PR   median %8.1f ms over %d PRs; baseline pr_deploy job alone %8.1f ms; ratio %.2f\n", ms(tm), n, ms(bm), float64(tm)/float64(bm))
		b.ReportMetric(ms(tm), "ms/pr")
	}
}

// benchPhases are the flow's phases in order, each between two events of
// the log (the PR's stream and its job's; "ready" is the PRCommentPosted
// that put the URL on the PR). The first is the delivery's own answer
// time, measured around Receive.
var benchPhases = []struct{ name, from, to string }{
	{name: "delivery accepted (answered)"},
	{"slot taken (PRChanged→PRSlotTaken)", "PRChanged", "PRSlotTaken"},
	{"job queued (PRSlotTaken→PRDeployQueued)", "PRSlotTaken", "PRDeployQueued"},
	{"push (PRDeployQueued→PRHeadPushed)", "PRDeployQueued", "PRHeadPushed"},
	{"deploy wait (PRHeadPushed→AppDeployed)", "PRHeadPushed", "AppDeployed"},
	{"comment posted (AppDeployed→URL on the PR)", "AppDeployed", "ready"},
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(l []time.Duration) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[len(s)/2]
}

func (w *world) read(stream string) []events.RecordedEvent {
	evs, err := w.store.ReadStream(context.Background(), stream, 0, 0, events.Forward)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

// waitJobEnd waits (on the log) for the job's terminal event and returns
// its stream.
func (w *world) waitJobEnd(id string) []events.RecordedEvent {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := fmt.Errorf("ended")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(id)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if events.IsTerminal(ev.Type) {
			return stop
		}
		return nil
	})
	if err != stop {
		w.t.Fatalf("job %s: %v", id, err)
	}
	return w.read(events.JobStream(id))
}
