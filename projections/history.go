package projections

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// History answers the "as of" questions about slots (SlotAsOf,
// SlotChanges; issue 37 item 3) at a cost that follows the range asked,
// not the slot's history. It keeps, per slot, checkpoints of the slot fold
// (the fold foldSlotEvents makes over SlotHistory): every Every events of
// the slot's own streams the fold's state (the slot's view and the views of
// its open jobs, with how far each stream was read), and the span of
// positions of every job of the slot. An answer resumes the fold from the
// nearest checkpoint at or before the moment asked and reads only the
// streams that have events after it: the slot's stream from the revision
// the checkpoint read to, and the streams of the jobs whose span reaches
// into the range.
//
// The checkpoints are derived from the log alone, never stored: a process
// builds a slot's on the first question about it (one fold of its history,
// shared by concurrent questions) and extends them when a question reaches
// past them (one short read per job of the slot, then the new events).
// Views are immutable once made (Project copies on write), so a checkpoint
// holds the fold's own pointers. Resuming a fold is the same fold, so an
// answer equals the full fold's; history_test.go checks that against the
// full fold for random moments and ranges. At most Slots slots keep their
// checkpoints (least recently asked leave first), so memory does not grow
// with the number of slots asked about.
type History struct {
	log   StreamReader
	every int
	max   int

	mu    sync.Mutex
	slots map[string]*slotIndex
	clock uint64
}

// HistoryOptions tunes a History (zero: the defaults).
type HistoryOptions struct {
	// Every is how many events of a slot's streams lie between two
	// checkpoints (DefaultCheckpointEvery): the most an answer folds
	// before the first event it was asked about.
	Every int
	// Slots is how many slots keep their checkpoints (DefaultHistorySlots).
	Slots int
}

// Defaults of HistoryOptions. 128 events fold in well under a millisecond;
// a checkpoint holds one slot view and its open jobs' views (a few KB), so
// a slot of 20,000 events keeps about 160 of them.
const (
	DefaultCheckpointEvery = 128
	DefaultHistorySlots    = 64
)

// NewHistory answers from log.
func NewHistory(log StreamReader, o HistoryOptions) *History {
	if o.Every <= 0 {
		o.Every = DefaultCheckpointEvery
	}
	if o.Slots <= 0 {
		o.Slots = DefaultHistorySlots
	}
	return &History{log: log, every: o.Every, max: o.Slots, slots: map[string]*slotIndex{}}
}

// slotIndex is one slot's checkpoints. mu is held while they are built or
// extended, so concurrent questions share one build; state is replaced,
// never changed, so a question reads the one it took without the lock.
type slotIndex struct {
	mu    sync.Mutex
	state *indexState
	used  uint64 // History.clock at the last question (under History.mu)
}

type indexState struct {
	built events.Position // every event of the slot's streams up to here is indexed
	cps   []*checkpoint   // every History.every events, in order; cps[0] is the empty fold
	tail  *checkpoint     // the fold at built
	spans map[string]span // every job of the slot known at built
}

// span is where a job's stream lies in the log, up to indexState.built.
type span struct {
	first, last events.Position
	n           uint64 // its events up to built
}

// checkpoint is the slot fold after every event of the slot's streams up
// to position at.
type checkpoint struct {
	at       events.Position
	n        int             // events folded
	lastPos  events.Position // the last of them (0: none)
	lastTime time.Time       // its time
	maxTime  time.Time       // the latest time of any of them
	slotNext events.Revision // the slot stream's events folded
	slot     *SlotView
	jobs     map[string]jobCursor // the open jobs (done ones are read back when needed)
	// prs are the pull requests' streams the fold follows: those that
	// occupied the slot and have not released it yet (slotPREvents), each
	// with the revision to read on from.
	prs map[string]events.Revision
}

type jobCursor struct {
	view *JobView
	next events.Revision // the job stream's events folded
}

