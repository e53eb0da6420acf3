// Package memory is the embedded read model, rebuilt from the log at start
// by a projections.Runner. Queries are answered from indexes kept up to date
// as events apply (slot by name, jobs of a slot newest first, latest job by
// slot and kind, audit in position order).
//
// Its memory does not grow with finished history (issue 13): it keeps the
// views of the slots it lists (every slot but the archived ones: idle
// retired slots past the most recent ListedRetired), the views of open jobs
// and of the most recently finished ones, and the latest audit entries. An
// archived slot's or an older job's view is folded from the log when asked
// for, and older audit pages are read from the log (projections.FoldSlot,
// projections.FoldJob, projections.AuditFromLog); all answer exactly what a
// read model holding everything would. What stays per job ever run is a
// small ref: id, slot, kind, queued position, and the state, requester and
// uncertain flag GET /api/jobs filters by (the indexes JobsBySlot and Jobs
// page through).
package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Limits bound what the read model keeps in memory.
type Limits struct {
	// RecentJobs is how many finished jobs keep their view in memory beside
	// the open ones (0: DefaultRecentJobs; negative: every job).
	RecentJobs int
	// RecentAudit is how many of the latest audit entries are kept (0:
	// DefaultRecentAudit; negative: all). Memory holds at least this many
	// and less than this plus one chunk of 4,096.
	RecentAudit int
	// ListedRetired is how many idle retired slots (projections.Idle)
	// ListSlots lists, the most recently changed ones (by view position);
	// older ones are archived: not listed, their views leave memory and Slot
	// folds them from the log (0: projections.DefaultListedRetired;
	// negative: list every slot, archive none). A read model without a log
	// keeps archived views in memory, still not listed.
	ListedRetired int
	// ClosedPRs and ClosedPRAge bound the closed (merged, declined,
	// deleted) pull requests whose views stay in memory: a closed PR's view
	// leaves when it is neither among the ClosedPRs most recently changed
	// closed ones (0: DefaultClosedPRs; negative: keep every PR; never
	// fewer than projections.ClosedPRsListed, the ones the list shows) nor
	// changed within ClosedPRAge (0: DefaultClosedPRAge) of the newest
	// event's time. Open PRs always stay. The list answers the same either
	// way, and a late event of a PR that left is applied to its view folded
	// from its stream (projections.FoldPR). A read model without a log
	// keeps every PR.
	ClosedPRs   int
	ClosedPRAge time.Duration
}

// Default limits: a day of a busy pool's jobs, and the audit entries the
// dashboard's live views start from, stay in memory.
const (
	DefaultRecentJobs  = 1000
	DefaultRecentAudit = 20000
)

// Closed pull requests kept by default: every one changed in the last
// week, and at least the 200 most recently changed ones
// (docs/pull-requests.md, "Closed pull requests leave memory").
const (
	DefaultClosedPRs   = 200
	DefaultClosedPRAge = 7 * 24 * time.Hour
)

// Store is the in-memory read model. It is safe for concurrent use: Apply
// takes the write lock once per batch, queries take the read lock and read
// the log without it.
type Store struct {
	log projections.Log
	lim Limits

	mu  sync.RWMutex
	pos events.Position
	// at is the event at pos (id, stream, revision): a snapshot names it,
	// so loading one finds it by its stream, not by a computed position.
	at    eventRef
	slots map[string]*projections.SlotView // never modified once stored; archived slots are not here
	// archived holds the idle retired slots that are not listed (see
	// Limits.ListedRetired): nil, their view left memory, except without a
	// log. idle names the idle slots still in slots, touched the slots the
	// current batch put (trim looks at them again).
	archived map[string]*projections.SlotView
	idle     map[string]struct{}
	touched  map[string]struct{}
	jobs     map[string]*projections.JobView // open jobs and recently finished ones
	refs     map[string]jobRef               // every job the log holds
	bySlot   map[string][]string             // slot → job ids, oldest first (by queued position)
	all      []string                        // every job id, oldest first (by queued position)
	latest   map[string]string               // slot + "\x00" + kind → newest job id
	// finished lists jobs in the order they finished (with repeats after a
	// resume); from its head, past RecentJobs, views leave memory.
	finished []string
	fhead    int
	audit    auditLog
	// prs are the pull requests by stream (projections.PRView): the open
	// ones and the closed ones Limits.ClosedPRs and ClosedPRAge keep, a few
	// hundred bytes each. closed lists the closed ones in the order they
	// last changed (with stale marks after a later change), from whose
	// head, past the limits, views leave memory; nclosed counts the closed
	// views held. newest is the latest event time applied: a closed PR's
	// age is measured against the log's own clock, so the read model at a
	// position is the same whenever and however it was built.
	prs     map[string]*projections.PRView
	closed  []prMark
	chead   int
	nclosed int
	newest  time.Time

	own   projections.Ownership // views ApplyQuiet's batch may change in place
	quiet bool                  // in ApplyQuiet: it notes finished jobs itself
}

