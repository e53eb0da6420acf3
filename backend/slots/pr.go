package slots

import (
	"context"
	"regexp"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// DeployPR accepts a pr_deploy job on slot (issue 34): the pull request's
// head pushed into the slot's repository and deployed. Only the occupant may
// be deployed to; backend/pullrequests occupies the slot for the PR first.
func (s *Service) DeployPR(ctx context.Context, a Actor, slot string, c DeployPRCmd) (JobAcceptedResult, error) {
	params := map[string]string{"pr_source": c.Source.String(), "pr_branch": c.Branch, "head": c.Head}
	return s.newJob(ctx, a, slot, events.KindPRDeploy, params, func(st *SlotState) error {
		if c.Occupant != "" && !IsOccupant(st.Occupant, st.OccupantID, c.OccupantID, c.Occupant) {
			return conflict(map[string]any{"occupant": st.Occupant}, "slot %s is occupied by %s, not by the pull request's %s", slot, st.Occupant, c.Occupant)
		}
		return nil
	})
}

// DeployPRCmd is a pull request's head to deploy, and who must hold the slot.
type DeployPRCmd struct {
	Source       events.RepoRef
	Branch, Head string
	Occupant     string
	OccupantID   string
}

// validatePRParams checks a pr_deploy's params: every one ends up in a git
// command line.
func validatePRParams(p map[string]string) error {
	proj, slug, ok := strings.Cut(p["pr_source"], "/")
	if !ok {
		return badField("pr_source", "pr_source %q: PROJECT/slug", p["pr_source"])
	}
	// A PR from a fork names the fork, possibly in a personal project
	// (~user): its key is checked as one, the slug as any.
	if events.IsPersonalProject(proj) {
		if err := validateSlug("pr_source.slug", slug); err != nil {
			return err
		}
	} else if err := validateRepo("pr_source", events.RepoRef{Project: proj, Slug: slug}); err != nil {
		return err
	}
	if err := validateRef("pr_branch", p["pr_branch"]); err != nil {
		return err
	}
	if !shaParamRe.MatchString(p["head"]) {
		return badField("head", "head %q is not a full commit sha", p["head"])
	}
	return nil
}

var shaParamRe = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
