package jobs

import (
	"context"
	"errors"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The adopt job (issue 15): a slot takes in an orphan the reconciler found.

func init() {
	kinds[events.KindAdopt] = map[string]stepFunc{
		events.StepLookupResource: lookupResource,
		events.StepAdoptResource:  adoptResource,
	}
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
		return events.StepSucceeded{StepResult: a.result(false), Detail: res.Kind + " " + res.ID + " exists at the provider"}, nil
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
	return events.StepSucceeded{StepResult: a.result(false), Detail: res.Kind + " " + res.ID + " is now tracked by slot " + a.job.Queued.Slot}, nil
}