// jobRef is what stays in memory of every job: enough to page a slot's jobs,
// to know the job exists, and to filter GET /api/jobs (state, requester,
// whether a step is uncertain) without folding the jobs that left memory.
// The filter fields are exact for a job whose view left memory (trim sets
// them from the view as it leaves); for a job in memory the view is read.
//
// Its strings are interned (unique.Handle, 8 bytes, one copy of each
// distinct value): a pool has few slots, kinds, states and requesters and
// many jobs, so a ref costs 48 bytes instead of 80 plus a copy of each
// string per job.
// prMark is a closed PR's change: its stream and the view's position then.
type prMark struct {
	stream string
	pos    events.Position
}

// closedPR reports whether a PR's view is of a closed one (merged,
// declined, deleted: closed stays closed, docs/pull-requests.md).
func closedPR(v *projections.PRView) bool { return v.State != events.PRStateOpen }

type jobRef struct {
	slot, kind  unique.Handle[string]
	state       unique.Handle[string]
	requestedBy unique.Handle[string]
	queued      events.Position
	uncertain   bool
}

func refOf(v *projections.JobView) jobRef {
	return jobRef{slot: unique.Make(v.Slot), kind: unique.Make(v.Kind), queued: v.QueuedPosition,
		state: unique.Make(v.State), requestedBy: unique.Make(v.RequestedBy), uncertain: v.UncertainStep != ""}
}

// matches reports whether the job passes f, from the ref alone
// (JobFilter.Match over the fields a ref keeps).
func (r jobRef) matches(f projections.JobFilter) bool {
	v := projections.JobView{Slot: r.slot.Value(), Kind: r.kind.Value(), State: r.state.Value(), RequestedBy: r.requestedBy.Value()}
	if r.uncertain {
		v.UncertainStep = "?" // Match asks only whether there is one
	}
	return f.Match(v)
}

// auditLog holds the latest audit entries in position order, in fixed-size
// chunks so that growing it never copies what is already there and the
// oldest leave a chunk at a time.
type auditLog struct {
	chunks  [][]projections.AuditEntry
	n       int
	size    int  // entries per chunk
	dropped bool // older entries left memory: before the first, ask the log
	// marks are the positions of the first entry of every dropped chunk,
	// in order: event positions a newest-first page can read the log
	// forward from, one chunk at a time, since a position is never
	// computed (events.Store.SubscribeAll).
	marks []events.Position
}

const auditChunk = 4096

func (l *auditLog) add(a projections.AuditEntry) {
	if l.n%l.size == 0 {
		l.chunks = append(l.chunks, make([]projections.AuditEntry, 0, l.size))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, a)
	l.n++
}

// trim drops the oldest chunks while at least keep entries remain.
func (l *auditLog) trim(keep int) {
	for len(l.chunks) > 1 && l.n-len(l.chunks[0]) >= keep {
		l.n -= len(l.chunks[0])
		if len(l.chunks[0]) > 0 {
			l.marks = append(l.marks, l.chunks[0][0].Position)
		}
		l.chunks[0] = nil
		l.chunks = slices.Delete(l.chunks, 0, 1)
		l.dropped = true
	}
}

func (l *auditLog) at(i int) *projections.AuditEntry { return &l.chunks[i/l.size][i%l.size] }

var (
	_ projections.Target      = (*Store)(nil)
	_ projections.QuietTarget = (*Store)(nil)
	_ projections.Snapshotter = (*Store)(nil)
	_ projections.ReadModel   = (*Store)(nil)
	_ projections.State       = (*Store)(nil)
	_ projections.SlotNamer   = (*Store)(nil)
	_ projections.PRState     = (*Store)(nil)
	_ projections.PRLister    = (*Store)(nil)
)

// New returns an empty read model with the default limits. log answers
// JobEvents and what has left memory; pass the store the runner projects
// from. With a nil log, JobEvents returns an error and everything stays in
// memory (nothing could be read back).
func New(log projections.Log) *Store { return NewWithLimits(log, Limits{}) }

