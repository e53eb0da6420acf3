// Package slots is the slot aggregate and its commands: each loads the slot
// (and job) stream, decides, and appends with the expected revision. A job's
// fold and step table live beside the events (events.JobState,
// events/jobs.go); commands fold a job to cancel or resume it.
package slots

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Config tunes the Service. Zero values pick the defaults noted.
type Config struct {
	// Grace delays a released slot's reset (JobQueued.NotBefore = now+Grace),
	// so a person who released by mistake can cancel. Default 0: immediate.
	Grace time.Duration
	// DeadlineReset makes RunDeadlines queue a reset when an occupancy
	// deadline passes. Off by default.
	DeadlineReset bool
	// MaxOccupancy bounds how far away a deadline may be. Default 30 days.
	MaxOccupancy time.Duration
	// Scope bounds the resources a slot, its template and a promote's
	// target may name (empty lists: unrestricted).
	Scope Scope
	// Resources looks registered resources up at the providers; nil skips
	// the lookups (unit tests without providers).
	Resources ResourceChecker
	Clock     clock.Clock // tells the time and owns timers; tests pass a clock.Fake
	Logger    *slog.Logger
	// SlotCache folds slots for commands (see SlotCache). Pass the one the
	// job engine uses to share it; nil (or a cache of another store): the
	// Service makes its own of DefaultSlotCacheSize.
	SlotCache *SlotCache
	// Health receives the events the deadline scheduler cannot apply (it
	// parks them and goes on; backend/consumer). nil: a Health of its own,
	// which only logs them.
	Health *consumer.Health
}

// Service implements Commands on an event store.
type Service struct {
	store  events.Store
	cfg    Config
	log    *slog.Logger
	owners *owners
	slots  *SlotCache
}

var _ Commands = (*Service)(nil)

// NewService returns the command handler for slots and jobs on store.
func NewService(store events.Store, cfg Config) *Service {
	if cfg.MaxOccupancy == 0 {
		cfg.MaxOccupancy = 30 * 24 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Health == nil {
		cfg.Health = consumer.NewHealth(cfg.Logger)
	}
	if cfg.SlotCache == nil || cfg.SlotCache.store != store {
		cfg.SlotCache = NewSlotCache(store, 0)
	}
	return &Service{store: store, cfg: cfg, log: cfg.Logger, slots: cfg.SlotCache, owners: newOwners(store, cfg.Logger, cfg.Health)}
}

func (s *Service) now() time.Time { return s.cfg.Clock.Now().UTC() }

func (s *Service) meta(a Actor) events.Metadata {
	return events.Metadata{Actor: a.Name, ActorID: a.ID, CorrelationID: a.CorrelationID, ClientRequestID: a.ClientRequestID, Time: s.now()}
}

func internal(msg string, err error) *Error { return apperr.Internalf(err, "%s", msg) }

func conflict(details map[string]any, format string, args ...any) *Error {
	return apperr.New(CodeConflict, format, args...).With(details)
}

// refuse and refuseAs are the conflicts for a reason (apperr.Refuse), with
// details.
func refuse(details map[string]any, r apperr.Reason, kv ...string) *Error {
	return refuseAs(details, r, "", kv...)
}

func refuseAs(details map[string]any, r apperr.Reason, variant string, kv ...string) *Error {
	return apperr.RefuseAs(CodeConflict, r, variant, kv...).With(details)
}

// retired, incomplete and unavailable are the conflicts of a slot's state
// (unavailable: the one of occupy, which names the state it met).
func retired(st *SlotState) *Error {
	return refuse(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotRetired, "slot", st.Name)
}

func incomplete(st *SlotState) *Error {
	return refuse(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotIncomplete, "slot", st.Name)
}

func unavailable(st *SlotState) *Error {
	details := map[string]any{"state": st.Lifecycle(), "occupant": st.Occupant}
	switch {
	case st.Retired:
		return refuse(details, apperr.ReasonSlotRetired, "slot", st.Name)
	case st.Incomplete:
		return refuseAs(details, apperr.ReasonSlotIncomplete, "state", "slot", st.Name, "state", st.Lifecycle())
	}
	return refuseAs(details, apperr.ReasonSlotOccupied, "state", "slot", st.Name, "occupant", st.Occupant, "state", st.Lifecycle())
}

// rfc3339 is a time as reason args carry it.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// blocked is the conflict a command gets while another job holds the lock.
func blocked(st *SlotState) *Error {
	return refuse(map[string]any{"blocking_job": st.LockJob, "state": st.Lifecycle()},
		apperr.ReasonSlotLocked, "slot", st.Name, "job", st.LockJob, "kind", st.LockKind, "state", st.Lifecycle())
}

// onSlot runs decide on the freshly loaded slot (the cached fold plus the
// events written since, see SlotCache) and appends what it returns with the
// slot's expected revision (events.Decide: a lost race loads and decides
// again, within its one budget). It returns the state decide saw last.
func (s *Service) onSlot(ctx context.Context, name string, decide func(st *SlotState) ([]events.EventData, error)) (SlotState, error) {
	var st SlotState
	_, err := events.Decide(ctx, s.store, events.SlotStream(name), func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		var err error
		if st, err = s.slots.Load(ctx, name); err != nil {
			return events.ExpectedRevision{}, nil, internal("load slot", err)
		}
		evs, err := decide(&st)
		return events.Expect(st.Exists, st.Revision), evs, err
	})
	return st, apperr.Decided(err, "slot "+name)
}

