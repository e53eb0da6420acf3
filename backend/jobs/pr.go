package jobs

import (
	"context"
	"fmt"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/events"
)

// The pull-request deploy (issue 34, docs/pull-requests.md): push_pr_head
// puts the PR's head commit on the slot branch; the ready reset's own deploy
// step (ready.go) then deploys it and waits until Coolify reports the
// application running.

var prSteps = bodies{events.StepPushPRHead: pushPRHead}

// Params of a pr_deploy job (set by backend/pullrequests, checked by
// slots' validateParams).
const (
	ParamPRSource = "pr_source" // PROJECT/slug the PR's branch lives in
	ParamPRBranch = "pr_branch"
	ParamPRHead   = "head"
)

// pushPRHead fetches the PR's branch and force-pushes it over the slot
// branch with a lease on the sha read just before, then reads the slot
// branch back: the step succeeds only when it holds the PR's head. A branch
// that moved on since the delivery (a newer push, whose own delivery and job
// supersede this one) fails the step without a retry. A resumed attempt whose
// push landed finds the head there and records it.
func pushPRHead(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	p := a.job.Queued.Params
	proj, slug, _ := strings.Cut(p[ParamPRSource], "/")
	src := events.RepoRef{Project: proj, Slug: slug}
	head, branch := p[ParamPRHead], p[ParamPRBranch]
	reg := st.Reg
	repoRes := &events.Resource{Kind: events.ResRepository, ID: reg.Repo.String(), Name: reg.Branch}
	srcURL, dstURL := a.e.deps.RepoURL(src), a.e.deps.RepoURL(reg.Repo)
	var oldSHA string
	err = a.call(ctx, events.StepStarted{Resource: repoRes, Verify: true}, func(ctx context.Context) error {
		var err error
		oldSHA, err = a.e.deps.Pusher.RemoteSHA(ctx, dstURL, reg.Branch)
		return err
	})
	if err != nil {
		return nil, fromProvider("read slot repo sha", err)
	}
	out := events.PRHeadPushed{StepResult: a.result(false), Repo: reg.Repo, Branch: reg.Branch, Source: src, Head: head, OldSHA: oldSHA}
	if oldSHA == head {
		return out, nil
	}
	var pushed string
	err = a.call(ctx, events.StepStarted{Resource: repoRes, ExpectedSHA: oldSHA}, func(ctx context.Context) error {
		var err error
		pushed, err = a.e.deps.Pusher.ForcePushWithLease(ctx, srcURL, branch, dstURL, reg.Branch, oldSHA)
		return err
	})
	if err != nil {
		if se := sourceUnreadable(err, srcURL, src, branch); se != nil {
			return nil, se
		}
		return nil, fromProvider("push the pull request's head", err)
	}
	// The commit verified: what the slot branch holds now, read back.
	var now string
	err = a.call(ctx, events.StepStarted{Resource: repoRes, Verify: true}, func(ctx context.Context) error {
		var err error
		now, err = a.e.deps.Pusher.RemoteSHA(ctx, dstURL, reg.Branch)
		return err
	})
	if err != nil {
		return nil, fromProvider("read the slot branch back", err)
	}
	if pushed != head || now != head {
		return nil, failf("branch %s of %s is at %s, not the delivered head %s (pushed %s): a newer push's delivery supersedes this job", branch, src, now, head, pushed)
	}
	return out, nil
}

// sourceUnreadable is the step's failure when the fetch of the PR's branch
// from its source repository — a fork's, for a PR from a fork — was refused
// (401, 403) or found nothing (404: the repository or the branch deleted, or
// hidden from the token; Bitbucket answers 404 for a repository the caller
// may not see). Nothing was pushed (the fetch comes first), so the slot is
// as it was. Coded events.CodePRSourceUnreadable and not retryable: the
// token or the fork must change first, and the PR's driver gives the slot
// back rather than retrying (docs/pull-requests.md, "Pull requests from
// forks"). nil for any other failure (the slot repository's, a 5xx, a
// reset: the usual step errors).
func sourceUnreadable(err error, srcURL string, src events.RepoRef, branch string) error {
	pe, ok := providers.AsError(err)
	if !ok || pe.Resource != srcURL {
		return nil
	}
	status, why := pe.Status, ""
	switch pe.Code {
	case providers.CodeUnauthorized:
		status, why = max(status, 401), "Bitbucket refused the token (--bitbucket-token) reading it"
	case providers.CodeForbidden:
		status, why = 403, "the token (--bitbucket-token) may not read it"
	case providers.CodeNotFound:
		status, why = 404, "it does not exist for the token (deleted, its branch deleted, or not visible to the token)"
	default:
		return nil
	}
	return &stepError{code: events.FailurePRSourceUnreadable, status: status, args: map[string]string{"source": src.String(), "branch": branch},
		msg: fmt.Sprintf("cannot fetch branch %s of %s (HTTP %d): %s; nothing was pushed: %s", branch, src, status, why, pe.Error())}
}
