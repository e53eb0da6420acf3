package jobs

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// index folds the log (job and slot streams) into what the loops need:
// open jobs, the slots they lock, queued jobs by due time, running jobs
// (for the rescuer) and ended jobs whose lock is still held (for the
// releaser). It is a consumer.Fold run by a consumer.Runner (r), which owns
// its checkpoints (checkpoint.go), its subscription, catching up and its
// lock: every field below wakes is read inside r.View and changed inside
// r.Update (or by Apply). It writes nothing to job or slot streams.
// Finished jobs leave it (forget); the loops pin the jobs they work on so
// they stay.
type index struct {
	store events.Store
	log   *slog.Logger
	r     *consumer.Runner
	// caughtUp is closed once the index has folded the log up to its head
	// at start; the loops act only from then on, so that a restart does not
	// act on every job that was once due in history.
	caughtUp <-chan struct{}

	jobs    map[string]*events.JobState
	slots   map[string]*slots.SlotState
	due     dueHeap         // queued jobs by NotBefore
	running map[string]bool // jobs the log shows running
	ended   map[string]bool // terminal jobs whose slot lock is still theirs
	pins    map[string]int  // jobs a loop works on: not forgotten
	// reload is the job Prepare folded from its stream for the next Apply.
	reload *events.JobState

	// onJobEvent is called (under the lock) for every job event folded;
	// the dispatcher fences its attempts with it.
	onJobEvent func(ev events.RecordedEvent)
	// wakes are the loops' channels, poked when what they look at changed.
	wakes []waker
}

// What a loop looks at, to wake it only when that changes.
type interest uint8

const (
	wantDue     interest = 1 << iota // the due heap (dispatcher)
	wantRunning                      // running jobs and their leases (rescuer)
	wantEnded                        // ended jobs holding their lock (releaser)
	wantAll     = wantDue | wantRunning | wantEnded
)

type waker struct {
	ch   chan struct{}
	want interest
}

func newIndex(store events.Store, log *slog.Logger) *index {
	x := &index{
		store: store, log: log,
		jobs:    map[string]*events.JobState{},
		slots:   map[string]*slots.SlotState{},
		running: map[string]bool{},
		ended:   map[string]bool{},
		pins:    map[string]int{},
	}
	x.setSave(consumer.SavePolicy{Every: indexSaveEvery, Gap: indexSaveGap})
	return x
}

// setSave (re)makes the Runner with a save policy (tests; before run).
func (x *index) setSave(p consumer.SavePolicy) {
	x.r = consumer.NewRunner(x.store, x, consumer.Options{Save: p, Logger: x.log})
	x.caughtUp = x.r.CaughtUp()
}

// wake returns a channel poked whenever what want names changes.
func (x *index) wake(want interest) <-chan struct{} {
	ch := make(chan struct{}, 1)
	x.r.Update(func() { x.wakes = append(x.wakes, waker{ch: ch, want: want}) })
	return ch
}