func needSlot(st *SlotState) error {
	if !st.Exists {
		return apperr.Refuse(CodeNotFound, apperr.ReasonSlotNotFound, "slot", st.Name)
	}
	return nil
}

// Occupant implements Commands.
func (s *Service) Occupant(ctx context.Context, slot string) (occupant, occupantID string, err error) {
	st, err := s.slots.Load(ctx, slot)
	if err != nil {
		return "", "", internal("load slot", err)
	}
	if err := needSlot(&st); err != nil {
		return "", "", err
	}
	if st.Retired {
		return "", "", nil // as the read model shows it: a retired slot has no occupant
	}
	return st.Occupant, st.OccupantID, nil
}

// Register implements Commands.
func (s *Service) Register(ctx context.Context, a Actor, c RegisterCmd) error {
	if err := validateActor(a); err != nil {
		return err
	}
	if err := ValidateSlotName(c.Name); err != nil {
		return err
	}
	for _, f := range []struct{ n, v string }{{"project_uuid", c.ProjectUUID}, {"app_uuid", c.AppUUID}, {"db_uuid", c.DBUUID}} {
		if err := validateProviderID(f.n, f.v); err != nil {
			return err
		}
	}
	if err := validateRepo("repo", c.Repo); err != nil {
		return err
	}
	if err := validateRepo("template_repo", c.TemplateRepo); err != nil {
		return err
	}
	if err := validateRef("template_ref", c.TemplateRef); err != nil {
		return err
	}
	// The branch a reset overwrites defaults to the repository's default
	// branch as the provider reports it ("main" without a checker).
	branchGiven := c.Branch != ""
	if !branchGiven {
		c.Branch = "main"
	}
	if err := validateRef("branch", c.Branch); err != nil {
		return err
	}
	if err := validateTemplate(c.Template); err != nil {
		return err
	}
	if c.Template != nil {
		t := *c.Template
		t.SeenEngine, t.SeenImage = "", "" // read from Coolify, never taken from the caller
		c.Template = &t
	}
	if err := s.checkScope(ctx, c); err != nil {
		return err
	}
	// One registration at a time in this process, from the ownership check
	// to the appends; across processes the claim's append with the
	// registry's expected revision decides (see owners).
	s.owners.mu.Lock()
	defer s.owners.mu.Unlock()
	checked := false
	var claim events.EventData
	// A lost race on the registry means another process claimed something
	// meanwhile: catch up and look again.
	res, err := events.Decide(ctx, s.store, events.SlotRegistryStream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		if err := s.owners.catchUp(ctx); err != nil {
			return events.ExpectedRevision{}, nil, internal("read the slots' registrations", err)
		}
		if err := s.owners.completePending(ctx, s.store); err != nil {
			return events.ExpectedRevision{}, nil, internal("complete an earlier registration", err)
		}
		if st, err := LoadSlot(ctx, s.store, c.Name); err != nil {
			return events.ExpectedRevision{}, nil, internal("load slot", err)
		} else if st.Exists {
			return events.ExpectedRevision{}, nil, refuse(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotRegistered, "slot", c.Name, "state", st.Lifecycle())
		}
		if err := s.owners.check(c); err != nil {
			return events.ExpectedRevision{}, nil, err
		}
		// The provider lookups once: a lost race changes what the log
		// says, not what the providers hold.
		if !checked {
			def, err := s.checkResources(ctx, c)
			if err != nil {
				return events.ExpectedRevision{}, nil, err
			}
			if !branchGiven && def != "" {
				if err := validateRef("branch", def); err != nil {
					return events.ExpectedRevision{}, nil, apperr.New(CodeUpstream, "the repository's default branch is not a usable branch name; give branch explicitly")
				}
				c.Branch = def
			}
			checked = true
		}
		reg := events.SlotRegistered{
			Slot: c.Name, ProjectUUID: c.ProjectUUID, AppUUID: c.AppUUID, DBUUID: c.DBUUID,
			Repo: c.Repo, TemplateRepo: c.TemplateRepo, TemplateRef: c.TemplateRef, Branch: c.Branch,
			Template: c.Template,
		}
		claim = events.New(events.SlotClaimed{SlotRegistered: reg}, s.meta(a))
		return s.owners.expected(), []events.EventData{claim}, nil
	})
	if err != nil {
		var ae *events.AppendError
		if errors.As(err, &ae) {
			return internal("claim the slot's resources", ae.Err)
		}
		return apperr.Decided(err, "registrations")
	}
	// The claim decided; the slot's stream gets its registration. A
	// failure here leaves a claim that the next Register (of any
	// process) completes.
	rec := events.RecordedEvent{ID: claim.ID, Stream: events.SlotRegistryStream, Revision: res.NextExpected, Type: claim.Type, Data: claim.Data, Meta: claim.Meta}
	if err := registered(ctx, s.store, rec); err != nil {
		return internal("record the registration", err)
	}
	return nil
}

