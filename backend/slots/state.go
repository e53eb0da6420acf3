package slots

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
)

// Clock tells the time and owns timers (backend/clock). Tests pass a
// clock.Fake; production uses clock.Real().
type Clock = clock.Clock

// Actors the system uses for events nobody asked for.
const (
	ActorDeadline = "system:deadline" // an occupancy deadline passed
	ActorRepair   = "system:repair"   // log-driven repair after a crash
	ActorRescuer  = "system:rescuer"  // an attempt's lease expired
	ActorShutdown = "system:shutdown" // graceful stop of a worker
)

// Job statuses, the same words as projections' job states.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimedOut  = "timed_out"
	StatusCancelled = "cancelled"
	StatusAbandoned = "abandoned"
)

// SlotState is the slot aggregate: the fold of a slot-<name> stream.
type SlotState struct {
	Name     string
	Exists   bool
	Revision events.Revision
	Reg      events.SlotRegistered

	Occupied bool
	Occupant string
	// OccupantID is the occupant's subject id (SlotOccupied.ByID; empty
	// for an occupant recorded by name only, see IsOccupant).
	OccupantID string
	Until      time.Time
	// DeadlineResetFor is the deadline an automatic reset was already queued
	// for; the scheduler queues at most one per deadline.
	DeadlineResetFor time.Time

	Retired    bool
	Incomplete bool
	Remaining  []events.Resource

	// LockJob is the job holding the slot's lock ("" when free).
	LockJob    string
	LockKind   string
	LockedAt   time.Time
	LockResume bool
	// LockRun is the run of the job the lock is for (JobAccepted.Run: 1,
	// then +1 per resume); 0 for a lock from a log older than the
	// one-append acceptance, which stands for the job's current run.
	LockRun int
	// Lock and LockMeta are the JobAccepted that took the lock: the job's
	// spec until its job stream holds it (JobState.Accept).
	Lock     events.JobAccepted
	LockMeta events.Metadata

	// Hold is the waitlist's hold on a vacant slot (events.SlotHeld): only
	// Hold.For / Hold.ForID may occupy it until Hold.Until. Zero when none.
	Hold events.SlotHeld

	// VacatedBy and PromotedBy record the jobs whose SlotVacated or
	// SlotPromoted the slot holds, for the lock holder and the job released
	// last only: a release writes a job's slot event once (slotOutcome asks
	// only about the lock holder) and the waitlist asks only about the last
	// released job, so older entries would only make every fold of a long
	// slot stream grow with its history (issue 13).
	VacatedBy  map[string]bool
	RetiredBy  string
	PromotedBy map[string]events.RepoRef
}

// forgetOutcomes drops the per-job records of every job but released (the
// job just released) and the lock holder.
func (s *SlotState) forgetOutcomes(released string) {
	for id := range s.VacatedBy {
		if id != released && id != s.LockJob {
			delete(s.VacatedBy, id)
		}
	}
	for id := range s.PromotedBy {
		if id != released && id != s.LockJob {
			delete(s.PromotedBy, id)
		}
	}
}

// Locked reports whether a job holds the slot's lock.
func (s *SlotState) Locked() bool { return s.LockJob != "" }

// LockedFor reports whether the lock is j's for j's current run (a lock from
// an old log, with no run, counts as the current run's).
func (s *SlotState) LockedFor(j *JobState) bool {
	return s.LockJob == j.ID && (s.LockRun == 0 || s.LockRun == j.Run())
}

// HeldAgainst reports whether the waitlist's hold keeps the person (by,
// with subject id byID) from occupying the slot at now.
func (s *SlotState) HeldAgainst(by, byID string, now time.Time) bool {
	h := s.Hold
	if h.OfferID == "" || !now.Before(h.Until) {
		return false
	}
	if byID != "" && h.ForID != "" {
		return byID != h.ForID
	}
	return by != h.For
}