// NewWithLimits is New with other limits (tests use tiny ones, so that
// nearly everything is read back from the log).
func NewWithLimits(log projections.Log, lim Limits) *Store {
	if lim.RecentJobs == 0 {
		lim.RecentJobs = DefaultRecentJobs
	}
	if lim.RecentAudit == 0 {
		lim.RecentAudit = DefaultRecentAudit
	}
	if lim.ListedRetired == 0 {
		lim.ListedRetired = projections.DefaultListedRetired
	}
	if lim.ClosedPRs == 0 {
		lim.ClosedPRs = DefaultClosedPRs
	}
	if lim.ClosedPRs > 0 {
		lim.ClosedPRs = max(lim.ClosedPRs, projections.ClosedPRsListed)
	}
	if lim.ClosedPRAge <= 0 {
		lim.ClosedPRAge = DefaultClosedPRAge
	}
	if log == nil {
		lim = Limits{RecentJobs: -1, RecentAudit: -1, ListedRetired: lim.ListedRetired, ClosedPRs: -1, ClosedPRAge: lim.ClosedPRAge}
	}
	size := auditChunk
	if lim.RecentAudit > 0 && lim.RecentAudit < size {
		size = lim.RecentAudit
	}
	return &Store{
		log: log, lim: lim, slots: map[string]*projections.SlotView{}, jobs: map[string]*projections.JobView{},
		refs: map[string]jobRef{}, bySlot: map[string][]string{}, latest: map[string]string{},
		archived: map[string]*projections.SlotView{}, idle: map[string]struct{}{}, touched: map[string]struct{}{},
		audit: auditLog{size: size}, prs: map[string]*projections.PRView{},
	}
}

// Limits are the limits in force (the defaults filled in).
func (s *Store) Limits() Limits { return s.lim }

// Apply implements projections.Target. Readers see either none or all of a
// batch, because the batch is applied under the write lock.
func (s *Store) Apply(ctx context.Context, evs []projections.Event) ([]projections.Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.trim()
	changes := make([]projections.Change, 0, len(evs))
	for _, ev := range evs {
		if ev.Position <= s.pos {
			return changes, fmt.Errorf("memory: event at %d is not after the checkpoint %d", ev.Position, s.pos)
		}
		if err := s.reload(ctx, ev); err != nil {
			return changes, err
		}
		ch := projections.Project(s, ev)
		s.audit.add(*ch.Audit)
		s.noteTime(ev)
		s.pos, s.at = ev.Position, eventRef{ID: ev.ID, Stream: ev.Stream, Revision: ev.Revision}
		changes = append(changes, ch)
	}
	return changes, nil
}

// ApplyQuiet implements projections.QuietTarget: Apply without the
// changes, so the batch may update the views it touches in place (see
// projections.Ownership); readers still see none or all of it, and no view
// a reader could have taken is changed.
func (s *Store) ApplyQuiet(ctx context.Context, evs []projections.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.quiet = true
	defer func() { s.quiet = false }()
	defer s.trim()
	defer s.own.Reset()
	for _, ev := range evs {
		if ev.Position <= s.pos {
			return fmt.Errorf("memory: event at %d is not after the checkpoint %d", ev.Position, s.pos)
		}
		if err := s.reload(ctx, ev); err != nil {
			return err
		}
		// ProjectQuiet changes owned job views in place, without PutJob:
		// a job that finishes here is noted here.
		id, was := s.jobState(ev.Stream)
		s.audit.add(projections.ProjectQuiet(s, &s.own, ev))
		s.noteTime(ev)
		if id != "" && !was {
			if v := s.jobs[id]; v != nil && done(v.State) && s.lim.RecentJobs >= 0 {
				s.finished = append(s.finished, id)
			}
		}
		s.pos, s.at = ev.Position, eventRef{ID: ev.ID, Stream: ev.Stream, Revision: ev.Revision}
	}
	return nil
}

// noteTime keeps the newest event time applied (closed PRs' age).
func (s *Store) noteTime(ev projections.Event) {
	if ev.Meta.Time.After(s.newest) {
		s.newest = ev.Meta.Time
	}
}

// jobState returns the job of a job stream and whether its view is done.
func (s *Store) jobState(stream string) (string, bool) {
	if !strings.HasPrefix(stream, events.JobStreamPrefix) {
		return "", false
	}
	id := stream[len(events.JobStreamPrefix):]
	v := s.jobs[id]
	return id, v != nil && done(v.State)
}