// Occupy implements Commands.
func (s *Service) Occupy(ctx context.Context, a Actor, slot string, c OccupyCmd) error {
	if err := validateActor(a); err != nil {
		return err
	}
	if err := ValidateSlotName(slot); err != nil {
		return err
	}
	if c.By == "" {
		c.By, c.ByID = a.Name, a.ID
	} else if c.By == a.Name && c.ByID == "" {
		c.ByID = a.ID
	}
	if err := validatePerson("by", c.By); err != nil {
		return err
	}
	if err := validateUntil(s.now(), c.Until, s.cfg.MaxOccupancy); err != nil {
		return err
	}
	_, err := s.onSlot(ctx, slot, func(st *SlotState) ([]events.EventData, error) {
		if err := needSlot(st); err != nil {
			return nil, err
		}
		if st.Locked() {
			return nil, blocked(st)
		}
		if st.Retired || st.Incomplete || st.Occupied {
			return nil, unavailable(st)
		}
		// Held for someone on the waitlist: only they may occupy it (by id
		// when the occupant has one, else by name).
		if st.HeldAgainst(c.By, c.ByID, s.now()) {
			return nil, refuse(map[string]any{"state": "held", "held_for": st.Hold.For, "held_until": st.Hold.Until},
				apperr.ReasonSlotHeld, "slot", slot, "held_for", st.Hold.For, "held_until", rfc3339(st.Hold.Until))
		}
		return []events.EventData{events.New(events.SlotOccupied{Slot: slot, By: c.By, ByID: c.ByID, Until: c.Until.UTC()}, s.meta(a))}, nil
	})
	return err
}

// Extend implements Commands. It is refused while a reset or teardown holds
// the lock: cancel that job first (a promote does not block it), and when
// the new deadline is earlier than the current one (409, details.until).
func (s *Service) Extend(ctx context.Context, a Actor, slot string, c ExtendCmd) error {
	if err := validateActor(a); err != nil {
		return err
	}
	if err := ValidateSlotName(slot); err != nil {
		return err
	}
	if err := validateUntil(s.now(), c.Until, s.cfg.MaxOccupancy); err != nil {
		return err
	}
	_, err := s.onSlot(ctx, slot, func(st *SlotState) ([]events.EventData, error) {
		if err := deadlineMovable(st, slot); err != nil {
			return nil, err
		}
		if err := ownOnly(a, st); err != nil {
			return nil, err
		}
		if c.Until.Before(st.Until) {
			// Extend only adds time: moving a deadline earlier could put the
			// slot up for a deadline reset under its occupant (issue 14).
			return nil, refuse(map[string]any{"until": st.Until.UTC()}, apperr.ReasonDeadlineNotLater, "slot", slot, "until", rfc3339(st.Until))
		}
		return []events.EventData{events.New(events.OccupancyExtended{Slot: slot, By: a.Name, Until: c.Until.UTC()}, s.meta(a))}, nil
	})
	return err
}

