package projections

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// ApplyJob folds one event of a job-<id> stream into the job's view. It is a
// pure function: v is never modified (slices and pointers are copied before
// they change), so a view handed to a reader stays as it was. Unknown event
// types and events of other streams leave v unchanged.
func ApplyJob(v JobView, ev events.RecordedEvent, p events.Payload) JobView {
	return applyJob(v, ev, p, false)
}

// applyJob is ApplyJob; with own, v's Steps and Attempts belong to the
// caller alone (see Ownership) and are changed in place instead of copied.
// The job's status is events.JobStatusAfter's, the transition
// events.JobState folds by; its resumable and cancellable flags are the
// events rules JobState applies; what is folded here is what the job page
// shows (attempts, each step's state, detail and timings).
func applyJob(v JobView, ev events.RecordedEvent, p events.Payload, own bool) JobView {
	t := ev.Meta.Time
	state := events.JobStatusAfter(v.State, p.EventType())
	switch e := p.(type) {
	case events.JobQueued:
		v = queuedView(e, ev)
	case events.JobClaimed:
		if !own {
			v.Attempts = slices.Clip(v.Attempts)
		}
		v.Attempts = append(v.Attempts, Attempt{
			Number: e.Attempt, Worker: e.Worker, ClaimedAt: t, LeaseUntil: e.LeaseUntil,
		})
	case events.LeaseRenewed:
		if i := attemptIndex(v.Attempts, e.Attempt); i >= 0 {
			if !own {
				v.Attempts = slices.Clone(v.Attempts)
			}
			v.Attempts[i].LeaseUntil = e.LeaseUntil
		}
	case events.JobTimedOut, events.JobCancelled, events.JobAbandoned, events.JobFailed, events.JobSucceeded:
		v = endJob(v, own, t, state, p)
	case events.JobResumed:
		v.EndedAt = nil
		v.Reason, v.ReasonCode, v.ReasonArgs = "", "", nil
		// Failed steps will run again; the uncertain one stays uncertain
		// until the next attempt verifies it.
		if !own {
			v.Steps = slices.Clone(v.Steps)
		}
		for i := range v.Steps {
			if v.Steps[i].State == StepFailed {
				v.Steps[i] = StepView{Name: v.Steps[i].Name, State: StepPending}
			}
		}
	default:
		var ok bool
		if v, ok = applyStep(v, t, p, own); !ok {
			return v // unknown or foreign event: nothing to fold
		}
	}
	v.State = state
	// The rules of events.JobState: touched is its Touched (an attempt ran
	// or a step is done).
	v.Resumable = events.Resumable(v.Kind, v.State, len(v.Attempts) > 0 || slices.ContainsFunc(v.Steps, stepDone))
	v.Cancellable = events.Cancellable(v.State)
	v.Revision = ev.Revision
	v.UpdatedAt = t
	v.Position = ev.Position
	return v
}

// queuedView is a job's view from its JobQueued: every planned step
// pending, every planned resource remaining.
func queuedView(e events.JobQueued, ev events.RecordedEvent) JobView {
	v := JobView{
		ID: e.JobID, Kind: e.Kind, Slot: e.Slot,
		RequestedBy: e.RequestedBy, Params: e.Params, QueuedAt: ev.Meta.Time,
		NotBefore: e.NotBefore, Attempts: []Attempt{}, Steps: make([]StepView, 0, len(e.Steps)),
		Remaining:     append([]events.Resource{}, e.Resources...),
		CorrelationID: ev.Meta.CorrelationID, QueuedPosition: ev.Position,
	}
	if v.ID == "" {
		v.ID = jobIDOfStream(ev.Stream)
	}
	for _, s := range e.Steps {
		v.Steps = append(v.Steps, StepView{Name: s, State: StepPending})
	}
	return v
}

