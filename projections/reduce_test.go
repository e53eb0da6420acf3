package projections_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// rec wraps a payload as the n-th event of a stream.
func rec(stream string, n int, p events.Payload) events.RecordedEvent {
	data, _ := json.Marshal(p)
	return events.RecordedEvent{
		Stream: stream, Revision: events.Revision(n), Position: events.Position(100 + n), Type: p.EventType(),
		Data: data, Meta: events.Metadata{Actor: "t", Time: t0.Add(time.Duration(n) * time.Second)},
	}
}

func applyJ(v projections.JobView, stream string, n int, p events.Payload) projections.JobView {
	return projections.ApplyJob(v, rec(stream, n, p), p)
}

func applyS(v projections.SlotView, stream string, n int, p events.Payload) projections.SlotView {
	return projections.ApplySlot(v, rec(stream, n, p), p)
}

// foldJob applies payloads in order to an empty job view.
func foldJob(ps ...events.Payload) projections.JobView {
	var v projections.JobView
	for i, p := range ps {
		v = applyJ(v, "job-j1", i, p)
	}
	return v
}

func stepState(v projections.JobView, name string) string {
	for _, s := range v.Steps {
		if s.Name == name {
			return s.State
		}
	}
	return "missing"
}

var resetSteps = []string{events.StepDeleteDB, events.StepDeleteEnvVars, events.StepDeleteVolumes, events.StepForcePush, events.StepVacate}

func queued() events.JobQueued {
	return events.JobQueued{JobID: "j1", Kind: events.KindReset, Slot: "s1", RequestedBy: "alice", Steps: resetSteps}
}

func TestAbandonedAttemptMakesTheStartedStepUncertain(t *testing.T) {
	v := foldJob(
		queued(),
		events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1, LeaseUntil: t0.Add(time.Minute)},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1},
		events.DBDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1}, DBUUID: "db"},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteEnvVars, Attempt: 1},
		// The rescuer does not name the step: the view must find it.
		events.JobAbandoned{JobID: "j1", Attempt: 1, Worker: "w1"},
	)
	if v.State != projections.JobAbandoned || v.UncertainStep != events.StepDeleteEnvVars {
		t.Fatalf("state %s uncertain %q, want abandoned / delete_env_vars", v.State, v.UncertainStep)
	}
	if got := stepState(v, events.StepDeleteEnvVars); got != projections.StepUncertain {
		t.Fatalf("delete_env_vars is %s, want uncertain", got)
	}
	if got := stepState(v, events.StepDeleteDB); got != projections.StepDone {
		t.Fatalf("delete_db is %s, want done", got)
	}
	if !v.Resumable || v.Cancellable || v.EndedAt == nil || v.Attempts[0].Outcome != projections.JobAbandoned {
		t.Fatalf("resumable %v cancellable %v ended %v attempts %+v", v.Resumable, v.Cancellable, v.EndedAt, v.Attempts)
	}
	ref := projections.RefOf(v)
	if ref.StepsDone != 1 || ref.StepsTotal != 5 || ref.CurrentStep != events.StepDeleteEnvVars {
		t.Fatalf("ref = %+v", ref)
	}
}