// deadlineMovable is what moving a deadline (either way) needs: a registered,
// occupied slot that no reset or teardown holds (a promote leaves the
// occupant in place).
func deadlineMovable(st *SlotState, slot string) error {
	if err := needSlot(st); err != nil {
		return err
	}
	if st.Locked() && st.LockKind != events.KindPromote {
		return blocked(st)
	}
	if !st.Occupied {
		return refuse(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotNotOccupied, "slot", slot)
	}
	return nil
}

// SetEarlierDeadline implements Commands: the explicit way to shorten an
// occupancy. It needs ConfirmEarlier (400 without), a future deadline within
// the maximum occupancy (400), an occupied slot whose lock allows it (409, as
// Extend) and a deadline strictly earlier than the current one (409,
// details.until: a later one is an extend).
func (s *Service) SetEarlierDeadline(ctx context.Context, a Actor, slot string, c DeadlineCmd) error {
	if err := validateActor(a); err != nil {
		return err
	}
	if err := ValidateSlotName(slot); err != nil {
		return err
	}
	if !c.ConfirmEarlier {
		return apperr.Refuse(CodeInvalid, apperr.ReasonConfirmEarlier, "field", "confirm_earlier").With(map[string]any{"field": "confirm_earlier"})
	}
	if err := validateUntil(s.now(), c.Deadline, s.cfg.MaxOccupancy); err != nil {
		err.Details = map[string]any{"field": "deadline"}
		err.Args["field"] = "deadline"
		return err
	}
	_, err := s.onSlot(ctx, slot, func(st *SlotState) ([]events.EventData, error) {
		if err := deadlineMovable(st, slot); err != nil {
			return nil, err
		}
		if err := ownOnly(a, st); err != nil {
			return nil, err
		}
		if !c.Deadline.Before(st.Until) {
			return nil, refuse(map[string]any{"until": st.Until.UTC()},
				apperr.ReasonDeadlineNotEarlier, "slot", slot, "deadline", rfc3339(c.Deadline), "until", rfc3339(st.Until))
		}
		return []events.EventData{events.New(events.OccupancyExtended{Slot: slot, By: a.Name, Until: c.Deadline.UTC(), Earlier: true}, s.meta(a))}, nil
	})
	return err
}

// Release implements Commands: it queues a reset that runs after the grace
// period.
func (s *Service) Release(ctx context.Context, a Actor, slot string) (JobAcceptedResult, error) {
	return s.newJob(ctx, a, slot, events.KindReset, nil, func(st *SlotState) error { return ownOnly(a, st) })
}

// ownOnly refuses an OwnOnly actor on a slot it does not occupy, decided
// on the slot state the command appends against.
func ownOnly(a Actor, st *SlotState) error {
	if !a.OwnOnly || IsOccupant(st.Occupant, st.OccupantID, a.ID, a.Name) {
		return nil
	}
	return apperr.Refuse(CodeForbidden, apperr.ReasonNotOccupant, "slot", st.Name, "occupant", st.Occupant).With(map[string]any{"field": "occupant"})
}

// Teardown implements Commands. An occupied slot must be released first.
func (s *Service) Teardown(ctx context.Context, a Actor, slot string) (JobAcceptedResult, error) {
	return s.newJob(ctx, a, slot, events.KindTeardown, nil, nil)
}

// Promote implements Commands. The new repository's name must be a valid
// Bitbucket slug (lowercase), so the lookup and the create name the same repo.
func (s *Service) Promote(ctx context.Context, a Actor, slot string, c PromoteCmd) (JobAcceptedResult, error) {
	if err := s.checkPromoteScope(ctx, events.KindPromote, map[string]string{"project": c.Project}); err != nil {
		return JobAcceptedResult{}, err
	}
	return s.newJob(ctx, a, slot, events.KindPromote, map[string]string{"project": c.Project, "name": c.Name}, nil)
}

