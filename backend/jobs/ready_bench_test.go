package jobs_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// BenchmarkReadyReset measures a reset's wall time against the simulators,
// split per step: the ready reset (issue 23: fresh database, env vars,
// new volumes, deploy until healthy) against the old reset (deletes and
// force push only) in the same run, alternating, on the same world.
// SLOTKEEPER_BENCH_RESETS sets how many of each (default 10).
func BenchmarkReadyReset(b *testing.B) {
	n := 10
	if v, err := strconv.Atoi(os.Getenv("SLOTKEEPER_BENCH_RESETS")); err == nil && v > 0 {
		n = v
	}
	w := newWorld(b, nil)
	w.startEngine(w.engineConfig())
	w.seed("old")
	w.seedReady("new", "")
	per := map[string]map[string][]time.Duration{"old": {}, "new": {}}
	total := map[string][]time.Duration{}
	for i := 0; i < n; i++ {
		for _, slot := range []string{"old", "new"} {
			w.occupy(slot)
			res, err := w.svc.Release(b.Context(), bob, slot)
			if err != nil {
				b.Fatal(err)
			}
			j := w.waitEnded(res.JobID)
			if j.Status != events.StatusSucceeded {
				b.Fatalf("%s reset %s: %s", slot, j.Status, j.LastError)
			}
			var first, last time.Time
			started := map[string]time.Time{}
			for _, ev := range w.jobEvents(res.JobID) {
				if ev.Type == "JobClaimed" && first.IsZero() {
					first = ev.Meta.Time
				}
				if ev.Type == "JobSucceeded" {
					last = ev.Meta.Time
				}
				p, err := events.Decode(ev)
				if err != nil {
					continue
				}
				if st, ok := p.(events.StepStarted); ok {
					if _, seen := started[st.Step]; !seen {
						started[st.Step] = ev.Meta.Time
					}
				}
				if events.IsStepResult(ev.Type) {
					step := stepOfResult(p)
					if t0, ok := started[step]; ok {
						per[slot][step] = append(per[slot][step], ev.Meta.Time.Sub(t0))
					}
				}
			}
			total[slot] = append(total[slot], last.Sub(first))
		}
	}
	med := func(d []time.Duration) time.Duration { return pct(d, 0.5) }
	for _, slot := range []string{"old", "new"} {
		steps := events.StepNames(events.KindReset, false)
		if slot == "new" {
			steps = events.StepNames(events.KindReset, true)
		}
		for _, s := range steps {
			fmt.Printf("ready-reset %s step %-20s median %8.1f ms\n", slot, s, ms(med(per[slot][s])))
		}
		fmt.Printf("ready-reset %s total median %8.1f ms p90 %8.1f ms (n=%d)\n", slot, ms(med(total[slot])), ms(pct(total[slot], 0.9)), len(total[slot]))
	}
	fmt.Printf("ready-reset ratio new/old (median total) %.2f\n", float64(med(total["new"]))/float64(med(total["old"])))
}

// stepOfResult is the step a step-result event names.
func stepOfResult(p events.Payload) string {
	switch e := p.(type) {
	case events.DBDeleted:
		return e.Step
	case events.EnvVarsDeleted:
		return e.Step
	case events.VolumeMountsRemoved:
		return e.Step
	case events.ForcePushed:
		return e.Step
	case events.DBCreated:
		return e.Step
	case events.EnvRestored:
		return e.Step
	case events.VolumesCreated:
		return e.Step
	case events.AppDeployed:
		return e.Step
	case events.StepSucceeded:
		return e.Step
	}
	return ""
}