// index returns slot name's checkpoints, built or extended to cover
// upTo. ids lists the slot's jobs (SlotJobIDs), read only when the index
// has to grow.
func (h *History) index(ctx context.Context, name string, upTo events.Position, ids func() ([]string, error)) (*indexState, error) {
	h.mu.Lock()
	si := h.slots[name]
	if si == nil {
		si = &slotIndex{}
		h.slots[name] = si
	}
	h.clock++
	si.used = h.clock
	h.evict()
	h.mu.Unlock()

	si.mu.Lock()
	defer si.mu.Unlock()
	if si.state != nil && si.state.built >= upTo {
		return si.state, nil
	}
	jobIDs, err := ids()
	if err != nil {
		return nil, err
	}
	st := si.state
	if st == nil {
		// The slot's stream must exist (SlotHistory's ErrNotFound).
		if _, err := h.log.ReadStream(ctx, events.SlotStream(name), 0, 1, events.Forward); errors.Is(err, events.ErrStreamNotFound) {
			h.forget(name, si)
			return nil, fmt.Errorf("slot %q: %w", name, ErrNotFound)
		} else if err != nil {
			return nil, err
		}
		empty := &checkpoint{jobs: map[string]jobCursor{}}
		st = &indexState{cps: []*checkpoint{empty}, tail: empty, spans: map[string]span{}}
	}
	next, err := h.extend(ctx, name, st, upTo, jobIDs)
	if err != nil {
		return nil, err
	}
	si.state = next
	return next, nil
}

// evict drops the least recently asked slots past h.max (under h.mu).
func (h *History) evict() {
	for len(h.slots) > h.max {
		var oldest string
		var used uint64
		for name, si := range h.slots {
			if oldest == "" || si.used < used {
				oldest, used = name, si.used
			}
		}
		delete(h.slots, oldest)
	}
}

func (h *History) forget(name string, si *slotIndex) {
	h.mu.Lock()
	if h.slots[name] == si {
		delete(h.slots, name)
	}
	h.mu.Unlock()
}