// PlanJob implements Commands: the same decision as the command, without
// appending. It returns the same error the command would.
func (s *Service) PlanJob(ctx context.Context, slot, kind string, params map[string]string) (Plan, error) {
	if err := ValidateSlotName(slot); err != nil {
		return Plan{}, err
	}
	if err := validateParams(kind, params); err != nil {
		return Plan{}, err
	}
	if err := s.checkPromoteScope(ctx, kind, params); err != nil {
		return Plan{}, err
	}
	st, err := s.slots.Load(ctx, slot)
	if err != nil {
		return Plan{}, internal("load slot", err)
	}
	if err := s.canStart(&st, kind); err != nil {
		return Plan{}, err
	}
	p := Plan{Kind: kind, Slot: slot, Steps: stepsForSlot(&st, kind), Resources: planResources(&st, kind), NotBefore: s.notBefore(kind)}
	if kind == events.KindPromote {
		p.Target = s.checkTarget(ctx, events.RepoRef{Project: params["project"], Slug: params["name"]})
	}
	return p, nil
}

// planLookupTimeout bounds the promote plan's lookup of its target.
const planLookupTimeout = 5 * time.Second

// checkTarget looks a promote's target repository up for the plan (issue
// 14): the confirmation says whether it exists, is free, or could not be
// checked. The job's own lookup_repo step still decides.
func (s *Service) checkTarget(ctx context.Context, r events.RepoRef) *TargetCheck {
	t := &TargetCheck{Repo: r, State: TargetUnknown}
	if s.cfg.Resources == nil {
		t.Error = "no git host is configured to look it up"
		return t
	}
	ctx, cancel := context.WithTimeout(ctx, planLookupTimeout)
	defer cancel()
	_, st, err := s.cfg.Resources.Repo(ctx, r)
	switch {
	case st == ResourceFound:
		t.State = TargetExists
	case st == ResourceAbsent:
		t.State = TargetFree
	case err != nil:
		t.Error = err.Error()
	default:
		t.Error = "the git host did not say"
	}
	return t
}

// notBefore is when a job of kind accepted now may run: after the grace
// period for a kind that waits it (kindRules).
func (s *Service) notBefore(kind string) time.Time {
	if kindRules[kind].grace {
		return s.now().Add(s.cfg.Grace)
	}
	return s.now()
}

// validateParams checks a job's params by its kind's rule (kindRules); an
// unknown kind is refused, naming the known ones.
func validateParams(kind string, params map[string]string) error {
	r, ok := kindRules[kind]
	if !ok {
		return apperr.Refuse(CodeInvalid, apperr.ReasonUnknownJobKind, "kind", kind, "kinds", strings.Join(events.JobKinds(), ", "))
	}
	return r.params(params)
}

// checkPromoteScope refuses a promote whose target project lies outside
// the Bitbucket scope: the code would be copied out of it.
func (s *Service) checkPromoteScope(ctx context.Context, kind string, params map[string]string) error {
	if kind == events.KindPromote && projectKeyRe.MatchString(params["project"]) {
		return s.cfg.Scope.checkBitbucket(ctx, "project", params["project"])
	}
	return nil
}

// canStart decides whether a job of kind may be accepted on the slot now.
func (s *Service) canStart(st *SlotState, kind string) error {
	if err := needSlot(st); err != nil {
		return err
	}
	if st.Locked() {
		return blocked(st)
	}
	if st.Retired {
		return retired(st)
	}
	if r, ok := kindRules[kind]; ok {
		return r.start(st)
	}
	return nil
}