// applyStep folds an event about one step: its start, its failure, what it
// listed, accepted or waits for, and its confirmed result. ok is false for
// any other event (v unchanged).
func applyStep(v JobView, t time.Time, p events.Payload, own bool) (_ JobView, ok bool) {
	switch e := p.(type) {
	case events.StepStarted:
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) { startStep(s, e, t) })
	case events.StepFailed:
		state := StepFailed
		if e.Uncertain {
			state = StepUncertain
			v.UncertainStep = e.Step
		} else if v.UncertainStep == e.Step {
			v.UncertainStep = ""
		}
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) {
			s.State, s.EndedAt, s.HTTPStatus, s.Error = state, timePtr(t), e.HTTPStatus, e.Error
			s.ErrorCode, s.ErrorArgs = e.ErrorCode, e.ErrorArgs
			if s.Attempt == 0 {
				s.Attempt = e.Attempt
			}
		})
	case events.ResourcesListed:
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) {
			s.Detail = listedDetail(e.Resources)
			s.DetailCode, s.DetailArgs = listedCode(e.Resources)
		})
	case events.DeleteAccepted:
		r := e.Resource
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) {
			s.Resource = &r
			s.Detail = "deleting " + r.Kind + " " + r.ID + " (accepted at " + t.UTC().Format(time.RFC3339) + ", not confirmed yet)"
			s.DetailCode, s.DetailArgs = events.DetailDeleting, map[string]string{"resource_kind": r.Kind, "id": r.ID, "accepted_at": t.UTC().Format(time.RFC3339)}
		})
	case events.WaitPhase:
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) {
			s.Wait = &WaitView{Phase: e.Phase, Since: e.Since, Ahead: e.Ahead, Building: e.Building, Status: e.Status,
				DeploymentUUID: e.DeploymentUUID, DBUUID: e.DBUUID, URL: e.URL}
		})
	case events.DeploymentStarted:
		v.Steps = setStep(v.Steps, own, e.Step, func(s *StepView) {
			if s.Wait == nil || s.Wait.DeploymentUUID != e.DeploymentUUID {
				s.Wait = &WaitView{Phase: events.WaitQueued, Since: t, DeploymentUUID: e.DeploymentUUID, URL: e.URL}
			}
		})
	default:
		r, ok := events.StepResultOf(p)
		if !ok {
			return v, false
		}
		v.Steps = setStep(v.Steps, own, r.Step, func(s *StepView) { doneStep(s, p, r, t) })
		if v.UncertainStep == r.Step {
			v.UncertainStep = ""
		}
		v.Remaining = withoutStep(v.Kind, v.Remaining, r.Step)
	}
	return v, true
}

// startStep is a step's view once its StepStarted is recorded.
func startStep(s *StepView, e events.StepStarted, t time.Time) {
	// A list step writes StepStarted once per resource (every env var,
	// every volume): the step started at the first of them in this
	// attempt, or its time read as the last resource's alone (issue 27:
	// "took 7 ms" for a 259 ms step).
	started := timePtr(t)
	if s.State == StepRunning && s.Attempt == e.Attempt && s.StartedAt != nil {
		started = s.StartedAt
	}
	// A wait's phase stays shown across the step's later calls in the
	// same attempt (issue 32).
	var wait *WaitView
	if s.State == StepRunning && s.Attempt == e.Attempt {
		wait = s.Wait
	}
	*s = StepView{Name: s.Name, State: StepRunning, Attempt: e.Attempt, StartedAt: started, Resource: e.Resource, Wait: wait}
	if e.Verify {
		s.Detail, s.DetailCode = "verifying", events.DetailVerifying
	}
}

// doneStep is a step's view once its result p is recorded.
func doneStep(s *StepView, p events.Payload, r events.StepResult, t time.Time) {
	s.State, s.EndedAt, s.HTTPStatus, s.Error = StepDone, timePtr(t), 0, ""
	s.ErrorCode, s.ErrorArgs = "", nil
	if s.Attempt == 0 {
		s.Attempt = r.Attempt
	}
	s.Detail = resultDetail(p, r)
	s.DetailCode, s.DetailArgs = detailOf(p, r)
	s.Left = nil
	if e, ok := p.(events.AppDeployed); ok {
		s.NoHealthCheck = e.NoHealthCheck
	}
	if e, ok := p.(events.VolumeMountsRemoved); ok && len(e.Left) > 0 {
		s.Left = slices.Clone(e.Left)
	}
}

// endJob folds a terminal event: the attempt ends in state, with the
// uncertain step and the remaining resources the event recorded (the
// writer's events.JobState's).
func endJob(v JobView, own bool, t time.Time, state string, p events.Payload) JobView {
	switch e := p.(type) {
	case events.JobTimedOut:
		v = endAttempt(v, own, t, state, e.UncertainStep, e.Remaining)
	case events.JobCancelled:
		v = endAttempt(v, own, t, state, e.UncertainStep, e.Remaining)
	case events.JobAbandoned:
		v = endAttempt(v, own, t, state, e.UncertainStep, e.Remaining)
	case events.JobFailed:
		v = endAttempt(v, own, t, state, "", e.Remaining)
		v.Reason, v.ReasonCode, v.ReasonArgs = e.Reason, e.ReasonCode, e.ReasonArgs
		if e.FailedStep != "" && e.Reason == "" {
			v.Reason = "step " + e.FailedStep + " failed"
		}
	case events.JobSucceeded:
		v = endAttempt(v, own, t, state, "", nil)
		v.UncertainStep = ""
		v.Remaining = []events.Resource{}
	}
	return v
}

