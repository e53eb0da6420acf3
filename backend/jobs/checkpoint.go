package jobs

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The index's checkpoint (docs/jobs.md, "Index checkpoints"): a
// ConsumerCheckpointed on checkpoint-jobs-index holding what the index
// needs to go on from its position, so that a start folds only the log
// after it instead of the whole history. The consumer.Runner writes it
// (indexSaveEvery, indexSaveGap, and when the index stops).
const (
	indexConsumer = "jobs-index"
	// indexVersion is the version of indexState's shape. It includes the
	// JSON shape of events.JobState and slots.SlotState (their field names):
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
	Jobs    map[string]*events.JobState `json:"jobs"`
	Locks   map[string]*slots.SlotState `json:"locks"`
	Running []string                    `json:"running"`
	Ended   []string                    `json:"ended"`
}

// Name implements consumer.Fold.
func (x *index) Name() string { return indexConsumer }

// Version implements consumer.Fold.
func (x *index) Version() int { return indexVersion }

// Snapshot implements consumer.Fold: the index's state for a checkpoint.
func (x *index) Snapshot() (any, error) {
	st := indexState{Jobs: map[string]*events.JobState{}, Locks: map[string]*slots.SlotState{}, Running: []string{}, Ended: []string{}}
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
	return st, nil
}

// Restore implements consumer.Fold: the index as it stood at a checkpoint,
// or an error saying why the state cannot be used (then the index is
// untouched).
func (x *index) Restore(b []byte) error {
	var st indexState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	for id, j := range st.Jobs {
		if j == nil || j.ID != id {
			return fmt.Errorf("job %q is not one", id)
		}
	}
	for name, s := range st.Locks {
		if s == nil || !s.Locked() {
			return fmt.Errorf("slot %q holds no lock", name)
		}
	}
	for _, id := range append(slices.Clone(st.Running), st.Ended...) {
		if st.Jobs[id] == nil {
			return fmt.Errorf("job %q is running or ended but not in the state", id)
		}
	}
	x.jobs, x.slots = st.Jobs, st.Locks
	if x.jobs == nil {
		x.jobs = map[string]*events.JobState{}
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
	return nil
}
