package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

var bob = slots.Actor{Name: "bob", CorrelationID: "req-bob"}

// TestUndisturbedRuns runs each job kind to success and checks the log
// against the simulator's state.
func TestUndisturbedRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx := context.Background()

	t.Run("reset", func(t *testing.T) {
		fx := w.seed("r1")
		w.occupy("r1")
		res, err := w.svc.Release(ctx, bob, "r1")
		if err != nil {
			t.Fatal(err)
		}
		j := w.waitEnded(res.JobID)
		assertEq(t, "status", j.Status, events.StatusSucceeded)
		checkReset(t, w, fx, res.JobID)
	})
	t.Run("teardown", func(t *testing.T) {
		fx := w.seed("t1")
		res, err := w.svc.Teardown(ctx, bob, "t1")
		if err != nil {
			t.Fatal(err)
		}
		j := w.waitEnded(res.JobID)
		assertEq(t, "status", j.Status, events.StatusSucceeded)
		checkTeardown(t, w, fx, res.JobID, true)
	})
	t.Run("promote", func(t *testing.T) {
		fx := w.seed("p1")
		res, err := w.svc.Promote(ctx, bob, "p1", slots.PromoteCmd{Project: "PROMO", Name: "p1-copy"})
		if err != nil {
			t.Fatal(err)
		}
		j := w.waitEnded(res.JobID)
		if j.Status != events.StatusSucceeded {
			t.Fatalf("promote %s: %s", j.Status, j.LastError)
		}
		checkPromote(t, w, fx, "PROMO", "p1-copy")
	})
}

// checkReset: the DB, env vars and persistent volumes are gone in the
// simulator, the repo is at the template, the slot is vacant.
func checkReset(t *testing.T, w *world, fx sim.SlotFixture, jobID string) {
	t.Helper()
	if w.sim.HasDatabase(fx.DBUUID) {
		t.Error("database still exists after a successful reset")
	}
	if n := len(w.sim.Envs(fx.AppUUID)); n != 0 {
		t.Errorf("%d env vars left", n)
	}
	for _, s := range w.sim.Storages(fx.AppUUID) {
		if s.Kind == "persistent" {
			t.Errorf("persistent storage %s left", s.UUID)
		}
	}
	head, err := w.sim.RepoHeadSHA(fx.Repo.Project, fx.Repo.Slug, "main")
	if err != nil || head != fx.TemplateHead {
		t.Errorf("slot repo at %s (%v), want template %s", head, err, fx.TemplateHead)
	}
	st := w.final(fx.Name)
	if st.Occupied || st.Locked() || !st.VacatedBy[jobID] {
		t.Errorf("slot after reset: occupied=%v lock=%q", st.Occupied, st.LockJob)
	}
}

// checkTeardown: with done, everything is gone and the slot retired;
// otherwise the slot is incomplete and its remaining list names exactly what
// the simulator still holds.
func checkTeardown(t *testing.T, w *world, fx sim.SlotFixture, jobID string, done bool) {
	t.Helper()
	held := map[string]bool{
		events.ResDatabase:    w.sim.HasDatabase(fx.DBUUID),
		events.ResApplication: w.sim.HasApp(fx.AppUUID),
		events.ResRepository:  w.sim.HasRepo(fx.Repo.Project, fx.Repo.Slug),
		events.ResProject:     w.sim.HasProject(fx.ProjectUUID),
	}
	st := w.final(fx.Name)
	if done {
		for k, v := range held {
			if v {
				t.Errorf("%s still exists after a successful teardown", k)
			}
		}
		if !st.Retired || st.RetiredBy != jobID {
			t.Errorf("slot not retired by %s", jobID)
		}
		return
	}
	if st.Retired {
		t.Fatal("slot retired although the teardown did not succeed")
	}
	if !st.Incomplete {
		evs, err := w.store.ReadStream(context.Background(), events.SlotStream(fx.Name), 0, 0, events.Forward)
		logged := w.logEvents(events.SlotStream(fx.Name))
		t.Fatalf("no TeardownIncomplete after a failed teardown; slot stream by ReadStream (%v):%s\nby SubscribeAll:%s\njob:%s", err, history(evs), history(logged), history(w.jobEvents(jobID)))
	}
	listed := map[string]bool{}
	for _, r := range st.Remaining {
		listed[r.Kind] = true
	}
	for k, v := range held {
		if v && !listed[k] {
			t.Errorf("%s exists in the simulator but is not in the remaining list %v (untracked)", k, st.Remaining)
		}
	}
}

func checkPromote(t *testing.T, w *world, fx sim.SlotFixture, project, name string) {
	t.Helper()
	if !w.sim.HasRepo(project, name) {
		t.Fatalf("promote target %s/%s missing", project, name)
	}
	head, err := w.sim.RepoHeadSHA(project, name, "main")
	if err != nil || head != fx.RepoHead {
		t.Errorf("promoted repo at %s (%v), want the slot's %s", head, err, fx.RepoHead)
	}
	st := w.final(fx.Name)
	if len(st.PromotedBy) != 1 {
		t.Errorf("SlotPromoted recorded %d times", len(st.PromotedBy))
	}
}

var _ = time.Second

// TestDeadlineResetRuns: an occupancy deadline passes, the scheduler queues a
// reset (actor system:deadline), the engine runs it and the slot is vacant,
// with the simulator holding exactly what an undisturbed reset leaves.
func TestDeadlineResetRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	// The deadline passes on a fake clock (a real 200 ms one could pass
	// before a loaded machine even validated the occupy). It runs an hour
	// behind the engine's wall clock, so the queued reset is due at once.
	clk := clock.NewFake(time.Now().Add(-time.Hour))
	w.svc = slots.NewService(w.store, slots.Config{DeadlineReset: true, Clock: clk, Logger: testLogger()})
	w.startEngine(w.engineConfig())
	fx := w.seed("late")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := w.svc.Occupy(ctx, bob, "late", slots.OccupyCmd{Until: clk.Now().Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	go w.svc.RunDeadlines(ctx)
	bctx, bcancel := context.WithTimeout(ctx, w.waitLimit())
	defer bcancel()
	if err := clk.BlockUntil(bctx, 1); err != nil { // the scheduler's first pass armed the deadline
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	s := w.waitSlot("late", func(s *slots.SlotState) bool { return s.Locked() })
	evs, err := w.store.ReadStream(ctx, events.SlotStream("late"), s.Revision, 1, events.Forward)
	if err != nil || len(evs) != 1 || evs[0].Meta.Actor != slots.ActorDeadline {
		t.Fatalf("lock taken by %v (%v), want %s", evs, err, slots.ActorDeadline)
	}
	j := w.waitEnded(s.LockJob)
	assertEq(t, "status", j.Status, events.StatusSucceeded)
	checkReset(t, w, fx, j.ID)
}
