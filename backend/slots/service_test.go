package slots_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

var alice = slots.Actor{Name: "alice", CorrelationID: "req-1"}

func register(t *testing.T, svc *slots.Service, name string) {
	t.Helper()
	err := svc.Register(context.Background(), alice, slots.RegisterCmd{
		Name: name, ProjectUUID: "proj-" + name, AppUUID: "app-" + name, DBUUID: "db-" + name,
		Repo:         events.RepoRef{Project: "SLOT", Slug: "slot-" + name},
		TemplateRepo: events.RepoRef{Project: "TPL", Slug: "template"}, TemplateRef: "main",
	})
	if err != nil {
		t.Fatalf("register %s: %v", name, err)
	}
}

func setup(t *testing.T, cfg slots.Config) (*slots.Service, *memstore.Store) {
	t.Helper()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	return slots.NewService(st, cfg), st
}

func head(t *testing.T, st events.Store) events.Position {
	t.Helper()
	p, err := st.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func wantCode(t *testing.T, err error, code slots.Code) *slots.Error {
	t.Helper()
	var e *slots.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *slots.Error with code %s", err, code)
	}
	if e.Code != code {
		t.Fatalf("code = %s (%v), want %s", e.Code, err, code)
	}
	return e
}

func TestBadInputIsRejectedAndAppendsNothing(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{})
	register(t, svc, "alpha")
	ctx := context.Background()
	before := head(t, st)
	good := slots.RegisterCmd{Name: "beta", ProjectUUID: "p1", AppUUID: "a1", DBUUID: "d1",
		Repo: events.RepoRef{Project: "SLOT", Slug: "x"}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "t"}, TemplateRef: "main"}
	regs := map[string]func(*slots.RegisterCmd){
		"traversal":    func(c *slots.RegisterCmd) { c.Name = "../etc" },
		"slash":        func(c *slots.RegisterCmd) { c.Name = "a/b" },
		"unicode":      func(c *slots.RegisterCmd) { c.Name = "slot-ä" },
		"homoglyph":    func(c *slots.RegisterCmd) { c.Name = "slоt" }, // Cyrillic о
		"upper":        func(c *slots.RegisterCmd) { c.Name = "Alpha" },
		"too long":     func(c *slots.RegisterCmd) { c.Name = strings.Repeat("a", 64) },
		"empty":        func(c *slots.RegisterCmd) { c.Name = "" },
		"leading dash": func(c *slots.RegisterCmd) { c.Name = "-a" },
		"bad uuid":     func(c *slots.RegisterCmd) { c.AppUUID = "a/../b" },
		"bad repo":     func(c *slots.RegisterCmd) { c.Repo.Slug = "a..b" },
		"bad project":  func(c *slots.RegisterCmd) { c.Repo.Project = "1X" },
		"bad ref":      func(c *slots.RegisterCmd) { c.TemplateRef = "main..x" },
		"bad branch":   func(c *slots.RegisterCmd) { c.Branch = "a b" },
	}
	for name, mut := range regs {
		c := good
		mut(&c)
		wantCode(t, svc.Register(ctx, alice, c), slots.CodeInvalid)
		_ = name
	}
	wantCode(t, svc.Register(ctx, slots.Actor{}, good), slots.CodeInvalid)
	wantCode(t, svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(-time.Minute)}), slots.CodeInvalid)
	wantCode(t, svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(365 * 24 * time.Hour)}), slots.CodeInvalid)
	wantCode(t, svc.Occupy(ctx, alice, "../alpha", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}), slots.CodeInvalid)
	wantCode(t, svc.Occupy(ctx, alice, "nope", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}), slots.CodeNotFound)
	wantCode(t, svc.Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: time.Now().Add(time.Hour)}), slots.CodeConflict)
	register(t, svc, "gamma")
	if err := svc.Occupy(ctx, alice, "gamma", slots.OccupyCmd{By: "alice", Until: time.Now().Add(30 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	before = head(t, st)
	// Extend never moves a deadline earlier (issue 14): 30 h left, "extend" to 8 h from now.
	e := wantCode(t, svc.Extend(ctx, alice, "gamma", slots.ExtendCmd{Until: time.Now().Add(8 * time.Hour)}), slots.CodeConflict)
	if e.Details["until"] == nil {
		t.Fatalf("refusal names no current deadline: %+v", e)
	}
	if after := head(t, st); after != before {
		t.Fatalf("an earlier extend appended: head %d → %d", before, after)
	}
	_, err := svc.Release(ctx, alice, "alpha")
	wantCode(t, err, slots.CodeConflict) // not occupied
	_, err = svc.Promote(ctx, alice, "alpha", slots.PromoteCmd{Project: "NEW", Name: "../x"})
	wantCode(t, err, slots.CodeInvalid)
	_, err = svc.Promote(ctx, alice, "alpha", slots.PromoteCmd{Project: "", Name: "x"})
	wantCode(t, err, slots.CodeInvalid)
	_, err = svc.PlanJob(ctx, "alpha", "explode", nil)
	wantCode(t, err, slots.CodeInvalid)
	wantCode(t, svc.Cancel(ctx, alice, "no/such"), slots.CodeInvalid)
	wantCode(t, svc.Cancel(ctx, alice, "nosuchjob"), slots.CodeNotFound)
	_, err = svc.Resume(ctx, alice, "nosuchjob")
	wantCode(t, err, slots.CodeNotFound)
	wantCode(t, svc.Register(ctx, alice, slots.RegisterCmd{Name: "alpha", ProjectUUID: "p", AppUUID: "a", DBUUID: "d",
		Repo: good.Repo, TemplateRepo: good.TemplateRepo, TemplateRef: "main"}), slots.CodeConflict)
	if after := head(t, st); after != before {
		t.Fatalf("rejected commands appended events: head %d → %d", before, after)
	}
}

func TestSecondJobIsRefusedNamingTheBlockingJob(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{Grace: time.Minute})
	ctx := context.Background()
	register(t, svc, "alpha")
	if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Ten people release at once: exactly one reset is accepted.
	var wg sync.WaitGroup
	results := make([]slots.JobAcceptedResult, 10)
	errs := make([]error, 10)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = svc.Release(ctx, alice, "alpha")
		}()
	}
	wg.Wait()
	var won string
	for i, err := range errs {
		if err == nil {
			if won != "" {
				t.Fatalf("two resets accepted: %s and %s", won, results[i].JobID)
			}
			won = results[i].JobID
		}
	}
	if won == "" {
		t.Fatal("no reset accepted")
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		e := wantCode(t, err, slots.CodeConflict)
		if e.Details["blocking_job"] != won {
			t.Fatalf("details = %v, want blocking_job %s", e.Details, won)
		}
	}
	before := head(t, st)
	_, err := svc.Promote(ctx, alice, "alpha", slots.PromoteCmd{Project: "NEW", Name: "copy"})
	if e := wantCode(t, err, slots.CodeConflict); e.Details["blocking_job"] != won {
		t.Fatalf("promote details = %v", e.Details)
	}
	_, err = svc.PlanJob(ctx, "alpha", events.KindTeardown, nil)
	wantCode(t, err, slots.CodeConflict)
	if head(t, st) != before {
		t.Fatal("refused commands appended events")
	}
	j, err := slots.LoadJob(ctx, st, won)
	if err != nil || j.Status != events.StatusQueued || j.NotBefore.Before(time.Now().Add(50*time.Second)) {
		t.Fatalf("job = %+v, %v; want queued with a minute of grace", j, err)
	}
	// Cancelling the queued job frees the lock at once.
	if err := svc.Cancel(ctx, slots.Actor{Name: "bob"}, won); err != nil {
		t.Fatal(err)
	}
	s, _ := slots.LoadSlot(ctx, st, "alpha")
	if s.Locked() || !s.Occupied {
		t.Fatalf("after cancel: lock %q occupied %v", s.LockJob, s.Occupied)
	}
	wantCode(t, svc.Cancel(ctx, alice, won), slots.CodeConflict)
	_, err = svc.Resume(ctx, alice, won)
	wantCode(t, err, slots.CodeConflict) // cancelled jobs are not resumable
}