func TestResumeRequeuesAndVerifyClearsTheUncertainStep(t *testing.T) {
	ps := []events.Payload{
		queued(),
		events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1},
		events.StepFailed{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Error: "connection reset", Uncertain: true},
		events.JobTimedOut{JobID: "j1", Attempt: 1, Deadline: "step"},
		events.JobResumed{JobID: "j1", By: "alice", FromStep: events.StepDeleteDB},
	}
	v := foldJob(ps...)
	if v.State != projections.JobQueued || !v.Cancellable || v.Resumable || v.EndedAt != nil {
		t.Fatalf("after resume: state %s cancellable %v resumable %v ended %v", v.State, v.Cancellable, v.Resumable, v.EndedAt)
	}
	if v.UncertainStep != events.StepDeleteDB || stepState(v, events.StepDeleteDB) != projections.StepUncertain {
		t.Fatalf("resume must keep the uncertain step until verified: %q %s", v.UncertainStep, stepState(v, events.StepDeleteDB))
	}
	ps = append(ps,
		events.JobClaimed{JobID: "j1", Worker: "w2", Attempt: 2},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 2, Verify: true},
		events.DBDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteDB, Attempt: 2, AlreadyAbsent: true}, DBUUID: "db"},
	)
	v = foldJob(ps...)
	if v.UncertainStep != "" || stepState(v, events.StepDeleteDB) != projections.StepDone || v.State != projections.JobRunning {
		t.Fatalf("after verify: uncertain %q, delete_db %s, state %s", v.UncertainStep, stepState(v, events.StepDeleteDB), v.State)
	}
	if len(v.Attempts) != 2 || v.Attempts[0].Outcome != projections.JobTimedOut || v.Attempts[1].Worker != "w2" {
		t.Fatalf("attempts = %+v", v.Attempts)
	}
}

func TestStepFailedRecordsHTTPStatusAndResumeResetsIt(t *testing.T) {
	ps := []events.Payload{
		queued(),
		events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1},
		events.StepFailed{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Error: "forbidden", HTTPStatus: 403},
		events.JobFailed{JobID: "j1", Attempt: 1, Reason: "forbidden", FailedStep: events.StepDeleteDB, Remaining: []events.Resource{{Kind: events.ResDatabase, ID: "db"}}},
	}
	v := foldJob(ps...)
	s := v.Steps[0]
	if s.State != projections.StepFailed || s.HTTPStatus != 403 || s.Error != "forbidden" || v.UncertainStep != "" {
		t.Fatalf("failed step = %+v uncertain %q", s, v.UncertainStep)
	}
	if len(v.Remaining) != 1 || v.Reason != "forbidden" || !v.Resumable {
		t.Fatalf("remaining %v reason %q resumable %v", v.Remaining, v.Reason, v.Resumable)
	}
	v = foldJob(append(ps, events.JobResumed{JobID: "j1", By: "bob", FromStep: events.StepDeleteDB})...)
	if v.Steps[0].State != projections.StepPending || v.Steps[0].Error != "" {
		t.Fatalf("after resume the failed step is %+v, want pending", v.Steps[0])
	}
}

func TestTeardownIncompleteKeepsEveryUnconfirmedID(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "p", AppUUID: "a", DBUUID: "d", Repo: events.RepoRef{Project: "P", Slug: "s1"}}
	var v projections.SlotView
	v = applyS(v, "slot-s1", 0, reg)
	v = applyS(v, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindTeardown})
	if v.Lifecycle != projections.LifecycleTearingDown || v.ActiveJob == nil {
		t.Fatalf("lifecycle %s active %v", v.Lifecycle, v.ActiveJob)
	}
	// The db is confirmed gone (a job-stream event reaching the slot).
	v = applyS(v, "job-j1", 2, events.DBDeleted{DBUUID: "d"})
	// The app delete was not confirmed, yet the incomplete list forgets it:
	// the slot must still keep the app's id.
	v = applyS(v, "slot-s1", 3, events.TeardownIncomplete{Slot: "s1", JobID: "j1",
		Remaining: []events.Resource{{Kind: events.ResRepository, ID: "P/s1"}, {Kind: "volume", ID: "vol-9"}}})
	v = applyS(v, "slot-s1", 4, events.JobReleased{Slot: "s1", JobID: "j1", Outcome: "failed"})
	got := map[string]bool{}
	for _, r := range v.Resources {
		got[r.Kind+":"+r.ID] = true
	}
	want := map[string]bool{"project:p": true, "application:a": true, "repository:P/s1": true, "volume:vol-9": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resources = %v, want %v", got, want)
	}
	if v.Lifecycle != projections.LifecycleIncomplete || v.ActiveJob != nil || v.Recovery == nil || v.Recovery.JobID != "j1" {
		t.Fatalf("lifecycle %s active %v recovery %+v", v.Lifecycle, v.ActiveJob, v.Recovery)
	}
	// A different app's deletion does not remove this slot's app.
	v2 := applyS(v, "job-j2", 5, events.AppDeleted{AppUUID: "other"})
	if len(v2.Resources) != len(v.Resources) {
		t.Fatalf("a foreign AppDeleted removed a resource: %v", v2.Resources)
	}
}