// endAttempt closes the job's current attempt with a terminal state. A step
// that was started and has no result when the attempt ended may or may not
// have taken effect: it becomes uncertain (the event may name it too). With
// own, v's Steps and Attempts are changed in place.
func endAttempt(v JobView, own bool, t time.Time, state, uncertain string, remaining []events.Resource) JobView {
	v.State = state
	v.EndedAt = timePtr(t)
	if n := len(v.Attempts); n > 0 && v.Attempts[n-1].EndedAt == nil {
		if !own {
			v.Attempts = slices.Clone(v.Attempts)
		}
		v.Attempts[n-1].EndedAt = timePtr(t)
		v.Attempts[n-1].Outcome = state
	}
	if !own {
		v.Steps = slices.Clone(v.Steps)
	}
	for i := range v.Steps {
		s := &v.Steps[i]
		if s.State == StepRunning || (uncertain != "" && s.Name == uncertain && s.State != StepDone) {
			s.State = StepUncertain
			s.EndedAt = timePtr(t)
			if uncertain == "" {
				uncertain = s.Name
			}
		}
	}
	if uncertain != "" {
		v.UncertainStep = uncertain
	}
	if remaining != nil {
		v.Remaining = append([]events.Resource{}, remaining...)
	}
	return v
}

func stepDone(s StepView) bool { return s.State == StepDone }

// withoutStep is the job's remaining list once step is confirmed done:
// events.WithoutDone, the rule events.JobState.Remaining applies (a step's
// confirmed result removes the planned resources of the kind its row of
// the step table names). It returns rs itself when nothing leaves it.
func withoutStep(kind string, rs []events.Resource, step string) []events.Resource {
	if !slices.ContainsFunc(rs, func(r events.Resource) bool { return events.StepForResource(kind, r.Kind) == step }) {
		return rs // most results remove nothing: no copy
	}
	out := events.WithoutDone(kind, rs, func(s string) bool { return s == step })
	if out == nil {
		out = []events.Resource{}
	}
	return out
}

// detailCode is the code of resultDetail's story when it is one of the
// server's own sentences (events.Detail*), "" when it is data.
func detailCode(p events.Payload, r events.StepResult) string {
	if e, ok := p.(events.StepSucceeded); ok && e.DetailCode != "" {
		return e.DetailCode
	}
	if r.AlreadyAbsent && resultDetail(p, events.StepResult{}) == "" {
		return events.DetailAlreadyAbsent
	}
	return ""
}

// detailOf is resultDetail as a code and its parts (issue 35), so the
// dashboard says it in the reader's language: the code of the story and,
// when the provider said the resource was already gone, already_absent
// "true" among the args. A story that is data alone has no code.
func detailOf(p events.Payload, r events.StepResult) (string, map[string]string) {
	code, args := "", map[string]string{}
	switch e := p.(type) {
	case events.StepSucceeded:
		if e.DetailCode != "" && len(e.DetailArgs) > 0 {
			code, args = e.DetailCode, maps.Clone(e.DetailArgs)
		}
	case events.ForcePushed:
		code, args = events.DetailForcePushed, map[string]string{"repo": e.Repo.String(), "old": short(e.OldSHA), "new": short(e.NewSHA)}
	case events.CodePushed:
		code, args = events.DetailCodePushed, map[string]string{"repo": e.Repo.String(), "sha": short(e.SHA)}
	case events.PRHeadPushed:
		code, args = events.DetailPRHeadPushed, map[string]string{"sha": short(e.Head), "from": e.Source.String(), "repo": e.Repo.String(), "branch": e.Branch, "old": short(e.OldSHA)}
	case events.RepoCreated:
		code, args = events.DetailRepoCreated, map[string]string{"repo": e.Repo.String()}
	case events.VolumeMountsRemoved:
		code, args = events.DetailMountsRemoved, map[string]string{"count": strconv.Itoa(len(e.StorageIDs)), "app": e.AppUUID}
	case events.DBCreated:
		code = events.DetailDBCreated
		if e.Found {
			code = events.DetailDBFound
		}
		args = map[string]string{"engine": e.Engine, "name": e.Name, "id": e.DBUUID}
	case events.EnvRestored:
		code, args = events.DetailEnvRestored, map[string]string{"keys": strings.Join(e.Keys, ", "), "from": e.From}
	case events.VolumesCreated:
		var vs []string
		for _, v := range e.Volumes {
			vs = append(vs, v.Name+" → "+v.MountPath)
		}
		code, args = events.DetailVolumesCreated, map[string]string{"count": strconv.Itoa(len(e.Volumes)), "volumes": strings.Join(vs, ", "), "skipped": strings.Join(e.Skipped, ", ")}
	case events.AppDeployed:
		code, args = events.DetailAppDeployed, map[string]string{"deployment": e.DeploymentUUID, "status": e.Status, "commit": short(e.Commit), "fqdn": e.FQDN}
	case events.DBDeleted, events.AppDeleted:
		if !r.AlreadyAbsent {
			code = events.DetailRowGoneOnly
		}
	}
	if code == "" {
		c := detailCode(p, r)
		if c == "" {
			return "", nil
		}
		return c, nil
	}
	if r.AlreadyAbsent {
		args["already_absent"] = "true"
	}
	return code, args
}

