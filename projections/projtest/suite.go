package projtest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Open returns an empty read model that reads job events from log. The
// suite calls it once per subtest.
type Open func(t *testing.T, log events.Store) projections.Target

// Reference returns a memory read model rebuilt one event per batch; the
// suite compares other read models with it.
type Reference func(log events.Store) projections.Target

// Run is the conformance suite every read-model store passes: the same
// histories must give the same answers to every query.
func Run(t *testing.T, open Open, reference Reference) {
	t.Run("Scenario", func(t *testing.T) { testScenario(t, open) })
	t.Run("GeneratedHistoryMatchesReference", func(t *testing.T) { testGenerated(t, open, reference) })
	t.Run("RunnerFeedIsGaplessAndWaitForWorks", func(t *testing.T) { testRunnerFeed(t, open) })
	t.Run("BadQueriesAreInvalid", func(t *testing.T) { testBadQueries(t, open) })
	t.Run("JobsAcrossSlots", func(t *testing.T) { testJobsAcrossSlots(t, open, reference) })
	t.Run("EveryViewChangeMovesItsPosition", func(t *testing.T) { testViewsChangeVisibly(t, open) })
	t.Run("RetiredSlotsAreArchived", func(t *testing.T) { testArchivedSlots(t, open, reference) })
	t.Run("AsOfEqualsReplayUpToThere", func(t *testing.T) { testAsOf(t, open, reference) })
	t.Run("PullRequestsListed", func(t *testing.T) { testPullRequests(t, open, reference) })
	t.Run("ClosedPullRequestsLeaveMemory", func(t *testing.T) { testClosedPRsLeave(t, open, reference) })
}

// Ctx is a test context with a bound, so nothing waits forever.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Must fails the test on err.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Catchup replays the whole log into rm.
func Catchup(t *testing.T, log events.Store, rm projections.Target, batch int) {
	t.Helper()
	if _, err := projections.Replay(Ctx(t), log, rm, 0, batch); err != nil {
		t.Fatal(err)
	}
}

// scenario is the hand-built history whose answers the suite checks one by one.
type scenario struct {
	log                    *memstore.Store
	j1, j2, j3, j4, j5, j6 string
}

func buildScenario(t *testing.T) scenario {
	ctx := Ctx(t)
	sc := scenario{log: memstore.New()}
	g := NewGen(sc.log, 1)
	var err error
	s1, err := g.Register(ctx, "s1")
	Must(t, err)
	Must(t, g.Occupy(ctx, s1, "alice"))
	// A reset times out at delete_volumes, is resumed and succeeds.
	g.FailAt = events.StepDeleteVolumes
	sc.j1, err = g.Job(ctx, s1, events.KindReset, TimeOut, Succeed)
	Must(t, err)
	Must(t, g.Occupy(ctx, s1, "bob"))
	// The next reset's worker dies during the force push.
	g.FailAt = events.StepForcePush
	sc.j2, err = g.Job(ctx, s1, events.KindReset, Abandon)
	Must(t, err)

	s2, err := g.Register(ctx, "s2")
	Must(t, err)
	g.FailAt = events.StepDeleteRepo
	sc.j3, err = g.Job(ctx, s2, events.KindTeardown, Fail)
	Must(t, err)

	s3, err := g.Register(ctx, "s3")
	Must(t, err)
	sc.j4, err = g.Job(ctx, s3, events.KindTeardown, Succeed)
	Must(t, err)

	s4, err := g.Register(ctx, "s4")
	Must(t, err)
	Must(t, g.Occupy(ctx, s4, "chen"))
	sc.j5, err = g.Job(ctx, s4, events.KindPromote, Succeed)
	Must(t, err)
	Must(t, g.Unknown(ctx, s4))
	g.FailAt = events.StepCreateRepo
	sc.j6, err = g.Job(ctx, s4, events.KindPromote, Fail)
	Must(t, err)
	return sc
}

