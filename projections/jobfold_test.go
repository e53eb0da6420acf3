package projections_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// The read model's remaining list, status, resumable and cancellable flags
// follow events.JobState, the fold the command side and the engine decide
// by (the status by the same transition, events.JobStatusAfter; the
// remaining list by the same rule, events.WithoutDone, and from the
// terminal events JobState's writers record): after every event of a job
// of each kind, through each of its step results and a cancel, they agree.
// (Before, the read model removed a resource only on a deletion event, so a
// reset's repository stayed "remaining" after force_push_template had
// reset it.) A regression test: the read model keeps its own view of each
// step, so a rule it applied differently would show here.
func TestReadModelAgreesWithTheJobFoldAfterEveryEvent(t *testing.T) {
	reg := events.SlotRegistered{Slot: "s1", ProjectUUID: "proj", AppUUID: "app", DBUUID: "db", Repo: events.RepoRef{Project: "P", Slug: "s1"}}
	for _, kind := range events.JobKinds() {
		for _, tmpl := range []*events.SlotTemplate{nil, {}} {
			reg.Template = tmpl
			steps := events.StepNames(kind, tmpl != nil)
			res := events.PlanResources(kind, reg)
			if kind == events.KindDeleteOrphan {
				res = []events.Resource{{Kind: events.ResApplication, ID: "orphan"}}
			}
			// Cut the job after each step: run that many steps, then
			// cancel it (a running job, so the cancel is a terminal
			// event with the fold's remaining list, as slots.Cancel writes it).
			for cut := 0; cut <= len(steps); cut++ {
				name := fmt.Sprintf("%s template=%v cut=%d", kind, tmpl != nil, cut)
				ps := []events.Payload{
					events.JobQueued{JobID: "j1", Kind: kind, Slot: "s1", Steps: steps, Resources: res},
					events.JobClaimed{JobID: "j1", Worker: "w", Attempt: 1},
				}
				for _, s := range steps[:cut] {
					ps = append(ps, events.StepStarted{JobID: "j1", Step: s, Attempt: 1}, resultOf(s))
				}
				var j events.JobState
				var v projections.JobView
				check := func(i int, p events.Payload) {
					t.Helper()
					ev := rec("job-j1", i, p)
					if err := j.Apply(ev); err != nil {
						t.Fatal(err)
					}
					v = projections.ApplyJob(v, ev, p)
					want := j.Remaining()
					if want == nil {
						want = []events.Resource{}
					}
					if !slices.Equal(v.Remaining, want) || v.State != j.Status ||
						v.Resumable != j.Resumable() || v.Cancellable != events.Cancellable(j.Status) {
						t.Fatalf("%s after %s: read model remaining %v state %s resumable %v cancellable %v; fold %v %s %v",
							name, p.EventType(), v.Remaining, v.State, v.Resumable, v.Cancellable, want, j.Status, j.Resumable())
					}
				}
				for i, p := range ps {
					check(i, p)
				}
				check(len(ps), events.JobCancelled{JobID: "j1", By: "alice", Attempt: 1, CompletedSteps: j.Completed(), Remaining: j.Remaining()})
			}
		}
	}
}

// resultOf is the result event backend/jobs records for step.
func resultOf(step string) events.Payload {
	r := events.StepResult{JobID: "j1", Step: step, Attempt: 1}
	repo := events.RepoRef{Project: "P", Slug: "s1"}
	switch step {
	case events.StepDeleteDB:
		return events.DBDeleted{StepResult: r, DBUUID: "db"}
	case events.StepDeleteEnvVars:
		return events.EnvVarsDeleted{StepResult: r, AppUUID: "app"}
	case events.StepDeleteVolumes:
		return events.VolumeMountsRemoved{StepResult: r, AppUUID: "app"}
	case events.StepForcePush:
		return events.ForcePushed{StepResult: r, Repo: repo, OldSHA: "a", NewSHA: "b"}
	case events.StepDeleteApp:
		return events.AppDeleted{StepResult: r, AppUUID: "app"}
	case events.StepDeleteRepo:
		return events.RepoDeleted{StepResult: r, Repo: repo}
	case events.StepDeleteProject:
		return events.ProjectDeleted{StepResult: r, ProjectUUID: "proj"}
	case events.StepDeleteResource:
		return events.AppDeleted{StepResult: r, AppUUID: "orphan"}
	case events.StepCreateRepo:
		return events.RepoCreated{StepResult: r, Repo: repo}
	case events.StepPushCode:
		return events.CodePushed{StepResult: r, Repo: repo, SHA: "c"}
	case events.StepCreateDB:
		return events.DBCreated{StepResult: r, DBUUID: "db2"}
	case events.StepRestoreEnv:
		return events.EnvRestored{StepResult: r}
	case events.StepCreateVolumes:
		return events.VolumesCreated{StepResult: r}
	case events.StepDeploy:
		return events.AppDeployed{StepResult: r, Status: "running:healthy"}
	}
	return events.StepSucceeded{StepResult: r}
}
