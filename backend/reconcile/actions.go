package reconcile

import (
	"context"
	"errors"
	"sort"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// AdoptPlan is the dry run of an adopt or a delete of an orphan: the job's
// plan and the finding it acts on.
type AdoptPlan struct {
	slots.Plan
	Finding events.ReconcileFinding `json:"finding"`
}

// Orphans is what Actions needs of the Reconciler.
type Orphans interface {
	CurrentOrphan(ctx context.Context, provider, kind, id string) (events.ReconcileFinding, error)
}

// Actions acts on the findings of reconciliation through the slot
// service. Its rule: an adopt or a delete is accepted only for an orphan of
// the latest run that no slot tracks now, so a tracked resource is never
// deleted this way; the rule is checked again on the slot stream the job
// is accepted against (slots.Service.Adopt's check).
type Actions struct {
	Slots   *slots.Service
	Orphans Orphans
}

// Orphan returns the latest run's finding of c's resource. A stale finding
// and a resource a slot tracks now are 409 conflicts with their reason
// (finding_stale, resource_tracked), nothing appended.
func (a Actions) Orphan(ctx context.Context, c slots.AdoptCmd) (events.ReconcileFinding, error) {
	f, err := a.Orphans.CurrentOrphan(ctx, c.Provider, c.Kind, c.ID)
	var te *TrackedError
	switch {
	case errors.Is(err, ErrStale):
		e := apperr.Refuse(apperr.Conflict, apperr.ReasonFindingStale, "provider", c.Provider, "resource_kind", c.Kind, "resource_id", c.ID).
			With(map[string]any{"reason": "stale_finding"})
		e.Err = err
		return f, e
	case errors.As(err, &te):
		e := apperr.Refuse(apperr.Conflict, apperr.ReasonResourceTracked, "slot", te.Slot, "provider", c.Provider, "resource_kind", c.Kind, "resource_id", c.ID).
			With(map[string]any{"reason": "tracked", "slot": te.Slot})
		e.Err = err
		return f, e
	case err != nil:
		return f, apperr.Internalf(err, "read the latest reconciliation run")
	}
	return f, nil
}

func (a Actions) check(ctx context.Context, c slots.AdoptCmd) func() error {
	return func() error {
		_, err := a.Orphan(ctx, c)
		return err
	}
}

// PlanAdopt is Adopt's dry run.
func (a Actions) PlanAdopt(ctx context.Context, slot string, c slots.AdoptCmd) (AdoptPlan, error) {
	return a.plan(ctx, a.Slots.PlanAdopt, slot, c)
}

// PlanDeleteOrphan is DeleteOrphan's dry run.
func (a Actions) PlanDeleteOrphan(ctx context.Context, slot string, c slots.AdoptCmd) (AdoptPlan, error) {
	return a.plan(ctx, a.Slots.PlanDeleteOrphan, slot, c)
}

// Adopt queues the job that makes slot track the orphan c names.
func (a Actions) Adopt(ctx context.Context, actor slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error) {
	return a.Slots.Adopt(ctx, actor, slot, c, a.check(ctx, c))
}

// DeleteOrphan queues the job, charged to slot, that adopts the orphan and
// deletes it.
func (a Actions) DeleteOrphan(ctx context.Context, actor slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error) {
	return a.Slots.DeleteOrphan(ctx, actor, slot, c, a.check(ctx, c))
}

func (a Actions) plan(ctx context.Context, plan func(context.Context, string, slots.AdoptCmd) (slots.Plan, error), slot string, c slots.AdoptCmd) (AdoptPlan, error) {
	p, err := plan(ctx, slot, c)
	if err != nil {
		return AdoptPlan{}, err
	}
	f, err := a.Orphan(ctx, c)
	if err != nil {
		return AdoptPlan{}, err
	}
	return AdoptPlan{Plan: p, Finding: f}, nil
}

// DefaultScope is the scope reconciliation covers: the configured one
// (the same --coolify-projects and --bitbucket-projects register and
// promote are held to); with the simulators (demo) and no scope set, the
// demo's own: every slot's Coolify project and its slot and template
// repositories' Bitbucket projects. Without a readable slot list the
// demo's scope is empty.
func DefaultScope(ctx context.Context, coolify, bitbucket []string, demo bool, reads SlotLister) ([]string, []string) {
	if len(coolify)+len(bitbucket) > 0 || !demo {
		return coolify, bitbucket
	}
	list, err := reads.ListSlots(ctx)
	if err != nil {
		return nil, nil
	}
	cs, bs := map[string]bool{}, map[string]bool{}
	for _, s := range list {
		if s.ProjectUUID != "" {
			cs[s.ProjectUUID] = true
		}
		for _, r := range []events.RepoRef{s.Repo, s.TemplateRepo} {
			if r.Project != "" {
				bs[r.Project] = true
			}
		}
	}
	return sortedKeys(cs), sortedKeys(bs)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