// listedCode is listedDetail as a code and its parts.
func listedCode(rs []events.Resource) (string, map[string]string) {
	if len(rs) == 0 {
		return events.DetailNothingToDelete, nil
	}
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		n := r.Name
		if n == "" {
			n = r.ID
		}
		names = append(names, n)
	}
	return events.DetailListed, map[string]string{"count": strconv.Itoa(len(rs)), "resource_kind": rs[0].Kind, "names": strings.Join(names, ", ")}
}

// resultDetail is the one-line story a step result tells on the job page.
func resultDetail(p events.Payload, r events.StepResult) string {
	d := ""
	switch e := p.(type) {
	case events.ForcePushed:
		d = e.Repo.String() + " " + short(e.OldSHA) + " → " + short(e.NewSHA)
	case events.CodePushed:
		d = e.Repo.String() + " at " + short(e.SHA)
	case events.PRHeadPushed:
		d = "pull request head " + short(e.Head) + " of " + e.Source.String() + " on " + e.Repo.String() + " " + e.Branch + " (was " + short(e.OldSHA) + ")"
	case events.RepoCreated:
		d = "created " + e.Repo.String()
	case events.StepSucceeded:
		d = e.Detail
	case events.VolumeMountsRemoved:
		d = mountsRemovedDetail(e)
	case events.DBCreated:
		d = "created " + e.Engine + " database " + e.Name + " (" + e.DBUUID + ")"
		if e.Found {
			d = "found " + e.Engine + " database " + e.Name + " (" + e.DBUUID + ") that an uncertain create made"
		}
	case events.EnvRestored:
		d = fmt.Sprintf("env vars are exactly the template's (%s), verified by listing", strings.Join(e.Keys, ", "))
		if e.From != "" {
			d += "; values read from template application " + e.From + ", not recorded"
		}
	case events.VolumesCreated:
		var vs []string
		for _, v := range e.Volumes {
			vs = append(vs, v.Name+" at "+v.MountPath)
		}
		d = fmt.Sprintf("mounted %d new, empty volume(s): %s", len(e.Volumes), strings.Join(vs, ", "))
		if len(e.Skipped) > 0 {
			d += "; bind mounts not recreated (a host directory cannot be emptied through the API): " + strings.Join(e.Skipped, ", ")
		}
	case events.AppDeployed:
		d = "deployment " + e.DeploymentUUID + " finished; the application is " + e.Status
		if e.NoHealthCheck {
			d += " (no health check)"
		}
		if e.Commit != "" {
			d += " at " + short(e.Commit)
		}
		if e.FQDN != "" {
			d += " (" + e.FQDN + ")"
		}
		if e.DBStatus != "" {
			d += "; database " + e.DBUUID + " is " + e.DBStatus
		}
	case events.DBDeleted, events.AppDeleted:
		if own, _ := events.StepResultOf(p); !own.AlreadyAbsent {
			d = RowGoneOnly
		}
	}
	if r.AlreadyAbsent {
		if d != "" {
			return "already absent; " + d
		}
		return "already absent"
	}
	return d
}

// confirmedGone lists the resources a confirmed-deletion event proves gone.
// match reports whether a resource is one of them; EnvVarsDeleted and
// VolumeDeleted confirm every env var / volume of the app.
func confirmedGone(p events.Payload) (match func(events.Resource) bool, ok bool) {
	is := func(kind, id string) func(events.Resource) bool {
		return func(r events.Resource) bool { return r.Kind == kind && (id == "" || r.ID == id) }
	}
	switch e := p.(type) {
	case events.DBDeleted:
		return is(events.ResDatabase, e.DBUUID), true
	case events.AppDeleted:
		return is(events.ResApplication, e.AppUUID), true
	case events.RepoDeleted:
		return is(events.ResRepository, e.Repo.String()), true
	case events.ProjectDeleted:
		return is(events.ResProject, e.ProjectUUID), true
	case events.EnvVarsDeleted:
		return is(events.ResEnvVar, ""), true
	case events.VolumeDeleted, events.VolumeMountsRemoved:
		return is(events.ResVolume, ""), true
	}
	return nil, false
}

