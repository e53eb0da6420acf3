package pullrequests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Reporter posts on a pull request: the one comment, created once and then
// edited in place (at the version Bitbucket last answered), and a build
// status on a commit. backend/providers/bitbucket's Client, through
// BitbucketReporter, is the real one.
type Reporter interface {
	AddComment(ctx context.Context, repo events.RepoRef, pr int64, text string) (id int64, version int, err error)
	// EditComment returns ErrStaleVersion (wrapped) when version is not
	// the comment's current one.
	EditComment(ctx context.Context, repo events.RepoRef, pr, id int64, version int, text string) (newVersion int, err error)
	CommentVersion(ctx context.Context, repo events.RepoRef, pr, id int64) (int, error)
	SetBuildStatus(ctx context.Context, repo events.RepoRef, sha, state, url, description string) error
}

// ErrStaleVersion: a comment edit named a version that is not the current
// one (Bitbucket's 409).
var ErrStaleVersion = errors.New("the comment was edited since the recorded version")

// The phases the comment says.
const (
	phaseWaiting   = "waiting"
	phaseQueued    = "queued"
	phaseDeploying = "deploying"
	phaseReady     = "ready"
	phaseFailed    = "failed"
)

// BuildKey is the key of Slotkeeper's build status on a commit (the same
// key replaces the previous state).
const BuildKey = "slotkeeper-preview"

// reportJob reports on the PR whose current job is jobID (an older,
// superseded job's events report nothing).
func (s *Service) reportJob(ctx context.Context, jobID string) {
	if s.cfg.Reporter == nil {
		return
	}
	j, err := slots.LoadJob(ctx, s.store, jobID)
	if err != nil || !j.Exists || j.Queued.Kind != events.KindPRDeploy {
		return
	}
	stream := j.QueuedMeta.CorrelationID
	if !strings.HasPrefix(stream, events.PRStreamPrefix) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := load(ctx, s.store, stream)
	if err != nil || st.job != jobID || st.released {
		return
	}
	phase := phaseQueued
	switch j.Status {
	case events.StatusRunning:
		phase = phaseDeploying
	case events.StatusSucceeded:
		phase = phaseReady
	case events.StatusFailed, events.StatusTimedOut, events.StatusAbandoned:
		phase = phaseFailed
	case events.StatusCancelled:
		return // superseded: the newer job reports
	}
	s.report(ctx, st, phase, &j)
}

// report edits the PR's one comment (posting it the first time) and sets
// the build status of the head; the caller holds s.mu. What was posted is
// appended (PRCommentPosted): a phase already posted for the same job and
// head is not posted again. A failure is logged; the next event retries.
func (s *Service) report(ctx context.Context, st *prState, phase string, j *events.JobState) {
	r := s.cfg.Reporter
	if r == nil {
		return
	}
	jobID := ""
	if j != nil {
		jobID = j.ID
	}
	last := st.comment
	if last.CommentID != 0 && last.Phase == phase && last.JobID == jobID && last.Head == st.pr.Head {
		return
	}
	text, state, url, desc := s.words(st, phase, j)
	out := events.PRCommentPosted{CommentID: last.CommentID, Version: last.Version, Phase: phase, JobID: jobID, Head: st.pr.Head}
	var err error
	if last.CommentID == 0 {
		out.CommentID, out.Version, err = r.AddComment(ctx, st.pr.Repo, st.pr.ID, text)
	} else {
		out.Version, err = r.EditComment(ctx, st.pr.Repo, st.pr.ID, last.CommentID, last.Version, text)
		if errors.Is(err, ErrStaleVersion) {
			// Edited since the version recorded (by a person, or a post
			// whose record was lost): read the current version, edit again.
			var v int
			if v, err = r.CommentVersion(ctx, st.pr.Repo, st.pr.ID, last.CommentID); err == nil {
				out.Version, err = r.EditComment(ctx, st.pr.Repo, st.pr.ID, last.CommentID, v, text)
			}
		}
	}
	if err != nil {
		s.log.Warn("pull requests: comment not posted", "pr", st.stream, "phase", phase, "err", err)
		return
	}
	if state != "" {
		if err := r.SetBuildStatus(ctx, st.pr.Source, st.pr.Head, state, url, desc); err != nil {
			s.log.Warn("pull requests: build status not posted", "pr", st.stream, "state", state, "err", err)
		} else {
			out.BuildState = state
		}
	}
	if err := s.appendPR(ctx, st, out); err != nil {
		s.log.Warn("pull requests: comment posted but not recorded", "pr", st.stream, "err", err)
		return
	}
	st.comment = out
}

