package events_test

import (
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// The vocabulary found from the catalogue is exactly what the hand-written
// lists it replaces held.
func TestJobVocabularyMatchesTheCatalogue(t *testing.T) {
	var results []string
	for _, typ := range events.Types() {
		if events.IsStepResult(typ) {
			results = append(results, typ)
		}
	}
	want := []string{"AppDeleted", "AppDeployed", "CodePushed", "DBCreated", "DBDeleted", "EnvRestored", "EnvVarsDeleted",
		"ForcePushed", "PRHeadPushed", "ProjectDeleted", "RepoCreated", "RepoDeleted", "StepSucceeded", "VolumeDeleted", "VolumeMountsRemoved", "VolumesCreated"}
	if !slices.Equal(results, want) {
		t.Errorf("step results %v\nwant %v", results, want)
	}
	if got := events.TerminalTypes(); !slices.Equal(got, []string{"JobAbandoned", "JobCancelled", "JobFailed", "JobSucceeded", "JobTimedOut"}) {
		t.Errorf("terminal types %v", got)
	}
	for _, typ := range events.Types() {
		st := events.TerminalStatus(typ)
		if events.IsTerminal(typ) != (st != "") || (st != "" && !events.Ended(st)) {
			t.Errorf("%s: terminal %v status %q", typ, events.IsTerminal(typ), st)
		}
	}
	if events.Ended(events.StatusQueued) || events.Ended(events.StatusRunning) {
		t.Error("a queued or running job has ended")
	}
}

// Each resource kind a plan lists leaves the remaining list with the step
// the old resource→step map named.
func TestStepForResource(t *testing.T) {
	for _, c := range []struct{ kind, res, step string }{
		{events.KindReset, events.ResDatabase, events.StepDeleteDB},
		{events.KindReset, events.ResEnvVar, events.StepDeleteEnvVars},
		{events.KindReset, events.ResVolume, events.StepDeleteVolumes},
		{events.KindReset, events.ResRepository, events.StepForcePush},
		{events.KindTeardown, events.ResDatabase, events.StepDeleteDB},
		{events.KindTeardown, events.ResApplication, events.StepDeleteApp},
		{events.KindTeardown, events.ResRepository, events.StepDeleteRepo},
		{events.KindTeardown, events.ResProject, events.StepDeleteProject},
		{events.KindDeleteOrphan, events.ResDatabase, events.StepDeleteResource},
		{events.KindDeleteOrphan, events.ResRepository, events.StepDeleteResource},
		{events.KindPromote, events.ResRepository, ""},
		{events.KindAdopt, events.ResApplication, ""},
	} {
		if got := events.StepForResource(c.kind, c.res); got != c.step {
			t.Errorf("StepForResource(%s, %s) = %q, want %q", c.kind, c.res, got, c.step)
		}
	}
	// The ready reset adds steps (the preflight first, issue 32); none of
	// them removes a planned resource.
	plain, ready := events.StepNames(events.KindReset, false), events.StepNames(events.KindReset, true)
	if len(ready) != len(plain)+5 || ready[0] != events.StepPreflight || ready[len(ready)-1] != events.StepVacate {
		t.Errorf("ready reset %v", ready)
	}
	if events.StepNames("nonsense", false) != nil {
		t.Error("an unknown kind has steps")
	}
}

// A step that removes a planned resource of a kind has the plan that names
// it (JobStep.Plan, of that kind), so PlanResources — the commands' plan —
// lists exactly the resources the steps remove, in step order.
func TestEveryPlannedStepHasAPlan(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "proj", AppUUID: "app", DBUUID: "db",
		Repo: events.RepoRef{Project: "P", Slug: "s1"}, TemplateRepo: events.RepoRef{Project: "P", Slug: "tmpl"}, TemplateRef: "main", Branch: "main"}
	for _, kind := range events.JobKinds() {
		for _, tmpl := range []*events.SlotTemplate{nil, {}} {
			reg.Template = tmpl
			var want []string
			for _, s := range events.Steps(kind, tmpl != nil) {
				switch {
				case s.Resource == "" || s.Resource == events.ResAny:
					if s.Plan != nil {
						t.Errorf("%s step %s plans a resource it does not remove", kind, s.Name)
					}
				case s.Plan == nil:
					t.Errorf("%s step %s removes a planned %s but has no plan", kind, s.Name, s.Resource)
				default:
					if r := s.Plan(reg); r.Kind != s.Resource || r.ID == "" {
						t.Errorf("%s step %s plans %+v, removes %s", kind, s.Name, r, s.Resource)
					}
					want = append(want, s.Resource)
				}
			}
			var got []string
			for _, r := range events.PlanResources(kind, reg) {
				got = append(got, r.Kind)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s template=%v: plan %v, steps remove %v", kind, tmpl != nil, got, want)
			}
		}
	}
	// The plans the commands wrote before they were declared with the steps.
	reset := events.PlanResources(events.KindReset, reg)
	if len(reset) != 4 || reset[1].NameCode != events.NameAppEnvVars || reset[3].Name != "branch main reset to P/tmpl@main" ||
		reset[3].NameArgs != (events.NameArgs{Branch: "main", Template: "P/tmpl@main"}) {
		t.Errorf("reset plan %+v", reset)
	}
	if td := events.PlanResources(events.KindTeardown, reg); len(td) != 4 || td[3] != (events.Resource{Kind: events.ResProject, ID: "proj"}) {
		t.Errorf("teardown plan %+v", td)
	}
}

// The one status transition: queued by JobQueued and JobResumed, running by
// a claim, each terminal type's status, and no change from any other event.
func TestJobStatusAfter(t *testing.T) {
	for _, typ := range events.Types() {
		want := events.StatusRunning // the status before
		switch {
		case typ == "JobQueued" || typ == "JobResumed":
			want = events.StatusQueued
		case events.IsTerminal(typ):
			want = events.TerminalStatus(typ)
		}
		if got := events.JobStatusAfter(events.StatusRunning, typ); got != want {
			t.Errorf("running, then %s: %s, want %s", typ, got, want)
		}
	}
	if got := events.JobStatusAfter(events.StatusQueued, "JobClaimed"); got != events.StatusRunning {
		t.Errorf("queued, then claimed: %s", got)
	}
}

// Only failed, timed-out and abandoned jobs, and a teardown cancelled after
// it started, are resumable (docs/jobs.md, "Lifecycle").
func TestResumable(t *testing.T) {
	for _, c := range []struct {
		kind, status  string
		touched, want bool
	}{
		{events.KindReset, events.StatusFailed, false, true},
		{events.KindReset, events.StatusTimedOut, true, true},
		{events.KindPromote, events.StatusAbandoned, true, true},
		{events.KindReset, events.StatusSucceeded, true, false},
		{events.KindReset, events.StatusCancelled, true, false},
		{events.KindTeardown, events.StatusCancelled, false, false},
		{events.KindTeardown, events.StatusCancelled, true, true},
		{events.KindTeardown, events.StatusRunning, true, false},
	} {
		if got := events.Resumable(c.kind, c.status, c.touched); got != c.want {
			t.Errorf("Resumable(%s, %s, touched %v) = %v", c.kind, c.status, c.touched, got)
		}
	}
}
