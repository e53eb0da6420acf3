package events

import (
	"encoding/json"
	"time"
)

// JobState is the fold of a job-<id> stream: the one fold of a job's life
// (status, steps done, the step in flight, remaining resources, terminal
// events), used by the command side (backend/slots), the engine
// (backend/jobs: each attempt and the index) and, through the rules it
// calls (Resumable, WithoutDone, TerminalStatus), the read model. It is a
// pure fold: Apply changes nothing but the state.
type JobState struct {
	ID string
	// Exists is true once the job is known: from its stream, or from the
	// slot's JobAccepted before the stream holds its copy (Accept).
	Exists bool
	// Written is true when the job stream has events; Revision is the
	// last one's.
	Written  bool
	Revision Revision
	// Header is the job stream's first event of the current run (JobQueued
	// or JobResumed) when the slot's JobAccepted implies it and the stream
	// does not hold it yet: whoever appends to the job stream next (the
	// claim, a cancel, the command) writes it first. See Accept.
	Header []EventData
	Queued JobQueued
	// QueuedMeta is the metadata of JobQueued; its correlation id ties every
	// event of the job to the request that created it.
	QueuedMeta Metadata
	Status     string
	NotBefore  time.Time

	Attempt    int
	Worker     string
	LeaseUntil time.Time

	// Done holds the steps whose result is recorded, DoneOrder their order.
	Done      map[string]bool
	DoneOrder []string
	// InFlight is the step whose StepStarted has no result yet: while the job
	// runs it is the current step, after a terminal event the uncertain one.
	InFlight string
	// Results keeps each done step's result event, for verification and
	// for SlotPromoted's repo.
	Results map[string]RecordedEvent

	Resumes      int
	Terminals    int    // terminal events so far (a resumed job has several)
	TerminalType string // type of the newest terminal event
	TerminalAt   time.Time
	// ByAttempt is true when the newest terminal event was written by the
	// attempt itself (it had no call in flight when it wrote it).
	ByAttempt bool
	LastError string
	// LastCode is the newest StepFailed's error code ("" for most failures).
	LastCode string
	// Deployment is the newest DeploymentStarted: the deployment a deploy
	// step waits for, which a later attempt follows instead of deploying
	// again (issue 32).
	Deployment DeploymentStarted
}

// Terminal reports whether the job has ended (possibly to be resumed).
func (j *JobState) Terminal() bool { return Ended(j.Status) }

// Touched reports whether the job may have changed anything: an attempt
// ran or a step is done.
func (j *JobState) Touched() bool { return j.Attempt > 0 || len(j.DoneOrder) > 0 }

// Resumable reports whether Resume may continue the job (the rule is
// Resumable's, shared with the read model).
func (j *JobState) Resumable() bool { return Resumable(j.Queued.Kind, j.Status, j.Touched()) }

// Remaining lists the planned resources whose step is not confirmed done
// (WithoutDone, the rule the read model applies too).
func (j *JobState) Remaining() []Resource {
	return WithoutDone(j.Queued.Kind, j.Queued.Resources, func(st string) bool { return j.Done[st] })
}

// TouchedRemaining is the remaining list a lock release records: nil when
// no attempt ever ran and no step is done (nothing can have changed, so a
// cancelled teardown leaves the slot as it was), else Remaining — possibly
// empty, never nil.
func (j *JobState) TouchedRemaining() []Resource {
	if !j.Touched() {
		return nil
	}
	r := j.Remaining()
	if r == nil {
		r = []Resource{}
	}
	// What a delete left on an unreachable server stays the slot's
	// (issue 32).
	for _, st := range []string{StepDeleteDB, StepDeleteApp} {
		for _, l := range LeftOf(j.Results[st]) {
			r = append(r, l.Resource())
		}
	}
	return r
}

// Completed returns the done steps in order.
func (j *JobState) Completed() []string { return append([]string(nil), j.DoneOrder...) }

// NextStep is the first step of the plan whose result is not recorded ("" when
// every step is done).
func (j *JobState) NextStep() string {
	for _, s := range j.Queued.Steps {
		if !j.Done[s] {
			return s
		}
	}
	return ""
}