func testScenario(t *testing.T, open Open) {
	ctx := Ctx(t)
	sc := buildScenario(t)
	rm := open(t, sc.log)
	Catchup(t, sc.log, rm, 7)

	head, _ := sc.log.Head(ctx)
	if pos, err := rm.Position(ctx); err != nil || pos != head {
		t.Fatalf("Position = %d, %v; want %d", pos, err, head)
	}
	slots, err := rm.ListSlots(ctx)
	Must(t, err)
	var names []string
	for _, s := range slots {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"s1", "s2", "s3", "s4"}) {
		t.Fatalf("ListSlots names = %v", names)
	}
	sn, ok := rm.(projections.Snapshotter)
	if !ok {
		t.Fatal("the read model does not implement projections.Snapshotter")
	}
	snap, snapPos, err := sn.SnapshotSlots(ctx)
	Must(t, err)
	if snapPos != head || len(snap) != len(slots) {
		t.Fatalf("SnapshotSlots = %d slots at %d; want %d at %d", len(snap), snapPos, len(slots), head)
	}
	diffJSON(t, "snapshot slots", snap, slots)

	// s1: the resumed reset succeeded; the next one was abandoned mid-push.
	s1, err := rm.Slot(ctx, "s1")
	Must(t, err)
	expect(t, "s1.lifecycle", s1.Lifecycle, projections.LifecycleOccupied)
	expect(t, "s1.occupant", s1.Occupant, "bob")
	if s1.ActiveJob != nil {
		t.Errorf("s1.active_job = %+v, want none", s1.ActiveJob)
	}
	expect(t, "s1.latest reset", s1.LatestJobs[events.KindReset].ID, sc.j2)
	expect(t, "s1.latest reset state", s1.LatestJobs[events.KindReset].State, projections.JobAbandoned)
	if s1.Recovery == nil {
		t.Fatal("s1 has no recovery information after an abandoned reset")
	}
	expect(t, "s1.recovery.job", s1.Recovery.JobID, sc.j2)
	expect(t, "s1.recovery.uncertain", s1.Recovery.UncertainStep, events.StepForcePush)
	expect(t, "s1.recovery.completed", strings.Join(s1.Recovery.CompletedSteps, ","),
		strings.Join([]string{events.StepDeleteDB, events.StepDeleteEnvVars, events.StepDeleteVolumes}, ","))
	if slices.ContainsFunc(s1.Resources, func(r events.Resource) bool { return r.Kind == events.ResDatabase }) {
		t.Errorf("s1 still lists its database after DBDeleted: %v", s1.Resources)
	}

	j1, err := rm.Job(ctx, sc.j1)
	Must(t, err)
	expect(t, "j1.state", j1.State, projections.JobSucceeded)
	if len(j1.Attempts) != 2 || j1.Attempts[0].Outcome != projections.JobTimedOut {
		t.Errorf("j1 attempts = %+v, want 2 with the first timed out", j1.Attempts)
	}
	expect(t, "j1.uncertain", j1.UncertainStep, "")
	for _, s := range j1.Steps {
		expect(t, "j1 step "+s.Name, s.State, projections.StepDone)
	}

	j2, err := rm.Job(ctx, sc.j2)
	Must(t, err)
	expect(t, "j2.state", j2.State, projections.JobAbandoned)
	expect(t, "j2.uncertain", j2.UncertainStep, events.StepForcePush)
	if !j2.Resumable || j2.Cancellable {
		t.Errorf("j2 resumable=%v cancellable=%v, want true/false", j2.Resumable, j2.Cancellable)
	}
	states := map[string]string{}
	for _, s := range j2.Steps {
		states[s.Name] = s.State
	}
	expect(t, "j2 force push", states[events.StepForcePush], projections.StepUncertain)
	expect(t, "j2 vacate", states[events.StepVacate], projections.StepPending)
	expect(t, "j2 delete_db", states[events.StepDeleteDB], projections.StepDone)

	// Latest by kind and paging, newest first.
	latest, err := rm.LatestJob(ctx, "s1", events.KindReset)
	Must(t, err)
	expect(t, "latest s1 reset", latest.ID, sc.j2)
	p1, err := rm.JobsBySlot(ctx, "s1", "", 1, "")
	Must(t, err)
	if len(p1.Jobs) != 1 || p1.Jobs[0].ID != sc.j2 || p1.NextCursor == "" {
		t.Fatalf("page 1 = %v cursor %q", jobIDs(p1.Jobs), p1.NextCursor)
	}
	p2, err := rm.JobsBySlot(ctx, "s1", "", 1, p1.NextCursor)
	Must(t, err)
	if len(p2.Jobs) != 1 || p2.Jobs[0].ID != sc.j1 || p2.NextCursor != "" {
		t.Fatalf("page 2 = %v cursor %q", jobIDs(p2.Jobs), p2.NextCursor)
	}
	pk, err := rm.JobsBySlot(ctx, "s4", events.KindPromote, 10, "")
	Must(t, err)
	if got := jobIDs(pk.Jobs); !slices.Equal(got, []string{sc.j6, sc.j5}) {
		t.Fatalf("s4 promotes = %v", got)
	}
	if _, err := rm.LatestJob(ctx, "s4", events.KindReset); !errors.Is(err, projections.ErrNotFound) {
		t.Fatalf("LatestJob of a kind never run: err = %v, want ErrNotFound", err)
	}

	// s2: teardown failed at delete_repo, so the repo and the project remain.
	s2, err := rm.Slot(ctx, "s2")
	Must(t, err)
	expect(t, "s2.lifecycle", s2.Lifecycle, projections.LifecycleIncomplete)
	expect(t, "s2.resources", resKinds(s2.Resources), "project,repository")
	expect(t, "s2.recovery.job", s2.Recovery.JobID, sc.j3)
	j3, err := rm.Job(ctx, sc.j3)
	Must(t, err)
	expect(t, "j3.state", j3.State, projections.JobFailed)
	expect(t, "j3.remaining", resKinds(j3.Remaining), "project,repository")
	for _, s := range j3.Steps {
		if s.Name == events.StepDeleteRepo && (s.State != projections.StepFailed || s.HTTPStatus != 500 || s.Error == "") {
			t.Errorf("j3 delete_repo = %+v, want failed with HTTP 500 and an error", s)
		}
	}

	// s3: retired with nothing left; s4: promoted, and the unknown event
	// left it alone.
	s3, err := rm.Slot(ctx, "s3")
	Must(t, err)
	expect(t, "s3.lifecycle", s3.Lifecycle, projections.LifecycleRetired)
	expect(t, "s3.resources", resKinds(s3.Resources), "")
	s4, err := rm.Slot(ctx, "s4")
	Must(t, err)
	if len(s4.PromotedTo) != 1 || s4.PromotedTo[0].Slug != "s4-app" {
		t.Errorf("s4.promoted_to = %v", s4.PromotedTo)
	}
	expect(t, "s4.recovery", s4.Recovery.JobID, sc.j6)

	rem, err := rm.RemainingResources(ctx)
	Must(t, err)
	var got []string
	for _, r := range rem {
		got = append(got, r.Slot+":"+r.Lifecycle+":"+r.Resource.Kind+":"+r.JobID)
	}
	want := []string{
		"s1:occupied:application:" + sc.j2, "s1:occupied:project:" + sc.j2, "s1:occupied:repository:" + sc.j2,
		"s2:teardown_incomplete:project:" + sc.j3, "s2:teardown_incomplete:repository:" + sc.j3,
		"s4:occupied:application:" + sc.j6, "s4:occupied:database:" + sc.j6, "s4:occupied:project:" + sc.j6, "s4:occupied:repository:" + sc.j6,
	}
	if !slices.Equal(got, want) {
		t.Errorf("RemainingResources =\n %v\nwant\n %v", got, want)
	}

	// Raw events of a job are its stream.
	evs, err := rm.JobEvents(ctx, sc.j2)
	Must(t, err)
	raw, _ := sc.log.ReadStream(ctx, events.JobStream(sc.j2), 0, 0, events.Forward)
	if len(evs) != len(raw) || !evs[0].Is(events.JobQueued{}) {
		t.Errorf("JobEvents(j2) = %d events, stream has %d", len(evs), len(raw))
	}

	testAudit(t, rm, sc)
}

