package events

import (
	"regexp"
	"strconv"
	"strings"
)

// The pull-request flow (issue 34, docs/pull-requests.md): an application
// repository linked to the pool, Bitbucket's webhook deliveries about its
// pull requests, and the pr_deploy job that puts a PR's head on its slot.

// PRReposStream is the one stream of the linked repositories: every link and
// unlink is appended with its expected revision, so a repository is linked
// at most once.
const PRReposStream = "pr-repos"

// PRStreamPrefix starts each pull request's stream, PRStream.
const PRStreamPrefix = "pr-"

// PRStream names the stream of pull request id of repo: what Bitbucket said
// about it (each accepted delivery) and what Slotkeeper did about it (the
// slot it took, the jobs it queued, the comment it posted).
func PRStream(repo RepoRef, id int64) string {
	return PRStreamPrefix + strings.ToUpper(repo.Project) + "-" + repo.Slug + "-" + strconv.FormatInt(id, 10)
}

// KindPRDeploy pushes a pull request's head commit into its slot's
// repository and deploys it until Coolify reports it running.
const KindPRDeploy = "pr_deploy"

// StepPushPRHead is pr_deploy's first step: the PR's head, fetched from the
// PR's repository, force-pushed (with a lease) over the slot branch, and
// read back.
const StepPushPRHead = "push_pr_head"

// CodePRSourceUnreadable is the code of a push_pr_head that could not fetch
// the PR's head from its source repository (the fork, for a PR from a fork):
// the token was refused (401, 403) or the repository or branch is not there
// for it (404: deleted, or hidden from the token). Trying again does not
// help until someone acts (StepFailed.ErrorCode, PRSourceRefused.Code).
const CodePRSourceUnreadable = FailurePRSourceUnreadable