// extend folds from st's tail up to upTo and returns the new state: the
// checkpoints it passed, the new tail and the jobs' spans. It finds the
// jobs with events after the tail by one short read of each job's stream.
func (h *History) extend(ctx context.Context, name string, st *indexState, upTo events.Position, jobIDs []string) (*indexState, error) {
	w := newWalker(h.log, name, st.tail, upTo)
	spans := maps.Clone(st.spans)
	seen := map[string]bool{}
	for _, id := range append(sortedKeys(st.spans), jobIDs...) {
		if seen[id] {
			continue
		}
		seen[id] = true
		next := events.Revision(spans[id].n)
		if c, ok := st.tail.jobs[id]; ok {
			next = c.next
		}
		evs, err := h.log.ReadStream(ctx, events.JobStream(id), next, 1, events.Forward)
		if errors.Is(err, events.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(evs) == 1 && evs[0].Position <= upTo {
			w.pending = append(w.pending, pendingJob{id: id, at: evs[0].Position})
		}
	}
	sortPending(w.pending)
	w.spans = st.spans
	out := &indexState{cps: st.cps, spans: spans}
	err := w.run(ctx, nil, func(ev events.RecordedEvent, _, _ *SlotView) bool {
		if id := jobOfStream(ev.Stream); id != "" {
			s := spans[id]
			if s.n == 0 {
				s.first = ev.Position
			}
			s.last, s.n = ev.Position, s.n+1
			spans[id] = s
		}
		if w.cp.n%h.every == 0 {
			out.cps = append(out.cps, w.checkpoint(ev.Position))
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	out.built = upTo
	out.tail = w.checkpoint(upTo)
	return out, nil
}

// from is the latest checkpoint at or before position p.
func (st *indexState) from(p events.Position) *checkpoint {
	if st.tail.at <= p {
		return st.tail
	}
	i := sort.Search(len(st.cps), func(i int) bool { return st.cps[i].at > p })
	return st.cps[i-1]
}

// fromTime is the latest checkpoint, not past limit, whose events are all
// at or before t: the first event after t lies after it.
func (st *indexState) fromTime(t time.Time, limit events.Position) *checkpoint {
	if st.tail.at <= limit && !st.tail.maxTime.After(t) {
		return st.tail
	}
	i := sort.Search(len(st.cps), func(i int) bool { return st.cps[i].maxTime.After(t) || st.cps[i].at > limit })
	return st.cps[i-1]
}

// resume is a walk from checkpoint base of st up to upTo: the jobs whose
// spans reach into the range are pending.
func (h *History) resume(st *indexState, name string, base *checkpoint, upTo events.Position) *walker {
	w := newWalker(h.log, name, base, upTo)
	for id, s := range st.spans {
		switch {
		case s.n == 0 || s.last <= base.at || s.first > upTo:
		case s.first > base.at:
			w.pending = append(w.pending, pendingJob{id: id, at: s.first})
		default:
			w.pending = append(w.pending, pendingJob{id: id, at: base.at})
		}
	}
	w.spans = st.spans
	sortPending(w.pending)
	return w
}

// moment is a resolved At: the fold up to position p answers it.
type moment struct {
	p  events.Position
	as AsOf
	// w is the walk that found a time's position, left there (nil for a
	// position or now); timed: as.Time is the time of the last event up
	// to p, which the walk to p finds.
	w     *walker
	timed bool
}

// resolve finds moment at as Cut does: a position (now when at or past
// limit), or a time, which needs a walk to the first event after it.
func (h *History) resolve(ctx context.Context, st *indexState, name string, at At, limit events.Position) (moment, error) {
	switch {
	case at.IsZero() || at.Position >= limit && at.Time.IsZero():
		return moment{p: limit, as: AsOf{Position: limit, Live: true}, timed: true}, nil
	case at.Position > 0:
		return moment{p: at.Position, as: AsOf{Position: at.Position}, timed: true}, nil
	}
	live := moment{p: limit, as: AsOf{Position: limit, Time: at.Time, Live: true}}
	base := st.fromTime(at.Time, limit)
	if base == st.tail && base.at == limit {
		return live, nil
	}
	w := h.resume(st, name, base, limit)
	stopped := false
	err := w.run(ctx, func(ev events.RecordedEvent) bool {
		stopped = ev.Meta.Time.After(at.Time)
		return stopped
	}, nil)
	if err != nil {
		return moment{}, err
	}
	if !stopped {
		live.w = w
		return live, nil
	}
	return moment{p: w.cp.lastPos, as: AsOf{Position: w.cp.lastPos, Time: at.Time}, w: w}, nil
}

// SlotAsOf is slot name's view as rm held it at moment at (never past rm's
// position), folded from the slot's stream and its jobs' streams in the
// log from the nearest checkpoint. ErrNotFound if the slot did not exist
// then.
func (h *History) SlotAsOf(ctx context.Context, rm ReadModel, name string, at At) (SlotView, AsOf, error) {
	limit, err := rm.Position(ctx)
	if err != nil {
		return SlotView{}, AsOf{}, err
	}
	st, err := h.index(ctx, name, needed(at, limit), func() ([]string, error) { return SlotJobIDs(ctx, rm, name) })
	if err != nil {
		return SlotView{}, AsOf{}, err
	}
	m, err := h.resolve(ctx, st, name, at, limit)
	if err != nil {
		return SlotView{}, AsOf{}, err
	}
	w := m.w
	if w == nil {
		w = h.resume(st, name, st.from(m.p), m.p)
		if err := w.run(ctx, nil, nil); err != nil {
			return SlotView{}, AsOf{}, err
		}
	}
	if m.timed {
		m.as.Time = w.cp.lastTime
	}
	v := w.slot()
	if v == nil {
		return SlotView{}, m.as, fmt.Errorf("slot %q at position %d: %w", name, m.as.Position, ErrNotFound)
	}
	return *v, m.as, nil
}

// needed is how far the index must reach for moment at: a position in the
// past needs nothing after it; now and a time may need everything.
func needed(at At, limit events.Position) events.Position {
	if at.Position > 0 && at.Position < limit {
		return at.Position
	}
	return limit
}

// Paging of SlotChanges.
const (
	// DefaultChangesLimit and MaxChangesLimit bound the changes of one
	// answer (?limit=).
	DefaultChangesLimit = 500
	MaxChangesLimit     = 5000
	// ChangesScan is the most events of the slot's streams one answer
	// folds inside the range; past it the answer stops at an event and
	// says where to go on (ChangesPage.NextFrom).
	ChangesScan = 20000
)

// ChangesPage is one page of a slot's changes between two moments.
type ChangesPage struct {
	Changes []SlotChange
	From    AsOf
	To      AsOf
	// NextFrom is set when the page stops before To: the position to ask
	// from next (with To.Position as to) for the rest. Zero: complete.
	NextFrom events.Position
	// NextTo (SlotChangesNewest) is set when older changes may remain: the
	// position to ask up to next (with the same from).
	NextTo events.Position
}

// SlotChanges is what changed on slot name after moment from and up to
// moment to (both never past rm's position), field by field, with the
// event that caused each, in log order: at most limit changes (0: the
// default) and ChangesScan events per page, every change of an event on
// the same page. ErrInvalid if from is after to.
func (h *History) SlotChanges(ctx context.Context, rm ReadModel, name string, from, to At, limit int) (ChangesPage, error) {
	st, fm, tm, page, limit, err := h.changesRange(ctx, rm, name, from, to, limit, false)
	if err != nil {
		return page, err
	}
	w := h.resume(st, name, st.from(fm.p), tm.p)
	if fm.timed {
		page.From.Time = w.cp.lastTime
	}
	scanned := 0
	err = w.run(ctx, nil, func(ev events.RecordedEvent, before, after *SlotView) bool {
		if ev.Position <= fm.p {
			if fm.timed {
				page.From.Time = ev.Meta.Time
			}
			return true
		}
		scanned++
		if after != nil && before != after {
			page.Changes = append(page.Changes, diffSlot(ev, before, after)...)
		}
		if len(page.Changes) >= limit || scanned >= ChangesScan {
			page.NextFrom = ev.Position
			return false
		}
		return true
	})
	if err != nil {
		return ChangesPage{}, err
	}
	if page.NextFrom != 0 {
		more, err := w.more(ctx)
		if err != nil {
			return ChangesPage{}, err
		}
		if !more {
			page.NextFrom = 0 // that was the last event of the range
		}
	}
	if tm.timed {
		if page.NextFrom != 0 {
			// The page stopped early: to's time is its last event's, a
			// short walk from its own checkpoint.
			if page.To.Time, err = h.lastTime(ctx, st, name, tm.p); err != nil {
				return ChangesPage{}, err
			}
		} else {
			page.To.Time = w.cp.lastTime
		}
	}
	return page, nil
}

// lastTime is the time of the last event of the slot's streams up to p.
func (h *History) lastTime(ctx context.Context, st *indexState, name string, p events.Position) (time.Time, error) {
	w := h.resume(st, name, st.from(p), p)
	err := w.run(ctx, nil, nil)
	return w.cp.lastTime, err
}

// changesRange resolves a changes question's two moments (ErrInvalid if
// from is after to) and the page's limit; with times, also the times of
// moments given as positions (else the caller's walk finds them).
func (h *History) changesRange(ctx context.Context, rm ReadModel, name string, from, to At, limit int, times bool) (*indexState, moment, moment, ChangesPage, int, error) {
	page := ChangesPage{Changes: []SlotChange{}}
	if limit <= 0 {
		limit = DefaultChangesLimit
	}
	limit = min(limit, MaxChangesLimit)
	end, err := rm.Position(ctx)
	if err != nil {
		return nil, moment{}, moment{}, page, 0, err
	}
	st, err := h.index(ctx, name, max(needed(from, end), needed(to, end)), func() ([]string, error) { return SlotJobIDs(ctx, rm, name) })
	if err != nil {
		return nil, moment{}, moment{}, page, 0, err
	}
	var fm moment // zero: the beginning
	if !from.IsZero() {
		if fm, err = h.resolve(ctx, st, name, from, end); err != nil {
			return nil, moment{}, moment{}, page, 0, err
		}
	}
	tm, err := h.resolve(ctx, st, name, to, end)
	if err != nil {
		return nil, moment{}, moment{}, page, 0, err
	}
	page.From, page.To = fm.as, tm.as
	if fm.p > tm.p {
		return nil, fm, tm, page, 0, fmt.Errorf("%w: from (position %d) is after to (position %d)", ErrInvalid, fm.p, tm.p)
	}
	// The moments' times, for a position or now: the last event's up to
	// each, a short walk from its own checkpoint.
	for _, m := range []struct {
		m  moment
		as *AsOf
	}{{fm, &page.From}, {tm, &page.To}} {
		if times && m.m.timed {
			if m.as.Time, err = h.lastTime(ctx, st, name, m.m.p); err != nil {
				return nil, moment{}, moment{}, page, 0, err
			}
		}
	}
	return st, fm, tm, page, limit, nil
}

// SlotChangesNewest is SlotChanges newest first: the page holds the
// latest changes of the range (in log order, every change of an event on
// the same page) and NextTo, when set, is the to of the page before it
// (with the same from). It folds the range backwards one checkpoint
// interval at a time, so the cost follows the page, not the range: what
// a timeline that shows the latest changes before a moment asks for.
func (h *History) SlotChangesNewest(ctx context.Context, rm ReadModel, name string, from, to At, limit int) (ChangesPage, error) {
	st, fm, tm, page, limit, err := h.changesRange(ctx, rm, name, from, to, limit, true)
	if err != nil {
		return page, err
	}
	var out []SlotChange
	scanned := 0
	for hi := tm.p; hi > fm.p; {
		lo := max(fm.p, st.from(hi-1).at)
		w := h.resume(st, name, st.from(lo), hi)
		var part []SlotChange
		var starts []int // where each event's changes begin in part
		var at []events.Position
		err := w.run(ctx, nil, func(ev events.RecordedEvent, before, after *SlotView) bool {
			if ev.Position <= lo {
				return true
			}
			scanned++
			if after != nil && before != after {
				if d := diffSlot(ev, before, after); len(d) > 0 {
					starts, at = append(starts, len(part)), append(at, ev.Position)
					part = append(part, d...)
				}
			}
			return true
		})
		if err != nil {
			return ChangesPage{}, err
		}
		if len(out)+len(part) >= limit {
			// Keep the newest whole events of part up to the limit.
			k := len(starts) - 1
			for k > 0 && len(out)+len(part)-starts[k] < limit {
				k--
			}
			out = append(part[starts[k]:], out...)
			if at[k]-1 > fm.p {
				page.NextTo = at[k] - 1
			}
			break
		}
		out = append(part, out...)
		hi = lo
		if scanned >= ChangesScan && hi > fm.p {
			page.NextTo = hi
			break
		}
	}
	if out != nil {
		page.Changes = out
	}
	return page, nil
}

// walker resumes the slot fold from a checkpoint: it merges, in position
// order, the slot's stream from the checkpoint's revision and the streams
// of the jobs pending (each opened when the merge reaches its first event
// after the checkpoint), up to upTo.
type walker struct {
	log  StreamReader
	name string
	base *checkpoint
	upTo events.Position
	st   *foldState
	cp   checkpoint // the fold's progress (st's views are its slot and jobs)
	next map[string]events.Revision
	// prs are the pull requests' streams followed (checkpoint.prs).
	prs map[string]events.Revision
	// spans, when known, say which done jobs had events before base (a
	// slot event naming one reads its view back).
	spans map[string]span

	slotBuf  []events.RecordedEvent
	slotFrom events.Revision // the slot stream's next revision to read
	slotDone bool
	pending  []pendingJob
	open     [][]events.RecordedEvent
	peeked   *events.RecordedEvent
}

// pendingJob is a job stream to open when the merge reaches position at
// (with pr, a pull request's stream the checkpoint followed).
type pendingJob struct {
	id string
	at events.Position
	pr bool
}

func sortPending(p []pendingJob) {
	sort.Slice(p, func(i, j int) bool {
		if p[i].at != p[j].at {
			return p[i].at < p[j].at
		}
		return p[i].id < p[j].id
	})
}

func newWalker(log StreamReader, name string, base *checkpoint, upTo events.Position) *walker {
	w := &walker{log: log, name: name, base: base, upTo: upTo,
		st:   &foldState{slots: map[string]*SlotView{}, jobs: map[string]*JobView{}},
		next: map[string]events.Revision{}}
	w.cp = *base
	w.slotFrom = base.slotNext
	if base.slot != nil {
		w.st.slots[name] = base.slot
	}
	for id, c := range base.jobs {
		w.st.jobs[id] = c.view
		w.next[id] = c.next
	}
	w.prs = maps.Clone(base.prs)
	if w.prs == nil {
		w.prs = map[string]events.Revision{}
	}
	for stream := range w.prs {
		w.pending = append(w.pending, pendingJob{id: stream, at: base.at, pr: true})
	}
	sortPending(w.pending)
	return w
}

func (w *walker) slot() *SlotView { return w.st.slots[w.name] }

// more reports whether events of the range are left.
func (w *walker) more(ctx context.Context) (bool, error) {
	if w.peeked != nil {
		return true, nil
	}
	ev, err := w.pull(ctx)
	w.peeked = ev
	return ev != nil, err
}

// checkpoint is the fold's state now, covering positions up to at.
func (w *walker) checkpoint(at events.Position) *checkpoint {
	c := w.cp
	c.at = at
	c.slot = w.slot()
	c.prs = maps.Clone(w.prs)
	c.jobs = map[string]jobCursor{}
	for id, v := range w.st.jobs {
		if v.State == JobQueued || v.State == JobRunning {
			c.jobs[id] = jobCursor{view: v, next: w.next[id]}
		}
	}
	return &c
}

// run folds the range's events in order. stop, if set, is asked before an
// event is folded and ends the walk there (the event stays next); each,
// if set, sees every folded event with the slot's view before and after
// it, and ends the walk by returning false.
func (w *walker) run(ctx context.Context, stop func(events.RecordedEvent) bool, each func(ev events.RecordedEvent, before, after *SlotView) bool) error {
	for {
		ev := w.peeked
		w.peeked = nil
		if ev == nil {
			var err error
			if ev, err = w.pull(ctx); err != nil {
				return err
			}
		}
		if ev == nil {
			return nil
		}
		if stop != nil && stop(*ev) {
			w.peeked = ev
			return nil
		}
		before := w.slot()
		if err := w.apply(ctx, *ev); err != nil {
			return err
		}
		if each != nil && !each(*ev, before, w.slot()) {
			return nil
		}
	}
}

// apply folds one event (Project, as foldSlotEvents does), first reading
// back the view of a done job a slot event names.
func (w *walker) apply(ctx context.Context, ev events.RecordedEvent) error {
	e := DecodeEvent(ev)
	if e.Err == nil && jobOfStream(ev.Stream) == "" {
		if id := PayloadJobID(e.Payload); id != "" && w.st.jobs[id] == nil {
			if s, ok := w.spans[id]; ok && s.n > 0 && s.first <= w.base.at {
				if _, err := w.readJob(ctx, id); err != nil {
					return err
				}
			}
		}
	}
	Project(w.st, e)
	switch id := jobOfStream(ev.Stream); {
	case id != "":
		w.next[id] = ev.Revision + 1
	case ev.Stream != events.SlotStream(w.name): // a pull request's
		w.prs[ev.Stream] = ev.Revision + 1
		if r, ok := e.Payload.(events.PRSlotReleased); ok && r.Slot == w.name {
			delete(w.prs, ev.Stream) // its last event about the slot
		}
	default:
		w.cp.slotNext = ev.Revision + 1
		if stream := prOccupant(ev); stream != "" {
			if err := w.followPR(ctx, stream, ev.Position); err != nil {
				return err
			}
		}
	}
	w.cp.n++
	w.cp.lastPos, w.cp.lastTime = ev.Position, ev.Meta.Time
	if ev.Meta.Time.After(w.cp.maxTime) {
		w.cp.maxTime = ev.Meta.Time
	}
	return nil
}

// followPR starts following a pull request's stream from the slot's
// occupancy for it at position at: its events after at that reach the slot
// join the merge, and checkpoints from here on name the stream, so an
// answer resumed from one reads on from where the fold was (even when the
// PR's PRSlotTaken lies past this walk's end).
func (w *walker) followPR(ctx context.Context, stream string, at events.Position) error {
	if _, ok := w.prs[stream]; ok {
		return nil
	}
	evs, err := w.log.ReadStream(ctx, stream, 0, 0, events.Forward)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		return err
	}
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Position > at })
	w.prs[stream] = 0
	if i > 0 {
		w.prs[stream] = evs[i-1].Revision + 1
	}
	if q := cutPosition(slotPREvents(evs[i:], w.name, at), w.upTo); len(q) > 0 {
		w.open = append(w.open, q)
	}
	return nil
}

// readPR reads a followed pull request's stream from where the
// checkpoint left it: its events after base that reach the slot.
func (w *walker) readPR(ctx context.Context, stream string) ([]events.RecordedEvent, error) {
	evs, err := w.log.ReadStream(ctx, stream, w.prs[stream], 0, events.Forward)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		return nil, err
	}
	return cutPosition(slotPREvents(evs, w.name, w.base.at), w.upTo), nil
}

