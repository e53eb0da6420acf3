package pullrequests

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Run is the driver: a consumer of the log on backend/consumer's Runner
// (docs/events.md), checkpointed as "pull-requests". Its fold (driverFold)
// notes which pull requests an event concerns — a delivery's PRChanged, a
// job of the PR's (queued, a step, its end), the release of the slot a PR
// holds (then the PRs waiting for a slot too, oldest first) — and its Step
// brings each noted PR to where its state says (Sync). Each decision reads
// the PR's stream and its slot, not the event that woke it, so a replay or
// a repeated wake does nothing new. Until ctx ends.
//
// The checkpoint claims no more than was acted on: it is held below the
// oldest event whose PR was not synced yet (consumer.Marker), so a restart
// reads again from there — and only from there, not from the start of the
// log.
func (s *Service) Run(ctx context.Context) error {
	f := &driverFold{}
	f.reset()
	r := consumer.NewRunner(s.store, f, consumer.Options{
		Save: s.cfg.Save, Health: s.cfg.Health, Logger: s.log, Clock: s.cfg.Clock,
		Step: func(ctx context.Context) time.Time { return s.step(ctx, f) },
	})
	s.runner.Store(r)
	return r.Run(ctx)
}

// Runner is the driver's consumer once Run started (nil before): for tests
// that wait until it caught up or check where it started.
func (s *Service) Runner() *consumer.Runner { return s.runner.Load() }

// DriverName is the driver's consumer name (its checkpoints are on
// checkpoint-pull-requests).
const DriverName = "pull-requests"

// driverFold is the driver's fold: what the Runner checkpoints (the slots
// PRs hold, the PRs waiting for a slot, the open pr_deploy jobs and their
// PRs) and, in memory only, the PRs to sync with the position of the
// oldest event that asked for it. Guarded by the Runner's lock.
type driverFold struct {
	BySlot  map[string]string `json:"by_slot"` // slot -> PR stream, from PRSlotTaken
	Waiting []string          `json:"waiting"` // PR streams waiting for a slot, oldest first
	Jobs    map[string]string `json:"jobs"`    // open pr_deploy job -> PR stream

	pending []pending // PRs to sync, in the order asked
}

// pending is one PR to sync: since the event at pos; gen counts the events
// that asked meanwhile (a sync done for an older gen does not settle it);
// after is when a failed sync is tried again, tries how often it failed.
type pending struct {
	stream string
	pos    events.Position
	gen    int
	after  time.Time
	tries  int
}

func (f *driverFold) reset() {
	f.BySlot, f.Waiting, f.Jobs, f.pending = map[string]string{}, nil, map[string]string{}, nil
}

func (f *driverFold) Name() string { return DriverName }
func (f *driverFold) Version() int { return 1 }

var driverTypes = map[string]bool{"PRChanged": true, "PRSlotTaken": true, "PRWaiting": true, "PRSlotReleased": true,
	"JobReleased": true, "JobQueued": true, "StepStarted": true}

func (f *driverFold) Wants(ev events.RecordedEvent) bool {
	return driverTypes[ev.Type] || events.IsTerminal(ev.Type)
}

func (f *driverFold) Apply(ev events.RecordedEvent) error {
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case events.PRChanged:
		if e.PR.State != events.PRStateOpen {
			f.Waiting = slices.DeleteFunc(f.Waiting, func(w string) bool { return w == ev.Stream })
		}
		f.mark(ev.Stream, ev.Position)
	case events.PRSlotTaken:
		f.BySlot[e.Slot] = ev.Stream
		f.Waiting = slices.DeleteFunc(f.Waiting, func(w string) bool { return w == ev.Stream })
	case events.PRWaiting:
		if !slices.Contains(f.Waiting, ev.Stream) {
			f.Waiting = append(f.Waiting, ev.Stream)
		}
	case events.PRSlotReleased:
		if f.BySlot[e.Slot] == ev.Stream {
			delete(f.BySlot, e.Slot)
		}
	case events.JobReleased:
		// A slot's job is over (the reset after a PR closed, anything
		// else's): the PRs waiting for a slot look again, in the order
		// they started waiting; then the PR holding the slot, if any.
		for _, w := range f.Waiting {
			f.mark(w, ev.Position)
		}
		if pr := f.BySlot[e.Slot]; pr != "" {
			f.mark(pr, ev.Position)
		}
	case events.JobQueued:
		if e.Kind == events.KindPRDeploy && strings.HasPrefix(ev.Meta.CorrelationID, events.PRStreamPrefix) {
			f.Jobs[e.JobID] = ev.Meta.CorrelationID
			f.mark(ev.Meta.CorrelationID, ev.Position)
		}
	default:
		// A step or the end of a PR's job: the PR says what it does.
		id := strings.TrimPrefix(ev.Stream, events.JobStreamPrefix)
		if pr, ok := f.Jobs[id]; ok {
			f.mark(pr, ev.Position)
			if events.IsTerminal(ev.Type) {
				delete(f.Jobs, id)
			}
		}
	}
	return nil
}

