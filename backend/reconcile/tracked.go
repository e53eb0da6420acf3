package reconcile

import (
	"context"
	"errors"
	"strings"

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
type ViewTracker struct{ Slots SlotLister }

// Tracked implements Tracker.
func (v ViewTracker) Tracked(ctx context.Context) ([]Tracked, error) {
	slots, err := v.Slots.ListSlots(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok := v.Slots.(archiveReader); ok {
		if slots, err = withArchived(ctx, r, slots); err != nil {
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
func withArchived(ctx context.Context, r archiveReader, listed []projections.SlotView) ([]projections.SlotView, error) {
	names, err := r.SlotNames(ctx)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(listed))
	for _, s := range listed {
		seen[s.Name] = true
	}
	for _, name := range names {
		if seen[name] {
			continue
		}
		s, err := r.Slot(ctx, name)
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
