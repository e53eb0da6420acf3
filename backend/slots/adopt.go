package slots

import (
	"context"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// Adopting an orphan (issue 15): a job of kind adopt on the slot that takes
// the resource in. The reconciler decides what is an orphan; this file only
// holds the slot's side: which resources can be adopted, the plan, and the
// command (the same lock and job stream as every other job).

// AdoptCmd names the orphan a slot takes in.
type AdoptCmd struct {
	Provider string `json:"provider"` // coolify | bitbucket
	Kind     string `json:"kind"`     // application | database | project (coolify); repository (bitbucket)
	ID       string `json:"id"`       // Coolify uuid, or "PROJECT/slug"
}

// Params is the job's params for the command.
func (c AdoptCmd) Params() map[string]string {
	return map[string]string{"provider": c.Provider, "kind": c.Kind, "id": c.ID}
}

// AdoptTarget is the resource an adopt job's params name. Returns
// CodeInvalid for anything else.
func AdoptTarget(params map[string]string) (events.Resource, error) {
	return adoptResource(params)
}

func adoptResource(params map[string]string) (events.Resource, error) {
	p, kind, id := params["provider"], params["kind"], params["id"]
	switch p {
	case "coolify":
		switch kind {
		case events.ResApplication, events.ResDatabase, events.ResProject:
		default:
			return events.Resource{}, invalid("kind %q: a Coolify orphan is an application, database or project", kind)
		}
		if err := validateProviderID("id", id); err != nil {
			return events.Resource{}, err
		}
	case "bitbucket":
		if kind != events.ResRepository {
			return events.Resource{}, invalid("kind %q: a Bitbucket orphan is a repository", kind)
		}
		proj, slug, ok := strings.Cut(id, "/")
		if !ok {
			return events.Resource{}, invalid("id %q: a repository is PROJECT/slug", id)
		}
		if err := validateRepo("id", events.RepoRef{Project: proj, Slug: slug}); err != nil {
			return events.Resource{}, err
		}
	default:
		return events.Resource{}, invalid("provider %q: coolify or bitbucket", p)
	}
	return events.Resource{Kind: kind, ID: id}, nil
}

// checkAdoptScope refuses a repository outside the Bitbucket scope (a
// Coolify orphan was found inside the scope's projects).
func (s *Service) checkAdoptScope(ctx context.Context, r events.Resource) error {
	if r.Kind == events.ResRepository {
		proj, _, _ := strings.Cut(r.ID, "/")
		return s.cfg.Scope.checkBitbucket(ctx, "id", proj)
	}
	return nil
}

// PlanAdopt is the dry run of Adopt: the same checks, nothing appended.
func (s *Service) PlanAdopt(ctx context.Context, slot string, c AdoptCmd) (Plan, error) {
	return s.planOrphan(ctx, events.KindAdopt, slot, c)
}

// PlanDeleteOrphan is the dry run of DeleteOrphan.
func (s *Service) PlanDeleteOrphan(ctx context.Context, slot string, c AdoptCmd) (Plan, error) {
	return s.planOrphan(ctx, events.KindDeleteOrphan, slot, c)
}

func (s *Service) planOrphan(ctx context.Context, kind, slot string, c AdoptCmd) (Plan, error) {
	if err := ValidateSlotName(slot); err != nil {
		return Plan{}, err
	}
	res, err := adoptResource(c.Params())
	if err != nil {
		return Plan{}, err
	}
	if err := s.checkAdoptScope(ctx, res); err != nil {
		return Plan{}, err
	}
	st, err := s.slots.Load(ctx, slot)
	if err != nil {
		return Plan{}, internal("load slot", err)
	}
	if err := s.canStart(&st, kind); err != nil {
		return Plan{}, err
	}
	return Plan{Kind: kind, Slot: slot, Steps: events.StepNames(kind, false), Resources: []events.Resource{res}, NotBefore: s.now()}, nil
}

// Adopt queues a job that makes slot track the orphan c names. check (may be
// nil) runs inside the decision, with the slot's state, before anything is
// appended: the caller refuses a stale finding or a resource some slot
// already tracks there. A retired slot → CodeConflict; a locked one →
// CodeConflict naming the blocking job.
func (s *Service) Adopt(ctx context.Context, a Actor, slot string, c AdoptCmd, check func() error) (JobAcceptedResult, error) {
	return s.orphanJob(ctx, events.KindAdopt, a, slot, c, check)
}

// DeleteOrphan queues a job, charged to slot, that adopts the orphan c
// names and deletes it, confirmed only by the provider's own 404. The same
// refusals as Adopt.
func (s *Service) DeleteOrphan(ctx context.Context, a Actor, slot string, c AdoptCmd, check func() error) (JobAcceptedResult, error) {
	return s.orphanJob(ctx, events.KindDeleteOrphan, a, slot, c, check)
}

func (s *Service) orphanJob(ctx context.Context, kind string, a Actor, slot string, c AdoptCmd, check func() error) (JobAcceptedResult, error) {
	res, err := adoptResource(c.Params())
	if err != nil {
		return JobAcceptedResult{}, err
	}
	if err := s.checkAdoptScope(ctx, res); err != nil {
		return JobAcceptedResult{}, err
	}
	var chk func(*SlotState) error
	if check != nil {
		chk = func(*SlotState) error { return check() }
	}
	return s.newJob(ctx, a, slot, kind, c.Params(), chk)
}
