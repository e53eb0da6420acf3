// Package providercheck lets the slots service look a slot's resources up
// at the providers (slots.ResourceChecker) without knowing them: it turns
// the clients' tri-state lookups into slots' words. The clients' own id
// rules apply (they validate before sending anything): an id a client
// refuses is reported as slots.ErrRefusedID, because a slot naming it could
// never be torn down.
package providercheck

import (
	"context"
	"fmt"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checker implements slots.ResourceChecker over a PaaS and a GitHost.
type Checker struct {
	PaaS    providers.PaaS
	GitHost providers.GitHost
}

var _ slots.ResourceChecker = Checker{}

func state(l providers.Lookup, err error) (slots.ResourceState, error) {
	if providers.CodeOf(err) == providers.CodeInvalid {
		return slots.ResourceUnknown, fmt.Errorf("%w: %v", slots.ErrRefusedID, err)
	}
	switch l {
	case providers.Found:
		return slots.ResourceFound, nil
	case providers.Absent:
		return slots.ResourceAbsent, nil
	}
	return slots.ResourceUnknown, err
}

// CoolifyProject implements slots.ResourceChecker.
func (c Checker) CoolifyProject(ctx context.Context, uuid string) ([]int64, slots.ResourceState, error) {
	p, l, err := c.PaaS.GetProject(ctx, uuid)
	st, err := state(l, err)
	return p.Environments, st, err
}

// CoolifyApp implements slots.ResourceChecker.
func (c Checker) CoolifyApp(ctx context.Context, uuid string) (int64, slots.ResourceState, error) {
	a, l, err := c.PaaS.GetApplication(ctx, uuid)
	st, err := state(l, err)
	return a.EnvironmentID, st, err
}

// CoolifyDB implements slots.ResourceChecker.
func (c Checker) CoolifyDB(ctx context.Context, uuid string) (int64, slots.ResourceState, error) {
	d, l, err := c.PaaS.GetDatabase(ctx, uuid)
	st, err := state(l, err)
	return d.EnvironmentID, st, err
}

// CoolifyAppBuildPack implements slots.AppBuildPackChecker.
func (c Checker) CoolifyAppBuildPack(ctx context.Context, uuid string) (string, error) {
	a, l, err := c.PaaS.GetApplication(ctx, uuid)
	if l != providers.Found {
		if err == nil {
			err = fmt.Errorf("application %s not found", uuid)
		}
		return "", err
	}
	return a.BuildPack, nil
}

// CoolifyDBEngine implements slots.DBEngineChecker.
func (c Checker) CoolifyDBEngine(ctx context.Context, uuid string) (string, string, error) {
	d, l, err := c.PaaS.GetDatabase(ctx, uuid)
	if l != providers.Found {
		if err == nil {
			err = fmt.Errorf("database %s not found", uuid)
		}
		return "", "", err
	}
	return d.Type, d.Image, nil
}

// DefaultBrancher is the optional part of a GitHost that tells a
// repository's default branch (the Bitbucket client has it).
type DefaultBrancher interface {
	DefaultBranch(ctx context.Context, project, slug string) (string, providers.Lookup, error)
}

// Repo implements slots.ResourceChecker. The default branch is looked up
// when the GitHost can; a failure to tell it is Unknown like the lookup.
func (c Checker) Repo(ctx context.Context, r events.RepoRef) (string, slots.ResourceState, error) {
	_, l, err := c.GitHost.GetRepo(ctx, r.Project, r.Slug)
	st, err := state(l, err)
	if st != slots.ResourceFound {
		return "", st, err
	}
	db, ok := c.GitHost.(DefaultBrancher)
	if !ok {
		return "", st, nil
	}
	name, l, err := db.DefaultBranch(ctx, r.Project, r.Slug)
	if l != providers.Found {
		st, err = state(l, err)
		if st == slots.ResourceAbsent { // gone between the two calls
			return "", st, nil
		}
		return "", slots.ResourceUnknown, err
	}
	return name, slots.ResourceFound, nil
}