// personalProjectRe: a personal project's key is "~" and its owner's user
// slug ("the user's slug prefixed by tilde as the project key", Atlassian
// KB "Personal projects in Bitbucket Server",
// confluence.atlassian.com/bitbucketserverkb/personal-projects-in-bitbucket-server-1072204133.html;
// project type PERSONAL in the 9.4 OpenAPI's RestProject). Slug characters
// are held to letters, digits, '.', '_' and '-', no "..": the key ends up in
// a clone URL's path.
var personalProjectRe = regexp.MustCompile(`^~[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// IsPersonalProject reports whether key is a well-formed personal project
// key (~<user slug>): where a fork in someone's own space lives.
func IsPersonalProject(key string) bool {
	return personalProjectRe.MatchString(key) && !strings.Contains(key, "..")
}

// PR states, as Bitbucket names them (PullRequest.state).
const (
	PRStateOpen     = "OPEN"
	PRStateMerged   = "MERGED"
	PRStateDeclined = "DECLINED"
	PRStateDeleted  = "DELETED" // pr:deleted; Bitbucket has no such state, the PR is gone
)

// ---- pr-repos ----

// PRRepoLinked links an application repository to the pool: its pull
// requests get slots.
type PRRepoLinked struct {
	Repo RepoRef `json:"repo"`
	By   string  `json:"by"`
}

// PRRepoUnlinked ends a link: deliveries about the repository are ignored
// from then on (PRs already holding a slot keep it until they close).
type PRRepoUnlinked struct {
	Repo RepoRef `json:"repo"`
	By   string  `json:"by"`
}

// ---- pr-<PROJECT>-<slug>-<id> ----

// PullRequest is what a delivery says about a pull request.
type PullRequest struct {
	Repo  RepoRef `json:"repo"`
	ID    int64   `json:"id"`
	Title string  `json:"title,omitempty"`
	State string  `json:"state"`
	// Branch and Head are the PR's source branch (fromRef.displayId) and
	// its commit (fromRef.latestCommit); Source the repository it lives in
	// (a fork's, for a PR from a fork).
	Branch string  `json:"branch"`
	Head   string  `json:"head"`
	Source RepoRef `json:"source"`
	// Author is the author's display name, AuthorSlug their Bitbucket user
	// slug (the stable subject "bitbucket:<slug>").
	Author     string `json:"author,omitempty"`
	AuthorSlug string `json:"author_slug,omitempty"`
	Link       string `json:"link,omitempty"`
}

// PRChanged records one accepted delivery: its request id, event key and
// the pull request as it says it is.
type PRChanged struct {
	RequestID string      `json:"request_id"`
	EventKey  string      `json:"event_key"`
	PR        PullRequest `json:"pr"`
	// BodySHA256 is the hex SHA-256 of the delivery's signed body: the
	// same body under another request id is the same delivery again (the
	// request id is not signed; fifth attack pass). Absent from events
	// recorded before it was added.
	BodySHA256 string `json:"body_sha256,omitempty"`
}

// PRSlotTaken: the PR occupies Slot (for its author).
type PRSlotTaken struct {
	Slot string `json:"slot"`
	// PR is the pull request as it was when it took the slot, for the
	// slot's read model (absent from events recorded before it was added).
	PR *PullRequest `json:"pr,omitempty"`
}

// PRWaiting: no ready slot was free when the PR needed one.
type PRWaiting struct {
	Reason string `json:"reason"`
}

// PRDeployQueued: a pr_deploy job for Head was accepted on the PR's slot.
type PRDeployQueued struct {
	Slot  string `json:"slot"`
	JobID string `json:"job_id"`
	Head  string `json:"head"`
}

// PRSlotReleased: the PR closed and its slot was released (a reset,
// after the grace period); JobID is that reset.
type PRSlotReleased struct {
	Slot  string `json:"slot"`
	JobID string `json:"job_id"`
	// Reason is why an open PR gave its slot back (CodePRSourceUnreadable:
	// its head cannot be fetched); "" when the PR closed.
	Reason string `json:"reason,omitempty"`
}

// PRSourceRefused: the PR's head could not be fetched from its source
// repository (Code CodePRSourceUnreadable; Status git's HTTP status, 401,
// 403 or 404): recorded once per head, after the pr_deploy JobID failed
// so; the PR then gives its slot back (PRSlotReleased with the reason)
// until a new head arrives.
type PRSourceRefused struct {
	Source RepoRef `json:"source"`
	Head   string  `json:"head"`
	JobID  string  `json:"job_id"`
	Slot   string  `json:"slot"`
	Code   string  `json:"code"`
	Status int     `json:"status,omitempty"`
	Reason string  `json:"reason"`
}

// PRCommentPosted records the one comment on the PR (created, or edited in
// place: Version is the one Bitbucket answered, the next edit's lock) and
// the build status last posted with it.
type PRCommentPosted struct {
	CommentID int64  `json:"comment_id"`
	Version   int    `json:"version"`
	Phase     string `json:"phase"` // queued | deploying | ready | failed | waiting
	JobID     string `json:"job_id,omitempty"`
	Head      string `json:"head,omitempty"`
	// BuildState is the build status posted on Head (INPROGRESS,
	// SUCCESSFUL, FAILED), "" when none was.
	BuildState string `json:"build_state,omitempty"`
}

// PRReportFailed: Bitbucket refused a post on the PR for good (the token
// refused, the PR gone): what was not posted and why. Appended once per
// phase, job, head and code; a failure that may pass (5xx, a reset, no
// answer in time) is retried instead and not recorded.
type PRReportFailed struct {
	Phase  string `json:"phase"`
	JobID  string `json:"job_id,omitempty"`
	Head   string `json:"head,omitempty"`
	Call   string `json:"call"`   // e.g. bitbucket.AddComment
	Code   string `json:"code"`   // the provider error's code (unauthorized, not_found, …)
	Reason string `json:"reason"` // never a secret: the provider's message, redacted
}

// ---- job-<id> ----

// PRHeadPushed: the PR's head is the slot branch's commit, read back after
// the push.
type PRHeadPushed struct {
	StepResult
	Repo   RepoRef `json:"repo"`
	Branch string  `json:"branch"`
	Source RepoRef `json:"source"`
	Head   string  `json:"head"`
	OldSHA string  `json:"old_sha"`
}

func (PRRepoLinked) EventType() string    { return "PRRepoLinked" }
func (PRRepoUnlinked) EventType() string  { return "PRRepoUnlinked" }
func (PRChanged) EventType() string       { return "PRChanged" }
func (PRSlotTaken) EventType() string     { return "PRSlotTaken" }
func (PRWaiting) EventType() string       { return "PRWaiting" }
func (PRDeployQueued) EventType() string  { return "PRDeployQueued" }
func (PRSlotReleased) EventType() string  { return "PRSlotReleased" }
func (PRCommentPosted) EventType() string { return "PRCommentPosted" }
func (PRHeadPushed) EventType() string    { return "PRHeadPushed" }
func (PRReportFailed) EventType() string  { return "PRReportFailed" }
func (PRSourceRefused) EventType() string { return "PRSourceRefused" }

func init() {
	constructors["PRRepoLinked"] = decodeAs[PRRepoLinked]
	constructors["PRRepoUnlinked"] = decodeAs[PRRepoUnlinked]
	constructors["PRChanged"] = decodeAs[PRChanged]
	constructors["PRSlotTaken"] = decodeAs[PRSlotTaken]
	constructors["PRWaiting"] = decodeAs[PRWaiting]
	constructors["PRDeployQueued"] = decodeAs[PRDeployQueued]
	constructors["PRSlotReleased"] = decodeAs[PRSlotReleased]
	constructors["PRCommentPosted"] = decodeAs[PRCommentPosted]
	constructors["PRHeadPushed"] = decodeAs[PRHeadPushed]
	constructors["PRReportFailed"] = decodeAs[PRReportFailed]
	constructors["PRSourceRefused"] = decodeAs[PRSourceRefused]
}