// newJob accepts a job with one append: JobAccepted with the whole job on
// the slot stream (expected slot revision) is its lock and its place in the
// queue. The job stream's JobQueued is a copy of it (see writeHeader); a
// crash between the two loses nothing, since the claim (or a cancel)
// writes the copy if it is missing.
func (s *Service) newJob(ctx context.Context, a Actor, slot, kind string, params map[string]string, check func(*SlotState) error) (JobAcceptedResult, error) {
	if err := validateActor(a); err != nil {
		return JobAcceptedResult{}, err
	}
	if err := ValidateSlotName(slot); err != nil {
		return JobAcceptedResult{}, err
	}
	if err := validateParams(kind, params); err != nil {
		return JobAcceptedResult{}, err
	}
	id := uuid.NewString()
	meta := s.meta(a)
	if meta.CorrelationID == "" {
		meta.CorrelationID = id
	}
	var queued events.JobQueued
	_, err := s.onSlot(ctx, slot, func(st *SlotState) ([]events.EventData, error) {
		if err := s.canStart(st, kind); err != nil {
			return nil, err
		}
		if check != nil {
			if err := check(st); err != nil {
				return nil, err
			}
		}
		queued = events.JobQueued{
			JobID: id, Kind: kind, Slot: slot, Params: params, RequestedBy: a.Name, Reason: a.Reason,
			NotBefore: s.notBefore(kind), Steps: stepsForSlot(st, kind), Resources: planResources(st, kind),
		}
		if r, err := adoptResource(params); err == nil && kind == events.KindDeleteOrphan {
			queued.Resources = []events.Resource{r} // what it deletes, until confirmed gone
		}
		return []events.EventData{events.New(events.JobAccepted{Slot: slot, JobID: id, Kind: kind, Run: 1, Job: &queued}, meta)}, nil
	})
	if err != nil {
		return JobAcceptedResult{}, err
	}
	s.writeHeader(ctx, id, events.NoStream(), events.New(queued, meta))
	s.log.InfoContext(ctx, "job queued", "job", id, "kind", kind, "slot", slot, "by", a.Name, "correlation_id", meta.CorrelationID)
	return JobAcceptedResult{JobID: id, Kind: kind, Slot: slot, NotBefore: queued.NotBefore, Steps: queued.Steps}, nil
}

// writeHeader writes the job stream's copy of an acceptance (JobQueued or
// JobResumed, same metadata) right after it, so the job can be read and
// cancelled by its id at once. The job is accepted already: if the copy
// does not land, the claim or a cancel writes it (JobState.Header), and a
// wrong revision means one of them got there first.
func (s *Service) writeHeader(ctx context.Context, id string, exp events.ExpectedRevision, header events.EventData) {
	_, err := s.store.Append(ctx, events.JobStream(id), exp, header)
	if err != nil && !errors.Is(err, events.ErrWrongRevision) {
		s.log.WarnContext(ctx, "job stream header not written; the claim will write it", "job", id, "type", header.Type, "err", err)
	}
}

// Cancel implements Commands. A queued job is cancelled and its lock freed at
// once. A running job gets JobCancelled with the job's expected revision: that
// fences the attempt (its next append fails, the engine cancels its context);
// the lock is freed by the engine once the attempt has stopped.
func (s *Service) Cancel(ctx context.Context, a Actor, jobID string) error {
	if err := validateActor(a); err != nil {
		return err
	}
	if err := ValidateJobID(jobID); err != nil {
		return err
	}
	var j events.JobState
	var meta events.Metadata
	_, err := events.Decide(ctx, s.store, events.JobStream(jobID), func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		var err error
		if j, err = LoadJob(ctx, s.store, jobID); err != nil {
			return events.ExpectedRevision{}, nil, internal("load job", err)
		}
		if !j.Exists {
			return events.ExpectedRevision{}, nil, apperr.Refuse(CodeNotFound, apperr.ReasonJobNotFound, "job", jobID)
		}
		// A resume accepted on the slot whose JobResumed is not written yet
		// is queued: cancelling it writes that copy first.
		st, err := s.slots.Load(ctx, j.Queued.Slot)
		if err != nil {
			return events.ExpectedRevision{}, nil, internal("load slot", err)
		}
		AcceptFrom(&j, &st)
		if j.Terminal() {
			return events.ExpectedRevision{}, nil, refuse(map[string]any{"state": j.Status}, apperr.ReasonJobEnded, "job", jobID, "state", j.Status)
		}
		meta = s.meta(a)
		meta.CorrelationID = j.QueuedMeta.CorrelationID
		ev := events.JobCancelled{JobID: jobID, By: a.Name, CompletedSteps: j.Completed(), Remaining: j.Remaining()}
		if j.Status == events.StatusRunning {
			ev.Attempt, ev.UncertainStep = j.Attempt, j.InFlight
		}
		return j.Expected(), append(j.Header, events.New(ev, meta)), nil
	})
	if err != nil {
		return apperr.Decided(err, "job "+jobID)
	}
	s.log.InfoContext(ctx, "job cancelled", "job", jobID, "by", a.Name, "was", j.Status, "correlation_id", meta.CorrelationID)
	if j.Status == events.StatusQueued {
		// No attempt exists: a racing claim would have failed its
		// conditional append, so the lock can go now.
		if _, err := s.slots.ReleaseLock(ctx, &j, events.StatusCancelled, meta); err != nil {
			s.log.WarnContext(ctx, "release after cancel failed; the engine will release", "job", jobID, "err", err)
		}
	}
	return nil
}