func testAudit(t *testing.T, rm projections.ReadModel, sc scenario) {
	ctx := Ctx(t)
	head, _ := sc.log.Head(ctx)
	all := auditAll(t, rm, projections.AuditFilter{}, 5)
	if len(all) != int(head) {
		t.Fatalf("audit has %d entries, log %d events", len(all), head)
	}
	for i, a := range all {
		if a.Position != events.Position(i+1) || a.Summary == "" || a.Time.IsZero() {
			t.Fatalf("audit entry %d = %+v", i, a)
		}
	}
	// By job: the job's stream and the slot events naming it.
	byJob := auditAll(t, rm, projections.AuditFilter{JobID: sc.j2}, 0)
	raw, _ := sc.log.ReadStream(ctx, events.JobStream(sc.j2), 0, 0, events.Forward)
	if len(byJob) != len(raw)+2 { // + JobAccepted, JobReleased
		t.Errorf("audit of job j2: %d entries, want %d", len(byJob), len(raw)+2)
	}
	for _, a := range byJob {
		if a.JobID != sc.j2 || a.Slot != "s1" {
			t.Errorf("audit of job j2 has %+v", a)
		}
	}
	rescuer := auditAll(t, rm, projections.AuditFilter{Actor: "system:rescuer"}, 0)
	if len(rescuer) != 1 || rescuer[0].Type != (events.JobAbandoned{}).EventType() {
		t.Errorf("audit by system:rescuer = %+v", rescuer)
	}
	inc := auditAll(t, rm, projections.AuditFilter{Type: "TeardownIncomplete", Slot: "s2"}, 0)
	if len(inc) != 1 || inc[0].JobID != sc.j3 {
		t.Errorf("audit TeardownIncomplete on s2 = %+v", inc)
	}
	unknown := auditAll(t, rm, projections.AuditFilter{Type: "SlotRenamedInTheFuture"}, 0)
	if len(unknown) != 1 || unknown[0].Slot != "s4" {
		t.Errorf("audit of the unknown event = %+v", unknown)
	}
	since := all[len(all)/2].Time
	recent := auditAll(t, rm, projections.AuditFilter{Since: since}, 0)
	want := 0
	for _, a := range all {
		if !a.Time.Before(since) {
			want++
		}
	}
	if len(recent) != want || want == 0 {
		t.Errorf("audit since %v: %d entries, want %d", since, len(recent), want)
	}
	limited, err := rm.Audit(ctx, projections.AuditFilter{Slot: "s1", Limit: 3})
	Must(t, err)
	if len(limited) != 3 {
		t.Errorf("audit with limit 3 returned %d", len(limited))
	}
	// Newest first, paged backwards with Before: the same entries reversed.
	var newest []projections.AuditEntry
	f := projections.AuditFilter{Newest: true, Limit: 4}
	for {
		page, err := rm.Audit(ctx, f)
		Must(t, err)
		if len(page) == 0 {
			break
		}
		newest = append(newest, page...)
		f.Before = page[len(page)-1].Position
	}
	if len(newest) != len(all) {
		t.Fatalf("newest first: %d entries, want %d", len(newest), len(all))
	}
	for i, a := range newest {
		if a.Position != all[len(all)-1-i].Position {
			t.Fatalf("newest first: entry %d is %d, want %d", i, a.Position, all[len(all)-1-i].Position)
		}
	}
	s1 := auditAll(t, rm, projections.AuditFilter{Slot: "s1"}, 0)
	mid := s1[len(s1)/2].Position
	older, err := rm.Audit(ctx, projections.AuditFilter{Slot: "s1", Newest: true, Before: mid, Limit: 1000})
	Must(t, err)
	if len(older) != len(s1)/2 || (len(older) > 0 && (older[0].Position >= mid || older[0].Slot != "s1")) {
		t.Errorf("s1 newest first before %d: %d entries, want %d", mid, len(older), len(s1)/2)
	}
	window, err := rm.Audit(ctx, projections.AuditFilter{After: all[1].Position, Before: all[4].Position, Limit: 1000})
	Must(t, err)
	if len(window) != 2 || window[0].Position != all[2].Position {
		t.Errorf("audit between %d and %d = %d entries", all[1].Position, all[4].Position, len(window))
	}
}