// mark asks for a sync of stream (once: a PR already asked for keeps its
// place and older position).
func (f *driverFold) mark(stream string, pos events.Position) {
	for i := range f.pending {
		if f.pending[i].stream == stream {
			f.pending[i].gen++
			f.pending[i].after, f.pending[i].tries = time.Time{}, 0 // a new event: try now
			return
		}
	}
	f.pending = append(f.pending, pending{stream: stream, pos: pos})
}

// Mark holds the checkpoint below the oldest PR not synced yet.
func (f *driverFold) Mark(applied events.Position) events.Position {
	for _, p := range f.pending {
		if p.pos <= applied {
			applied = p.pos - 1
		}
	}
	return applied
}

func (f *driverFold) Snapshot() (any, error) { return f, nil }

func (f *driverFold) Restore(state []byte) error {
	f.reset()
	if err := json.Unmarshal(state, f); err != nil {
		f.reset()
		return err
	}
	if f.BySlot == nil {
		f.BySlot = map[string]string{}
	}
	if f.Jobs == nil {
		f.Jobs = map[string]string{}
	}
	return nil
}

// step syncs the PRs the fold asks for that are due, oldest first, and
// says when to look again (the next retry; zero: at the next event). A
// sync that failed for a reason that may pass is tried again after a
// doubling delay (Config.Retry, up to 32 times it); a definite refusal
// (the token refused) waits for the PR's next event instead of storming
// Bitbucket.
func (s *Service) step(ctx context.Context, f *driverFold) time.Time {
	r := s.runner.Load()
	now := s.cfg.Clock.Now()
	var due []pending
	r.View(func() {
		for _, p := range f.pending {
			if !p.after.After(now) {
				due = append(due, p)
			}
		}
	})
	for _, p := range due {
		if ctx.Err() != nil {
			return time.Time{}
		}
		err := s.Sync(ctx, p.stream)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("pull requests: sync failed", "pr", p.stream, "err", err)
		}
		if ctx.Err() != nil {
			return time.Time{}
		}
		retry := err != nil && mayPass(err)
		r.Update(func() {
			i := slices.IndexFunc(f.pending, func(q pending) bool { return q.stream == p.stream })
			switch {
			case i < 0:
			case retry:
				q := &f.pending[i]
				q.tries++
				if q.gen == p.gen {
					q.after = s.cfg.Clock.Now().Add(s.cfg.Retry << min(q.tries-1, 5))
				}
			case f.pending[i].gen == p.gen:
				f.pending = slices.Delete(f.pending, i, i+1)
			}
		})
	}
	var next time.Time
	r.View(func() {
		for _, p := range f.pending {
			if !p.after.IsZero() && (next.IsZero() || p.after.Before(next)) {
				next = p.after
			}
		}
	})
	return next
}

// Sync brings one PR's slot and jobs to where its state says, and says on
// the PR where it stands.
func (s *Service) Sync(ctx context.Context, stream string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := load(ctx, s.store, stream)
	if err != nil || !st.exists {
		return err
	}
	if !st.open() {
		return s.close(ctx, st)
	}
	if st.slot == "" {
		if st.headRefused() {
			// Its source would not give this head: no slot for it until
			// a new head arrives (the refusal's comment stands).
			return s.reportState(ctx, st)
		}
		ok, err := s.take(ctx, st)
		if err != nil {
			return err
		}
		if !ok {
			return s.reportState(ctx, st)
		}
	}
	if err := s.deploy(ctx, st); err != nil {
		return err
	}
	if err := s.sourceRefused(ctx, st); err != nil {
		return err
	}
	return s.reportState(ctx, st)
}