// Lifecycle names the slot's state in the words of projections.
func (s *SlotState) Lifecycle() string {
	switch {
	case s.Retired:
		return "retired"
	case s.LockKind == events.KindTeardown:
		return "tearing_down"
	case s.LockKind == events.KindReset:
		return "resetting"
	case s.Incomplete:
		return "teardown_incomplete"
	case s.Occupied:
		return "occupied"
	default:
		return "vacant"
	}
}

// Apply folds one event of the slot's stream into the state.
func (s *SlotState) Apply(ev events.RecordedEvent) error {
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	s.Exists = true
	s.Revision = ev.Revision
	if s.VacatedBy == nil {
		s.VacatedBy = map[string]bool{}
		s.PromotedBy = map[string]events.RepoRef{}
	}
	switch e := p.(type) {
	case events.SlotRegistered:
		s.Name = e.Slot
		s.Reg = e
		if s.Reg.Branch == "" {
			s.Reg.Branch = "main"
		}
	case events.SlotOccupied:
		s.Occupied, s.Occupant, s.OccupantID, s.Until = true, e.By, e.ByID, e.Until
		s.Hold = events.SlotHeld{}
	case events.SlotHeld:
		s.Hold = e
	case events.SlotHoldReleased:
		if s.Hold.OfferID == e.OfferID {
			s.Hold = events.SlotHeld{}
		}
	case events.OccupancyExtended:
		s.Until = e.Until
	case events.JobAccepted:
		s.LockJob, s.LockKind, s.LockedAt, s.LockResume = e.JobID, e.Kind, ev.Meta.Time, e.Resumed
		s.LockRun, s.Lock, s.LockMeta = e.Run, e, ev.Meta
		if ev.Meta.Actor == ActorDeadline {
			s.DeadlineResetFor = s.Until
		}
	case events.JobReleased:
		if s.LockJob == e.JobID {
			s.LockJob, s.LockKind, s.LockResume = "", "", false
			s.LockRun, s.Lock, s.LockMeta = 0, events.JobAccepted{}, events.Metadata{}
		}
		s.forgetOutcomes(e.JobID)
	case events.SlotVacated:
		s.Occupied, s.Occupant, s.OccupantID, s.Until = false, "", "", time.Time{}
		s.Hold = events.SlotHeld{}
		s.VacatedBy[e.JobID] = true
	case events.TeardownIncomplete:
		s.Incomplete = true
		s.Remaining = e.Remaining
	case events.SlotRetired:
		s.Retired, s.Incomplete, s.Remaining, s.RetiredBy = true, false, nil, e.JobID
	case events.SlotPromoted:
		s.PromotedBy[e.JobID] = e.NewRepo
	case events.SlotDatabaseChanged:
		// A reset's create_db made the slot a new database: the next
		// reset or teardown deletes that one, and "same as before" is its
		// engine.
		s.Reg.DBUUID = e.DBUUID
		if t := s.Reg.Template; t != nil && e.Engine != "" {
			c := *t
			c.SeenEngine, c.SeenImage = e.Engine, e.Image
			s.Reg.Template = &c
		}
	}
	return nil
}

// JobState is the fold of a job-<id> stream.
type JobState struct {
	ID string
	// Exists is true once the job is known: from its stream, or from the
	// slot's JobAccepted before the stream holds its copy (Accept).
	Exists bool
	// Written is true when the job stream has events; Revision is the
	// last one's.
	Written  bool
	Revision events.Revision
	// Header is the job stream's first event of the current run (JobQueued
	// or JobResumed) when the slot's JobAccepted implies it and the stream
	// does not hold it yet: whoever appends to the job stream next (the
	// claim, a cancel, the command) writes it first. See Accept.
	Header []events.EventData
	Queued events.JobQueued
	// QueuedMeta is the metadata of JobQueued; its correlation id ties every
	// event of the job to the request that created it.
	QueuedMeta events.Metadata
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
	Results map[string]events.RecordedEvent

	Resumes      int
	Terminals    int    // terminal events so far (a resumed job has several)
	TerminalType string // type of the newest terminal event
	TerminalAt   time.Time
	// ByAttempt is true when the newest terminal event was written by the
	// attempt itself (it had no call in flight when it wrote it).
	ByAttempt bool
	LastError string
}

