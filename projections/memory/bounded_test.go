package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// A read model that keeps only recent jobs and audit entries answers every
// query exactly like one that keeps everything — a job that left memory, its
// events, its slot's job pages and old audit pages come from the log — while
// it holds no more views than the open jobs and its limit. Jobs that left
// memory and are then resumed or notified about come back correctly, both on
// the live path (the runner) and the replay path.
func TestBoundedAnswersLikeEverything(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	lim := memory.Limits{RecentJobs: 5, RecentAudit: 50}
	live := memory.NewWithLimits(log, lim)
	r := projections.NewRunner(log, live, projections.RunnerOptions{MaxBatch: 64})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()

	g := projtest.NewGen(log, 13)
	projtest.Must(t, g.Random(ctx, 6, 3000))
	// A job fails, many others finish after it, then it is resumed and
	// notified about: by then its view has left memory.
	s, err := g.Register(ctx, "late")
	projtest.Must(t, err)
	failed, err := g.Job(ctx, s, events.KindReset, projtest.Fail)
	projtest.Must(t, err)
	projtest.Must(t, g.Random(ctx, 0, g.Appended+800))
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	projtest.Must(t, r.WaitFor(ctx, head))
	if _, held := live.Held(); held >= len(jobsOf(t, live)) {
		t.Fatalf("the bounded read model holds %d job views: nothing left memory", held)
	}
	jv, err := live.Job(ctx, failed)
	projtest.Must(t, err)
	last, err := log.ReadStream(ctx, events.JobStream(failed), 0, 0, events.Forward)
	projtest.Must(t, err)
	_, err = log.Append(ctx, events.JobStream(failed), events.Exact(last[len(last)-1].Revision),
		events.New(events.JobResumed{JobID: failed, By: "alice", FromStep: jv.Steps[0].Name}, events.Metadata{Actor: "alice"}))
	projtest.Must(t, err)
	_, err = log.Append(ctx, events.SlotStream("late"), events.Exact(s.Rev),
		events.New(events.JobAccepted{Slot: "late", JobID: failed, Kind: events.KindReset, Resumed: true}, events.Metadata{Actor: "alice"}))
	projtest.Must(t, err)
	_, err = log.Append(ctx, events.NotifyStream(failed), events.NoStream(),
		events.New(events.NotificationSent{JobID: failed, Outcome: "failed", Status: 200}, events.Metadata{Actor: "system:notify"}))
	projtest.Must(t, err)
	head, err = log.Head(ctx)
	projtest.Must(t, err)
	projtest.Must(t, r.WaitFor(ctx, head))

	ref := memory.NewWithLimits(log, everything)
	projtest.Catchup(t, log, ref, 1)
	replayed := memory.NewWithLimits(log, lim)
	projtest.Catchup(t, log, replayed, 500)
	for name, rm := range map[string]*memory.Store{"live": live, "replayed": replayed} {
		diffs, err := projections.Compare(ctx, ref, rm)
		projtest.Must(t, err)
		for _, d := range diffs {
			t.Errorf("%s: %s", name, d)
		}
		for _, id := range jobsOf(t, ref) {
			sameAnswer(t, name+" job "+id, func(m projections.ReadModel) (any, error) { return m.Job(ctx, id) }, ref, rm)
			sameAnswer(t, name+" events of "+id, func(m projections.ReadModel) (any, error) { return m.JobEvents(ctx, id) }, ref, rm)
		}
		// Audit pages starting anywhere, with filters, cross from the
		// log into memory.
		for _, f := range []projections.AuditFilter{
			{Limit: 7, After: 100}, {Slot: "late"}, {JobID: failed, Limit: 3}, {Type: events.JobResumed{}.EventType()},
			{Actor: "alice", Limit: 1000}, {After: head - 60, Limit: 20},
		} {
			sameAnswer(t, fmt.Sprintf("%s audit %+v", name, f), func(m projections.ReadModel) (any, error) { return m.Audit(ctx, f) }, ref, rm)
		}
		// GET /api/jobs over jobs that left memory filters by what each
		// job's ref keeps (state, requester, uncertain step).
		for _, f := range []projections.JobFilter{
			{}, {Limit: 3}, {State: projections.JobFailed}, {State: projections.JobSucceeded, Limit: 5},
			{State: projections.JobStateUncertain}, {Actor: "alice"}, {Slot: "late", State: projections.JobRunning},
			{Kind: events.KindReset, State: projections.JobFailed, Limit: 2},
		} {
			sameAnswer(t, fmt.Sprintf("%s jobs %+v", name, f), func(m projections.ReadModel) (any, error) { return m.Jobs(ctx, f) }, ref, rm)
		}
		// Every generated job has ended: memory holds the limit's views.
		if audit, jobs := rm.Held(); audit > lim.RecentAudit+4096 || jobs > lim.RecentJobs {
			t.Errorf("%s holds %d audit entries and %d job views, limits %d and %d", name, audit, jobs, lim.RecentAudit, lim.RecentJobs)
		}
	}
}

// jobsOf lists every job of every slot, through the read model's pages.
func jobsOf(t *testing.T, rm projections.ReadModel) []string {
	t.Helper()
	ctx := projtest.Ctx(t)
	slots, err := rm.ListSlots(ctx)
	projtest.Must(t, err)
	var ids []string
	for _, s := range slots {
		cursor := ""
		for {
			p, err := rm.JobsBySlot(ctx, s.Name, "", 7, cursor)
			projtest.Must(t, err)
			for _, j := range p.Jobs {
				ids = append(ids, j.ID)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
	}
	return ids
}

func sameAnswer(t *testing.T, what string, q func(projections.ReadModel) (any, error), want, got projections.ReadModel) {
	t.Helper()
	w, werr := q(want)
	g, gerr := q(got)
	wj, _ := json.Marshal(w)
	gj, _ := json.Marshal(g)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) || string(wj) != string(gj) {
		t.Errorf("%s differs:\n  want %s (%v)\n  got  %s (%v)", what, wj, werr, gj, gerr)
	}
}