// reload puts back the view of a job that left memory before an event that
// reads it is projected (a resume, a late notification, a slot event naming
// it), folded from its stream as of the position before the event. On an
// error the event is not applied: the runner retries from the checkpoint.
func (s *Store) reload(ctx context.Context, ev projections.Event) error {
	if err := s.reloadJob(ctx, ev); err != nil {
		return err
	}
	if err := s.reloadPR(ctx, ev); err != nil {
		return err
	}
	// Then the slot the event reaches, if it was archived (an event on a
	// retired slot's stream, a late event of one of its jobs).
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		return s.reloadSlot(ctx, ev.Stream[len(events.SlotStreamPrefix):])
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		if v := s.jobs[ev.Stream[len(events.JobStreamPrefix):]]; v != nil {
			if err := s.reloadSlot(ctx, v.Slot); err != nil {
				return err
			}
		}
		if q, ok := ev.Payload.(events.JobQueued); ok {
			return s.reloadSlot(ctx, q.Slot)
		}
	}
	return nil
}

// reloadJob puts back the view of the job ev reads, if it left memory.
func (s *Store) reloadJob(ctx context.Context, ev projections.Event) error {
	id := projections.EventJobID(ev.Stream)
	if id == "" && ev.Err == nil {
		id = projections.PayloadJobID(ev.Payload)
	}
	if id == "" || s.jobs[id] != nil {
		return nil
	}
	if _, known := s.refs[id]; !known {
		return nil
	}
	v, err := projections.FoldJob(ctx, s.log, id, s.pos)
	if err != nil {
		return fmt.Errorf("memory: read back job %s: %w", id, err)
	}
	s.jobs[id] = v
	if done(v.State) {
		s.finished = append(s.finished, id)
	}
	return nil
}

// reloadPR puts back the view of a closed pull request that left memory
// before a later event of its stream is projected (a comment or the slot's
// release recorded after the close), folded from its stream as of the
// position before the event. A PR stream's first event is its first
// delivery, so a later event (revision > 0) of a stream without a view is
// one whose view left.
func (s *Store) reloadPR(ctx context.Context, ev projections.Event) error {
	if s.lim.ClosedPRs < 0 || ev.Revision == 0 || ev.Stream == events.PRReposStream ||
		!strings.HasPrefix(ev.Stream, events.PRStreamPrefix) || s.prs[ev.Stream] != nil {
		return nil
	}
	v, err := projections.FoldPR(ctx, s.log, ev.Stream, s.pos)
	if err != nil {
		return fmt.Errorf("memory: read back pull request %s: %w", ev.Stream, err)
	}
	if v != nil {
		s.PutPR(v)
	}
	return nil
}

// reloadSlot puts back the view of an archived slot, folded from the log as
// of the read model's position.
func (s *Store) reloadSlot(ctx context.Context, name string) error {
	v, ok := s.archived[name]
	if !ok {
		return nil
	}
	if v == nil {
		var err error
		if v, err = projections.FoldSlot(ctx, s.log, name, s.bySlot[name], s.pos); err != nil {
			return fmt.Errorf("memory: read back slot %s: %w", name, err)
		}
	}
	delete(s.archived, name)
	s.PutSlot(v)
	return nil
}

// done reports whether a job's state is not an open one: its view may leave
// memory (a resume brings it back).
func done(state string) bool {
	return state != projections.JobQueued && state != projections.JobRunning
}

// trim lets the oldest finished jobs' views and audit entries leave memory
// (called under the write lock at the end of a batch, so no batch sees a
// view leave while it works).
func (s *Store) trim() {
	if s.lim.RecentJobs >= 0 {
		for len(s.finished)-s.fhead > s.lim.RecentJobs {
			id := s.finished[s.fhead]
			s.finished[s.fhead] = ""
			s.fhead++
			if v := s.jobs[id]; v != nil && done(v.State) {
				// A quiet batch changes views in place without PutJob:
				// the ref takes the view's last word as it leaves.
				s.refs[id] = refOf(v)
				delete(s.jobs, id)
			}
		}
		if s.fhead > 1024 && s.fhead > len(s.finished)/2 {
			s.finished = slices.Clone(s.finished[s.fhead:])
			s.fhead = 0
		}
	}
	if s.lim.RecentAudit >= 0 {
		s.audit.trim(s.lim.RecentAudit)
	}
	s.archive()
	s.dropClosedPRs()
}

// dropClosedPRs lets the views of closed pull requests leave memory, oldest
// change first, while more than Limits.ClosedPRs are held and the oldest
// last changed more than ClosedPRAge before the newest event. Marks are in
// position order, so the walk stops at the first PR young enough to stay.
func (s *Store) dropClosedPRs() {
	if s.lim.ClosedPRs < 0 {
		return
	}
	cutoff := s.newest.Add(-s.lim.ClosedPRAge)
	for s.nclosed > s.lim.ClosedPRs && s.chead < len(s.closed) {
		m := s.closed[s.chead]
		if v := s.prs[m.stream]; v != nil && v.Position == m.pos && closedPR(v) {
			if !v.UpdatedAt.Before(cutoff) {
				break
			}
			delete(s.prs, m.stream)
			s.nclosed--
		}
		s.closed[s.chead] = prMark{}
		s.chead++
	}
	if s.chead > 1024 && s.chead > len(s.closed)/2 {
		s.closed = slices.Clone(s.closed[s.chead:])
		s.chead = 0
	}
}

