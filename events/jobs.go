package events

import (
	"slices"
	"sync"
)

// A job's vocabulary beside its events: its statuses, the event types that
// end it, and each kind's step table. The command side (backend/slots), the
// engine (backend/jobs) and the read model (projections) read them from
// here, and fold a job's stream with JobState (jobstate.go). Each kind is
// declared once, in kindTable below: its steps in order, the planned
// resource each removes, and the plan that names it; the slot kinds' and
// steps' names are declared beside the tables (the reconciliation's in
// reconcile.go, the pull-request deploy's in pullrequests.go). The
// lifecycle they make is drawn in docs/jobs.md.

// Job statuses: the state of a job in JobState and in the read model.
const (
	StatusQueued    = "queued"    // waiting for its grace period or a worker
	StatusRunning   = "running"   // claimed, lease live
	StatusSucceeded = "succeeded" // final
	StatusFailed    = "failed"    // ended; resumable
	StatusTimedOut  = "timed_out" // ended; resumable
	StatusCancelled = "cancelled" // final, except a teardown cancelled after it started
	StatusAbandoned = "abandoned" // ended (its worker stopped renewing); resumable
)

// terminals is the one list of the event types that end a job (or one run
// of it, until a resume), with the status each leaves, in the order the
// dashboard lists the statuses (EndedStatuses).
var terminals = []struct{ typ, status string }{
	{JobSucceeded{}.EventType(), StatusSucceeded},
	{JobFailed{}.EventType(), StatusFailed},
	{JobTimedOut{}.EventType(), StatusTimedOut},
	{JobCancelled{}.EventType(), StatusCancelled},
	{JobAbandoned{}.EventType(), StatusAbandoned},
}

// terminalStatus is terminals by event type.
var terminalStatus = func() map[string]string {
	m := make(map[string]string, len(terminals))
	for _, t := range terminals {
		m[t.typ] = t.status
	}
	return m
}()

// IsTerminal reports whether an event type ends a job (or a run of it).
func IsTerminal(typ string) bool { return terminalStatus[typ] != "" }

// TerminalStatus is the status a terminal event type leaves ("" for any
// other type).
func TerminalStatus(typ string) string { return terminalStatus[typ] }