func TestReducersArePure(t *testing.T) {
	v := foldJob(queued(), events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1},
		events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1})
	before, _ := json.Marshal(v)
	for i, p := range []events.Payload{
		events.DBDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1}},
		events.StepFailed{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Error: "x"},
		events.LeaseRenewed{JobID: "j1", Attempt: 1, LeaseUntil: t0.Add(time.Hour)},
		events.JobAbandoned{JobID: "j1", Attempt: 1},
		events.JobClaimed{JobID: "j1", Worker: "w2", Attempt: 2},
		events.JobResumed{JobID: "j1"},
	} {
		_ = applyJ(v, "job-j1", 10+i, p)
		if after, _ := json.Marshal(v); string(after) != string(before) {
			t.Fatalf("ApplyJob(%s) modified its input:\n%s\n%s", p.EventType(), before, after)
		}
	}
	s := applyS(projections.SlotView{}, "slot-s1", 0, events.SlotRegistered{Slot: "s1", DBUUID: "d", AppUUID: "a"})
	s = applyS(s, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindReset})
	sb, _ := json.Marshal(s)
	for i, p := range []events.Payload{
		events.DBDeleted{DBUUID: "d"}, events.JobAccepted{Slot: "s1", JobID: "j2", Kind: events.KindPromote},
		events.TeardownIncomplete{Remaining: []events.Resource{{Kind: "x", ID: "y"}}}, events.SlotPromoted{NewRepo: events.RepoRef{Slug: "n"}},
	} {
		_ = applyS(s, "slot-s1", 10+i, p)
		if after, _ := json.Marshal(s); string(after) != string(sb) {
			t.Fatalf("ApplySlot(%s) modified its input", p.EventType())
		}
	}
	_, _ = projections.RefreshSlotJob(s, foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}))
	if after, _ := json.Marshal(s); string(after) != string(sb) {
		t.Fatalf("RefreshSlotJob modified its input")
	}
}

func TestUnknownTypesAreIgnoredAndEveryCatalogueTypeHasASummary(t *testing.T) {
	v := foldJob(queued())
	u := events.Unknown{Type: "FromTheFuture"}
	ev := events.RecordedEvent{Stream: "job-j1", Type: u.Type, Position: 999, Data: []byte(`{}`)}
	if got := projections.ApplyJob(v, ev, u); !reflect.DeepEqual(got, v) {
		t.Fatal("an unknown event changed the job view")
	}
	s := projections.SlotView{Name: "s1"}
	if got := projections.ApplySlot(s, ev, u); !reflect.DeepEqual(got, s) {
		t.Fatal("an unknown event changed the slot view")
	}
	for _, typ := range events.Types() {
		ev := events.RecordedEvent{Stream: "job-j1", Type: typ, Data: []byte(`{"job_id":"j1","step":"delete_db"}`)}
		p, err := events.Decode(ev)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if a := projections.AuditOf(ev, p, ""); a.Summary == "" || a.Summary == typ {
			t.Errorf("%s has no summary of its own (%q)", typ, a.Summary)
		}
	}
}