// archive lets the idle retired slots past the ListedRetired most recently
// changed ones (by view position) leave memory (see Limits.ListedRetired).
// Only the slots the batch put can have become idle or stopped being so.
func (s *Store) archive() {
	if s.lim.ListedRetired < 0 {
		return
	}
	for name := range s.touched {
		if v := s.slots[name]; v != nil && projections.Idle(*v) {
			s.idle[name] = struct{}{}
		} else {
			delete(s.idle, name)
		}
	}
	clear(s.touched)
	extra := len(s.idle) - s.lim.ListedRetired
	if extra <= 0 {
		return
	}
	names := make([]string, 0, len(s.idle))
	for name := range s.idle {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return s.slots[names[i]].Position < s.slots[names[j]].Position })
	for _, name := range names[:extra] {
		var keep *projections.SlotView
		if s.log == nil {
			keep = s.slots[name] // nothing to fold it from
		}
		s.archived[name] = keep
		delete(s.slots, name)
		delete(s.idle, name)
	}
}

// GetSlot implements projections.State (called under the write lock).
func (s *Store) GetSlot(name string) *projections.SlotView { return s.slots[name] }

// GetJob implements projections.State (called under the write lock). A job
// that left memory was put back by reload before its event.
func (s *Store) GetJob(id string) *projections.JobView { return s.jobs[id] }

// PutSlot implements projections.State (called under the write lock).
func (s *Store) PutSlot(v *projections.SlotView) {
	s.slots[v.Name] = v
	if s.lim.ListedRetired >= 0 {
		s.touched[v.Name] = struct{}{}
	}
}

// PutJob implements projections.State (called under the write lock) and
// keeps the slot indexes.
func (s *Store) PutJob(v *projections.JobView) {
	prev := s.jobs[v.ID]
	s.jobs[v.ID] = v
	if s.lim.RecentJobs >= 0 && !s.quiet && done(v.State) && (prev == nil || !done(prev.State)) {
		s.finished = append(s.finished, v.ID)
	}
	old, existed := s.refs[v.ID]
	s.refs[v.ID] = refOf(v)
	if existed && old.slot.Value() == v.Slot && old.queued == v.QueuedPosition {
		return
	}
	if existed {
		s.all = slices.DeleteFunc(s.all, func(id string) bool { return id == v.ID })
		oldSlot, oldKey := old.slot.Value(), old.slot.Value()+"\x00"+old.kind.Value()
		s.bySlot[oldSlot] = slices.DeleteFunc(s.bySlot[oldSlot], func(id string) bool { return id == v.ID })
		if s.latest[oldKey] == v.ID {
			delete(s.latest, oldKey)
		}
	}
	// Jobs arrive in position order, so these are appends in practice.
	at := sort.Search(len(s.all), func(i int) bool { return s.refs[s.all[i]].queued > v.QueuedPosition })
	s.all = slices.Insert(s.all, at, v.ID)
	ids := s.bySlot[v.Slot]
	i := sort.Search(len(ids), func(i int) bool { return s.refs[ids[i]].queued > v.QueuedPosition })
	s.bySlot[v.Slot] = slices.Insert(ids, i, v.ID)
	key := v.Slot + "\x00" + v.Kind
	if cur, ok := s.refs[s.latest[key]]; !ok || cur.queued <= v.QueuedPosition {
		s.latest[key] = v.ID
	}
}

// GetPR implements projections.PRState (called under the write lock).
func (s *Store) GetPR(stream string) *projections.PRView { return s.prs[stream] }

// PutPR implements projections.PRState (called under the write lock) and
// notes a closed PR's change for dropClosedPRs.
func (s *Store) PutPR(v *projections.PRView) {
	if prev := s.prs[v.Stream]; prev != nil && closedPR(prev) {
		s.nclosed--
	}
	s.prs[v.Stream] = v
	if closedPR(v) {
		s.nclosed++
		if s.lim.ClosedPRs >= 0 {
			s.closed = append(s.closed, prMark{v.Stream, v.Position})
		}
	}
}

// HeldPullRequests reports how many pull requests' views the read model
// holds in memory (the open ones and the closed ones its limits keep).
func (s *Store) HeldPullRequests() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.prs)
}

