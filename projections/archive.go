package projections

import (
	"context"
	"fmt"
	"slices"

	"github.com/slotkeeper/slotkeeper/events"
)

// DefaultListedRetired is how many of the most recently retired idle slots
// (see Idle) ListSlots still lists; older ones are archived: GET /api/slots
// and the SSE snapshot leave them out, GET /api/slots/{name} still answers.
// A hundred keeps the last days' teardowns of a busy pool on the board
// (what someone looks for after a teardown) while the list, and what every
// browser is sent, stays the size of the live pool.
const DefaultListedRetired = 100

// Idle reports whether a slot is one ListSlots may leave out: retired and
// owning no resource any more (nothing left to clean up).
func Idle(v SlotView) bool {
	return v.Lifecycle == LifecycleRetired && len(v.Resources) == 0
}

// SlotNamer is a read model that can name every slot it knows, archived
// ones included (ListSlots leaves those out). Compare uses it so a verify
// still checks every slot's view and jobs.
type SlotNamer interface {
	SlotNames(ctx context.Context) ([]string, error)
}

// FoldSlot rebuilds slot name's view up to position upTo from the log, with
// Project: the slot's stream merged in position order with the streams of
// its jobs (jobIDs, every job whose view names the slot), which is every
// event that reaches a slot's view (its own, its jobs' resources and
// deletions, and their progress through RefreshSlotJob). The view equals the
// one a read model that applied the log up to upTo holds. ErrNotFound if no
// event up to upTo made a view.
func FoldSlot(ctx context.Context, log StreamReader, name string, jobIDs []string, upTo events.Position) (*SlotView, error) {
	evs, err := SlotHistory(ctx, log, name, jobIDs, upTo)
	if err != nil {
		return nil, err
	}
	v := foldSlotEvents(name, evs, nil)
	if v == nil {
		return nil, fmt.Errorf("slot %q: %w", name, ErrNotFound)
	}
	return v, nil
}

// foldState is the State of FoldSlot: the slot and its jobs.
type foldState struct {
	slots map[string]*SlotView
	jobs  map[string]*JobView
}

func (s *foldState) GetSlot(n string) *SlotView { return s.slots[n] }
func (s *foldState) GetJob(id string) *JobView  { return s.jobs[id] }
func (s *foldState) PutSlot(v *SlotView)        { s.slots[v.Name] = v }
func (s *foldState) PutJob(v *JobView)          { s.jobs[v.ID] = v }

// allSlotNames is every slot rm knows: SlotNames when it has it, else the
// listed ones.
func allSlotNames(ctx context.Context, rm ReadModel, listed []SlotView) ([]string, error) {
	if n, ok := rm.(SlotNamer); ok {
		names, err := n.SlotNames(ctx)
		if err != nil {
			return nil, err
		}
		slices.Sort(names)
		return names, nil
	}
	return slotNames(listed), nil
}
