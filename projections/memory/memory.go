// Package memory is the embedded read model: every view in maps, rebuilt from
// the log at start by a projections.Runner. Queries are answered from indexes
// kept up to date as events apply (slot by name, jobs of a slot newest first,
// latest job by slot and kind, audit in position order).
package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Store is the in-memory read model. It is safe for concurrent use: Apply
// takes the write lock once per batch, queries take the read lock.
type Store struct {
	log projections.StreamReader

	mu     sync.RWMutex
	pos    events.Position
	slots  map[string]*projections.SlotView // never modified once stored
	jobs   map[string]*projections.JobView
	bySlot map[string][]string // slot → job ids, oldest first (by QueuedPosition)
	all    []string            // every job id, oldest first (by QueuedPosition)
	latest map[string]string   // slot + "\x00" + kind → newest job id
	audit  auditLog
	own    projections.Ownership // views ApplyQuiet's batch may change in place
}

// auditLog holds the audit entries in position order, in fixed-size chunks so
// that growing it never copies what is already there.
type auditLog struct {
	chunks [][]projections.AuditEntry
	n      int
}

const auditChunk = 4096

func (l *auditLog) add(a projections.AuditEntry) {
	if l.n%auditChunk == 0 {
		l.chunks = append(l.chunks, make([]projections.AuditEntry, 0, auditChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, a)
	l.n++
}

func (l *auditLog) at(i int) *projections.AuditEntry { return &l.chunks[i/auditChunk][i%auditChunk] }

var (
	_ projections.Target      = (*Store)(nil)
	_ projections.QuietTarget = (*Store)(nil)
	_ projections.Snapshotter = (*Store)(nil)
	_ projections.ReadModel   = (*Store)(nil)
	_ projections.State       = (*Store)(nil)
)

// New returns an empty read model. log answers JobEvents (nil: JobEvents
// returns an error); pass the store the runner projects from.
func New(log projections.StreamReader) *Store {
	return &Store{
		log: log, slots: map[string]*projections.SlotView{}, jobs: map[string]*projections.JobView{},
		bySlot: map[string][]string{}, latest: map[string]string{},
	}
}

// Apply implements projections.Target. Readers see either none or all of a
// batch, because the batch is applied under the write lock.
func (s *Store) Apply(_ context.Context, evs []projections.Event) ([]projections.Change, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changes := make([]projections.Change, 0, len(evs))
	for _, ev := range evs {
		if ev.Position <= s.pos {
			return changes, fmt.Errorf("memory: event at %d is not after the checkpoint %d", ev.Position, s.pos)
		}
		ch := projections.Project(s, ev)
		s.audit.add(*ch.Audit)
		s.pos = ev.Position
		changes = append(changes, ch)
	}
	return changes, nil
}

// ApplyQuiet implements projections.QuietTarget: Apply without the
// changes, so the batch may update the views it touches in place (see
// projections.Ownership); readers still see none or all of it, and no view
// a reader could have taken is changed.
func (s *Store) ApplyQuiet(_ context.Context, evs []projections.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.own.Reset()
	for _, ev := range evs {
		if ev.Position <= s.pos {
			return fmt.Errorf("memory: event at %d is not after the checkpoint %d", ev.Position, s.pos)
		}
		s.audit.add(projections.ProjectQuiet(s, &s.own, ev))
		s.pos = ev.Position
	}
	return nil
}

// GetSlot implements projections.State (called under the write lock).
func (s *Store) GetSlot(name string) *projections.SlotView { return s.slots[name] }

// GetJob implements projections.State (called under the write lock).
func (s *Store) GetJob(id string) *projections.JobView { return s.jobs[id] }

// PutSlot implements projections.State (called under the write lock).
func (s *Store) PutSlot(v *projections.SlotView) { s.slots[v.Name] = v }

// PutJob implements projections.State (called under the write lock) and
// keeps the slot indexes.
func (s *Store) PutJob(v *projections.JobView) {
	old, existed := s.jobs[v.ID]
	s.jobs[v.ID] = v
	if existed && old.Slot == v.Slot && old.QueuedPosition == v.QueuedPosition {
		return
	}
	if existed {
		s.all = slices.DeleteFunc(s.all, func(id string) bool { return id == v.ID })
		s.bySlot[old.Slot] = slices.DeleteFunc(s.bySlot[old.Slot], func(id string) bool { return id == v.ID })
		if s.latest[old.Slot+"\x00"+old.Kind] == v.ID {
			delete(s.latest, old.Slot+"\x00"+old.Kind)
		}
	}
	// Jobs arrive in position order, so these are appends in practice.
	at := sort.Search(len(s.all), func(i int) bool { return s.jobs[s.all[i]].QueuedPosition > v.QueuedPosition })
	s.all = slices.Insert(s.all, at, v.ID)
	ids := s.bySlot[v.Slot]
	i := sort.Search(len(ids), func(i int) bool { return s.jobs[ids[i]].QueuedPosition > v.QueuedPosition })
	s.bySlot[v.Slot] = slices.Insert(ids, i, v.ID)
	key := v.Slot + "\x00" + v.Kind
	if cur := s.jobs[s.latest[key]]; cur == nil || cur.QueuedPosition <= v.QueuedPosition {
		s.latest[key] = v.ID
	}
}

// Position implements projections.ReadModel.
func (s *Store) Position(context.Context) (events.Position, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pos, nil
}

// ListSlots implements projections.ReadModel, ordered by name.
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

// Slot implements projections.ReadModel.
func (s *Store) Slot(_ context.Context, name string) (projections.SlotView, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.slots[name]
	if !ok {
		return projections.SlotView{}, fmt.Errorf("slot %q: %w", name, projections.ErrNotFound)
	}
	return *v, nil
}

// Job implements projections.ReadModel.
func (s *Store) Job(_ context.Context, id string) (projections.JobView, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.jobs[id]
	if !ok {
		return projections.JobView{}, fmt.Errorf("job %q: %w", id, projections.ErrNotFound)
	}
	return *v, nil
}

// LatestJob implements projections.ReadModel.
func (s *Store) LatestJob(_ context.Context, slot, kind string) (projections.JobView, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.jobs[s.latest[slot+"\x00"+kind]]
	if !ok {
		return projections.JobView{}, fmt.Errorf("%s job of slot %q: %w", kind, slot, projections.ErrNotFound)
	}
	return *v, nil
}

// JobsBySlot implements projections.ReadModel. The cursor is the
// QueuedPosition of the last job of the previous page.
func (s *Store) JobsBySlot(_ context.Context, slot, kind string, limit int, cursor string) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(limit, cursor)
	if err != nil {
		return projections.Page{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := s.bySlot[slot]
	page := projections.Page{Jobs: []projections.JobView{}}
	for i := len(ids) - 1; i >= 0; i-- {
		j := s.jobs[ids[i]]
		if j.QueuedPosition >= before || (kind != "" && j.Kind != kind) {
			continue
		}
		if len(page.Jobs) == limit {
			page.NextCursor = strconv.FormatUint(uint64(page.Jobs[limit-1].QueuedPosition), 10)
			break
		}
		page.Jobs = append(page.Jobs, *j)
	}
	return page, nil
}

// Jobs implements projections.ReadModel: a walk of every job newest first
// (of one slot's jobs when the filter names a slot), skipping those the
// filter does not match. The cursor is as in JobsBySlot.
func (s *Store) Jobs(_ context.Context, f projections.JobFilter) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(f.Limit, f.Cursor)
	if err != nil {
		return projections.Page{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := s.all
	if f.Slot != "" {
		ids = s.bySlot[f.Slot]
	}
	// Skip the ids at or after the cursor with a binary search: a deep page
	// does not walk the pages before it.
	end := sort.Search(len(ids), func(i int) bool { return s.jobs[ids[i]].QueuedPosition >= before })
	page := projections.Page{Jobs: []projections.JobView{}}
	for i := end - 1; i >= 0; i-- {
		j := s.jobs[ids[i]]
		if !f.Match(*j) {
			continue
		}
		if len(page.Jobs) == limit {
			page.NextCursor = strconv.FormatUint(uint64(page.Jobs[limit-1].QueuedPosition), 10)
			break
		}
		page.Jobs = append(page.Jobs, *j)
	}
	return page, nil
}

// JobEvents implements projections.ReadModel: the job's stream from the log,
// up to the read model's position, so it agrees with the job's view.
func (s *Store) JobEvents(ctx context.Context, id string) ([]events.RecordedEvent, error) {
	s.mu.RLock()
	_, ok := s.jobs[id]
	pos := s.pos
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, projections.ErrNotFound)
	}
	return projections.ReadJobEvents(ctx, s.log, id, pos)
}

// Audit implements projections.ReadModel, in position order.
func (s *Store) Audit(_ context.Context, f projections.AuditFilter) ([]projections.AuditEntry, error) {
	limit, err := projections.AuditLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	i := sort.Search(s.audit.n, func(i int) bool { return s.audit.at(i).Position > f.After })
	out := []projections.AuditEntry{}
	for ; i < s.audit.n && len(out) < limit; i++ {
		if a := s.audit.at(i); f.Match(*a) {
			out = append(out, *a)
		}
	}
	return out, nil
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