// ListPullRequests implements projections.PRLister.
func (s *Store) ListPullRequests(context.Context) ([]projections.PRView, events.Position, error) {
	s.mu.RLock()
	out := make([]projections.PRView, 0, len(s.prs))
	for _, v := range s.prs {
		out = append(out, *v)
	}
	pos := s.pos
	s.mu.RUnlock()
	return projections.SortPRs(out), pos, nil
}

// job returns job id's view as of the read model's position pos: from
// memory, else folded from its stream. Call it without the lock.
func (s *Store) job(ctx context.Context, id string, inMemory *projections.JobView, pos events.Position) (projections.JobView, error) {
	if inMemory != nil {
		return *inMemory, nil
	}
	v, err := projections.FoldJob(ctx, s.log, id, pos)
	if errors.Is(err, projections.ErrNotFound) {
		return projections.JobView{}, fmt.Errorf("job %q: %w", id, projections.ErrNotFound)
	}
	if err != nil {
		return projections.JobView{}, err
	}
	return *v, nil
}

// Held reports what the read model holds in memory: audit entries and job
// views (the rest is read from the log when asked for).
func (s *Store) Held() (auditEntries, jobViews int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.audit.n, len(s.jobs)
}

// HeldSlots reports how many slot views the read model holds in memory and
// how many archived slots it folds from the log when asked for.
func (s *Store) HeldSlots() (views, archived int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.slots), len(s.archived)
}

// Position implements projections.ReadModel.
func (s *Store) Position(context.Context) (events.Position, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pos, nil
}

// ListSlots implements projections.ReadModel, ordered by name: every slot
// but the archived ones (see Limits.ListedRetired).
func (s *Store) ListSlots(ctx context.Context) ([]projections.SlotView, error) {
	out, _, err := s.SnapshotSlots(ctx)
	return out, err
}

// SnapshotSlots implements projections.Snapshotter.
func (s *Store) SnapshotSlots(context.Context) ([]projections.SlotView, events.Position, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]projections.SlotView, 0, len(s.slots))
	for _, v := range s.slots {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, s.pos, nil
}

// Slot implements projections.ReadModel. An archived slot's view is folded
// from the log (its stream and its jobs'), after the read lock.
func (s *Store) Slot(ctx context.Context, name string) (projections.SlotView, error) {
	s.mu.RLock()
	v, ok := s.slots[name]
	if !ok {
		v, ok = s.archived[name]
	}
	var jobs []string
	if v == nil {
		jobs = slices.Clone(s.bySlot[name])
	}
	pos := s.pos
	s.mu.RUnlock()
	switch {
	case v != nil:
		return *v, nil
	case !ok:
		return projections.SlotView{}, fmt.Errorf("slot %q: %w", name, projections.ErrNotFound)
	}
	fv, err := projections.FoldSlot(ctx, s.log, name, jobs, pos)
	if err != nil {
		return projections.SlotView{}, err
	}
	return *fv, nil
}

// SlotJobIDs implements projections.SlotJobLister: the ids of every job
// whose view names slot, from the job index (held or not).
func (s *Store) SlotJobIDs(_ context.Context, slot string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.bySlot[slot]), nil
}

// SlotNames implements projections.SlotNamer: every slot, archived ones
// included.
func (s *Store) SlotNames(context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.slots)+len(s.archived))
	for name := range s.slots {
		out = append(out, name)
	}
	for name := range s.archived {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

// Job implements projections.ReadModel.
func (s *Store) Job(ctx context.Context, id string) (projections.JobView, error) {
	s.mu.RLock()
	v := s.jobs[id]
	_, known := s.refs[id]
	pos := s.pos
	s.mu.RUnlock()
	if !known {
		return projections.JobView{}, fmt.Errorf("job %q: %w", id, projections.ErrNotFound)
	}
	return s.job(ctx, id, v, pos)
}

// LatestJob implements projections.ReadModel.
func (s *Store) LatestJob(ctx context.Context, slot, kind string) (projections.JobView, error) {
	s.mu.RLock()
	id, ok := s.latest[slot+"\x00"+kind]
	v := s.jobs[id]
	pos := s.pos
	s.mu.RUnlock()
	if !ok {
		return projections.JobView{}, fmt.Errorf("%s job of slot %q: %w", kind, slot, projections.ErrNotFound)
	}
	return s.job(ctx, id, v, pos)
}

// JobsBySlot implements projections.ReadModel. The cursor is the
// QueuedPosition of the last job of the previous page. The page is chosen
// from the index under the lock; views that left memory are folded after.
func (s *Store) JobsBySlot(ctx context.Context, slot, kind string, limit int, cursor string) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(limit, cursor)
	if err != nil {
		return projections.Page{}, err
	}
	var picks []pick
	page := projections.Page{Jobs: []projections.JobView{}}
	s.mu.RLock()
	ids := s.bySlot[slot]
	for i := len(ids) - 1; i >= 0; i-- {
		r := s.refs[ids[i]]
		if r.queued >= before || (kind != "" && r.kind.Value() != kind) {
			continue
		}
		if len(picks) == limit {
			page.NextCursor = strconv.FormatUint(uint64(s.refs[picks[limit-1].id].queued), 10)
			break
		}
		picks = append(picks, pick{ids[i], s.jobs[ids[i]]})
	}
	pos := s.pos
	s.mu.RUnlock()
	return s.fill(ctx, page, picks, pos)
}