// Resume implements Commands. It accepts the resume with one append
// (JobAccepted with Resumed, the run, and the step it resumes from) and
// then writes its copy JobResumed on the job stream (see writeHeader); the
// next attempt starts at the first
// unconfirmed step and verifies an uncertain one first. It is refused while
// the job's previous attempt still holds the lock (running or being
// abandoned), and for jobs that succeeded or were cancelled.
func (s *Service) Resume(ctx context.Context, a Actor, jobID string) (JobAcceptedResult, error) {
	if err := validateActor(a); err != nil {
		return JobAcceptedResult{}, err
	}
	if err := ValidateJobID(jobID); err != nil {
		return JobAcceptedResult{}, err
	}
	j, err := LoadJob(ctx, s.store, jobID)
	if err != nil {
		return JobAcceptedResult{}, internal("load job", err)
	}
	if !j.Exists || j.Queued.JobID == "" {
		return JobAcceptedResult{}, apperr.Refuse(CodeNotFound, apperr.ReasonJobNotFound, "job", jobID)
	}
	if !j.Resumable() {
		return JobAcceptedResult{}, refuse(map[string]any{"state": j.Status, "blocking_job": jobID}, apperr.ReasonJobNotResumable, "job", jobID, "state", j.Status)
	}
	slot := j.Queued.Slot
	meta := s.meta(a)
	meta.CorrelationID = j.QueuedMeta.CorrelationID
	if a.CorrelationID != "" {
		meta.CausationID = a.CorrelationID
	}
	var from string
	_, err = s.onSlot(ctx, slot, func(st *SlotState) ([]events.EventData, error) {
		if err := needSlot(st); err != nil {
			return nil, err
		}
		// Decide on the job as it is now, in every round: a resume
		// appends to the slot stream first, so one that got in after this
		// round's slot read makes this round's append fail, and the next
		// round reads both again. (The check above only answers early.)
		// Read once before the loop, two people resuming at once could
		// both be accepted — the second, its slot append retried after the
		// first's run had ended, accepting that run's number again, even
		// for a job that had succeeded meanwhile
		// (TestConcurrentResumesDecideOnTheJobAsItIsNow, found by
		// TestRandomFaultSchedules).
		var err error
		if j, err = LoadJob(ctx, s.store, jobID); err != nil {
			return nil, internal("load job", err)
		}
		if !j.Resumable() {
			return nil, refuse(map[string]any{"state": j.Status, "blocking_job": jobID}, apperr.ReasonJobNotResumable, "job", jobID, "state", j.Status)
		}
		from = j.NextStep()
		if st.LockJob == jobID {
			return nil, refuse(map[string]any{"blocking_job": jobID, "state": j.Status}, apperr.ReasonJobStillEnding, "job", jobID)
		}
		if st.Locked() {
			return nil, blocked(st)
		}
		// A retired slot takes no more jobs — except the teardown that
		// retired it, interrupted before it recorded its last step.
		if st.Retired && st.RetiredBy != jobID {
			return nil, retired(st)
		}
		return []events.EventData{events.New(events.JobAccepted{
			Slot: slot, JobID: jobID, Kind: j.Queued.Kind, Resumed: true, Run: j.Run() + 1, By: a.Name, FromStep: from,
		}, meta)}, nil
	})
	if err != nil {
		return JobAcceptedResult{}, err
	}
	s.writeHeader(ctx, jobID, j.Expected(), events.New(events.JobResumed{JobID: jobID, By: a.Name, FromStep: from}, meta))
	s.log.InfoContext(ctx, "job resumed", "job", jobID, "from_step", from, "by", a.Name, "correlation_id", meta.CorrelationID)
	return JobAcceptedResult{JobID: jobID, Kind: j.Queued.Kind, Slot: slot, NotBefore: meta.Time, Steps: j.Queued.Steps}, nil
}