// RowGoneOnly is what a confirmed Coolify database or application delete
// proves, said where it is shown: the GET answered 404 after the queued
// delete, and Coolify's DeleteResourceJob deletes its row even when the
// server cleanup failed (app/Jobs/DeleteResourceJob.php:57-100, 130).
const RowGoneOnly = "Coolify's record is gone (GET answers its own 404 after the queued delete); " +
	"this does not prove the server cleaned up: Coolify deletes the record even when stopping the containers or removing the volumes on the server failed"

// mountsRemovedDetail tells what delete_volumes did and what it left.
func mountsRemovedDetail(e events.VolumeMountsRemoved) string {
	d := fmt.Sprintf("removed %d volume mount definition(s) from application %s", len(e.StorageIDs), e.AppUUID)
	if len(e.Left) == 0 {
		return d
	}
	d += "; Coolify's API cannot delete volume data, left on the server:"
	for i, l := range e.Left {
		if i > 0 {
			d += ";"
		}
		what := "Docker volume " + l.Volume
		if l.Volume == "" {
			what = "host directory " + l.HostPath
		}
		d += " " + what + " with its data on " + l.Server + " (clean up: " + l.Cleanup + ")"
	}
	return d
}

// removeConfirmed drops from rs the resources p confirms deleted. It returns
// rs itself when nothing matches, a new slice otherwise.
func removeConfirmed(rs []events.Resource, p events.Payload) []events.Resource {
	match, ok := confirmedGone(p)
	if !ok || !slices.ContainsFunc(rs, match) {
		return rs
	}
	out := make([]events.Resource, 0, len(rs))
	for _, r := range rs {
		if !match(r) {
			out = append(out, r)
		}
	}
	return out
}

// setStep returns a copy of steps (steps itself with own) with the named
// step changed by f; a step the plan did not list is appended (an older or
// newer worker may run steps this binary does not know).
func setStep(steps []StepView, own bool, name string, f func(*StepView)) []StepView {
	out := steps
	if !own {
		out = slices.Clone(steps)
	}
	for i := range out {
		if out[i].Name == name {
			f(&out[i])
			return out
		}
	}
	s := StepView{Name: name, State: StepPending}
	f(&s)
	return append(out, s)
}

func attemptIndex(as []Attempt, n int) int {
	for i := len(as) - 1; i >= 0; i-- {
		if as[i].Number == n {
			return i
		}
	}
	return -1
}

// RefOf is the short form of a job shown on its slot.
func RefOf(j JobView) JobRef {
	r := JobRef{ID: j.ID, Kind: j.Kind, State: j.State, StepsTotal: len(j.Steps)}
	if j.State == JobQueued {
		r.NotBefore = j.NotBefore.UTC()
	}
	for _, s := range j.Steps {
		switch s.State {
		case StepDone:
			r.StepsDone++
		case StepRunning:
			r.CurrentStep = s.Name
		}
	}
	if r.CurrentStep == "" && j.UncertainStep != "" {
		r.CurrentStep = j.UncertainStep
	}
	return r
}

// CompletedSteps lists a job's done steps in plan order.
func CompletedSteps(j JobView) []string {
	out := []string{}
	for _, s := range j.Steps {
		if s.State == StepDone {
			out = append(out, s.Name)
		}
	}
	return out
}

func jobIDOfStream(stream string) string {
	if len(stream) > len(events.JobStreamPrefix) && stream[:len(events.JobStreamPrefix)] == events.JobStreamPrefix {
		return stream[len(events.JobStreamPrefix):]
	}
	return ""
}

func timePtr(t time.Time) *time.Time { return &t }

func short(sha string) string {
	if len(sha) > 8 {
		return sha[:8]
	}
	return sha
}

// listedDetail is a step's detail once it listed what it will delete.
func listedDetail(rs []events.Resource) string {
	if len(rs) == 0 {
		return "nothing to delete"
	}
	names := make([]string, 0, len(rs))
	for _, r := range rs {
		n := r.Name
		if n == "" {
			n = r.ID
		}
		names = append(names, n)
	}
	return fmt.Sprintf("found %d %s to delete: %s", len(rs), rs[0].Kind, strings.Join(names, ", "))
}