func TestRefreshSlotJobCarriesProgressAndRecovery(t *testing.T) {
	s := applyS(projections.SlotView{}, "slot-s1", 0, events.SlotRegistered{Slot: "s1"})
	s = applyS(s, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindReset})
	j := foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}, events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1})
	s, changed := projections.RefreshSlotJob(s, j)
	if !changed || s.ActiveJob.CurrentStep != events.StepDeleteDB || s.ActiveJob.State != projections.JobRunning || s.LatestJobs[events.KindReset].StepsTotal != 5 {
		t.Fatalf("changed %v active %+v latest %+v", changed, s.ActiveJob, s.LatestJobs)
	}
	j = foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}, events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1},
		events.JobCancelled{JobID: "j1", By: "bob", UncertainStep: events.StepDeleteDB})
	s, _ = projections.RefreshSlotJob(s, j)
	s = applyS(s, "slot-s1", 2, events.JobReleased{Slot: "s1", JobID: "j1", Outcome: "cancelled"})
	s, _ = projections.RefreshSlotJob(s, j)
	if s.ActiveJob != nil || s.Recovery == nil || s.Recovery.UncertainStep != events.StepDeleteDB || s.Recovery.State != projections.JobCancelled {
		t.Fatalf("after a cancelled job: active %+v recovery %+v", s.ActiveJob, s.Recovery)
	}
	if _, changed := projections.RefreshSlotJob(s, foldJob(events.JobQueued{JobID: "other", Kind: events.KindReset})); changed {
		t.Fatal("a job the slot does not show changed it")
	}
}

// Issue 12 item 10: env vars and volumes a step lists are the slot's until a
// confirmed deletion removes them, and show in the remaining resources.
func TestListedEnvVarsAndVolumesAreTrackedUntilConfirmed(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "p", AppUUID: "a", DBUUID: "d", Repo: events.RepoRef{Project: "P", Slug: "s1"}}
	v := applyS(projections.SlotView{}, "slot-s1", 0, reg)
	v = applyS(v, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindReset})
	envs := []events.Resource{{Kind: events.ResEnvVar, ID: "e1", Name: "DATABASE_URL"}, {Kind: events.ResEnvVar, ID: "e2", Name: "SECRET"}}
	v = applyS(v, "job-j1", 2, events.ResourcesListed{JobID: "j1", Step: events.StepDeleteEnvVars, Attempt: 1, Resources: envs})
	if got := kindsOf(v.Resources); got != "project application database repository env_var env_var" {
		t.Fatalf("after the listing the slot holds %s", got)
	}
	if v.Position != 102 {
		t.Fatalf("the listing changed the slot but its position is %d", v.Position)
	}
	rem := projections.RemainingOf(v)
	if got := len(rem); got != 6 || rem[4].Resource.ID != "e1" || rem[4].JobID != "j1" {
		t.Fatalf("remaining = %+v", rem)
	}
	// Listing the same again (a resumed attempt) changes nothing.
	if again := applyS(v, "job-j1", 3, events.ResourcesListed{JobID: "j1", Step: events.StepDeleteEnvVars, Attempt: 2, Resources: envs}); again.Position != v.Position {
		t.Fatalf("a repeated listing moved the view")
	}
	v = applyS(v, "job-j1", 4, events.EnvVarsDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteEnvVars}, AppUUID: "a", EnvIDs: []string{"e1", "e2"}})
	vols := []events.Resource{{Kind: events.ResVolume, ID: "v1", Name: "data"}}
	v = applyS(v, "job-j1", 5, events.ResourcesListed{JobID: "j1", Step: events.StepDeleteVolumes, Attempt: 1, Resources: vols})
	if got := kindsOf(v.Resources); got != "project application database repository volume" {
		t.Fatalf("after EnvVarsDeleted and the volume listing the slot holds %s", got)
	}
	// A teardown deleting the app takes the app's volumes with it.
	v = applyS(v, "job-j2", 6, events.AppDeleted{StepResult: events.StepResult{JobID: "j2", Step: events.StepDeleteApp}, AppUUID: "a"})
	if got := kindsOf(v.Resources); got != "project database repository" {
		t.Fatalf("after AppDeleted the slot holds %s", got)
	}
}