// Accept folds the job-stream event a one-append acceptance implies (the
// upcast of JobAccepted, docs/md): the first run's JobQueued, or a
// resume's JobResumed, with the acceptance's metadata, and keeps it in
// Header until the job stream holds it. It does nothing for an acceptance
// the job stream already holds, for another job, or for an old-format
// JobAccepted (Run 0), whose JobQueued/JobResumed the command wrote itself.
func (j *JobState) Accept(acc JobAccepted, meta Metadata) {
	if acc.JobID != j.ID || acc.Run == 0 || acc.Run <= j.Run() {
		return
	}
	var p Payload
	switch {
	case acc.Run == 1 && acc.Job != nil:
		p = *acc.Job
	case acc.Resumed && acc.Run == j.Run()+1:
		p = JobResumed{JobID: acc.JobID, By: acc.By, FromStep: acc.FromStep}
	default:
		return
	}
	j.Exists = true
	j.fold(p, meta)
	j.Header = []EventData{New(p, meta)}
}

// Expected is the revision the next append to the job stream must expect.
func (j *JobState) Expected() ExpectedRevision {
	if !j.Written {
		return NoStream()
	}
	return Exact(j.Revision)
}

// Apply folds one event of the job's stream into the state.
func (j *JobState) Apply(ev RecordedEvent) error {
	header := len(j.Header) > 0 && ev.Type == j.Header[0].Type
	j.Exists, j.Written = true, true
	j.Revision = ev.Revision
	if header {
		// The copy of the acceptance Accept folded already.
		j.Header = nil
		return nil
	}
	if j.Done == nil {
		j.Done = map[string]bool{}
		j.Results = map[string]RecordedEvent{}
	}
	if IsStepResult(ev.Type) {
		var r StepResult
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return err
		}
		if !j.Done[r.Step] {
			j.Done[r.Step] = true
			j.DoneOrder = append(j.DoneOrder, r.Step)
		}
		j.Results[r.Step] = ev
		if j.InFlight == r.Step {
			j.InFlight = ""
		}
		return nil
	}
	if IsTerminal(ev.Type) {
		j.Status = JobStatusAfter(j.Status, ev.Type)
		j.Terminals++
		j.TerminalType = ev.Type
		j.TerminalAt = ev.Meta.Time
		j.ByAttempt = j.Worker != "" && ev.Meta.Actor == j.Worker
		if ev.Type == (JobFailed{}).EventType() {
			var f JobFailed
			_ = json.Unmarshal(ev.Data, &f)
			j.LastError = f.Reason
		}
		return nil
	}
	p, err := Decode(ev)
	if err != nil {
		return err
	}
	j.fold(p, ev.Meta)
	return nil
}

// fold applies a decoded job event that is neither a step result nor
// terminal.
func (j *JobState) fold(p Payload, meta Metadata) {
	if j.Done == nil {
		j.Done = map[string]bool{}
		j.Results = map[string]RecordedEvent{}
	}
	j.Status = JobStatusAfter(j.Status, p.EventType())
	switch e := p.(type) {
	case JobQueued:
		j.ID = e.JobID
		j.Queued = e
		j.QueuedMeta = meta
		j.NotBefore = e.NotBefore
	case JobClaimed:
		j.Attempt, j.Worker, j.LeaseUntil = e.Attempt, e.Worker, e.LeaseUntil
	case LeaseRenewed:
		j.LeaseUntil = e.LeaseUntil
	case StepStarted:
		j.InFlight = e.Step
	case StepFailed:
		// A definite failure leaves nothing in flight; an uncertain one
		// keeps the step uncertain until a later attempt verifies it.
		if !e.Uncertain && j.InFlight == e.Step {
			j.InFlight = ""
		}
		j.LastError, j.LastCode = e.Error, e.ErrorCode
	case DeploymentStarted:
		j.Deployment = e
	case JobResumed:
		j.Resumes++
		j.NotBefore = meta.Time
		j.Worker = ""
	}
}

// Run is the job's current run: 1 + its resumes (0 before it is known).
func (j *JobState) Run() int {
	if j.Queued.JobID == "" {
		return 0
	}
	return j.Resumes + 1
}

// Record folds d, which the caller has just appended to the job's stream,
// into j: a writer keeps its copy of the fold current without reading the
// stream back. Revision is left as it was (the writer tracks its own
// expected revision).
func (j *JobState) Record(d EventData) error {
	rev := j.Revision
	err := j.Apply(RecordedEvent{ID: d.ID, Stream: JobStream(j.ID), Revision: rev, Type: d.Type, Data: d.Data, Meta: d.Meta})
	j.Revision = rev
	return err
}