func TestPlanMatchesTheJob(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{})
	ctx := context.Background()
	register(t, svc, "alpha")
	before := head(t, st)
	p, err := svc.PlanJob(ctx, "alpha", events.KindTeardown, nil)
	if err != nil {
		t.Fatal(err)
	}
	if head(t, st) != before {
		t.Fatal("plan appended")
	}
	r, err := svc.Teardown(ctx, alice, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Steps, ",") != strings.Join(r.Steps, ",") || len(p.Resources) != 4 {
		t.Fatalf("plan %+v vs job %+v", p, r)
	}
	j, _ := slots.LoadJob(ctx, st, r.JobID)
	if got := len(j.Remaining()); got != 4 {
		t.Fatalf("remaining = %d, want 4", got)
	}
}

func TestResumeRules(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{})
	ctx := context.Background()
	register(t, svc, "alpha")
	r, err := svc.Teardown(ctx, alice, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Resume(ctx, alice, r.JobID)
	wantCode(t, err, slots.CodeConflict) // queued, not resumable
	// Simulate a failed attempt: claim and fail, with the lock still held
	// (the attempt has not released yet).
	j, _ := slots.LoadJob(ctx, st, r.JobID)
	_, err = st.Append(ctx, events.JobStream(r.JobID), events.Exact(j.Revision),
		events.New(events.JobClaimed{JobID: r.JobID, Worker: "w", Attempt: 1, LeaseUntil: time.Now().Add(time.Minute)}, events.Metadata{Actor: "w"}),
		events.New(events.JobFailed{JobID: r.JobID, Attempt: 1, Reason: "boom"}, events.Metadata{Actor: "w"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Resume(ctx, alice, r.JobID)
	if e := wantCode(t, err, slots.CodeConflict); e.Details["blocking_job"] != r.JobID {
		t.Fatalf("resume while the lock is held: %v", err)
	}
	j, _ = slots.LoadJob(ctx, st, r.JobID)
	if ok, err := slots.ReleaseLock(ctx, st, &j, events.StatusFailed, events.Metadata{Actor: "w"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	s, _ := slots.LoadSlot(ctx, st, "alpha")
	if !s.Incomplete || s.Retired {
		t.Fatalf("failed teardown: incomplete=%v retired=%v", s.Incomplete, s.Retired)
	}
	res, err := svc.Resume(ctx, alice, r.JobID)
	if err != nil {
		t.Fatal(err)
	}
	j, _ = slots.LoadJob(ctx, st, r.JobID)
	s, _ = slots.LoadSlot(ctx, st, "alpha")
	if j.Status != events.StatusQueued || s.LockJob != r.JobID || s.LockRun != 2 || j.Resumes != 1 || res.JobID != r.JobID {
		t.Fatalf("after resume: job %s lock %s run %d resumes %d", j.Status, s.LockJob, s.LockRun, j.Resumes)
	}
	_, err = svc.Resume(ctx, alice, r.JobID)
	wantCode(t, err, slots.CodeConflict)
}

// The service runs on a fake clock: the deadline comes when the test sets
// the time to it (before, a real 150 ms deadline).
func TestDeadlineQueuesOneReset(t *testing.T) {
	t.Parallel()
	fc := clock.NewFake(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	svc, st := setup(t, slots.Config{DeadlineReset: true, Grace: time.Minute, Clock: fc})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	register(t, svc, "alpha")
	register(t, svc, "beta")
	until := fc.Now().Add(8 * time.Hour)
	if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: until}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.RunDeadlines(runCtx) }()
	// JobQueued is the command's second append: once it is there the job
	// can be cancelled.
	queued := make(chan events.JobQueued, 4)
	actors := make(chan string, 4)
	times := make(chan time.Time, 4)
	go st.SubscribeAll(runCtx, 0, events.Filter{EventTypes: []string{"JobQueued"}}, func(_ context.Context, ev events.RecordedEvent) error {
		p, err := events.Decode(ev)
		if err != nil {
			return err
		}
		queued <- p.(events.JobQueued)
		actors <- ev.Meta.Actor
		times <- ev.Meta.Time
		return nil
	})
	if err := fc.BlockUntil(ctx, 1); err != nil { // the scheduler waits on the clock
		t.Fatal(err)
	}
	fc.Set(until)
	var q events.JobQueued
	select {
	case q = <-queued:
	case <-ctx.Done():
		t.Fatal("no reset queued after the deadline")
	}
	if actor := <-actors; q.Slot != "alpha" || actor != slots.ActorDeadline {
		t.Fatalf("reset queued on %s by %s", q.Slot, actor)
	}
	if at := <-times; at.Before(until) {
		t.Fatalf("reset queued at %s, before the deadline %s", at, until)
	}
	// Cancelling the reset frees the lock; the scheduler must not queue a
	// second one for the same deadline: the next reset is beta's, occupied
	// with a close deadline after the scheduler started (extend cannot
	// move a deadline earlier any more).
	if err := svc.Cancel(ctx, alice, q.JobID); err != nil {
		t.Fatal(err)
	}
	if err := svc.Occupy(ctx, alice, "beta", slots.OccupyCmd{Until: fc.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Hour)
	select {
	case q = <-queued:
	case <-ctx.Done():
		t.Fatal("no reset for beta")
	}
	if q.Slot != "beta" {
		t.Fatalf("second deadline reset on %s, want beta", q.Slot)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCancelledTeardownThatNeverRanLeavesTheSlotAlone(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{})
	ctx := context.Background()
	register(t, svc, "alpha")
	r, err := svc.Teardown(ctx, alice, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Cancel(ctx, alice, r.JobID); err != nil {
		t.Fatal(err)
	}
	s, _ := slots.LoadSlot(ctx, st, "alpha")
	if s.Locked() || s.Incomplete || s.Lifecycle() != "vacant" {
		t.Fatalf("after cancelling an unstarted teardown: lock %q incomplete %v lifecycle %s", s.LockJob, s.Incomplete, s.Lifecycle())
	}
	if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("occupy after the cancelled teardown: %v", err)
	}
}

// TestCancelledTeardownThatRanCanBeResumed: a teardown cancelled after it
// started leaves the slot "teardown incomplete"; Resume finishes it (issue
// 14: Resume was hidden and refused). A cancelled teardown that never ran
// changed nothing and is not resumable.
func TestCancelledTeardownThatRanCanBeResumed(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{})
	ctx := context.Background()
	register(t, svc, "alpha")
	r, err := svc.Teardown(ctx, alice, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	j, _ := slots.LoadJob(ctx, st, r.JobID)
	if _, err := st.Append(ctx, events.JobStream(r.JobID), events.Exact(j.Revision),
		events.New(events.JobClaimed{JobID: r.JobID, Worker: "w", Attempt: 1, LeaseUntil: time.Now().Add(time.Minute)}, events.Metadata{Actor: "w"})); err != nil {
		t.Fatal(err)
	}
	if err := svc.Cancel(ctx, alice, r.JobID); err != nil {
		t.Fatal(err)
	}
	// The cancelled attempt releases the lock as it stops.
	j, _ = slots.LoadJob(ctx, st, r.JobID)
	if ok, err := slots.ReleaseLock(ctx, st, &j, events.StatusCancelled, events.Metadata{Actor: "w"}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if s, _ := slots.LoadSlot(ctx, st, "alpha"); !s.Incomplete {
		t.Fatal("a cancelled teardown that ran leaves the slot incomplete")
	}
	res, err := svc.Resume(ctx, alice, r.JobID)
	if err != nil {
		t.Fatalf("resume of the cancelled teardown: %v", err)
	}
	if j, _ = slots.LoadJob(ctx, st, r.JobID); j.Status != events.StatusQueued || res.JobID != r.JobID {
		t.Fatalf("after resume: %s", j.Status)
	}

	register(t, svc, "beta")
	r2, err := svc.Teardown(ctx, alice, "beta")
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Cancel(ctx, alice, r2.JobID); err != nil {
		t.Fatal(err)
	}
	_, err = svc.Resume(ctx, alice, r2.JobID)
	wantCode(t, err, slots.CodeConflict)
}

// TestSetEarlierDeadline: the explicit way to shorten an occupancy moves the
// deadline earlier only with confirm_earlier, only earlier, and a refusal
// appends nothing.
func TestSetEarlierDeadline(t *testing.T) {
	t.Parallel()
	svc, st := setup(t, slots.Config{MaxOccupancy: 48 * time.Hour})
	ctx := context.Background()
	register(t, svc, "alpha")
	register(t, svc, "beta")
	later := time.Now().Add(30 * time.Hour).Truncate(time.Second)
	if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{By: "alice", Until: later}); err != nil {
		t.Fatal(err)
	}
	sooner := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	before := head(t, st)
	for _, tc := range []struct {
		name  string
		slot  string
		cmd   slots.DeadlineCmd
		code  slots.Code
		field string
	}{
		{"without confirmation", "alpha", slots.DeadlineCmd{Deadline: sooner}, slots.CodeInvalid, "confirm_earlier"},
		{"no deadline", "alpha", slots.DeadlineCmd{ConfirmEarlier: true}, slots.CodeInvalid, "deadline"},
		{"in the past", "alpha", slots.DeadlineCmd{Deadline: time.Now().Add(-time.Minute), ConfirmEarlier: true}, slots.CodeInvalid, "deadline"},
		{"later is an extend", "alpha", slots.DeadlineCmd{Deadline: later.Add(time.Hour), ConfirmEarlier: true}, slots.CodeConflict, ""},
		{"the same deadline", "alpha", slots.DeadlineCmd{Deadline: later, ConfirmEarlier: true}, slots.CodeConflict, ""},
		{"vacant slot", "beta", slots.DeadlineCmd{Deadline: sooner, ConfirmEarlier: true}, slots.CodeConflict, ""},
		{"unknown slot", "gamma", slots.DeadlineCmd{Deadline: sooner, ConfirmEarlier: true}, slots.CodeNotFound, ""},
	} {
		e := wantCode(t, svc.SetEarlierDeadline(ctx, alice, tc.slot, tc.cmd), tc.code)
		if tc.field != "" && e.Details["field"] != tc.field {
			t.Errorf("%s: details %v, want field %q", tc.name, e.Details, tc.field)
		}
	}
	if after := head(t, st); after != before {
		t.Fatalf("refused deadline changes appended: head %d → %d", before, after)
	}

	if err := svc.SetEarlierDeadline(ctx, alice, "alpha", slots.DeadlineCmd{Deadline: sooner, ConfirmEarlier: true}); err != nil {
		t.Fatal(err)
	}
	evs, err := st.ReadStream(ctx, events.SlotStream("alpha"), 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	evs = evs[len(evs)-1:]
	p, err := events.Decode(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	ext, ok := p.(events.OccupancyExtended)
	if evs[0].Position != before+1 || !ok || !ext.Until.Equal(sooner) || !ext.Earlier || ext.By != "alice" {
		t.Fatalf("appended %s %+v at %d, want OccupancyExtended{Until: %s, Earlier: true} at %d", evs[0].Type, ext, evs[0].Position, sooner, before+1)
	}
	// An extend from there adds time again.
	if err := svc.Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: sooner.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}