// sourceRefused handles a PR whose job for its current head failed because
// the head could not be fetched from the PR's source repository (the fork,
// for a PR from a fork: the token refused, or the fork or branch gone —
// events.CodePRSourceUnreadable). Nothing was pushed, so the slot still
// holds what it held; but the PR cannot use it until someone acts (the
// token gets read on the fork, the author pushes again), so rather than
// hold a scarce slot for up to the occupancy deadline, the refusal is
// recorded once for the head (PRSourceRefused, with the job's coded reason)
// and the slot is released with the ordinary release (the ready reset):
// PRSlotReleased with the code as its reason. The PR's next head takes a
// slot again. A refusal is never retried on a timer: the job failed once,
// and only a new head queues another.
func (s *Service) sourceRefused(ctx context.Context, st *prState) error {
	if st.job == "" || st.jobHead != st.pr.Head || st.slot == "" {
		return nil
	}
	if st.refused.JobID != st.job {
		j, err := s.currentJob(ctx, st)
		if err != nil {
			return err
		}
		if j.Status != events.StatusFailed || j.LastCode != events.CodePRSourceUnreadable {
			st.read = &j
			return nil
		}
		r := events.PRSourceRefused{Source: st.pr.Source, Head: st.pr.Head, JobID: st.job, Slot: st.slot,
			Code: events.CodePRSourceUnreadable, Reason: j.LastError}
		if err := s.appendPR(ctx, st, r); err != nil {
			return err
		}
		st.refused = r
	}
	done, err := s.release(ctx, st, events.CodePRSourceUnreadable)
	if done && err == nil {
		st.slot = ""
	}
	return err
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
		pr := st.pr
		return true, s.appendPR(ctx, st, events.PRSlotTaken{Slot: slot, PR: &pr})
	}
	if st.waiting {
		return false, nil
	}
	st.waiting = true
	return false, s.appendPR(ctx, st, events.PRWaiting{Reason: "every ready slot is occupied"})
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
	return s.appendPR(ctx, st, events.PRDeployQueued{Slot: st.slot, JobID: res.JobID, Head: st.pr.Head})
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
	done, err := s.release(ctx, st, "")
	st.released = done
	return err
}

// release gives the PR's slot back once its job is cancelled and its lock
// free (a busy slot is not done yet: the lock's release wakes Sync again),
// and records it with reason ("" for a closed PR).
func (s *Service) release(ctx context.Context, st *prState, reason string) (done bool, err error) {
	if busy, err := s.cancelJob(ctx, st); err != nil || busy {
		return false, err
	}
	sl, err := slots.LoadSlot(ctx, s.store, st.slot)
	if err != nil {
		return false, apperr.Internalf(err, "load slot")
	}
	name, id := occupant(st.pr)
	var jobID string
	if sl.Occupied && slots.IsOccupant(sl.Occupant, sl.OccupantID, id, name) {
		a := Actor
		a.CorrelationID = st.stream
		res, err := s.slots.Release(ctx, a, st.slot)
		if err != nil {
			return false, err
		}
		jobID = res.JobID
	}
	return true, s.appendPR(ctx, st, events.PRSlotReleased{Slot: st.slot, JobID: jobID, Reason: reason})
}

// mayPass: a sync's failure that trying again may cure — a failed post
// that was not a definite refusal, the store or a provider not answering.
// A refusal (a slot command's conflict, the token refused) waits for the
// next event about the PR.
func mayPass(err error) bool {
	var de *definiteError
	if errors.As(err, &de) {
		return false
	}
	switch apperr.CodeOf(err) {
	case apperr.Internal, apperr.Upstream, apperr.Unavailable, apperr.StoreChanged, apperr.TooMany, apperr.RequestTimeout:
		return true
	}
	return false
}