// auditAll pages through the audit feed (page size limit; 0: default).
func auditAll(t *testing.T, rm projections.ReadModel, f projections.AuditFilter, limit int) []projections.AuditEntry {
	t.Helper()
	var out []projections.AuditEntry
	f.Limit = limit
	for {
		page, err := rm.Audit(Ctx(t), f)
		Must(t, err)
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		f.After = page[len(page)-1].Position
	}
}

func testGenerated(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	log := memstore.New()
	Must(t, NewGen(log, 42).Random(ctx, 12, 4000))
	ref := reference(log)
	Catchup(t, log, ref, 1)
	rm := open(t, log)
	Catchup(t, log, rm, 500)
	diffs, err := projections.Compare(ctx, rm, ref)
	Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
	// Every job of the log is projected, and its latest-of-kind is findable.
	slots, err := rm.ListSlots(ctx)
	Must(t, err)
	for _, s := range slots {
		for kind, ref := range s.LatestJobs {
			j, err := rm.LatestJob(ctx, s.Name, kind)
			Must(t, err)
			if j.ID != ref.ID || j.Kind != kind || j.Slot != s.Name {
				t.Errorf("LatestJob(%s, %s) = %s, slot shows %s", s.Name, kind, j.ID, ref.ID)
			}
		}
	}
}