// Issue 12 item 10: a delete the provider accepted but nobody confirmed
// shows as "deleting (accepted at …)", unlike one never sent.
func TestAcceptedDeleteShowsAsDeletingUntilConfirmed(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "p", AppUUID: "a", DBUUID: "d", Repo: events.RepoRef{Project: "P", Slug: "s1"}}
	v := applyS(projections.SlotView{}, "slot-s1", 0, reg)
	v = applyS(v, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindReset})
	for _, r := range projections.RemainingOf(v) {
		if r.DeleteAcceptedAt != nil {
			t.Fatalf("%s shows as deleting before any delete was sent", r.Resource.Kind)
		}
	}
	db := events.Resource{Kind: events.ResDatabase, ID: "d"}
	ev := rec("job-j1", 2, events.DeleteAccepted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Resource: db, HTTPStatus: 200})
	v = projections.ApplySlot(v, ev, events.DeleteAccepted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Resource: db, HTTPStatus: 200})
	if len(v.Deleting) != 1 || v.Deleting[0].ID != "d" || !v.Deleting[0].AcceptedAt.Equal(ev.Meta.Time) || v.Deleting[0].JobID != "j1" || v.Position != ev.Position {
		t.Fatalf("deleting = %+v (position %d)", v.Deleting, v.Position)
	}
	var dbRow projections.RemainingResource
	for _, r := range projections.RemainingOf(v) {
		if r.Resource.Kind == events.ResDatabase {
			dbRow = r
		} else if r.DeleteAcceptedAt != nil {
			t.Fatalf("%s shows as deleting", r.Resource.Kind)
		}
	}
	if dbRow.DeleteAcceptedAt == nil || !dbRow.DeleteAcceptedAt.Equal(ev.Meta.Time) {
		t.Fatalf("remaining database row = %+v", dbRow)
	}
	// The job's step says so too.
	j := foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}, events.StepStarted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1},
		events.DeleteAccepted{JobID: "j1", Step: events.StepDeleteDB, Attempt: 1, Resource: db})
	if s := j.Steps[0]; s.State != projections.StepRunning || s.Resource == nil || s.Resource.ID != "d" || !strings.Contains(s.Detail, "accepted at") {
		t.Fatalf("job step = %+v", s)
	}
	// The confirmation removes the resource and its pending delete.
	v = applyS(v, "job-j1", 3, events.DBDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteDB}, DBUUID: "d"})
	if v.Deleting != nil || kindsOf(v.Resources) != "project application repository" {
		t.Fatalf("after DBDeleted: deleting %+v resources %s", v.Deleting, kindsOf(v.Resources))
	}
	b, err := json.Marshal(v)
	if err != nil || strings.Contains(string(b), `"deleting"`) {
		t.Fatalf("a slot with nothing deleting still lists it: %s %v", b, err)
	}
}

func kindsOf(rs []events.Resource) string {
	ks := make([]string, 0, len(rs))
	for _, r := range rs {
		ks = append(ks, r.Kind)
	}
	return strings.Join(ks, " ")
}

// TestCancelledTeardownThatRanIsResumable mirrors events.JobState.Resumable:
// a teardown cancelled after it was claimed may be resumed; one cancelled
// while queued, or a cancelled reset, may not (issue 14).
func TestCancelledTeardownThatRanIsResumable(t *testing.T) {
	td := events.JobQueued{JobID: "j1", Kind: events.KindTeardown, Slot: "s1", RequestedBy: "alice", Steps: []string{events.StepDeleteDB, events.StepDeleteApp}}
	ran := foldJob(td,
		events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1, LeaseUntil: t0.Add(time.Minute)},
		events.JobCancelled{JobID: "j1", By: "alice", Attempt: 1})
	if ran.State != projections.JobCancelled || !ran.Resumable {
		t.Fatalf("cancelled teardown that ran: state %s resumable %v", ran.State, ran.Resumable)
	}
	if v := foldJob(td, events.JobCancelled{JobID: "j1", By: "alice"}); v.Resumable {
		t.Fatal("a teardown cancelled while queued changed nothing and is not resumable")
	}
	reset := foldJob(queued(),
		events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 1, LeaseUntil: t0.Add(time.Minute)},
		events.JobCancelled{JobID: "j1", By: "alice", Attempt: 1})
	if reset.Resumable {
		t.Fatal("a cancelled reset is not resumable")
	}
}