// poke wakes the loops interested in what changed. Under the lock.
func (x *index) poke(changed interest) {
	for _, w := range x.wakes {
		if w.want&changed == 0 {
			continue
		}
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// run folds the log from its checkpoint (or from position 0 if there is
// none it can use) until ctx ends or the store fails, and writes a last
// checkpoint when it stops.
func (x *index) run(ctx context.Context) error {
	go func() {
		select {
		case <-x.caughtUp:
			x.r.Update(func() { x.poke(wantAll) })
		case <-ctx.Done():
		}
	}()
	return x.r.Run(ctx)
}

// Wants implements consumer.Fold: job and slot events.
func (x *index) Wants(ev events.RecordedEvent) bool {
	return strings.HasPrefix(ev.Stream, events.JobStreamPrefix) || strings.HasPrefix(ev.Stream, events.SlotStreamPrefix)
}

// Prepare implements consumer.Preparer: a finished job the index forgot is
// back (a resume), so its stream is folded as it stood before ev, outside
// the lock, for Apply.
func (x *index) Prepare(ctx context.Context, ev events.RecordedEvent) error {
	var id string
	x.r.View(func() { id = x.missing(ev) })
	if id == "" {
		return nil
	}
	j, err := x.loadBefore(ctx, id, ev)
	if err != nil {
		return fmt.Errorf("jobs: reload job %s: %w", id, err)
	}
	x.reload = &j
	return nil
}

// Apply implements consumer.Fold.
func (x *index) Apply(ev events.RecordedEvent) error {
	if j := x.reload; j != nil {
		x.reload = nil
		if x.jobs[j.ID] == nil && j.Exists {
			x.jobs[j.ID] = j
		}
	}
	if name, ok := strings.CutPrefix(ev.Stream, events.SlotStreamPrefix); ok {
		x.poke(x.applySlot(name, ev))
	} else {
		x.poke(x.applyJob(strings.TrimPrefix(ev.Stream, events.JobStreamPrefix), ev))
	}
	return nil
}

// applySlot folds a slot event. The index needs only each slot's lock (for
// LockedFor and the acceptance's job), so it folds JobAccepted and
// JobReleased and skips the rest: a slot's fold here stays the same size
// whatever the slot's history (SlotState's per-job maps stay empty).
func (x *index) applySlot(name string, ev events.RecordedEvent) interest {
	if !ev.Is(events.JobAccepted{}) && !ev.Is(events.JobReleased{}) {
		return 0
	}
	st := x.slots[name]
	if st == nil {
		st = &slots.SlotState{Name: name}
		x.slots[name] = st
	}
	if err := st.Apply(ev); err != nil {
		x.log.Error("undecodable slot event skipped", "stream", ev.Stream, "rev", ev.Revision, "err", err)
		return 0
	}
	switch {
	case ev.Is(events.JobAccepted{}):
		x.accepted(st.Lock, ev.Meta)
		return wantAll
	case ev.Is(events.JobReleased{}):
		for id := range x.ended {
			if j := x.jobs[id]; j != nil && j.Queued.Slot == name && !st.LockedFor(j) {
				delete(x.ended, id)
				x.forget(id)
			}
		}
		if p, err := events.Decode(ev); err == nil {
			x.forget(p.(events.JobReleased).JobID)
		}
	}
	return wantEnded
}

func (x *index) applyJob(id string, ev events.RecordedEvent) interest {
	j := x.jobs[id]
	if j == nil {
		j = &events.JobState{ID: id}
		x.jobs[id] = j
	}
	if j.Written && ev.Revision <= j.Revision {
		return 0 // folded already, by a reload from the stream
	}
	if err := j.Apply(ev); err != nil {
		x.log.Error("undecodable job event skipped", "stream", ev.Stream, "rev", ev.Revision, "err", err)
		return 0
	}
	if x.onJobEvent != nil {
		x.onJobEvent(ev)
	}
	switch {
	case ev.Is(events.JobQueued{}) || ev.Is(events.JobResumed{}):
		delete(x.ended, id) // a resume that landed: the lock is its again
		heap.Push(&x.due, dueItem{id: id, at: j.NotBefore})
		return wantDue | wantEnded
	case ev.Is(events.JobClaimed{}):
		x.running[id] = true
		return wantRunning
	case events.IsTerminal(ev.Type):
		delete(x.running, id)
		if st := x.slots[j.Queued.Slot]; st != nil && st.LockedFor(j) {
			x.ended[id] = true
		}
		x.forget(id)
		return wantEnded
	}
	return 0 // steps and renewals: a later lease only makes the rescuer's timer early
}

// accepted folds a slot's JobAccepted into the job it accepts. A
// one-append acceptance (Run > 0) queues the job from the lock alone (its
// job stream may not exist yet); an old-format one is followed by the
// command's JobQueued or JobResumed on the job stream, and until that lands
// a resumed job is terminal under a held lock (released if it never does).
// Under the lock.
func (x *index) accepted(acc events.JobAccepted, meta events.Metadata) {
	j := x.jobs[acc.JobID]
	if j == nil && acc.Run == 1 {
		j = &events.JobState{ID: acc.JobID}
		x.jobs[acc.JobID] = j
	}
	switch {
	case j == nil:
	case acc.Run > 0:
		before := j.Run()
		j.Accept(acc, meta)
		if j.Run() > before {
			delete(x.ended, j.ID)
			heap.Push(&x.due, dueItem{id: j.ID, at: j.NotBefore})
		}
	case j.Terminal():
		x.ended[j.ID] = true
	}
}

// forget drops a finished job (DESIGN.md invariant 14: finished jobs leave
// memory): it has ended, its slot's lock does not name it (released, or
// never taken), and no loop works on it (pins; not running, not ended with
// its lock). A failed, timed-out or abandoned job can still be resumed: the
// resume's JobAccepted (or any later event of the job) makes apply fold the
// job again from its stream (loadBefore). Under the lock.
func (x *index) forget(id string) {
	if j := x.jobs[id]; j != nil && x.pins[id] == 0 && x.finished(id, j) {
		delete(x.jobs, id)
	}
}

// finished reports whether the log keeps nothing of job id in the index:
// it has ended, is neither running nor ended with its lock, and its slot's
// lock does not name it. What forget drops, and what checkpoints leave out
// (pins are the process's, not the log's). Under the lock.
func (x *index) finished(id string, j *events.JobState) bool {
	if !j.Terminal() || x.running[id] || x.ended[id] {
		return false
	}
	st := x.slots[j.Queued.Slot]
	return st == nil || st.LockJob != id
}

// pin keeps job id in the index while a loop works on it; unpin ends that
// (and forgets the job if it is finished).
func (x *index) pin(id string) {
	x.r.Update(func() { x.pins[id]++ })
}

func (x *index) unpin(id string) {
	x.r.Update(func() {
		if x.pins[id]--; x.pins[id] <= 0 {
			delete(x.pins, id)
		}
		x.forget(id)
		x.poke(wantAll) // a loop may have skipped it while it was pinned
	})
}

// job returns a copy of job id's state, if the index holds it.
func (x *index) job(id string) (j events.JobState, ok bool) {
	x.r.View(func() {
		if p := x.jobs[id]; p != nil {
			j, ok = *p, true
		}
	})
	return j, ok
}

// requeue puts a job back in the due heap if it is queued (resumed while
// an attempt of it was still ending).
func (x *index) requeue(id string) {
	x.r.Update(func() {
		if j := x.jobs[id]; j != nil && j.Status == events.StatusQueued {
			heap.Push(&x.due, dueItem{id: id, at: j.NotBefore})
		}
	})
}

// popDue removes the jobs due at now from the heap and returns those that
// may be claimed (queued, their slot lock for their current run), and when
// the next one falls due (zero: none).
func (x *index) popDue(now time.Time) (ids []string, next time.Time) {
	x.r.Update(func() { ids, next = x.popDueLocked(now) })
	return ids, next
}

func (x *index) popDueLocked(now time.Time) (ids []string, next time.Time) {
	for x.due.Len() > 0 {
		top := x.due[0]
		if top.at.After(now) {
			return ids, top.at
		}
		heap.Pop(&x.due)
		j := x.jobs[top.id]
		if j == nil || j.Status != events.StatusQueued {
			continue
		}
		if st := x.slots[j.Queued.Slot]; st == nil || !st.LockedFor(j) {
			continue // only a job whose lock is for its current run is claimed
		}
		ids = append(ids, top.id)
	}
	return ids, time.Time{}
}

// expired returns the running jobs whose lease ended more than grace ago
// and that no loop works on (the rescuer's), and when the next lease will
// have (zero: none).
func (x *index) expired(now time.Time, grace time.Duration) (ids []string, next time.Time) {
	x.r.View(func() {
		for id := range x.running {
			if x.pins[id] > 0 {
				continue
			}
			ids, next = due(ids, next, id, x.jobs[id].LeaseUntil.Add(grace), now)
		}
	})
	return ids, next
}

// releasable returns the ended jobs still holding their slot's lock once no
// attempt can act (the releaser's): grace after the terminal event if the
// attempt wrote it itself, else grace after the lease's end; and when the
// next one will be (zero: none).
func (x *index) releasable(now time.Time, grace time.Duration) (ids []string, next time.Time) {
	x.r.Update(func() { ids, next = x.releasableLocked(now, grace) })
	return ids, next
}

func (x *index) releasableLocked(now time.Time, grace time.Duration) (ids []string, next time.Time) {
	for id := range x.ended {
		j := x.jobs[id]
		if !j.Terminal() {
			delete(x.ended, id)
			x.forget(id)
			continue
		}
		if x.pins[id] > 0 {
			continue
		}
		at := j.LeaseUntil.Add(grace)
		if j.ByAttempt {
			at = j.TerminalAt.Add(grace)
		}
		ids, next = due(ids, next, id, at, now)
	}
	return ids, next
}

// due adds id to ids if at has passed, or else moves next to at if that is
// sooner.
func due(ids []string, next time.Time, id string, at, now time.Time) ([]string, time.Time) {
	if !at.After(now) {
		return append(ids, id), next
	}
	if next.IsZero() || at.Before(next) {
		next = at
	}
	return ids, next
}

// waitCaughtUp waits until the index has folded the log up to its head at
// start; false if ctx ended or stop was closed first.
func (x *index) waitCaughtUp(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-x.caughtUp:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

func (x *index) len() (n int) {
	x.r.View(func() { n = len(x.jobs) })
	return n
}

// missing (under the lock) names the job ev concerns if the index must
// fold it from its stream first: a job event after the job's first, or a resume's
// JobAccepted, for a job the index does not hold (it forgot it).
func (x *index) missing(ev events.RecordedEvent) string {
	var id string
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		if !ev.Is(events.JobAccepted{}) {
			return ""
		}
		p, err := events.Decode(ev)
		if err != nil || !p.(events.JobAccepted).Resumed {
			return ""
		}
		id = p.(events.JobAccepted).JobID
	case ev.Revision > 0:
		id = strings.TrimPrefix(ev.Stream, events.JobStreamPrefix)
	default:
		return ""
	}
	if x.jobs[id] != nil {
		return ""
	}
	return id
}

// loadBefore folds job id's stream as the subscription has delivered it when
// it delivers ev: the events before ev in the global order.
func (x *index) loadBefore(ctx context.Context, id string, ev events.RecordedEvent) (events.JobState, error) {
	j := events.JobState{ID: id}
	evs, err := x.store.ReadStream(ctx, events.JobStream(id), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return j, nil
	}
	if err != nil {
		return j, err
	}
	n := 0
	for _, e := range evs {
		if e.Position >= ev.Position {
			break
		}
		if err := j.Apply(e); err != nil {
			x.log.Error("undecodable job event skipped", "stream", e.Stream, "rev", e.Revision, "err", err)
		}
		n++
	}
	if ev.Stream == events.JobStream(id) && uint64(n) != ev.Revision {
		// ReadStream lagging behind the subscription (a known boltstore
		// limit): the fold misses events; every decision re-reads the
		// stream before it appends, so this only delays work.
		x.log.Warn("reloaded job is missing events", "job", id, "read", n, "want", ev.Revision)
	}
	return j, nil
}

// dueHeap orders queued jobs by NotBefore.
type dueItem struct {
	id string
	at time.Time
}

type dueHeap []dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueItem)) }
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
