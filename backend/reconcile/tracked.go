package reconcile

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// SlotLister is the read model's slot list (every slot, retired included).
// A read model's ListSlots leaves archived slots out (retired, nothing left
// to clean up; docs/projections.md): when the lister also names every slot
// and answers one (projections.SlotNamer and Slot, as both read models do),
// the tracker reads the archived ones too, so their promoted and template
// repositories stay tracked.
type SlotLister interface {
	ListSlots(ctx context.Context) ([]projections.SlotView, error)
}

// archiveReader is a SlotLister that can read the slots it does not list.
type archiveReader interface {
	projections.SlotNamer
	Slot(ctx context.Context, name string) (projections.SlotView, error)
}

// ViewTracker reads tracked resources from the slot views: each slot's
// Resources (an id leaves them only after its deletion was confirmed, so a
// retired slot's leftovers and a teardown-incomplete slot's remainder are
// in it), every promoted repository, and every template repository.
type ViewTracker struct {
	Slots SlotLister
	// cache keeps what the tracker folded of each archived slot between
	// runs (NewViewTracker); nil: every run folds every archived slot.
	cache *archiveCache
}

// NewViewTracker returns a ViewTracker that folds an archived slot only
// when its stream changed since the last run (log tells: the slot stream's
// newest revision), so a run's cost does not grow with the retired slots
// of the pool's history. Without it every run would fold thousands of
// archived slots from the log.
func NewViewTracker(slots SlotLister, log projections.StreamReader) ViewTracker {
	return ViewTracker{Slots: slots, cache: &archiveCache{log: log, m: map[string]archivedSlot{}}}
}

// archiveCache is what the tracker reads of the archived slots: the
// fields Tracked uses, at the slot stream's revision they were folded at.
type archiveCache struct {
	log projections.StreamReader
	mu  sync.Mutex
	m   map[string]archivedSlot
}

type archivedSlot struct {
	rev  events.Revision
	view projections.SlotView
}

// slot returns archived slot name's view (the fields Tracked reads),
// folding it with r only if its stream moved since it was cached.
func (c *archiveCache) slot(ctx context.Context, r archiveReader, name string) (projections.SlotView, error) {
	evs, err := c.log.ReadStream(ctx, events.SlotStream(name), math.MaxUint64, 1, events.Backward)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(evs) == 0) {
		return projections.SlotView{}, projections.ErrNotFound
	}
	if err != nil {
		return projections.SlotView{}, err
	}
	rev := evs[0].Revision
	c.mu.Lock()
	got, ok := c.m[name]
	c.mu.Unlock()
	if ok && got.rev == rev {
		return got.view, nil
	}
	v, err := r.Slot(ctx, name)
	if err != nil {
		return v, err
	}
	keep := projections.SlotView{Name: v.Name, ProjectUUID: v.ProjectUUID, Resources: v.Resources, PromotedTo: v.PromotedTo, TemplateRepo: v.TemplateRepo}
	c.mu.Lock()
	c.m[name] = archivedSlot{rev: rev, view: keep}
	c.mu.Unlock()
	return keep, nil
}

// forget drops the cached slots that are listed again.
func (c *archiveCache) forget(listed map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.m {
		if listed[name] {
			delete(c.m, name)
		}
	}
}

// Tracked implements Tracker.
func (v ViewTracker) Tracked(ctx context.Context) ([]Tracked, error) {
	slots, err := v.Slots.ListSlots(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok := v.Slots.(archiveReader); ok {
		if slots, err = withArchived(ctx, r, slots, v.cache); err != nil {
			return nil, err
		}
	}
	var out []Tracked
	for _, s := range slots {
		for _, r := range s.Resources {
			switch r.Kind {
			case events.ResProject, events.ResApplication, events.ResDatabase:
				out = append(out, Tracked{Provider: "coolify", Kind: r.Kind, ID: r.ID, Scope: "coolify:" + s.ProjectUUID, Slot: s.Name})
			case events.ResRepository:
				out = append(out, Tracked{Provider: "bitbucket", Kind: r.Kind, ID: r.ID, Scope: "bitbucket:" + repoProject(r.ID), Slot: s.Name})
			}
		}
		for _, p := range s.PromotedTo {
			out = append(out, Tracked{Provider: "bitbucket", Kind: events.ResRepository, ID: p.String(), Scope: "bitbucket:" + p.Project, Slot: s.Name})
		}
		if s.TemplateRepo.Slug != "" {
			out = append(out, Tracked{Provider: "bitbucket", Kind: events.ResRepository, ID: s.TemplateRepo.String(), Scope: "bitbucket:" + s.TemplateRepo.Project, Slot: s.Name, Template: true})
		}
	}
	return out, nil
}

func repoProject(id string) string {
	p, _, _ := strings.Cut(id, "/")
	return p
}

// withArchived adds the views of the slots r names but did not list.
func withArchived(ctx context.Context, r archiveReader, listed []projections.SlotView, cache *archiveCache) ([]projections.SlotView, error) {
	names, err := r.SlotNames(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(listed))
	for _, s := range listed {
		seen[s.Name] = true
	}
	if cache != nil {
		cache.forget(seen)
	}
	for _, name := range names {
		if seen[name] {
			continue
		}
		var s projections.SlotView
		if cache != nil {
			s, err = cache.slot(ctx, r, name)
		} else {
			s, err = r.Slot(ctx, name)
		}
		if errors.Is(err, projections.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		listed = append(listed, s)
	}
	return listed, nil
}
