package pullrequests

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Run is the driver: it follows the log from its start (each decision is
// idempotent: it looks at the PR's stream and its slot, not at the event
// that woke it) and brings each pull request's slot and jobs to where its
// state says, until ctx ends. It wakes on PRChanged, on the release of a
// slot a PR holds (a cancelled job's lock freed, so the newer head can be
// queued; the PR's job ended, to report it) and on a job's steps (report).
func (s *Service) Run(ctx context.Context) error {
	filter := events.Filter{EventTypes: append([]string{"PRChanged", "PRSlotTaken", "PRWaiting", "JobReleased", "StepStarted", "JobQueued"}, events.TerminalTypes()...)}
	err := s.store.SubscribeAll(ctx, 0, filter, func(ctx context.Context, ev events.RecordedEvent) error {
		s.Apply(ctx, ev)
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Apply handles one event of Run's subscription (exported for tests that
// drive the flow step by step).
func (s *Service) Apply(ctx context.Context, ev events.RecordedEvent) {
	p, err := events.Decode(ev)
	if err != nil {
		return
	}
	stream := ""
	switch e := p.(type) {
	case events.PRChanged:
		stream = ev.Stream
	case events.PRSlotTaken:
		s.mu.Lock()
		s.bySlot[e.Slot] = ev.Stream
		s.waiting = slices.DeleteFunc(s.waiting, func(w string) bool { return w == ev.Stream })
		s.mu.Unlock()
		return
	case events.PRWaiting:
		s.mu.Lock()
		if !slices.Contains(s.waiting, ev.Stream) {
			s.waiting = append(s.waiting, ev.Stream)
		}
		s.mu.Unlock()
		return
	case events.JobReleased:
		s.mu.Lock()
		stream = s.bySlot[e.Slot]
		waiting := slices.Clone(s.waiting)
		s.mu.Unlock()
		// A slot's job is over (the reset after a PR closed, anything
		// else's): the PRs waiting for a slot, in the order they started
		// waiting, look again; then the PR holding the slot, if any.
		for _, w := range waiting {
			if err := s.Sync(ctx, w); err != nil && ctx.Err() == nil {
				s.log.Warn("pull requests: sync failed", "pr", w, "err", err)
			}
		}
	default:
		// A job's queue, steps and end are only for the report: the PR
		// whose current job it is says what it does.
		if strings.HasPrefix(ev.Stream, events.JobStreamPrefix) {
			s.reportJob(ctx, strings.TrimPrefix(ev.Stream, events.JobStreamPrefix))
		}
		return
	}
	if stream == "" {
		return
	}
	if err := s.Sync(ctx, stream); err != nil && ctx.Err() == nil {
		s.log.Warn("pull requests: sync failed; the next event about it retries", "pr", stream, "err", err)
	}
}

// Sync brings one PR's slot and jobs to where its state says.
func (s *Service) Sync(ctx context.Context, stream string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := load(ctx, s.store, stream)
	if err != nil || !st.exists {
		return err
	}
	if st.slot != "" {
		s.bySlot[st.slot] = stream
	}
	if !st.open() {
		s.waiting = slices.DeleteFunc(s.waiting, func(w string) bool { return w == stream })
		return s.close(ctx, st)
	}
	if st.slot == "" {
		ok, err := s.take(ctx, st)
		if err != nil || !ok {
			return err
		}
	}
	return s.deploy(ctx, st)
}

// occupant is who the PR's slot is occupied by: the author, by their
// Bitbucket user slug as a stable subject.
func occupant(pr events.PullRequest) (name, id string) {
	name = pr.Author
	if pr.AuthorSlug != "" {
		id = "bitbucket:" + pr.AuthorSlug
		if name == "" {
			name = id
		}
	}
	if name == "" {
		name = "pull request " + pr.Repo.String() + "#" + itoa(pr.ID)
	}
	return name, id
}

// take occupies a free ready slot for the PR, or records that none was
// free (once).
func (s *Service) take(ctx context.Context, st *prState) (bool, error) {
	name, id := occupant(st.pr)
	now := s.cfg.Clock.Now().UTC()
	cands, err := s.freeSlots(ctx, name, id)
	if err != nil {
		return false, err
	}
	a := Actor
	a.CorrelationID = st.stream
	for _, slot := range cands {
		err := s.slots.Occupy(ctx, a, slot, slots.OccupyCmd{By: name, ByID: id, Until: now.Add(s.cfg.Occupancy)})
		if apperr.CodeOf(err) == apperr.Conflict {
			continue // taken meanwhile
		}
		if err != nil {
			return false, err
		}
		st.slot = slot
		s.bySlot[slot] = st.stream
		pr := st.pr
		return true, s.appendPR(ctx, st, events.PRSlotTaken{Slot: slot, PR: &pr})
	}
	if st.waiting {
		return false, nil
	}
	st.waiting = true
	if err := s.appendPR(ctx, st, events.PRWaiting{Reason: "every ready slot is occupied"}); err != nil {
		return false, err
	}
	s.report(ctx, st, phaseWaiting, nil)
	return false, nil
}

// freeSlots are the slots a PR may take, by name: registered with a
// template (a pr_deploy deploys with it), vacant, no job on them, not held
// for someone else.
func (s *Service) freeSlots(ctx context.Context, name, id string) ([]string, error) {
	evs, err := s.store.ReadStream(ctx, events.SlotRegistryStream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, apperr.Internalf(err, "read the slots' registrations")
	}
	var names []string
	for _, ev := range evs {
		if p, err := events.Decode(ev); err == nil {
			if c, ok := p.(events.SlotClaimed); ok && !slices.Contains(names, c.Slot) {
				names = append(names, c.Slot)
			}
		}
	}
	slices.Sort(names)
	now := s.cfg.Clock.Now()
	var out []string
	for _, n := range names {
		sl, err := slots.LoadSlot(ctx, s.store, n)
		if err != nil {
			return nil, apperr.Internalf(err, "load slot")
		}
		if sl.Exists && sl.Reg.Template != nil && !sl.Occupied && !sl.Locked() && !sl.Retired && !sl.Incomplete && !sl.HeldAgainst(name, id, now) {
			out = append(out, n)
		}
	}
	return out, nil
}

// deploy queues a pr_deploy for the PR's head unless one for it was
// queued already; an older head's job still queued or running is cancelled
// first (its lock's release wakes Sync again).
func (s *Service) deploy(ctx context.Context, st *prState) error {
	if st.jobHead == st.pr.Head {
		return nil
	}
	if busy, err := s.cancelJob(ctx, st); err != nil || busy {
		return err
	}
	name, id := occupant(st.pr)
	a := Actor
	a.CorrelationID = st.stream
	res, err := s.slots.DeployPR(ctx, a, st.slot, slots.DeployPRCmd{Source: st.pr.Source, Branch: st.pr.Branch, Head: st.pr.Head, Occupant: name, OccupantID: id})
	if err != nil {
		return err
	}
	st.job, st.jobHead = res.JobID, st.pr.Head
	if err := s.appendPR(ctx, st, events.PRDeployQueued{Slot: st.slot, JobID: res.JobID, Head: st.pr.Head}); err != nil {
		return err
	}
	s.report(ctx, st, phaseQueued, &events.JobState{ID: res.JobID})
	return nil
}

// cancelJob cancels the PR's job if it has not ended, and reports whether
// the slot is still locked (by it or by anything else): then nothing more
// can be queued until the release wakes Sync.
func (s *Service) cancelJob(ctx context.Context, st *prState) (busy bool, err error) {
	if st.job != "" {
		j, err := slots.LoadJob(ctx, s.store, st.job)
		if err != nil {
			return false, apperr.Internalf(err, "load job")
		}
		if j.Exists && !j.Terminal() {
			if err := s.slots.Cancel(ctx, Actor, st.job); err != nil && apperr.CodeOf(err) != apperr.Conflict {
				return false, err
			}
		}
	}
	sl, err := slots.LoadSlot(ctx, s.store, st.slot)
	if err != nil {
		return false, apperr.Internalf(err, "load slot")
	}
	return sl.Locked(), nil
}

// close releases the PR's slot (the ready reset, after the grace period)
// once its job is cancelled and its lock free; a PR that never got a slot
// only stops waiting.
func (s *Service) close(ctx context.Context, st *prState) error {
	if st.slot == "" || st.released {
		return nil
	}
	if busy, err := s.cancelJob(ctx, st); err != nil || busy {
		return err
	}
	sl, err := slots.LoadSlot(ctx, s.store, st.slot)
	if err != nil {
		return apperr.Internalf(err, "load slot")
	}
	name, id := occupant(st.pr)
	var jobID string
	if sl.Occupied && slots.IsOccupant(sl.Occupant, sl.OccupantID, id, name) {
		a := Actor
		a.CorrelationID = st.stream
		res, err := s.slots.Release(ctx, a, st.slot)
		if err != nil {
			return err
		}
		jobID = res.JobID
	}
	st.released = true
	return s.appendPR(ctx, st, events.PRSlotReleased{Slot: st.slot, JobID: jobID})
}
