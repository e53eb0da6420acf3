package jobs

import (
	"container/heap"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The index's checkpoint (docs/jobs.md, "Index checkpoints"): a
// ConsumerCheckpointed on checkpoint-jobs-index holding what the index
// needs to go on from its position, so that a start folds only the log
// after it instead of the whole history.
const (
	indexConsumer = "jobs-index"
	// indexVersion is the version of indexState's shape. It includes the
	// JSON shape of slots.JobState and slots.SlotState (their field names):
	// bump it when they change, so older checkpoints are ignored instead of
	// decoding into zero fields.
	indexVersion = 1
	// A checkpoint is written once the index folded indexSaveEvery events
	// since the last one and at least indexSaveGap passed: a restart then
	// folds at most about that many events, and a busy log does not fill
	// with checkpoints.
	indexSaveEvery = 10_000
	indexSaveGap   = 10 * time.Second
)

// indexState is the checkpoint's state: the jobs the index holds for a
// reason that outlives the process (open; ended with its lock; named by its
// slot's lock) and the slots whose lock is held (the lock fold applySlot
// keeps), and which of the jobs are running or ended with their lock. The
// due heap is rebuilt from the queued jobs. Finished jobs the index would
// forget are never in it, so its size does not grow with history.
type indexState struct {
	Jobs    map[string]*slots.JobState  `json:"jobs"`
	Locks   map[string]*slots.SlotState `json:"locks"`
	Running []string                    `json:"running"`
	Ended   []string                    `json:"ended"`
}

// snapshot is the index's state for a checkpoint, JSON-encoded (the folds
// go on changing the jobs after the lock is let go, so it is encoded
// here), and the position it summarises. Callers hold x.mu.
func (x *index) snapshot() ([]byte, events.Position, error) {
	st := indexState{Jobs: map[string]*slots.JobState{}, Locks: map[string]*slots.SlotState{}, Running: []string{}, Ended: []string{}}
	for name, s := range x.slots {
		if s.Locked() {
			st.Locks[name] = s
		}
	}
	for id, j := range x.jobs {
		if !x.finished(id, j) {
			st.Jobs[id] = j
		}
	}
	for id := range x.running {
		st.Running = append(st.Running, id)
	}
	for id := range x.ended {
		st.Ended = append(st.Ended, id)
	}
	slices.Sort(st.Running)
	slices.Sort(st.Ended)
	b, err := json.Marshal(st)
	return b, x.applied, err
}

// restore makes the index st's, as it stood at a checkpoint; why says why
// st cannot be used (then the index is untouched). Called before the
// subscription starts.
func (x *index) restore(st indexState) (why string) {
	for id, j := range st.Jobs {
		if j == nil || j.ID != id {
			return fmt.Sprintf("job %q is not one", id)
		}
	}
	for name, s := range st.Locks {
		if s == nil || !s.Locked() {
			return fmt.Sprintf("slot %q holds no lock", name)
		}
	}
	for _, id := range append(slices.Clone(st.Running), st.Ended...) {
		if st.Jobs[id] == nil {
			return fmt.Sprintf("job %q is running or ended but not in the state", id)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.jobs, x.slots = st.Jobs, st.Locks
	if x.jobs == nil {
		x.jobs = map[string]*slots.JobState{}
	}
	if x.slots == nil {
		x.slots = map[string]*slots.SlotState{}
	}
	x.due = nil
	for id, j := range x.jobs {
		if j.Status == events.StatusQueued {
			heap.Push(&x.due, dueItem{id: id, at: j.NotBefore})
		}
	}
	x.running, x.ended = map[string]bool{}, map[string]bool{}
	for _, id := range st.Running {
		x.running[id] = true
	}
	for _, id := range st.Ended {
		x.ended[id] = true
	}
	return ""
}

// load restores the newest checkpoint, if it can be used, and returns the
// position to subscribe after (0 when there is none).
func (x *index) load(ctx context.Context) (events.Position, error) {
	var st indexState
	pos, ok, why, err := consumer.LoadCheckpoint(ctx, x.store, indexConsumer, indexVersion, &st)
	if err != nil {
		return 0, fmt.Errorf("jobs: read the index checkpoint: %w", err)
	}
	if ok {
		why = x.restore(st)
	}
	switch {
	case ok && why == "":
		x.log.Info("jobs: index starts from its checkpoint", "position", pos, "jobs", len(st.Jobs), "locks", len(st.Locks))
		return pos, nil
	case why != "":
		x.log.Warn("jobs: index checkpoint ignored, folding the log from the start", "why", why)
	default:
		x.log.Info("jobs: no index checkpoint, folding the log from the start")
	}
	return 0, nil
}

// maybeSave starts writing a checkpoint in the background if the index
// folded enough since the last one and none is being written. The append
// runs outside x.mu, so folding goes on meanwhile. Callers hold x.mu.
func (x *index) maybeSave(ctx context.Context) {
	if x.saving || x.folded-x.foldedAtSave < x.saveEvery || x.now().Sub(x.savedAt) < x.saveGap {
		return
	}
	b, pos, err := x.snapshot()
	folded := x.folded
	x.foldedAtSave, x.savedAt = x.folded, x.now() // a failed write is retried after as many events
	if err != nil {
		x.log.Error("jobs: index checkpoint not encoded", "err", err)
		return
	}
	x.saving = true
	x.saves.Add(1)
	go func() {
		defer x.saves.Done()
		err := x.write(ctx, b, pos, folded)
		if err != nil && ctx.Err() == nil {
			x.log.Warn("jobs: index checkpoint not written", "position", pos, "err", err)
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		x.saving = false
		// The fold may have gone far meanwhile (catching up) and the log
		// gone quiet since: save that too rather than wait for more.
		x.maybeSave(ctx)
	}()
}

// save writes a checkpoint now if the index folded anything (checkpoints
// aside) since the last one written (Engine.Stop's, bounded by ctx): so a
// restart with nothing new in between appends nothing. Not concurrent with
// maybeSave's writes: the subscription has ended and they were waited for.
func (x *index) save(ctx context.Context) error {
	x.mu.Lock()
	if x.folded == x.foldedSaved {
		x.mu.Unlock()
		return nil
	}
	b, pos, err := x.snapshot()
	folded := x.folded
	x.mu.Unlock()
	if err != nil {
		return err
	}
	return x.write(ctx, b, pos, folded)
}

// write appends a checkpoint of the state b at pos, taken when the index
// had folded `folded` events.
func (x *index) write(ctx context.Context, b []byte, pos events.Position, folded int) error {
	if err := consumer.SaveCheckpoint(ctx, x.store, indexConsumer, indexVersion, pos, json.RawMessage(b)); err != nil {
		return err
	}
	x.mu.Lock()
	x.foldedSaved = max(x.foldedSaved, folded)
	x.mu.Unlock()
	return nil
}
