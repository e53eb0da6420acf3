package pullrequests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
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
	// the comment's current one, ErrCommentGone when Bitbucket says the
	// comment does not exist (a person deleted it).
	EditComment(ctx context.Context, repo events.RepoRef, pr, id int64, version int, text string) (newVersion int, err error)
	CommentVersion(ctx context.Context, repo events.RepoRef, pr, id int64) (int, error)
	// FindComment returns the oldest comment on the PR whose text carries
	// marker (as its last line), at its current version. found is false
	// only when Bitbucket listed every comment and none did: any failure
	// is an error, and no comment is posted on an error.
	FindComment(ctx context.Context, repo events.RepoRef, pr int64, marker string) (id int64, version int, found bool, err error)
	SetBuildStatus(ctx context.Context, repo events.RepoRef, sha, state, url, description string) error
}

// ErrStaleVersion: a comment edit named a version that is not the current
// one (Bitbucket's 409).
var ErrStaleVersion = errors.New("the comment was edited since the recorded version")

// ErrCommentGone: the recorded comment does not exist any more (Bitbucket's
// own 404 on the edit: a person deleted it).
var ErrCommentGone = errors.New("the comment does not exist any more")

// The phases the comment says.
const (
	phaseWaiting   = "waiting"
	phaseQueued    = "queued"
	phaseDeploying = "deploying"
	phaseReady     = "ready"
	phaseFailed    = "failed"
	phaseCancelled = "cancelled"
	// phaseRefused: the head cannot be fetched from the PR's source
	// repository (a fork the token cannot read, or gone); the slot is
	// given back.
	phaseRefused = "source_unreadable"
)

// BuildKey is the key of Slotkeeper's build status on a commit (the same
// key replaces the previous state).
const BuildKey = "slotkeeper-preview"

// Marker is the comment's last line: how the comment is found again when
// its id was never recorded (a crash, or an answer lost, between
// Bitbucket's 201 and PRCommentPosted). It names the PR's stream, so it is
// stable across every edit and unique per PR.
func Marker(stream string) string { return "slotkeeper:" + stream }

// hasMarker: the text's last line is the marker (a person quoting our
// comment puts it elsewhere, or behind "> ").
func hasMarker(text, marker string) bool {
	text = strings.TrimRight(text, " \n\r\t")
	i := strings.LastIndexByte(text, '\n')
	return strings.TrimSpace(text[i+1:]) == marker
}

// currentJob is the PR's current job: as sourceRefused read it in this
// Sync when nothing was appended since, else read now.
func (s *Service) currentJob(ctx context.Context, st *prState) (events.JobState, error) {
	if st.read != nil && st.read.Queued.JobID == st.job {
		return *st.read, nil
	}
	j, err := slots.LoadJob(ctx, s.store, st.job)
	if err != nil {
		return j, apperr.Internalf(err, "load job")
	}
	return j, nil
}

// reportState says on the PR what its state is now: waiting for a slot,
// or its current job's phase. A superseded (cancelled for a newer head)
// job says nothing: the newer one reports. The caller holds s.mu.
func (s *Service) reportState(ctx context.Context, st *prState) error {
	if s.cfg.Reporter == nil || st.released || !st.open() {
		return nil
	}
	if st.headRefused() {
		j, err := slots.LoadJob(ctx, s.store, st.refused.JobID)
		if err != nil {
			return apperr.Internalf(err, "load job")
		}
		return s.report(ctx, st, phaseRefused, &j)
	}
	if st.job == "" {
		if st.slot == "" && st.waiting {
			return s.report(ctx, st, phaseWaiting, nil)
		}
		return nil
	}
	j, err := s.currentJob(ctx, st)
	if err != nil {
		return err
	}
	if !j.Exists || j.Queued.Kind != events.KindPRDeploy {
		return nil
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
		if st.jobHead != st.pr.Head {
			return nil // superseded: the newer head's job reports
		}
		phase = phaseCancelled
	}
	return s.report(ctx, st, phase, &j)
}