// readJob reads job id's stream from where the fold is. A job not in the
// fold yet is read from its start and its events at or before base are
// folded first (its view at base). It returns the events after base.
func (w *walker) readJob(ctx context.Context, id string) ([]events.RecordedEvent, error) {
	from, in := w.next[id]
	evs, err := w.log.ReadStream(ctx, events.JobStream(id), from, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !in {
		i := sort.Search(len(evs), func(i int) bool { return evs[i].Position > w.base.at })
		for _, ev := range evs[:i] {
			Project(w.st, DecodeEvent(ev))
			w.next[id] = ev.Revision + 1
		}
		evs = evs[i:]
		if _, ok := w.next[id]; !ok {
			w.next[id] = 0
		}
	}
	return cutPosition(evs, w.upTo), nil
}

// pull is the next event of the range in position order (nil: none left).
func (w *walker) pull(ctx context.Context) (*events.RecordedEvent, error) {
	for {
		if len(w.slotBuf) == 0 && !w.slotDone {
			evs, err := w.log.ReadStream(ctx, events.SlotStream(w.name), w.slotFrom, slotChunk, events.Forward)
			if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
				return nil, err
			}
			w.slotFrom += events.Revision(len(evs))
			w.slotBuf = cutPosition(evs, w.upTo)
			w.slotDone = len(w.slotBuf) < slotChunk
		}
		best, src := events.Position(0), -2
		if len(w.slotBuf) > 0 {
			best, src = w.slotBuf[0].Position, -1
		}
		for i, q := range w.open {
			if src == -2 || q[0].Position < best {
				best, src = q[0].Position, i
			}
		}
		if len(w.pending) > 0 && (src == -2 || w.pending[0].at < best) {
			p := w.pending[0]
			w.pending = w.pending[1:]
			read := w.readJob
			if p.pr {
				read = w.readPR
			}
			evs, err := read(ctx, p.id)
			if err != nil {
				return nil, err
			}
			if len(evs) > 0 {
				w.open = append(w.open, evs)
			}
			continue
		}
		switch src {
		case -2:
			return nil, nil
		case -1:
			ev := w.slotBuf[0]
			w.slotBuf = w.slotBuf[1:]
			return &ev, nil
		}
		ev := w.open[src][0]
		if w.open[src] = w.open[src][1:]; len(w.open[src]) == 0 {
			w.open = append(w.open[:src], w.open[src+1:]...)
		}
		return &ev, nil
	}
}

// slotChunk is how many slot events a walk reads at a time.
const slotChunk = 256

func jobOfStream(stream string) string {
	if len(stream) > len(events.JobStreamPrefix) && stream[:len(events.JobStreamPrefix)] == events.JobStreamPrefix {
		return stream[len(events.JobStreamPrefix):]
	}
	return ""
}

func sortedKeys(m map[string]span) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
