package jobs

import (
	"context"
	"errors"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The adopt and delete-orphan jobs (issue 15): a slot takes in an orphan
// the reconciler found, and (delete_orphan) then deletes it.

var adoptSteps = bodies{
	events.StepLookupResource: lookupResource,
	events.StepAdoptResource:  adoptResource,
	events.StepDeleteResource: deleteResource,
}

// lookupResource checks the provider still holds the resource. Only found
// lets the job go on: absent (the provider's own 404) fails it, and a
// lookup that could not answer fails the attempt without guessing.
func lookupResource(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	res, err := slots.AdoptTarget(a.job.Queued.Params)
	if err != nil {
		return nil, failf("%v", err)
	}
	var l providers.Lookup
	err = a.call(ctx, events.StepStarted{Resource: &res}, func(ctx context.Context) error {
		var err error
		l, err = a.lookup(ctx, res)
		return err
	})
	switch {
	case l == providers.Found:
		return events.StepSucceeded{StepResult: a.result(false), Detail: res.Kind + " " + res.ID + " exists at the provider",
			DetailCode: events.DetailResourceExists, DetailArgs: map[string]string{"resource_kind": res.Kind, "id": res.ID}}, nil
	case l == providers.Absent:
		return nil, failf("%s %s does not exist at the provider; nothing to adopt", res.Kind, res.ID)
	case err != nil:
		if errors.Is(err, errFenced) || ctx.Err() != nil {
			return nil, err
		}
		se := fromProvider("cannot verify that "+res.Kind+" "+res.ID+" exists", err).(*stepError)
		se.uncertain = false // a lookup changes nothing
		return nil, se
	}
	return nil, failf("cannot verify that %s %s exists", res.Kind, res.ID)
}

// lookup is the tri-state GET of an adoptable resource.
func (a *attempt) lookup(ctx context.Context, res events.Resource) (providers.Lookup, error) {
	var l providers.Lookup
	var err error
	switch res.Kind {
	case events.ResApplication:
		_, l, err = a.e.deps.PaaS.GetApplication(ctx, res.ID)
	case events.ResDatabase:
		_, l, err = a.e.deps.PaaS.GetDatabase(ctx, res.ID)
	case events.ResProject:
		_, l, err = a.e.deps.PaaS.GetProject(ctx, res.ID)
	case events.ResRepository:
		proj, slug, _ := strings.Cut(res.ID, "/")
		_, l, err = a.e.deps.GitHost.GetRepo(ctx, proj, slug)
	default:
		return providers.Unknown, failf("cannot look up a %s", res.Kind)
	}
	return l, err
}

// adoptResource records the resource as the slot's (ResourcesListed: the
// slot's view tracks it from here, like every resource a step lists). It
// makes no outside call; the append is fenced like every step's.
func adoptResource(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	res, err := slots.AdoptTarget(a.job.Queued.Params)
	if err != nil {
		return nil, failf("%v", err)
	}
	if !a.job.Done[events.StepLookupResource] {
		return nil, failf("cannot adopt: step %s is not confirmed", events.StepLookupResource)
	}
	if err := a.holdsLock(ctx); err != nil {
		return nil, err
	}
	if err := a.listed(ctx, []events.Resource{res}); err != nil {
		return nil, err
	}
	return events.StepSucceeded{StepResult: a.result(false), Detail: res.Kind + " " + res.ID + " is now tracked by slot " + a.job.Queued.Slot,
		DetailCode: events.DetailResourceAdopted, DetailArgs: map[string]string{"resource_kind": res.Kind, "id": res.ID, "slot": a.job.Queued.Slot}}, nil
}

// deleteResource deletes an orphan the job has adopted (so it is tracked
// while it is being deleted). The result is recorded only once the
// provider's own 404 confirms it gone (confirmDelete, as every delete):
// until then it stays the slot's, and a failure leaves it listed.
func deleteResource(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	res, err := slots.AdoptTarget(a.job.Queued.Params)
	if err != nil {
		return nil, failf("%v", err)
	}
	if !a.job.Done[events.StepAdoptResource] {
		return nil, failf("cannot delete: step %s is not confirmed", events.StepAdoptResource)
	}
	paas, git := a.e.deps.PaaS, a.e.deps.GitHost
	proj, slug, _ := strings.Cut(res.ID, "/")
	var del func(context.Context) (providers.DeleteOutcome, error)
	switch res.Kind {
	case events.ResApplication:
		del = func(ctx context.Context) (providers.DeleteOutcome, error) { return paas.DeleteApplication(ctx, res.ID) }
	case events.ResDatabase:
		del = func(ctx context.Context) (providers.DeleteOutcome, error) { return paas.DeleteDatabase(ctx, res.ID) }
	case events.ResProject:
		del = func(ctx context.Context) (providers.DeleteOutcome, error) { return paas.DeleteProject(ctx, res.ID) }
	case events.ResRepository:
		del = func(ctx context.Context) (providers.DeleteOutcome, error) { return git.DeleteRepo(ctx, proj, slug) }
	default:
		return nil, failf("cannot delete a %s", res.Kind)
	}
	absent, err := confirmDelete(ctx, a, verify, res,
		func(ctx context.Context) (providers.Lookup, error) { return a.lookup(ctx, res) }, del)
	if err != nil {
		return nil, err
	}
	r := a.result(absent)
	switch res.Kind {
	case events.ResApplication:
		return events.AppDeleted{StepResult: r, AppUUID: res.ID}, nil
	case events.ResDatabase:
		return events.DBDeleted{StepResult: r, DBUUID: res.ID}, nil
	case events.ResProject:
		return events.ProjectDeleted{StepResult: r, ProjectUUID: res.ID}, nil
	}
	return events.RepoDeleted{StepResult: r, Repo: events.RepoRef{Project: proj, Slug: slug}}, nil
}