// report edits the PR's one comment (posting it the first time) and sets
// the build status of the head; the caller holds s.mu. What was posted is
// appended (PRCommentPosted): a phase already posted for the same job and
// head is not posted again.
//
// Posting is at-least-once and never duplicates the comment: with no
// comment recorded, the PR's comments are looked through for our marker
// first (FindComment) and one found is adopted and edited; only a look
// that listed them all and found none lets a new comment be posted. A
// failed look posts nothing (the next try looks again).
//
// Every call of one report shares the deadline CallTimeout. An error is
// returned for the driver to retry; a definite refusal (the token, the PR
// gone) is also recorded as PRReportFailed, once.
func (s *Service) report(ctx context.Context, st *prState, phase string, j *events.JobState) error {
	r := s.cfg.Reporter
	if r == nil {
		return nil
	}
	jobID := ""
	if j != nil {
		jobID = j.ID
	}
	last := st.comment
	text, state, url, desc := s.words(st, phase, j)
	// The comment already says this phase: only a build status whose post
	// failed is left to do.
	said := last.CommentID != 0 && last.Phase == phase && last.JobID == jobID && last.Head == st.pr.Head
	if said && (state == "" || last.BuildState == state) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	out := events.PRCommentPosted{CommentID: last.CommentID, Version: last.Version, Phase: phase, JobID: jobID, Head: st.pr.Head}
	if !said {
		if call, err := s.postComment(ctx, st, &out, text); err != nil {
			return s.reportFailed(ctx, st, out, call, err)
		}
	}
	if state != "" {
		// On the target repository, as the comment: the one linked, which
		// the token reads (a fork's may be unreadable to it). Storing a
		// status needs REPO_READ "for the repository that this build
		// status is for" (the 9.4 OpenAPI, POST …/commits/{commitId}/builds).
		if err := r.SetBuildStatus(ctx, st.pr.Repo, st.pr.Head, state, url, desc); err != nil {
			// Record the comment (its status not posted): the retry posts
			// only the status.
			if !said {
				if aerr := s.appendPR(context.WithoutCancel(ctx), st, out); aerr == nil {
					st.comment = out
				}
			}
			return s.reportFailed(ctx, st, out, bitbucket.OpSetBuildStatus, err)
		}
		out.BuildState = state
	}
	if err := s.appendPR(context.WithoutCancel(ctx), st, out); err != nil {
		return fmt.Errorf("comment posted but not recorded (its marker finds it again): %w", err)
	}
	st.comment = out
	return nil
}

// postComment edits the recorded comment, or the one carrying the marker,
// or posts a new one; out gets its id and version. call names the call
// that failed.
func (s *Service) postComment(ctx context.Context, st *prState, out *events.PRCommentPosted, text string) (string, error) {
	r := s.cfg.Reporter
	repo, pr := st.pr.Repo, st.pr.ID
	if out.CommentID != 0 {
		v, call, err := s.editComment(ctx, st, out.CommentID, out.Version, text)
		if !errors.Is(err, ErrCommentGone) {
			out.Version = v
			return call, err
		}
		out.CommentID = 0 // deleted by a person: look again, then post anew
	}
	id, version, found, err := r.FindComment(ctx, repo, pr, Marker(st.stream))
	if err != nil {
		return bitbucket.OpPRActivities, err
	}
	if found {
		v, call, err := s.editComment(ctx, st, id, version, text)
		out.CommentID, out.Version = id, v
		return call, err
	}
	out.CommentID, out.Version, err = r.AddComment(ctx, repo, pr, text)
	return bitbucket.OpAddComment, err
}

// editComment edits at version; a stale version (a person edited the
// comment, or an edit whose record was lost) is read back and the edit
// repeated once at the current one.
func (s *Service) editComment(ctx context.Context, st *prState, id int64, version int, text string) (int, string, error) {
	r := s.cfg.Reporter
	v, err := r.EditComment(ctx, st.pr.Repo, st.pr.ID, id, version, text)
	if errors.Is(err, ErrStaleVersion) {
		if version, err = r.CommentVersion(ctx, st.pr.Repo, st.pr.ID, id); err != nil {
			return 0, bitbucket.OpGetComment, err
		}
		v, err = r.EditComment(ctx, st.pr.Repo, st.pr.ID, id, version, text)
	}
	return v, bitbucket.OpEditComment, err
}

// Definite reports whether err is a refusal that trying again will not
// change (the token refused, the PR gone, a request Bitbucket will not
// take): recorded and not retried on a timer. Anything else — a 5xx, a
// reset, no answer in time, a proxy's 404 — may pass.
func Definite(err error) bool {
	pe, ok := providers.AsError(err)
	if !ok {
		return false
	}
	switch pe.Code {
	case providers.CodeUnauthorized, providers.CodeForbidden, providers.CodeNotFound, providers.CodeInvalid, providers.CodeUnprocessable:
		return true
	}
	return false
}