func testRunnerFeed(t *testing.T, open Open) {
	ctx := Ctx(t)
	log := memstore.New()
	g := NewGen(log, 7)
	Must(t, g.Random(ctx, 3, 200)) // some history before the runner starts
	rm := open(t, log)
	r := projections.NewRunner(log, rm, projections.RunnerOptions{MaxBatch: 64})
	feed := r.Subscribe(1 << 16)
	slow := r.Subscribe(1)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	Must(t, g.Random(ctx, 0, 1500))
	head, _ := log.Head(ctx)
	Must(t, r.WaitFor(ctx, head))
	if pos, _ := rm.Position(ctx); pos != head {
		t.Fatalf("after WaitFor(%d) the read model is at %d", head, pos)
	}
	next := events.Position(1)
	for next <= head {
		select {
		case c, ok := <-feed.C:
			if !ok {
				t.Fatalf("feed closed at %d (dropped=%v)", next, feed.Dropped())
			}
			if c.Position != next || c.Audit == nil || c.Audit.Position != next {
				t.Fatalf("change %d: got position %d", next, c.Position)
			}
			if c.Slot != nil {
				got, err := json.Marshal(c.Slot)
				Must(t, err)
				if c.Slot.Position != c.Position {
					t.Fatalf("change %d carries slot view of position %d: %s", next, c.Slot.Position, got)
				}
			}
			next++
		case <-ctx.Done():
			t.Fatalf("feed stalled at %d of %d", next, head)
		}
	}
	// The consumer that never read was dropped, not waited for.
	select {
	case <-slow.C: // the one buffered change
	default:
	}
	if _, ok := <-slow.C; ok || !slow.Dropped() {
		t.Fatalf("slow consumer: still open or not flagged dropped (dropped=%v)", slow.Dropped())
	}
	feed.Cancel()
	feed.Cancel()
	// A second read model fed by the same log agrees with the live one.
	again := open(t, log)
	Catchup(t, log, again, 0)
	diffs, err := projections.Compare(ctx, rm, again)
	Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
}

func testBadQueries(t *testing.T, open Open) {
	ctx := Ctx(t)
	sc := buildScenario(t)
	rm := open(t, sc.log)
	Catchup(t, sc.log, rm, 0)
	for _, cursor := range []string{"abc", "-1", "0", "1e3"} {
		if _, err := rm.JobsBySlot(ctx, "s1", "", 10, cursor); !errors.Is(err, projections.ErrInvalid) {
			t.Errorf("cursor %q: err = %v, want ErrInvalid", cursor, err)
		}
	}
	if _, err := rm.JobsBySlot(ctx, "s1", "", -1, ""); !errors.Is(err, projections.ErrInvalid) {
		t.Errorf("limit -1: err = %v, want ErrInvalid", err)
	}
	if _, err := rm.Audit(ctx, projections.AuditFilter{Limit: -5}); !errors.Is(err, projections.ErrInvalid) {
		t.Errorf("audit limit -5: err = %v, want ErrInvalid", err)
	}
	for name, err := range map[string]error{
		"slot":   second(rm.Slot(ctx, "nope")),
		"job":    second(rm.Job(ctx, "nope")),
		"events": second(rm.JobEvents(ctx, "nope")),
		"latest": second(rm.LatestJob(ctx, "s3", events.KindReset)),
	} {
		if !errors.Is(err, projections.ErrNotFound) {
			t.Errorf("%s of a missing thing: err = %v, want ErrNotFound", name, err)
		}
	}
	page, err := rm.JobsBySlot(ctx, "nope", "", 0, "")
	Must(t, err)
	if len(page.Jobs) != 0 || page.Jobs == nil {
		t.Errorf("jobs of a missing slot = %#v, want an empty list", page.Jobs)
	}
}

// diffJSON fails the test when a and b differ in their JSON form.
func diffJSON(t *testing.T, what string, a, b any) {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Errorf("%s differ:\n %s\n %s", what, ja, jb)
	}
}

func second[T any](_ T, err error) error { return err }

