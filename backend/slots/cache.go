package slots

import (
	"container/list"
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/slotkeeper/slotkeeper/events"
)

// DefaultSlotCacheSize is how many slots a SlotCache keeps folded when its
// size is not given. A pool has tens of slots; the bound only matters for
// processes that touch many more.
const DefaultSlotCacheSize = 4096

// SlotCache loads slot aggregates in constant time (DESIGN.md invariant 14):
// it keeps the folded state of recently used slots with the revision it was
// folded to, and a load reads only the events after that revision
// (ReadStream from revision+1) and folds them on top. A stream's events never
// change once written, so fold(all) == fold(cached prefix) + fold(tail).
//
// The cache is an optimisation, never the guard: every command still appends
// with the expected revision of the state it decided on, so a state that is
// stale by the time of the append (another goroutine or process wrote in
// between) fails the append with ErrWrongRevision, and the retry loads the
// new tail. Several processes each keep their own cache over the same store.
//
// One SlotCache serves one store (the revisions it keeps are that store's).
// It is safe for concurrent use; it holds at most its size in slots (least
// recently used ones are dropped and reloaded in full when used again).
type SlotCache struct {
	store events.Store
	max   int

	mu  sync.Mutex
	ll  *list.List // of *slotEntry, most recently used first
	idx map[string]*list.Element
}

type slotEntry struct {
	name string
	st   SlotState
}

// NewSlotCache returns a cache of at most size slots of store (size <= 0:
// DefaultSlotCacheSize).
func NewSlotCache(store events.Store, size int) *SlotCache {
	if size <= 0 {
		size = DefaultSlotCacheSize
	}
	return &SlotCache{store: store, max: size, ll: list.New(), idx: map[string]*list.Element{}}
}

// Store is the store the cache reads.
func (c *SlotCache) Store() events.Store { return c.store }

// Len is the number of slots the cache holds.
func (c *SlotCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Load returns the slot's state at the stream's current end, like LoadSlot,
// reading only the events written since the cached state (all of them the
// first time). The caller owns the returned state.
func (c *SlotCache) Load(ctx context.Context, name string) (SlotState, error) {
	st, cached := c.get(name)
	if !cached {
		st = SlotState{Name: name}
	}
	from := events.Revision(0)
	if cached {
		from = st.Revision + 1
	}
	evs, err := c.store.ReadStream(ctx, events.SlotStream(name), from, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		if cached {
			// The stream is gone (a KurrentDB stream can be deleted):
			// forget what it was, like a full load would.
			c.drop(name)
		}
		return SlotState{Name: name}, nil
	}
	if err != nil {
		return SlotState{Name: name}, err
	}
	if cached && len(evs) > 0 && evs[0].Revision != from {
		// Not the tail we asked for: trust nothing cached, fold it all.
		c.drop(name)
		return c.Load(ctx, name)
	}
	for _, ev := range evs {
		if err := st.Apply(ev); err != nil {
			return SlotState{Name: name}, err
		}
	}
	if st.Exists && (!cached || len(evs) > 0) {
		c.put(name, st)
	}
	return st, nil
}

func (c *SlotCache) get(name string) (SlotState, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.idx[name]
	if !ok {
		return SlotState{}, false
	}
	c.ll.MoveToFront(el)
	return el.Value.(*slotEntry).st.clone(), true
}

// put keeps st unless the cache already holds a newer fold of the slot (a
// concurrent load may have read further).
func (c *SlotCache) put(name string, st SlotState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.idx[name]; ok {
		e := el.Value.(*slotEntry)
		if st.Revision > e.st.Revision {
			e.st = st.clone()
		}
		c.ll.MoveToFront(el)
		return
	}
	c.idx[name] = c.ll.PushFront(&slotEntry{name: name, st: st.clone()})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.idx, old.Value.(*slotEntry).name)
	}
}

func (c *SlotCache) drop(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.idx[name]; ok {
		c.ll.Remove(el)
		delete(c.idx, name)
	}
}

// clone copies the state so that folding more events into the copy does not
// change the original (Apply writes into the maps).
func (s SlotState) clone() SlotState {
	s.Remaining = slices.Clone(s.Remaining)
	s.VacatedBy = maps.Clone(s.VacatedBy)
	s.PromotedBy = maps.Clone(s.PromotedBy)
	return s
}