// Terminal reports whether the job has ended (possibly to be resumed).
func (j *JobState) Terminal() bool {
	switch j.Status {
	case StatusSucceeded, StatusFailed, StatusTimedOut, StatusCancelled, StatusAbandoned:
		return true
	}
	return false
}

// Resumable reports whether Resume may continue the job.
func (j *JobState) Resumable() bool {
	switch j.Status {
	case StatusFailed, StatusTimedOut, StatusAbandoned:
		return true
	case StatusCancelled:
		// A teardown cancelled after it started left the slot "teardown
		// incomplete"; resuming is how it is finished (issue 14). One that
		// never ran changed nothing.
		return j.Queued.Kind == events.KindTeardown && j.TouchedRemaining() != nil
	}
	return false
}

// Remaining lists the planned resources whose step is not confirmed done.
func (j *JobState) Remaining() []events.Resource {
	var out []events.Resource
	for _, r := range j.Queued.Resources {
		if st := StepForResource(j.Queued.Kind, r.Kind); st == "" || !j.Done[st] {
			out = append(out, r)
		}
	}
	return out
}

// TouchedRemaining is the remaining list a lock release records: nil when
// no attempt ever ran and no step is done (nothing can have changed, so a
// cancelled teardown leaves the slot as it was), else Remaining — possibly
// empty, never nil.
func (j *JobState) TouchedRemaining() []events.Resource {
	if j.Attempt == 0 && len(j.DoneOrder) == 0 {
		return nil
	}
	if r := j.Remaining(); r != nil {
		return r
	}
	return []events.Resource{}
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

// stepResult is the part every step-result event shares.
type stepResult struct {
	Step          string `json:"step"`
	AlreadyAbsent bool   `json:"already_absent"`
}

var resultTypes = map[string]bool{
	"DBDeleted": true, "EnvVarsDeleted": true, "VolumeDeleted": true, "VolumeMountsRemoved": true, "ForcePushed": true,
	"AppDeleted": true, "RepoDeleted": true, "ProjectDeleted": true, "RepoCreated": true,
	"CodePushed": true, "StepSucceeded": true,
	"DBCreated": true, "EnvRestored": true, "VolumesCreated": true, "AppDeployed": true, // the ready reset (issue 23)
}

// IsStepResult reports whether an event type records a step's confirmed result.
func IsStepResult(typ string) bool { return resultTypes[typ] }

// IsTerminal reports whether an event type ends a job (or an attempt of it).
func IsTerminal(typ string) bool {
	switch typ {
	case "JobSucceeded", "JobFailed", "JobTimedOut", "JobCancelled", "JobAbandoned":
		return true
	}
	return false
}

// TerminalStatus maps a terminal event type to a job status.
func TerminalStatus(typ string) string {
	switch typ {
	case "JobSucceeded":
		return StatusSucceeded
	case "JobFailed":
		return StatusFailed
	case "JobTimedOut":
		return StatusTimedOut
	case "JobCancelled":
		return StatusCancelled
	case "JobAbandoned":
		return StatusAbandoned
	}
	return ""
}

// Accept folds the job-stream event a one-append acceptance implies (the
// upcast of JobAccepted, docs/events.md): the first run's JobQueued, or a
// resume's JobResumed, with the acceptance's metadata, and keeps it in
// Header until the job stream holds it. It does nothing for an acceptance
// the job stream already holds, for another job, or for an old-format
// JobAccepted (Run 0), whose JobQueued/JobResumed the command wrote itself.
func (j *JobState) Accept(acc events.JobAccepted, meta events.Metadata) {
	if acc.JobID != j.ID || acc.Run == 0 || acc.Run <= j.Run() {
		return
	}
	var p events.Payload
	switch {
	case acc.Run == 1 && acc.Job != nil:
		p = *acc.Job
	case acc.Resumed && acc.Run == j.Run()+1:
		p = events.JobResumed{JobID: acc.JobID, By: acc.By, FromStep: acc.FromStep}
	default:
		return
	}
	j.Exists = true
	j.fold(p, meta)
	j.Header = []events.EventData{events.New(p, meta)}
}

// AcceptFrom is Accept with the slot's current lock, if it names j.
func (j *JobState) AcceptFrom(st *SlotState) {
	if st.LockJob == j.ID {
		j.Accept(st.Lock, st.LockMeta)
	}
}

// Expected is the revision the next append to the job stream must expect.
func (j *JobState) Expected() events.ExpectedRevision {
	if !j.Written {
		return events.NoStream()
	}
	return events.Exact(j.Revision)
}

// Apply folds one event of the job's stream into the state.
func (j *JobState) Apply(ev events.RecordedEvent) error {
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
		j.Results = map[string]events.RecordedEvent{}
	}
	if IsStepResult(ev.Type) {
		var r stepResult
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
		j.Status = TerminalStatus(ev.Type)
		j.Terminals++
		j.TerminalType = ev.Type
		j.TerminalAt = ev.Meta.Time
		j.ByAttempt = j.Worker != "" && ev.Meta.Actor == j.Worker
		if ev.Type == "JobFailed" {
			var f events.JobFailed
			_ = json.Unmarshal(ev.Data, &f)
			j.LastError = f.Reason
		}
		return nil
	}
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	j.fold(p, ev.Meta)
	return nil
}

