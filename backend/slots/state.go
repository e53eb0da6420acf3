package slots

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Actors the system uses for events nobody asked for.
const (
	ActorDeadline = "system:deadline" // an occupancy deadline passed
	ActorRepair   = "system:repair"   // log-driven repair after a crash
	ActorRescuer  = "system:rescuer"  // an attempt's lease expired
	ActorShutdown = "system:shutdown" // graceful stop of a worker
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
func (s *SlotState) LockedFor(j *events.JobState) bool {
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

// AcceptFrom folds into j the acceptance the slot's current lock implies,
// if the lock names j (JobState.Accept).
func AcceptFrom(j *events.JobState, st *SlotState) {
	if st.LockJob == j.ID {
		j.Accept(st.Lock, st.LockMeta)
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
func LoadJob(ctx context.Context, store events.Store, id string) (events.JobState, error) {
	j := events.JobState{ID: id}
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