// pick is a job chosen for a page under the read lock: its view when memory
// holds it, nil when it must be folded from the log.
type pick struct {
	id string
	v  *projections.JobView
}

// fill adds the picked jobs' views to page, folding those that left memory
// (after the read lock: folding reads the log).
func (s *Store) fill(ctx context.Context, page projections.Page, picks []pick, pos events.Position) (projections.Page, error) {
	for _, p := range picks {
		v, err := s.job(ctx, p.id, p.v, pos)
		if err != nil {
			return projections.Page{}, err
		}
		page.Jobs = append(page.Jobs, v)
	}
	return page, nil
}

// Jobs implements projections.ReadModel: a walk of the job index newest
// first (of one slot's jobs when the filter names a slot), skipping those the
// filter does not match. The cursor is as in JobsBySlot. Matching reads the
// view of a job in memory and the ref of one that left it, so the walk folds
// nothing; only the page's jobs that left memory are folded, after the lock.
func (s *Store) Jobs(ctx context.Context, f projections.JobFilter) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(f.Limit, f.Cursor)
	if err != nil {
		return projections.Page{}, err
	}
	var picks []pick
	page := projections.Page{Jobs: []projections.JobView{}}
	s.mu.RLock()
	ids := s.all
	if f.Slot != "" {
		ids = s.bySlot[f.Slot]
	}
	// Skip the ids at or after the cursor with a binary search: a deep page
	// does not walk the pages before it.
	end := sort.Search(len(ids), func(i int) bool { return s.refs[ids[i]].queued >= before })
	for i := end - 1; i >= 0; i-- {
		id := ids[i]
		v := s.jobs[id]
		if (v != nil && !f.Match(*v)) || (v == nil && !s.refs[id].matches(f)) {
			continue
		}
		if len(picks) == limit {
			page.NextCursor = strconv.FormatUint(uint64(s.refs[picks[limit-1].id].queued), 10)
			break
		}
		picks = append(picks, pick{id, v})
	}
	pos := s.pos
	s.mu.RUnlock()
	return s.fill(ctx, page, picks, pos)
}

// JobEvents implements projections.ReadModel: the job's stream from the log,
// up to the read model's position, so it agrees with the job's view.
func (s *Store) JobEvents(ctx context.Context, id string) ([]events.RecordedEvent, error) {
	s.mu.RLock()
	_, ok := s.refs[id]
	pos := s.pos
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, projections.ErrNotFound)
	}
	return projections.ReadJobEvents(ctx, s.log, id, pos)
}

// Audit implements projections.ReadModel, in position order (or newest
// first with f.Newest). Entries before the first one memory holds are read
// from the log; the window may move while that runs, so it looks again
// until it meets memory or the limit.
func (s *Store) Audit(ctx context.Context, f projections.AuditFilter) ([]projections.AuditEntry, error) {
	limit, err := projections.AuditLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	if f.Newest {
		return s.auditNewest(ctx, f, limit)
	}
	out := []projections.AuditEntry{}
	// after is where the next log read starts: the caller's cursor or the
	// last event a read looked at, never a computed position. scanned is
	// how far the log has been read (a bound, compared only).
	after, scanned := f.After, f.After
	for {
		s.mu.RLock()
		if s.audit.n == 0 || !s.audit.dropped || scanned >= s.audit.at(0).Position-1 {
			i := sort.Search(s.audit.n, func(i int) bool { return s.audit.at(i).Position > scanned })
			for ; i < s.audit.n && len(out) < limit; i++ {
				a := s.audit.at(i)
				if f.Before > 0 && a.Position >= f.Before {
					break
				}
				if f.Match(*a) {
					out = append(out, *a)
				}
			}
			s.mu.RUnlock()
			return out, nil
		}
		upTo := s.audit.at(0).Position - 1 // a bound: the log is read up to memory's first entry
		s.mu.RUnlock()
		last := false
		if f.Before > 0 && upTo >= f.Before {
			upTo, last = f.Before-1, true
		}
		sf := f
		sf.After = after
		got, looked, err := projections.AuditFromLog(ctx, s.log, sf, upTo, limit-len(out))
		if err != nil {
			return nil, cursorErr(err, after, f.After)
		}
		out = append(out, got...)
		if len(out) == limit || last {
			return out, nil
		}
		after, scanned = looked, upTo
	}
}