// fold applies a decoded job event that is neither a step result nor
// terminal.
func (j *JobState) fold(p events.Payload, meta events.Metadata) {
	if j.Done == nil {
		j.Done = map[string]bool{}
		j.Results = map[string]events.RecordedEvent{}
	}
	switch e := p.(type) {
	case events.JobQueued:
		j.ID = e.JobID
		j.Queued = e
		j.QueuedMeta = meta
		j.Status = StatusQueued
		j.NotBefore = e.NotBefore
	case events.JobClaimed:
		j.Status = StatusRunning
		j.Attempt, j.Worker, j.LeaseUntil = e.Attempt, e.Worker, e.LeaseUntil
	case events.LeaseRenewed:
		j.LeaseUntil = e.LeaseUntil
	case events.StepStarted:
		j.InFlight = e.Step
	case events.StepFailed:
		// A definite failure leaves nothing in flight; an uncertain one
		// keeps the step uncertain until a later attempt verifies it.
		if !e.Uncertain && j.InFlight == e.Step {
			j.InFlight = ""
		}
		j.LastError = e.Error
	case events.JobResumed:
		j.Status = StatusQueued
		j.Resumes++
		j.NotBefore = meta.Time
		j.Worker = ""
	}
}

// LoadSlot reads and folds a slot's stream. A missing stream yields a state
// with Exists false and no error.
func LoadSlot(ctx context.Context, store events.Store, name string) (SlotState, error) {
	s := SlotState{Name: name}
	evs, err := store.ReadStream(ctx, events.SlotStream(name), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	for _, ev := range evs {
		if err := s.Apply(ev); err != nil {
			return s, err
		}
	}
	return s, nil
}

// LoadJob reads and folds a job's stream. A missing stream yields a state with
// Exists false and no error.
func LoadJob(ctx context.Context, store events.Store, id string) (JobState, error) {
	j := JobState{ID: id}
	evs, err := store.ReadStream(ctx, events.JobStream(id), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return j, nil
	}
	if err != nil {
		return j, err
	}
	for _, ev := range evs {
		if err := j.Apply(ev); err != nil {
			return j, err
		}
	}
	return j, nil
}