// words is the comment's text and the build status for a phase.
func (s *Service) words(st *prState, phase string, j *events.JobState) (text, state, url, desc string) {
	link := ""
	if j != nil && s.cfg.JobURL != nil {
		link = s.cfg.JobURL(j.ID)
	}
	head := st.pr.Head
	if len(head) > 12 {
		head = head[:12]
	}
	switch phase {
	case phaseWaiting:
		text = "Slotkeeper: every preview slot is taken; this pull request waits for one."
	case phaseQueued:
		text = fmt.Sprintf("Slotkeeper: slot **%s** is this pull request's; deploying %s is queued.", st.slot, head)
		state, desc = "INPROGRESS", "queued on slot "+st.slot
	case phaseDeploying:
		text = fmt.Sprintf("Slotkeeper: deploying %s on slot **%s**…", head, st.slot)
		state, desc = "INPROGRESS", "deploying on slot "+st.slot
	case phaseReady:
		app := appURL(j)
		text = fmt.Sprintf("Slotkeeper: %s is running on slot **%s**: %s", head, st.slot, app)
		state, url, desc = "SUCCESSFUL", app, "running on slot "+st.slot
	case phaseFailed:
		why := ""
		if j != nil {
			why = j.LastError
		}
		text = fmt.Sprintf("Slotkeeper: deploying %s on slot **%s** failed: %s", head, st.slot, why)
		state, desc = "FAILED", clip("failed: "+why, 250)
	}
	if link != "" {
		text += "\n\nJob: " + link
		if url == "" {
			url = link
		}
	}
	if url == "" {
		url = st.pr.Link // the build status's url is required
	}
	return text, state, url, desc
}

// appURL is the application's URL from the job's deploy result.
func appURL(j *events.JobState) string {
	if j == nil {
		return ""
	}
	ev, ok := j.Results[events.StepDeploy]
	if !ok {
		return ""
	}
	var d events.AppDeployed
	if json.Unmarshal(ev.Data, &d) != nil {
		return ""
	}
	if i := strings.IndexByte(d.FQDN, ','); i >= 0 {
		return d.FQDN[:i] // Coolify lists several domains comma-separated
	}
	return d.FQDN
}

// BitbucketReporter is the Reporter on Bitbucket Data Center's REST API.
type BitbucketReporter struct{ Client *bitbucket.Client }

// AddComment implements Reporter.
func (b BitbucketReporter) AddComment(ctx context.Context, repo events.RepoRef, pr int64, text string) (int64, int, error) {
	c, err := b.Client.AddComment(ctx, repo.Project, repo.Slug, pr, text)
	return c.ID, c.Version, err
}

// EditComment implements Reporter.
func (b BitbucketReporter) EditComment(ctx context.Context, repo events.RepoRef, pr, id int64, version int, text string) (int, error) {
	c, err := b.Client.EditComment(ctx, repo.Project, repo.Slug, pr, id, version, text)
	if pe, ok := providers.AsError(err); ok && pe.Status == 409 {
		return 0, fmt.Errorf("%w: %v", ErrStaleVersion, err)
	}
	return c.Version, err
}

// CommentVersion implements Reporter.
func (b BitbucketReporter) CommentVersion(ctx context.Context, repo events.RepoRef, pr, id int64) (int, error) {
	c, err := b.Client.GetComment(ctx, repo.Project, repo.Slug, pr, id)
	return c.Version, err
}

// SetBuildStatus implements Reporter.
func (b BitbucketReporter) SetBuildStatus(ctx context.Context, repo events.RepoRef, sha, state, url, desc string) error {
	return b.Client.SetBuildStatus(ctx, repo.Project, repo.Slug, sha, bitbucket.BuildStatus{Key: BuildKey, State: state, URL: url, Name: "Slotkeeper preview", Description: desc})
}