// cursorErr turns the log's refusal of the caller's own cursor (a start
// that is not an event's position) into bad input.
func cursorErr(err error, sent, cursor events.Position) error {
	if sent == cursor && cursor != 0 && errors.Is(err, events.ErrInvalidPosition) {
		return fmt.Errorf("%w: after=%d is not the position of an event", projections.ErrInvalid, cursor)
	}
	return err
}

// auditBackPage is how many entries one forward read of a newest-first
// audit page asks the log for at a time.
const auditBackPage = 1000

// auditNewest answers a newest-first audit page: from memory's window, then,
// when memory dropped older entries and the page is not full, from the log
// one dropped chunk at a time walking backwards, each read forward from the
// chunk's mark (an event's position).
func (s *Store) auditNewest(ctx context.Context, f projections.AuditFilter, limit int) ([]projections.AuditEntry, error) {
	out := []projections.AuditEntry{}
	s.mu.RLock()
	end := s.audit.n
	if f.Before > 0 {
		end = sort.Search(s.audit.n, func(i int) bool { return s.audit.at(i).Position >= f.Before })
	}
	for i := end - 1; i >= 0 && len(out) < limit; i-- {
		a := s.audit.at(i)
		if a.Position <= f.After {
			s.mu.RUnlock()
			return out, nil
		}
		if f.Match(*a) {
			out = append(out, *a)
		}
	}
	if len(out) == limit || !s.audit.dropped {
		s.mu.RUnlock()
		return out, nil
	}
	// Memory ran out before the page did: everything before memory's first
	// entry (and before f.Before) comes from the log.
	upTo := s.pos
	if s.audit.n > 0 {
		upTo = s.audit.at(0).Position - 1 // a bound, compared only
	}
	if f.Before > 0 && upTo >= f.Before {
		upTo = f.Before - 1
	}
	var marks []events.Position
	for _, m := range s.audit.marks {
		if m > f.After && m < upTo {
			marks = append(marks, m)
		}
	}
	s.mu.RUnlock()
	for i := len(marks) - 1; i >= -1 && len(out) < limit && upTo > f.After; i-- {
		from := f.After
		if i >= 0 {
			from = marks[i]
		}
		got, err := s.newestFromLog(ctx, f, from, upTo, limit-len(out))
		if err != nil {
			return nil, err
		}
		for j := len(got) - 1; j >= 0; j-- {
			out = append(out, got[j])
		}
		upTo = from // the next chunk ends with the mark's own entry
	}
	return out, nil
}

// newestFromLog returns the newest need entries matching f in (after, upTo],
// oldest first, reading the log forward from after (f.After or a mark) in
// pages that each go on from the last event the one before looked at.
func (s *Store) newestFromLog(ctx context.Context, f projections.AuditFilter, after, upTo events.Position, need int) ([]projections.AuditEntry, error) {
	var tail []projections.AuditEntry
	for {
		sf := f
		sf.After = after
		got, looked, err := projections.AuditFromLog(ctx, s.log, sf, upTo, auditBackPage)
		if err != nil {
			return nil, cursorErr(err, after, f.After)
		}
		tail = append(tail, got...)
		if len(tail) > need {
			tail = slices.Clone(tail[len(tail)-need:])
		}
		if len(got) < auditBackPage || looked >= upTo || looked == after {
			return tail, nil
		}
		after = looked
	}
}

// RemainingResources implements projections.ReadModel.
func (s *Store) RemainingResources(context.Context) ([]projections.RemainingResource, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := []projections.RemainingResource{}
	for _, v := range s.slots {
		out = append(out, projections.RemainingOf(*v)...)
	}
	projections.SortRemaining(out)
	return out, nil
}

// Verify rebuilds the log into a fresh in-memory shadow and lists every
// difference from live (see projections.Verify). `slotkeeper verify` calls it
// and exits non-zero when the list is not empty.
func Verify(ctx context.Context, store events.Store, live projections.ReadModel) ([]string, error) {
	return projections.Verify(ctx, store, live, New(store))
}