// Issue 27 item 11: a queued job's card says "starts in 23 s", so the slot's
// active job carries JobQueued's NotBefore until the job is claimed.
func TestActiveJobCarriesNotBeforeWhileQueued(t *testing.T) {
	nb := t0.Add(2 * time.Minute)
	q := queued()
	q.NotBefore = nb
	s := applyS(projections.SlotView{}, "slot-s1", 0, events.SlotRegistered{Slot: "s1"})
	s = applyS(s, "slot-s1", 1, events.JobAccepted{Slot: "s1", JobID: "j1", Kind: events.KindReset})
	s, _ = projections.RefreshSlotJob(s, foldJob(q))
	if !s.ActiveJob.NotBefore.Equal(nb) || !s.LatestJobs[events.KindReset].NotBefore.Equal(nb) {
		t.Fatalf("queued: active %+v latest %+v", s.ActiveJob, s.LatestJobs)
	}
	data, _ := json.Marshal(s.ActiveJob)
	if !strings.Contains(string(data), `"not_before":"2026-03-01T09:02:00Z"`) {
		t.Fatalf("queued active job JSON %s", data)
	}
	s, _ = projections.RefreshSlotJob(s, foldJob(q, events.JobClaimed{JobID: "j1", Attempt: 1}))
	data, _ = json.Marshal(s.ActiveJob)
	if !s.ActiveJob.NotBefore.IsZero() || strings.Contains(string(data), "not_before") {
		t.Fatalf("running active job still says when it starts: %s", data)
	}
}

// A list step writes StepStarted once per resource: the step's start is
// the first of them in its attempt (issue 27: the Steps list read "took
// 7 ms" for a 259 ms step, the last env var's time); a new attempt starts
// it again.
func TestListStepStartsAtItsFirstResource(t *testing.T) {
	env := func(attempt int) events.StepStarted {
		return events.StepStarted{JobID: "j1", Step: events.StepDeleteEnvVars, Attempt: attempt}
	}
	done := events.EnvVarsDeleted{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeleteEnvVars, Attempt: 1}}
	started := func(v projections.JobView) time.Time {
		for _, s := range v.Steps {
			if s.Name == events.StepDeleteEnvVars && s.StartedAt != nil {
				return *s.StartedAt
			}
		}
		t.Fatalf("no start: %+v", v.Steps)
		return time.Time{}
	}
	v := foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}, env(1), env(1), env(1), done)
	if got := started(v); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("started %s, want the first StepStarted (%s)", got, t0.Add(2*time.Second))
	}
	v = foldJob(queued(), events.JobClaimed{JobID: "j1", Attempt: 1}, env(1), env(1), events.JobClaimed{JobID: "j1", Attempt: 2}, env(2))
	if got := started(v); !got.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("a new attempt's start %s, want %s", got, t0.Add(5*time.Second))
	}
}

// TestReadyWithoutHealthCheck (issue 32): a vacant slot whose deploy left
// the application running:unknown (no health check, Coolify's default) is
// ready and says "no health check"; an exited one is not, in Coolify's words.
func TestReadyWithoutHealthCheck(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "p", AppUUID: "a", DBUUID: "d", Template: &events.SlotTemplate{ServerUUID: "srv"}}
	for _, c := range []struct {
		status string
		ready  bool
	}{{"running:unknown", true}, {"running:healthy", true}, {"exited:unhealthy", false}} {
		s := applyS(projections.SlotView{}, "slot-s1", 0, reg)
		s = applyS(s, "slot-s1", 1, events.AppDeployed{StepResult: events.StepResult{JobID: "j1", Step: events.StepDeploy}, Status: c.status, NoHealthCheck: c.status == "running:unknown"})
		if s.Lifecycle != projections.LifecycleVacant || s.Ready != c.ready || s.Deployed == nil || s.Deployed.NoHealthCheck != (c.status == "running:unknown") {
			t.Errorf("%s: lifecycle %s ready %v missing %v deployed %+v", c.status, s.Lifecycle, s.Ready, s.Missing, s.Deployed)
		}
		if !c.ready && (len(s.Missing) != 1 || !strings.Contains(s.Missing[0], c.status)) {
			t.Errorf("%s: missing %v, want Coolify's words", c.status, s.Missing)
		}
	}
}