func expect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func jobIDs(js []projections.JobView) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// resKinds lists resource kinds, sorted, comma-separated.
func resKinds(rs []events.Resource) string {
	var ks []string
	for _, r := range rs {
		ks = append(ks, r.Kind)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// testViewsChangeVisibly applies a generated history one event at a time and
// reads every slot and job view after each event (DESIGN invariant 13,
// issue 12 item 3): a view whose fields changed must carry the event's
// position (the version clients compare: they keep the highest), the change
// must carry that view, and a view that did not change keeps its position.
// A slot's revision does not qualify: its jobs' events (JobQueued,
// JobClaimed, StepStarted, results) move its active job without moving the
// slot stream's revision. Keeping the view with the highest position from
// the changes alone must end at exactly the read model's views.
func testViewsChangeVisibly(t *testing.T, open Open) {
	ctx := Ctx(t)
	log := memstore.New()
	g := NewGen(log, 12)
	Must(t, g.Random(ctx, 3, 600))
	rm := open(t, log)
	ctx = exclusive(t, ctx, rm)
	var evs []projections.Event
	for _, ev := range readAll(t, log) {
		evs = append(evs, projections.DecodeEvent(ev))
	}
	strip := func(v projections.SlotView) string {
		v.Position, v.UpdatedAt = 0, time.Time{}
		b, err := json.Marshal(v)
		Must(t, err)
		return string(b)
	}
	before := map[string]projections.SlotView{}
	kept := map[string]projections.SlotView{} // what a client keeps
	revisionStuck := 0
	for _, e := range evs {
		chs, err := rm.Apply(ctx, []projections.Event{e})
		Must(t, err)
		if len(chs) != 1 || chs[0].Position != e.Position {
			t.Fatalf("event %d (%s): %d changes", e.Position, e.Type, len(chs))
		}
		ch := chs[0]
		if ch.Slot != nil {
			if have, ok := kept[ch.Slot.Name]; !ok || ch.Slot.Position > have.Position {
				kept[ch.Slot.Name] = *ch.Slot
			}
		}
		if ch.Job != nil && ch.Job.Position != e.Position {
			t.Errorf("event %d (%s): its job view has position %d", e.Position, e.Type, ch.Job.Position)
		}
		slots, err := rm.ListSlots(ctx)
		Must(t, err)
		for _, v := range slots {
			// The slot shows its jobs as their own views are now: a job's
			// progress that did not reach the slot's view is a frozen card.
			for _, ref := range append([]*projections.JobRef{v.ActiveJob}, refs(v.LatestJobs)...) {
				if ref == nil {
					continue
				}
				j, err := rm.Job(ctx, ref.ID)
				Must(t, err)
				if want := projections.RefOf(j); want != *ref {
					t.Fatalf("event %d (%s): slot %s shows job %+v, the job's view is %+v", e.Position, e.Type, v.Name, *ref, want)
				}
			}
			old, seen := before[v.Name]
			before[v.Name] = v
			switch {
			case seen && strip(old) == strip(v):
				if v.Position != old.Position {
					t.Errorf("event %d (%s): slot %s did not change but its position moved %d → %d", e.Position, e.Type, v.Name, old.Position, v.Position)
				}
				continue
			case v.Position != e.Position:
				t.Errorf("event %d (%s) changed slot %s but its position is %d:\n was %s\n now %s", e.Position, e.Type, v.Name, v.Position, strip(old), strip(v))
			case ch.Slot == nil || ch.Slot.Name != v.Name:
				t.Errorf("event %d (%s) changed slot %s but its change does not carry it", e.Position, e.Type, v.Name)
			}
			if seen && v.Revision == old.Revision {
				revisionStuck++
			}
		}
	}
	if revisionStuck == 0 {
		t.Error("no slot view changed without its revision moving: the history does not exercise job progress")
	}
	for name, v := range before {
		if got := kept[name]; strip(got) != strip(v) || got.Position != v.Position {
			t.Errorf("slot %s: a client keeping the highest position holds\n %s\nthe read model has\n %s", name, strip(got), strip(v))
		}
	}
}

func refs(m map[string]projections.JobRef) []*projections.JobRef {
	out := make([]*projections.JobRef, 0, len(m))
	for _, r := range m {
		out = append(out, &r)
	}
	return out
}

// testJobsAcrossSlots checks Jobs (GET /api/jobs): the scenario's answers
// one by one, then every filter over a generated history, paged in small
// pages, against the reference read model.
func testJobsAcrossSlots(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	sc := buildScenario(t)
	rm := open(t, sc.log)
	Catchup(t, sc.log, rm, 0)
	for _, tc := range []struct {
		name string
		f    projections.JobFilter
		want []string
	}{
		{"all", projections.JobFilter{}, []string{sc.j6, sc.j5, sc.j4, sc.j3, sc.j2, sc.j1}},
		// A failed job is found without knowing its slot.
		{"failed", projections.JobFilter{State: projections.JobFailed}, []string{sc.j6, sc.j3}},
		{"abandoned", projections.JobFilter{State: projections.JobAbandoned}, []string{sc.j2}},
		{"uncertain", projections.JobFilter{State: projections.JobStateUncertain}, []string{sc.j2}},
		{"teardowns", projections.JobFilter{Kind: events.KindTeardown}, []string{sc.j4, sc.j3}},
		{"slot s1", projections.JobFilter{Slot: "s1"}, []string{sc.j2, sc.j1}},
		{"by chen", projections.JobFilter{Actor: "chen"}, []string{sc.j6, sc.j5}},
		{"succeeded promotes of s4 by chen", projections.JobFilter{State: projections.JobSucceeded, Kind: events.KindPromote, Slot: "s4", Actor: "chen"}, []string{sc.j5}},
		{"nobody", projections.JobFilter{Actor: "nobody"}, nil},
		{"unknown slot", projections.JobFilter{Slot: "nope"}, nil},
	} {
		got := allJobs(t, rm, tc.f, 0)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Jobs = %v, want %v", tc.name, got, tc.want)
		}
	}
	// Pages of two: newest first, a cursor while more remain, none after.
	p, err := rm.Jobs(ctx, projections.JobFilter{Limit: 2})
	Must(t, err)
	if got := jobIDs(p.Jobs); !slices.Equal(got, []string{sc.j6, sc.j5}) || p.NextCursor == "" {
		t.Fatalf("page 1 = %v cursor %q", got, p.NextCursor)
	}
	p, err = rm.Jobs(ctx, projections.JobFilter{Limit: 4, Cursor: p.NextCursor})
	Must(t, err)
	if got := jobIDs(p.Jobs); !slices.Equal(got, []string{sc.j4, sc.j3, sc.j2, sc.j1}) || p.NextCursor != "" {
		t.Fatalf("page 2 = %v cursor %q, want the last four and no cursor", got, p.NextCursor)
	}
	empty, err := rm.Jobs(ctx, projections.JobFilter{Actor: "nobody"})
	Must(t, err)
	if empty.Jobs == nil {
		t.Error("no match: Jobs = nil, want an empty list")
	}
	for _, cursor := range []string{"abc", "-1", "0"} {
		if _, err := rm.Jobs(ctx, projections.JobFilter{Cursor: cursor}); !errors.Is(err, projections.ErrInvalid) {
			t.Errorf("cursor %q: err = %v, want ErrInvalid", cursor, err)
		}
	}
	if _, err := rm.Jobs(ctx, projections.JobFilter{Limit: -1}); !errors.Is(err, projections.ErrInvalid) {
		t.Errorf("limit -1: err = %v, want ErrInvalid", err)
	}

	// A generated history: every filter, in pages of three, agrees with the
	// reference, and the reference agrees with Match over every job.
	log := memstore.New()
	Must(t, NewGen(log, 11).Random(ctx, 6, 1500))
	ref := reference(log)
	Catchup(t, log, ref, 1)
	gen := open(t, log)
	Catchup(t, log, gen, 200)
	every := allJobs(t, ref, projections.JobFilter{}, 0)
	views := map[string]projections.JobView{}
	for _, id := range every {
		v, err := ref.Job(ctx, id)
		Must(t, err)
		views[id] = v
	}
	var filters []projections.JobFilter
	for _, st := range append([]string{""}, projections.JobFilterStates...) {
		for _, kind := range []string{"", events.KindReset, events.KindTeardown, events.KindPromote} {
			filters = append(filters, projections.JobFilter{State: st, Kind: kind})
		}
	}
	for _, id := range every[:min(len(every), 3)] {
		filters = append(filters, projections.JobFilter{Slot: views[id].Slot}, projections.JobFilter{Actor: views[id].RequestedBy, State: views[id].State})
	}
	for _, f := range filters {
		want := allJobs(t, ref, f, 3)
		var match []string
		for _, id := range every {
			if f.Match(views[id]) {
				match = append(match, id)
			}
		}
		if !slices.Equal(want, match) {
			t.Errorf("reference %+v = %v, Match says %v", f, want, match)
		}
		if got := allJobs(t, gen, f, 3); !slices.Equal(got, want) {
			t.Errorf("Jobs(%+v) = %v, reference %v", f, got, want)
		}
	}
}

// allJobs follows Jobs' cursor to the end and returns the ids in order.
func allJobs(t *testing.T, rm projections.ReadModel, f projections.JobFilter, limit int) []string {
	t.Helper()
	f.Limit = limit
	var ids []string
	for range 10000 {
		p, err := rm.Jobs(Ctx(t), f)
		Must(t, err)
		ids = append(ids, jobIDs(p.Jobs)...)
		if p.NextCursor == "" {
			return ids
		}
		f.Cursor = p.NextCursor
	}
	t.Fatalf("Jobs(%+v): the cursor never ends", f)
	return nil
}

// testArchivedSlots: more than DefaultListedRetired slots are torn down.
// ListSlots (and SnapshotSlots) list the slots in use, the incomplete one
// and only the DefaultListedRetired most recently changed idle retired ones
// (projections.Idle); Slot answers for every slot, archived ones included,
// exactly as a read model that keeps every view, and their jobs stay
// listed. Late events on archived slots (an unknown type that changes
// nothing, a teardown found incomplete after all) leave the answers equal,
// and the second brings its slot back into the list.
func testArchivedSlots(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	log := memstore.New()
	g := NewGen(log, 5)
	var retired []*SlotState
	for i := range projections.DefaultListedRetired + 25 {
		s, err := g.Register(ctx, fmt.Sprintf("r%03d", i))
		Must(t, err)
		if i%3 == 0 {
			Must(t, g.Occupy(ctx, s, "alice"))
			_, err = g.Job(ctx, s, events.KindPromote, Succeed)
			Must(t, err)
		}
		_, err = g.Job(ctx, s, events.KindTeardown, Succeed)
		Must(t, err)
		retired = append(retired, s)
	}
	used, err := g.Register(ctx, "used")
	Must(t, err)
	Must(t, g.Occupy(ctx, used, "bob"))
	left, err := g.Register(ctx, "left")
	Must(t, err)
	g.FailAt = events.StepDeleteRepo
	_, err = g.Job(ctx, left, events.KindTeardown, Fail)
	Must(t, err)

	rm := open(t, log)
	Catchup(t, log, rm, 50)
	// truth keeps every view in memory (it has no log to fold from).
	truth := reference(nil)
	Catchup(t, log, truth, 1)
	check := func(stage string) {
		t.Helper()
		all, err := truth.(projections.SlotNamer).SlotNames(ctx)
		Must(t, err)
		var idle []projections.SlotView
		var want []string
		for _, name := range all {
			v, err := truth.Slot(ctx, name)
			Must(t, err)
			if projections.Idle(v) {
				idle = append(idle, v)
			} else {
				want = append(want, name)
			}
		}
		if len(idle) <= projections.DefaultListedRetired {
			t.Fatalf("%s: only %d idle slots, want more than %d", stage, len(idle), projections.DefaultListedRetired)
		}
		slices.SortFunc(idle, func(a, b projections.SlotView) int { return cmp.Compare(b.Position, a.Position) })
		for _, v := range idle[:projections.DefaultListedRetired] {
			want = append(want, v.Name)
		}
		slices.Sort(want)
		listed, err := rm.ListSlots(ctx)
		Must(t, err)
		if got := slotNamesOf(listed); !slices.Equal(got, want) {
			t.Fatalf("%s: ListSlots = %v\nwant %v", stage, got, want)
		}
		snap, _, err := rm.(projections.Snapshotter).SnapshotSlots(ctx)
		Must(t, err)
		diffJSON(t, stage+": SnapshotSlots", snap, listed)
		if n, ok := rm.(projections.SlotNamer); ok {
			names, err := n.SlotNames(ctx)
			Must(t, err)
			if !slices.Equal(names, all) {
				t.Errorf("%s: SlotNames = %v, want %v", stage, names, all)
			}
		}
		for _, name := range all {
			got, err := rm.Slot(ctx, name)
			Must(t, err)
			want, err := truth.Slot(ctx, name)
			Must(t, err)
			diffJSON(t, stage+": slot "+name, got, want)
			gj, err := rm.JobsBySlot(ctx, name, "", 0, "")
			Must(t, err)
			wj, err := truth.JobsBySlot(ctx, name, "", 0, "")
			Must(t, err)
			if want.Lifecycle == projections.LifecycleRetired && len(wj.Jobs) == 0 {
				t.Fatalf("%s: slot %s has no jobs", stage, name)
			}
			diffJSON(t, stage+": jobs of "+name, gj, wj)
		}
		if _, err := rm.Slot(ctx, "never-registered"); !errors.Is(err, projections.ErrNotFound) {
			t.Errorf("%s: Slot(never-registered) err = %v, want ErrNotFound", stage, err)
		}
	}
	check("archived")

	// The oldest retired slot is archived: an unknown event on its stream
	// changes nothing; a late incomplete teardown gives it a resource again,
	// so it is listed again (not idle).
	oldest := retired[0]
	Must(t, g.Unknown(ctx, oldest))
	_, err = log.Append(ctx, events.SlotStream(oldest.Name), events.Exact(oldest.Rev),
		events.New(events.TeardownIncomplete{Slot: oldest.Name, JobID: "late", Remaining: []events.Resource{{Kind: events.ResDatabase, ID: "db-found-again"}}}, events.Metadata{Actor: "admin"}))
	Must(t, err)
	Catchup(t, log, rm, 50)
	Catchup(t, log, truth, 1)
	check("after late events")
	listed, err := rm.ListSlots(ctx)
	Must(t, err)
	if !slices.Contains(slotNamesOf(listed), oldest.Name) {
		t.Errorf("%s holds a resource again but is not listed", oldest.Name)
	}
}

func slotNamesOf(vs []projections.SlotView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}