// ReleaseLock frees the lock job j holds on its slot for its current run
// (JobAccepted.Run: 1, then +1 per resume; a lock from an old log, with no
// run, is the current run's), recording outcome, and reports whether it
// did. The run keeps a late release of a finished run from freeing the lock
// a resume has just taken. It is the one release of a job's lock: in the
// same append it writes what the outcome means for the slot (releaseEvents).
// Callers must know that no attempt of the job can still act (see
// docs/jobs.md), and pass events.StatusSucceeded only after reading or
// writing JobSucceeded.
func ReleaseLock(ctx context.Context, store events.Store, j *events.JobState, outcome string, meta events.Metadata) (bool, error) {
	return NewSlotCache(store, 1).ReleaseLock(ctx, j, outcome, meta)
}

// ReleaseLock is the package's ReleaseLock, loading the slot through c; it
// decides through events.Decide (the one loop and budget).
func (c *SlotCache) ReleaseLock(ctx context.Context, j *events.JobState, outcome string, meta events.Metadata) (bool, error) {
	released := false
	_, err := events.Decide(ctx, c.store, events.SlotStream(j.Queued.Slot), func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		released = false
		st, err := c.Load(ctx, j.Queued.Slot)
		if err != nil || !st.LockedFor(j) {
			return events.ExpectedRevision{}, nil, err // released, or a resume's lock for the next run
		}
		released = true
		return events.Exact(st.Revision), releaseEvents(&st, j, outcome, meta), nil
	})
	return released && err == nil, err
}

// releaseEvents is the append that releases j's lock on st with outcome:
// JobReleased, after the slot event the outcome implies, if any. A success
// implies its slot change (slotOutcome); a teardown that did not succeed
// and touched anything (JobState.TouchedRemaining) leaves the slot
// TeardownIncomplete with the remaining resources — unless the slot is
// retired, which means every resource is confirmed gone.
func releaseEvents(st *SlotState, j *events.JobState, outcome string, meta events.Metadata) []events.EventData {
	var evs []events.EventData
	if outcome == events.StatusSucceeded {
		if p := slotOutcome(j, st); p != nil {
			evs = append(evs, events.New(p, meta))
		}
	} else if rem := j.TouchedRemaining(); st.LockKind == events.KindTeardown && rem != nil && !st.Retired {
		evs = append(evs, events.New(events.TeardownIncomplete{Slot: st.Name, JobID: j.ID, Remaining: rem}, meta))
	}
	return append(evs, events.New(events.JobReleased{Slot: st.Name, JobID: j.ID, Outcome: outcome}, meta))
}

// slotOutcome is the slot event a job's success implies, or nil if there is
// none or the slot already records it (a release retried after a crash, or a
// log written before this order, where the step itself wrote it). The
// slot-changing steps (vacate, retire, record_repo) only check that the job
// may change the slot: the change is a consequence of the success, written
// with the release once JobSucceeded is in the job stream, beyond any
// cancel's reach (docs/jobs.md, "Streams and order of appends").
func slotOutcome(j *events.JobState, st *SlotState) events.Payload {
	if r := kindRules[j.Queued.Kind]; r.outcome != nil {
		return r.outcome(j, st)
	}
	return nil
}

// PromoteTarget is the repository a promote creates, from its params and,
// once created, the slug the 201 answered.
func PromoteTarget(j *events.JobState) events.RepoRef {
	r := events.RepoRef{Project: j.Queued.Params["project"], Slug: j.Queued.Params["name"]}
	if ev, ok := j.Results[events.StepCreateRepo]; ok {
		var rc events.RepoCreated
		if json.Unmarshal(ev.Data, &rc) == nil && rc.Repo.Slug != "" {
			r = rc.Repo
		}
	}
	return r
}