// reportFailed logs a failed post and, for a definite refusal, records it
// once (PRReportFailed) with a reason that names what to fix. It returns
// err, wrapped with that reason.
func (s *Service) reportFailed(ctx context.Context, st *prState, out events.PRCommentPosted, call string, err error) error {
	why := reason(err)
	s.log.Warn("pull requests: not posted on the pull request", "pr", st.stream, "phase", out.Phase, "call", call, "err", why)
	if !Definite(err) {
		return fmt.Errorf("%s: %s", call, why)
	}
	pe, _ := providers.AsError(err)
	f := events.PRReportFailed{Phase: out.Phase, JobID: out.JobID, Head: out.Head, Call: call, Code: string(pe.Code), Reason: why}
	if lf := st.failed; lf.Phase != f.Phase || lf.JobID != f.JobID || lf.Head != f.Head || lf.Call != f.Call || lf.Code != f.Code {
		if aerr := s.appendPR(context.WithoutCancel(ctx), st, f); aerr == nil {
			st.failed = f
		}
	}
	return &definiteError{fmt.Errorf("%s: %s", call, why)}
}

// definiteError marks an error the driver does not retry on a timer.
type definiteError struct{ error }

func (e *definiteError) Unwrap() error { return e.error }

// reason is a failure's reason as a person fixing it needs it: a refused
// token names the setting.
func reason(err error) string {
	pe, ok := providers.AsError(err)
	if !ok {
		return err.Error()
	}
	switch pe.Code {
	case providers.CodeUnauthorized:
		return "Bitbucket refused the token (--bitbucket-token): expired, revoked, or without Repository read on the pull request's repository: " + pe.Error()
	case providers.CodeForbidden:
		return "Bitbucket forbids this call to the token (--bitbucket-token): " + pe.Error()
	}
	return pe.Error()
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
			if why == "" {
				// A timeout or an abandoned attempt has no error of its own.
				why = "the job " + strings.ReplaceAll(j.Status, "_", " ")
				if j.InFlight != "" {
					why += " during " + j.InFlight
				}
			}
		}
		text = fmt.Sprintf("Slotkeeper: deploying %s on slot **%s** failed: %s", head, st.slot, why)
		state, desc = "FAILED", clip("failed: "+why, 250)
	case phaseRefused:
		rf := st.refused
		text = fmt.Sprintf("Slotkeeper: cannot fetch %s from %s, the repository this pull request's branch lives in: %s\n\n"+
			"Nothing of it was deployed, and slot **%s** went back to the pool. For a preview, let Slotkeeper's Bitbucket user (its token) read %s "+
			"— or push the branch to %s — then push a new commit.", head, rf.Source, rf.Reason, rf.Slot, rf.Source, st.pr.Repo)
		state, desc = "FAILED", clip("cannot fetch the head from "+rf.Source.String(), 250)
	case phaseCancelled:
		why := "cancelled"
		if j != nil && j.LastError != "" {
			why = j.LastError
		}
		// FAILED, not CANCELLED: CANCELLED is in the 9.4 OpenAPI's enum
		// but not in older Data Center releases'.
		text = fmt.Sprintf("Slotkeeper: deploying %s on slot **%s** was cancelled: %s", head, st.slot, why)
		state, desc = "FAILED", clip("cancelled: "+why, 250)
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
	text += "\n\n" + Marker(st.stream)
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
	if pe, ok := providers.AsError(err); ok && pe.Code == providers.CodeNotFound && strings.Contains(pe.Message, "NoSuchComment") {
		// Bitbucket's own words that the comment is gone (a proxy's 404 is
		// CodeForeign and says nothing).
		return 0, fmt.Errorf("%w: %v", ErrCommentGone, err)
	}
	return c.Version, err
}

// FindComment implements Reporter.
func (b BitbucketReporter) FindComment(ctx context.Context, repo events.RepoRef, pr int64, marker string) (int64, int, bool, error) {
	c, found, err := b.Client.FindComment(ctx, repo.Project, repo.Slug, pr, func(text string) bool { return hasMarker(text, marker) })
	return c.ID, c.Version, found, err
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