// TerminalTypes lists the terminal event types (sorted), e.g. for a
// subscription filter.
func TerminalTypes() []string {
	out := make([]string, 0, len(terminalStatus))
	for t := range terminalStatus {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// endedStatus is the set of terminalStatus's statuses.
var endedStatus = func() map[string]bool {
	m := map[string]bool{}
	for _, st := range terminalStatus {
		m[st] = true
	}
	return m
}()

// Ended reports whether a status is one a terminal event leaves.
func Ended(status string) bool { return endedStatus[status] }

// JobStatusAfter is the one status transition of a job: its status after an
// event of type typ, in a job whose status was status (status itself when
// the event changes none). JobState folds by it, and so does the read
// model's job view (projections): a status is decided in one place.
func JobStatusAfter(status, typ string) string {
	switch typ {
	case JobQueued{}.EventType(), JobResumed{}.EventType():
		return StatusQueued
	case JobClaimed{}.EventType():
		return StatusRunning
	}
	if st := terminalStatus[typ]; st != "" {
		return st
	}
	return status
}

// Resumable is the one rule for which ended jobs a resume may continue:
// failed, timed-out and abandoned ones, and a teardown cancelled after it
// started (touched: an attempt ran or a step is done), which left the slot
// "teardown incomplete" and is finished by resuming it (issue 14). A
// succeeded job, and any other cancelled one, is final.
func Resumable(kind, status string, touched bool) bool {
	switch status {
	case StatusFailed, StatusTimedOut, StatusAbandoned:
		return true
	case StatusCancelled:
		return kind == KindTeardown && touched
	}
	return false
}

// Cancellable reports whether a job in status may be cancelled.
func Cancellable(status string) bool { return status == StatusQueued || status == StatusRunning }

// JobStep is one row of a job kind's step table, the one declaration of a
// step: its name, the kind of planned resource its confirmed result removes
// from the job's remaining list ("" when it removes none; ResAny for a step
// that removes the job's resource whatever its kind), and Plan, which names
// that resource for a slot from its registration. A row with a Resource
// other than ResAny has a Plan (TestEveryPlannedStepHasAPlan): the commands
// plan a job from these rows alone (PlanResources), so the plan cannot
// drift from the steps that remove it. The step bodies are backend/jobs',
// one per step name, checked against these tables by a test there.
type JobStep struct {
	Name     string
	Resource string
	Plan     func(SlotRegistered) Resource
}

// ResAny is the JobStep.Resource of delete_resource: a delete-orphan job
// plans one resource of any kind, and its last step removes it.
const ResAny = "*"

// The slot job kinds (the reconciliation's, adopt and delete_orphan, are
// reconcile.go's; pr_deploy is pullrequests.go's).
const (
	KindReset    = "reset"
	KindTeardown = "teardown"
	KindPromote  = "promote"
)

// Step names, each beside the tables below that run it (the
// reconciliation's and the pull-request deploy's are in their files).
const (
	StepDeleteDB      = "delete_db"
	StepDeleteEnvVars = "delete_env_vars"
	StepDeleteVolumes = "delete_volumes"
	StepForcePush     = "force_push_template"
	StepVacate        = "vacate"
	StepDeleteApp     = "delete_app"
	StepDeleteRepo    = "delete_repo"
	StepDeleteProject = "delete_project"
	StepRetire        = "retire"
	StepLookupRepo    = "lookup_repo"
	StepCreateRepo    = "create_repo"
	StepPushCode      = "push_code"
	StepRecordRepo    = "record_repo"
	// StepPreflight is the ready reset's first step (issue 32): it checks
	// what the reset will need (token abilities, the template's env values
	// readable, the server reachable, the engine known, the application
	// there) before anything is deleted, and fails with the fix when
	// something is missing.
	StepPreflight = "preflight"
	// The steps a ready-slot reset (issue 23, template.go) adds after
	// force_push_template.
	StepCreateDB   = "create_db"
	StepRestoreEnv = "restore_env"
	// StepCreateVolumes mounts a new, empty Docker volume where each
	// persistent storage delete_volumes removed was mounted.
	StepCreateVolumes = "create_volumes"
	StepDeploy        = "deploy"
)

// resetClears are the reset's deletes and force push: the plain reset's
// steps before vacate, and the ready reset's after its preflight.
var resetClears = []JobStep{
	{StepDeleteDB, ResDatabase, planDatabase},
	{StepDeleteEnvVars, ResEnvVar, planEnvVars},
	{StepDeleteVolumes, ResVolume, planVolumes},
	{StepForcePush, ResRepository, planBranchReset},
}

// jobKind is the declaration of one job kind in this package: its step
// table, in the order the engine runs the steps, and whether the slot's
// plan route plans it. What a kind needs of the slot (its params, the
// slot's state it starts from, its grace period, the slot event its success
// implies) is backend/slots' kindRules, one entry per kind, checked against
// kindTable by a test there (TestEveryKindHasRules).
type jobKind struct {
	name  string
	steps []JobStep
	// slotPlan: GET /api/slots/{name}/plan?kind= plans it (SlotPlanKinds),
	// the dry run of the slot's own command. The orphan kinds are planned
	// through the reconciliation's routes, and a pull request's deploy is
	// queued by the pull request's driver, never by a person.
	slotPlan bool
}

// kindTable is every job kind, in display order (the slot jobs, then the
// reconciliation's, then the pull request's): the one list of the job kinds
// (JobKinds) and, with readyResetTable, of their steps (StepOrder).
var kindTable = []jobKind{
	{name: KindReset, slotPlan: true, steps: slices.Concat(resetClears, []JobStep{{Name: StepVacate}})},
	{name: KindTeardown, slotPlan: true, steps: []JobStep{
		{StepDeleteDB, ResDatabase, planDatabase},
		{StepDeleteApp, ResApplication, planApplication},
		{StepDeleteRepo, ResRepository, planRepository},
		{StepDeleteProject, ResProject, planProject},
		{Name: StepRetire},
	}},
	{name: KindPromote, slotPlan: true, steps: []JobStep{{Name: StepLookupRepo}, {Name: StepCreateRepo}, {Name: StepPushCode}, {Name: StepRecordRepo}}},
	{name: KindAdopt, steps: []JobStep{{Name: StepLookupResource}, {Name: StepAdoptResource}}},
	{name: KindDeleteOrphan, steps: []JobStep{{Name: StepLookupResource}, {Name: StepAdoptResource}, {Name: StepDeleteResource, Resource: ResAny}}},
	// The head pushed, then the ready reset's own deploy step, which waits
	// until the application runs (issue 34).
	{name: KindPRDeploy, steps: []JobStep{{Name: StepPushPRHead}, {Name: StepDeploy}}},
}

// kindOf is kind's declaration (nil for an unknown kind).
func kindOf(kind string) *jobKind {
	for i := range kindTable {
		if kindTable[i].name == kind {
			return &kindTable[i]
		}
	}
	return nil
}

// readyResetTable is the reset of a slot registered with a template (issue
// 23): the plain reset's deletes and force push, then a fresh database, the
// template's env vars and volumes, and the template deployed and healthy,
// before the slot is vacated. What the creates make is tracked from their
// results (DBCreated), not from the plan's resources.
var readyResetTable = slices.Concat(
	[]JobStep{{Name: StepPreflight}}, // issue 32: nothing is deleted before it passed
	resetClears,
	[]JobStep{{Name: StepCreateDB}, {Name: StepRestoreEnv}, {Name: StepCreateVolumes}, {Name: StepDeploy}, {Name: StepVacate}},
)

// The plans of the reset's and the teardown's steps. A reset lists the
// app's env vars and volumes by the app's id: their own ids are only known
// when the step lists them (and are recorded in its result).
func planDatabase(r SlotRegistered) Resource { return Resource{Kind: ResDatabase, ID: r.DBUUID} }
func planApplication(r SlotRegistered) Resource {
	return Resource{Kind: ResApplication, ID: r.AppUUID}
}
func planRepository(r SlotRegistered) Resource {
	return Resource{Kind: ResRepository, ID: r.Repo.String()}
}
func planProject(r SlotRegistered) Resource { return Resource{Kind: ResProject, ID: r.ProjectUUID} }
func planEnvVars(r SlotRegistered) Resource {
	return Resource{Kind: ResEnvVar, ID: r.AppUUID, Name: "env vars of the application", NameCode: NameAppEnvVars}
}
func planVolumes(r SlotRegistered) Resource {
	return Resource{Kind: ResVolume, ID: r.AppUUID, Name: "persistent volumes of the application", NameCode: NameAppVolumes}
}
func planBranchReset(r SlotRegistered) Resource {
	tmpl := r.TemplateRepo.String() + "@" + r.TemplateRef
	return Resource{Kind: ResRepository, ID: r.Repo.String(), Name: "branch " + r.Branch + " reset to " + tmpl,
		NameCode: NameBranchReset, NameArgs: NameArgs{Branch: r.Branch, Template: tmpl}}
}

// Steps is kind's step table (a copy; nil for an unknown kind); template
// selects the ready reset's table for a reset of a slot with a template.
func Steps(kind string, template bool) []JobStep { return slices.Clone(table(kind, template)) }

// table is Steps without the copy, for this file's readers.
func table(kind string, template bool) []JobStep {
	if kind == KindReset && template {
		return readyResetTable
	}
	if k := kindOf(kind); k != nil {
		return k.steps
	}
	return nil
}

// StepNames is Steps' names, the plan a JobQueued records.
func StepNames(kind string, template bool) []string {
	t := table(kind, template)
	if t == nil {
		return nil
	}
	out := make([]string, len(t))
	for i, s := range t {
		out[i] = s.Name
	}
	return out
}

// PlanResources is what a job of kind will act on for the slot registered
// as reg, in step order: each step's Plan (nil when no step plans one — a
// delete-orphan job's resource comes from its request).
func PlanResources(kind string, reg SlotRegistered) []Resource {
	var out []Resource
	for _, s := range table(kind, reg.Template != nil) {
		if s.Plan != nil {
			out = append(out, s.Plan(reg))
		}
	}
	return out
}

// StepForResource names the step of kind whose confirmed result removes a
// planned resource of kind res from the job's remaining list ("" when none
// does).
func StepForResource(kind, res string) string {
	for _, s := range table(kind, true) {
		if s.Resource == res || s.Resource == ResAny {
			return s.Name
		}
	}
	return ""
}

// WithoutDone is the one rule for a job's remaining resources: rs without
// those whose step (StepForResource) done reports confirmed. It returns a
// new slice (nil when nothing is left), never rs itself.
func WithoutDone(kind string, rs []Resource, done func(step string) bool) []Resource {
	var out []Resource
	for _, r := range rs {
		if st := StepForResource(kind, r.Kind); st == "" || !done(st) {
			out = append(out, r)
		}
	}
	return out
}

// stepResulter is every payload that embeds StepResult: a step's confirmed
// result.
type stepResulter interface{ stepResult() StepResult }

func (r StepResult) stepResult() StepResult { return r }

// StepResultOf returns the StepResult a step-result payload embeds.
func StepResultOf(p Payload) (StepResult, bool) {
	if r, ok := p.(stepResulter); ok {
		return r.stepResult(), true
	}
	return StepResult{}, false
}

// resultTypes are the catalogue's types whose payload embeds StepResult,
// found once from the catalogue itself (so a new result event needs no
// list to be added to).
var resultTypes = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for t, mk := range constructors {
		if p, err := mk(nil); err == nil {
			if _, ok := p.(stepResulter); ok {
				m[t] = true
			}
		}
	}
	return m
})

// IsStepResult reports whether an event type records a step's confirmed
// result.
func IsStepResult(typ string) bool { return resultTypes()[typ] }
