package jobs_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Finished jobs leave the engine's index (issue 13, DESIGN.md invariant 14):
// after N failed teardowns whose locks were released the index holds none of
// them, a resume of one of them (which left memory) still runs — the engine
// folds it again from its stream — and once that ends the index is empty.
func TestFinishedJobsLeaveTheEngineIndex(t *testing.T) {
	t.Parallel()
	const n = 20
	w := newWorld(t, nil)
	w.seed("mem")
	fault := w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Status: http.StatusForbidden})
	eng, stop := w.startEngine(w.engineConfig())
	ctx := context.Background()
	bob := slots.Actor{Name: "bob"}
	settled := func(what string) {
		t.Helper()
		head, err := w.store.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, w.waitLimit())
		defer cancel()
		if err := eng.WaitApplied(wctx, head); err != nil {
			t.Fatalf("%s: engine index did not reach position %d: %v", what, head, err)
		}
	}

	var ids []string
	for i := range n {
		res, err := w.svc.Teardown(ctx, bob, "mem")
		if err != nil {
			t.Fatalf("teardown %d: %v", i, err)
		}
		if j := w.waitEnded(res.JobID); j.Status != events.StatusFailed {
			t.Fatalf("teardown %d: %s, want failed", i, j.Status)
		}
		ids = append(ids, res.JobID)
	}
	settled("after the failures")
	// The last job's attempt may still be on its way out (it released its
	// lock in the background); every earlier one must be gone.
	if got := eng.IndexedJobs(); got > 1 {
		t.Fatalf("engine index holds %d jobs after %d failed jobs whose locks were released; want ≤ 1 (finished jobs leave memory)", got, n)
	}

	// Resume the first job: the index forgot it, the engine reloads it from
	// its stream and runs it to success.
	w.sim.RemoveFault(fault)
	if _, err := w.svc.Resume(ctx, bob, ids[0]); err != nil {
		t.Fatalf("resume of a job that left memory: %v", err)
	}
	if j := w.waitEndedN(ids[0], 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed job: %s (%s), want succeeded", j.Status, j.LastError)
	}
	if s := w.waitSlot("mem", func(s *slots.SlotState) bool { return s.Retired }); s.RetiredBy != ids[0] {
		t.Fatalf("slot retired by %q, want %s", s.RetiredBy, ids[0])
	}
	settled("after the resume")
	stop() // every attempt and maintenance task has exited
	if got := eng.IndexedJobs(); got != 0 {
		t.Fatalf("engine index holds %d jobs after every job finished, want 0", got)
	}
}
