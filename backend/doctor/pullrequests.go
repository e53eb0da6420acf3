package doctor

import (
	"context"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// RepoReader reads one repository (*bitbucket.Client).
type RepoReader interface {
	GetRepo(ctx context.Context, project, slug string) (providers.Repo, providers.Lookup, error)
}

// PRRepo is one repository of --pr-repos.
type PRRepo struct {
	Project, Slug string
	URL           string // clone URL, no credentials
}

// PullRequests checks what the pull-request flow needs (issue 34,
// docs/pull-requests.md), read-only: a webhook secret (without one every
// delivery is refused), and for each linked repository that the token
// reads it over REST (GET the repository) and over git (ls-remote, as the
// pr_deploy's fetch does). Commenting on a pull request and posting a
// build status need nothing more: both ask REPO_READ (the 9.4 OpenAPI,
// POST …/pull-requests/{id}/comments and POST …/commits/{id}/builds).
func PullRequests(bb RepoReader, g GitReader, repos []PRRepo, secretSet bool) Check {
	return func(ctx context.Context) []Result {
		if len(repos) == 0 {
			return []Result{{Check: "pull requests", OK: true, Detail: "no --pr-repos: nothing to check (repositories linked later through /api/pr-repos are not checked here)"}}
		}
		out := []Result{{Check: "pull requests: webhook secret", OK: secretSet, Detail: "set",
			Fix: "set --bitbucket-webhook-secret-file to the secret of the Bitbucket webhook; without one every delivery is refused"}}
		if !secretSet {
			out[0].Detail = "not set: every delivery to /api/hooks/bitbucket is refused (401)"
		} else {
			out[0].Fix = ""
		}
		for _, r := range repos {
			name := r.Project + "/" + r.Slug
			res := Result{Check: "pull requests: " + name, OK: true, Detail: "the token reads it (REST and git): it can comment on its pull requests and post build statuses"}
			_, l, err := bb.GetRepo(ctx, r.Project, r.Slug)
			switch {
			case l == providers.Absent:
				res = Result{Check: res.Check, Detail: "Bitbucket says it does not exist, or the token cannot see it",
					Fix: "fix the --pr-repos entry, or give the token (at least) repository read on " + name, Definite: true}
			case err != nil:
				res = Result{Check: res.Check, Detail: "could not read it: " + err.Error(), Fix: "give the token repository read on " + name + ", or retry once Bitbucket answers"}
				if pe, ok := providers.AsError(err); ok && pe.Status == 401 {
					res.Definite = true
				}
			}
			if res.OK && g != nil && r.URL != "" {
				if _, err := g.RemoteSHA(ctx, r.URL, "main"); err != nil {
					res = Result{Check: res.Check, Detail: "git cannot read it: " + err.Error(), Fix: "give the token repository read on " + name + " (git uses the same token)"}
				}
			}
			out = append(out, res)
		}
		return out
	}
}
