package events

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	fastjson "github.com/segmentio/encoding/json"
)

// Stream name prefixes. A slot's stream is "slot-<name>", a job's "job-<id>".
const (
	SlotStreamPrefix   = "slot-"
	JobStreamPrefix    = "job-"
	NotifyStreamPrefix = "notify-"
	// AuthStreamPrefix starts the streams of backend/auth: AuthUsersStream
	// (accounts, role grants, password changes) and AuthTokensStream (API
	// tokens issued and revoked). Each is one stream, so an append with the
	// expected revision keeps user names and token ids unique.
	AuthStreamPrefix = "auth-"
	AuthUsersStream  = "auth-users"
	AuthTokensStream = "auth-tokens"
	// AuthSessionsStream holds browser sessions (started, coarse activity,
	// ended), so that a restart keeps them and every process sees them.
	// Appended with any revision: sessions have no uniqueness to protect.
	AuthSessionsStream = "auth-sessions"
)

// SlotStream and JobStream name the streams of a slot and a job.
func SlotStream(slot string) string    { return SlotStreamPrefix + slot }
func JobStream(jobID string) string    { return JobStreamPrefix + jobID }
func NotifyStream(jobID string) string { return NotifyStreamPrefix + jobID }

// Resource kinds named in remaining-resource lists.
const (
	ResDatabase    = "database"
	ResApplication = "application"
	ResEnvVar      = "env_var"
	ResVolume      = "volume"
	// ResDockerVolume is a Docker volume (id = its name) left on the
	// Coolify server after its mount definition was removed; Name says
	// where. Coolify's API cannot delete it (issue 22).
	ResDockerVolume = "docker_volume"
	ResRepository   = "repository"
	ResProject      = "project"
)

// Resource is one outside thing a slot owns. Its id is kept until its deletion
// is confirmed (DESIGN.md invariant 5).
type Resource struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// NameCode and NameArgs are a Name the server wrote as a description
	// (Name*), not a provider's own name, as a code and its parts, which the
	// dashboard words in the reader's language (issue 26).
	NameCode string   `json:"name_code,omitempty"`
	NameArgs NameArgs `json:"name_args,omitzero"`
	// Cleanup, for what a delete left on an unreachable server (issue
	// 32), is the command that removes it there.
	Cleanup string `json:"cleanup,omitempty"`
}

// The codes of a described resource name (Resource.NameCode).
const (
	NameListEnvs     = "list_env_vars" // listing an application's env vars
	NameListStorages = "list_storages" // listing an application's persistent volumes
	NameBranchReset  = "branch_reset"  // args branch, template: a repository branch reset to the template
	NameAppServer    = "app_server"    // args app: the server a Coolify application runs on
	NameAppEnvVars   = "app_env_vars"  // a reset plan's "env vars of the application" (issue 35)
	NameAppVolumes   = "app_volumes"   // a reset plan's "persistent volumes of the application"
	// The calls of a ready reset's steps (issue 35: they reached Korean pages in English).
	NameListTemplateEnvs = "list_template_env_vars" // listing the template application's env vars
	NameReadInternalURL  = "read_internal_url"      // reading the new database's internal URL
	NameDeploy           = "deploy"                 // starting a deployment of the application
	NameWaitDeployment   = "wait_deployment"        // args deployment: waiting for it to finish and the application running
	// The calls of issue 32's checks and waits.
	NameCheckReset      = "check_reset"      // the preflight: checking what the reset needs
	NameServerReachable = "server_reachable" // args target: is the server of the deleted resource reachable
	NameWaitDatabase    = "wait_database"    // waiting for the new database to be running
	NameLookDeployment  = "look_deployment"  // args deployment: looking at the deployment an earlier attempt waited for
	NameListDeployments = "list_deployments" // listing the application's deployments
	NameReadEngine      = "read_engine"      // reading the database's engine before its delete
)

// NameArgs are the parts of a described name (a struct, not a map, so a
// Resource stays comparable).
type NameArgs struct {
	Branch   string `json:"branch,omitempty"`
	Template string `json:"template,omitempty"`
	App      string `json:"app,omitempty"`
	// Deployment is a Coolify deployment uuid (NameWaitDeployment).
	Deployment string `json:"deployment,omitempty"`
	// Target is the deleted resource's id (NameServerReachable).
	Target string `json:"target,omitempty"`
}

// RepoRef names a Bitbucket repository.
type RepoRef struct {
	Project string `json:"project"`
	Slug    string `json:"slug"`
}

func (r RepoRef) String() string { return r.Project + "/" + r.Slug }

// Payload is implemented by every event of the catalogue.
type Payload interface {
	EventType() string
}

// ---- slot-<name> ----

// SlotRegistered imports an existing slot into Slotkeeper.
type SlotRegistered struct {
	Slot        string  `json:"slot"`
	ProjectUUID string  `json:"project_uuid"`
	AppUUID     string  `json:"app_uuid"`
	DBUUID      string  `json:"db_uuid"`
	Repo        RepoRef `json:"repo"`
	// TemplateRepo and TemplateRef are what a reset force-pushes into Repo.
	TemplateRepo RepoRef `json:"template_repo"`
	TemplateRef  string  `json:"template_ref"`
	// Branch is the slot repo's branch a reset overwrites (default "main").
	Branch string `json:"branch,omitempty"`
	// Template is what a reset brings the slot back to (issue 23): a fresh
	// database, the template's env vars, the template deployed and healthy.
	// Nil in registrations without one: their reset deletes and
	// force-pushes only, and the slot is shown as not ready.
	Template *SlotTemplate `json:"template,omitempty"`
}

// SlotOccupied hands a vacant slot to a person until a deadline. By is the
// occupant's display name; ByID its stable subject id ("user:<id>",
// "token:<id>"), which is what ownership compares. Events from before ByID
// (or seeded for a name with no account) have none: such an occupant is
// the account of that name only, never a token (docs/auth.md).
type SlotOccupied struct {
	Slot  string    `json:"slot"`
	By    string    `json:"by"`
	ByID  string    `json:"by_id,omitempty"`
	Until time.Time `json:"until"`
}

// OccupancyExtended moves an occupied slot's deadline. Extend only moves it
// later; the explicit "set an earlier deadline" command moves it earlier and
// says so with Earlier, so the audit feed can tell the two apart.
type OccupancyExtended struct {
	Slot    string    `json:"slot"`
	By      string    `json:"by"`
	Until   time.Time `json:"until"`
	Earlier bool      `json:"earlier,omitempty"`
}

// JobAccepted accepts a job: it is the slot's lock and the job's place in
// the queue at once, and the only write of an acceptance. Only that job's
// terminal event (followed by JobReleased) frees it.
//
// Since the one-append acceptance it carries the job (Run, Job; for a
// resume Run, By, FromStep), and the job stream's first event of the run
// (JobQueued, JobResumed) is a copy of it with the same metadata, written
// once by whoever comes first: the command just after, the claim, or a
// cancel (docs/events.md, "Upcasting"). In older logs Run is 0, Job is nil,
// and the command wrote JobQueued or JobResumed itself.
type JobAccepted struct {
	Slot  string `json:"slot"`
	JobID string `json:"job_id"`
	Kind  string `json:"kind"`
	// Resumed is true when the lock is taken again to resume a job.
	Resumed bool `json:"resumed,omitempty"`
	// Run is the run of the job this lock is for: 1, then +1 per resume.
	Run int `json:"run,omitempty"`
	// Job is the whole job (first run only).
	Job *JobQueued `json:"job,omitempty"`
	// By and FromStep are the resume's (JobResumed's fields).
	By       string `json:"by,omitempty"`
	FromStep string `json:"from_step,omitempty"`
}

// JobReleased frees the slot's lock after the job's terminal event.
type JobReleased struct {
	Slot    string `json:"slot"`
	JobID   string `json:"job_id"`
	Outcome string `json:"outcome"` // succeeded | failed | timed_out | cancelled | abandoned
}

// SlotVacated ends occupancy after a successful reset.
type SlotVacated struct {
	Slot  string `json:"slot"`
	JobID string `json:"job_id"`
}

// TeardownIncomplete records what a teardown could not confirm deleted.
type TeardownIncomplete struct {
	Slot      string     `json:"slot"`
	JobID     string     `json:"job_id"`
	Remaining []Resource `json:"remaining"`
}

// SlotRetired ends a slot whose every resource is confirmed gone.
type SlotRetired struct {
	Slot  string `json:"slot"`
	JobID string `json:"job_id"`
}

// SlotPromoted records the new repository a slot's code was promoted to.
type SlotPromoted struct {
	Slot    string  `json:"slot"`
	JobID   string  `json:"job_id"`
	NewRepo RepoRef `json:"new_repo"`
	SHA     string  `json:"sha,omitempty"`
}

// ---- job-<id> ----

// JobQueued creates a job. NotBefore is the end of the grace period.
type JobQueued struct {
	JobID       string            `json:"job_id"`
	Kind        string            `json:"kind"`
	Slot        string            `json:"slot"`
	Params      map[string]string `json:"params,omitempty"`
	RequestedBy string            `json:"requested_by"`
	// Reason is why it was requested, when the requester had to say so
	// (an operator releasing someone else's slot).
	Reason    string    `json:"reason,omitempty"`
	NotBefore time.Time `json:"not_before"`
	Steps     []string  `json:"steps"`
	// Resources is the plan: what the job will act on, with ids.
	Resources []Resource `json:"resources,omitempty"`
}

// JobClaimed starts an attempt: the worker owns the job until LeaseUntil.
type JobClaimed struct {
	JobID      string    `json:"job_id"`
	Worker     string    `json:"worker"`
	Attempt    int       `json:"attempt"`
	LeaseUntil time.Time `json:"lease_until"`
}

// LeaseRenewed extends the running attempt's lease.
type LeaseRenewed struct {
	JobID      string    `json:"job_id"`
	Attempt    int       `json:"attempt"`
	LeaseUntil time.Time `json:"lease_until"`
}

// StepStarted is appended before every outside call of a step.
type StepStarted struct {
	JobID    string    `json:"job_id"`
	Step     string    `json:"step"`
	Attempt  int       `json:"attempt"`
	Resource *Resource `json:"resource,omitempty"`
	// Verify is true when a resumed attempt first checks an uncertain step.
	Verify bool `json:"verify,omitempty"`
	// ExpectedSHA is the lease of a force push (the remote sha before it).
	ExpectedSHA string `json:"expected_sha,omitempty"`
}

// StepResult is the common part of every step-result event.
type StepResult struct {
	JobID   string `json:"job_id"`
	Step    string `json:"step"`
	Attempt int    `json:"attempt"`
	// AlreadyAbsent is true when the provider said the resource did not
	// exist (404 on delete, 204 from Bitbucket) or a verify found it gone.
	AlreadyAbsent bool `json:"already_absent,omitempty"`
}

// DBDeleted: the slot's database is confirmed gone.
type DBDeleted struct {
	StepResult
	DBUUID string `json:"db_uuid"`
	// Engine and Image are what a reset read from Coolify before the
	// delete (database_type without "standalone-", image), so create_db
	// can make the same again ("same as before"). Empty in older logs.
	Engine string `json:"engine,omitempty"`
	Image  string `json:"image,omitempty"`
	// Left is what the delete left on an unreachable server (issue 32).
	Left []LeftOnServer `json:"left_on_server,omitempty"`
}

// EnvVarsDeleted: every env var of the app is confirmed gone.
type EnvVarsDeleted struct {
	StepResult
	AppUUID string   `json:"app_uuid"`
	EnvIDs  []string `json:"env_ids,omitempty"`
}

// VolumeDeleted: the app's persistent storages are confirmed gone. No
// longer written (issue 22): Coolify's storage delete removes only the
// mount definition, never the Docker volume's data, so this name claimed
// too much. Old logs still hold it and it still decodes; delete_volumes now
// records VolumeMountsRemoved.
type VolumeDeleted struct {
	StepResult
	AppUUID    string   `json:"app_uuid"`
	StorageIDs []string `json:"storage_ids,omitempty"`
}

// VolumeMountsRemoved: delete_volumes removed the mount definitions of the
// app's persistent storages (StorageIDs, confirmed by a listing without
// them). It says nothing more: Coolify's DELETE
// /applications/{uuid}/storages/{storage_uuid} runs no `docker volume rm`,
// so each Docker volume and its data stay on the server (Left). The read
// models track each one as a remaining docker_volume resource. Added in
// issue 22.
type VolumeMountsRemoved struct {
	StepResult
	AppUUID    string       `json:"app_uuid"`
	StorageIDs []string     `json:"storage_ids,omitempty"`
	Left       []LeftVolume `json:"left_on_server"`
}

// LeftVolume is data a step could not delete through the API and left on
// the server, with the exact manual clean-up.
type LeftVolume struct {
	StorageUUID string `json:"storage_uuid"`
	// Volume is the Docker volume's name; HostPath, when set, says the
	// storage bind-mounted that host directory instead (no volume).
	Volume   string `json:"volume,omitempty"`
	HostPath string `json:"host_path,omitempty"`
	// MountPath is where the storage was mounted (a ready reset mounts a
	// new, empty volume there; issue 23). Empty in older logs.
	MountPath string `json:"mount_path,omitempty"`
	// Server names the server holding it.
	Server string `json:"server"`
	// Cleanup is the command to run there, e.g. "docker volume rm data-x".
	Cleanup string `json:"cleanup"`
}

// AppServer names the server of a Coolify application where the API does
// not say which one it is (a storage's JSON names no server).
func AppServer(appUUID string) string { return "the server of Coolify application " + appUUID }

// AppServerResource is a resource left on the server of a Coolify
// application, named by AppServer.
func AppServerResource(kind, id, appUUID string) Resource {
	return Resource{Kind: kind, ID: id, Name: AppServer(appUUID), NameCode: NameAppServer, NameArgs: NameArgs{App: appUUID}}
}

// Resource is how a left volume is tracked among a slot's resources.
func (l LeftVolume) Resource() Resource {
	id := l.Volume
	if id == "" {
		id = l.HostPath
	}
	// A server named by AppServer is said by its code, so the dashboard
	// words it in the reader's language (issue 35); another name stays data.
	if app, ok := strings.CutPrefix(l.Server, AppServer("")); ok && app != "" {
		return AppServerResource(ResDockerVolume, id, app)
	}
	return Resource{Kind: ResDockerVolume, ID: id, Name: l.Server}
}

// ForcePushed: the template was pushed over the slot repo with a lease.
type ForcePushed struct {
	StepResult
	Repo   RepoRef `json:"repo"`
	OldSHA string  `json:"old_sha"`
	NewSHA string  `json:"new_sha"`
}

// AppDeleted: the slot's application is confirmed gone.
type AppDeleted struct {
	StepResult
	AppUUID string `json:"app_uuid"`
	// Left is what the delete left on an unreachable server (issue 32).
	Left []LeftOnServer `json:"left_on_server,omitempty"`
}

// RepoDeleted: the slot's repository is confirmed gone.
type RepoDeleted struct {
	StepResult
	Repo RepoRef `json:"repo"`
}

// ProjectDeleted: the slot's PaaS project is confirmed gone.
type ProjectDeleted struct {
	StepResult
	ProjectUUID string `json:"project_uuid"`
}

// RepoCreated: a 201 created the promote target.
type RepoCreated struct {
	StepResult
	Repo RepoRef `json:"repo"`
}

// CodePushed: the slot's code was pushed (never forced) to the new repo.
type CodePushed struct {
	StepResult
	Repo RepoRef `json:"repo"`
	SHA  string  `json:"sha"`
}

// StepSucceeded records a step with no resource of its own (vacate, retire,
// lookup, record) as done.
type StepSucceeded struct {
	StepResult
	Detail string `json:"detail,omitempty"`
	// DetailCode is Detail as a code (Detail*) the dashboard words in the
	// reader's language (issue 26); absent in events written before it.
	DetailCode string `json:"detail_code,omitempty"`
	// DetailArgs are DetailCode's parts (ids and names, as data), so the
	// dashboard words a detail with parts in the reader's language too
	// (issue 35: the deploy step's no-deploy detail reached Korean pages in English).
	DetailArgs map[string]string `json:"detail_args,omitempty"`
}

// The codes of the server's own step details (StepSucceeded.DetailCode,
// projections.StepView.DetailCode).
const (
	DetailAlreadyAbsent   = "already_absent"    // the resource was gone before the step deleted it
	DetailVacateOnSuccess = "vacate_on_success" // the slot is vacated when the job's success is recorded
	DetailPreflightPassed = "preflight_passed"  // every check of the reset's preflight passed (issue 32); Detail lists them
	// The job view's own stories of a step result (projections.StepView
	// DetailCode and DetailArgs, issue 35), each beside its English.
	DetailRowGoneOnly     = "row_gone_only"     // a Coolify delete confirmed by its record's 404 only (projections.RowGoneOnly)
	DetailVerifying       = "verifying"         // a resumed attempt first checks an uncertain step
	DetailListed          = "listed"            // args count, resource_kind, names: what the step found to delete
	DetailNothingToDelete = "nothing_to_delete" // the step listed nothing to delete
	DetailDeleting        = "deleting"          // args resource_kind, id, accepted_at: a delete the provider accepted, not confirmed yet
	DetailForcePushed     = "force_pushed"      // args repo, old, new: the template force-pushed
	DetailCodePushed      = "code_pushed"       // args repo, sha
	DetailPRHeadPushed    = "pr_head_pushed"    // args sha, from, repo, branch, old: a pull request's head on the slot branch
	DetailRepoCreated     = "repo_created"      // args repo
	DetailDBCreated       = "db_created"        // args engine, name, id
	DetailDBFound         = "db_found"          // args engine, name, id: found what an uncertain create made
	DetailEnvRestored     = "env_restored"      // args keys, from (may be empty): env vars exactly the template's
	DetailVolumesCreated  = "volumes_created"   // args count, volumes, skipped (may be empty)
	DetailAppDeployed     = "app_deployed"      // args deployment, status, commit, fqdn (the last two may be empty)
	DetailMountsRemoved   = "mounts_removed"    // args count, app; what it left is StepView.Left
	// The StepSucceeded stories with parts (issue 35): each its English
	// in Detail beside it, for older dashboards and the log.
	DetailNoDeploy         = "no_deploy"          // the template declares no deploy (and the slot has no database to wait for)
	DetailNoDeployDB       = "no_deploy_db"       // args db, db_status: no deploy declared; the new database is db_status
	DetailRetireOnSuccess  = "retire_on_success"  // every resource is confirmed gone; retired when the success is recorded
	DetailPromoteOnSuccess = "promote_on_success" // args repo: recorded on the slot when the success is recorded
	DetailRepoAbsent       = "repo_absent"        // args repo: the promote's target does not exist yet
	DetailAdoptedUncertain = "adopted_uncertain"  // args repo: exists (same project and name, empty) after this job's uncertain create
	DetailAdoptedConflict  = "adopted_conflict"   // args repo: answered 409 to this attempt's create; the earlier attempt's create landed
	DetailResourceExists   = "resource_exists"    // args resource_kind, id: the resource to adopt exists at the provider
	DetailResourceAdopted  = "resource_adopted"   // args resource_kind, id, slot: the resource is now tracked by the slot
)

// ResourcesListed: a step listed the resources it is about to delete (an
// app's env vars, its persistent volumes). They belong to the slot from here
// until a confirmed deletion (EnvVarsDeleted, VolumeDeleted, AppDeleted)
// removes them, so a job that stops half way never leaves one untracked.
// Added in issue 12 (older logs simply do not have it).
type ResourcesListed struct {
	JobID     string     `json:"job_id"`
	Step      string     `json:"step"`
	Attempt   int        `json:"attempt"`
	Resources []Resource `json:"resources"`
}

// DeleteAccepted: the provider accepted a delete that completes later
// (Coolify queued the deletion, Bitbucket answered 202) and it is not
// confirmed yet. Appended before the confirming GETs; the confirmation is
// the step's result (DBDeleted, AppDeleted, RepoDeleted). The event's time is
// when the delete was accepted. Added in issue 12.
type DeleteAccepted struct {
	JobID      string   `json:"job_id"`
	Step       string   `json:"step"`
	Attempt    int      `json:"attempt"`
	Resource   Resource `json:"resource"`
	HTTPStatus int      `json:"http_status,omitempty"`
}

// StepFailed records a step's failure. Uncertain is true when the outside
// call may or may not have taken effect (timeout, reset, 5xx after sending),
// and when a verifying run failed: what an earlier attempt's call did is
// still unknown (docs/jobs.md, "Resume verification").
type StepFailed struct {
	JobID      string `json:"job_id"`
	Step       string `json:"step"`
	Attempt    int    `json:"attempt"`
	Error      string `json:"error"`
	HTTPStatus int    `json:"http_status,omitempty"`
	Retryable  bool   `json:"retryable"`
	Uncertain  bool   `json:"uncertain,omitempty"`
	// ErrorCode is the failure as a code (Failure*) and ErrorArgs its
	// parts (ids, names, a provider's Code; never a secret): the dashboard
	// words the failure in the reader's language from them, and keeps
	// Error — the provider's and the engine's own English — as a secondary
	// detail. Empty in events written before the codes.
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
}

// The codes of a step's failure (StepFailed.ErrorCode, JobFailed.ReasonCode),
// each with its parts (ErrorArgs).
const (
	FailureProvider      = "provider"        // args provider (coolify, bitbucket, git), problem (providers.Code), target: the provider's answer; the status is StepFailed.HTTPStatus
	FailureInternal      = "internal"        // an error that is not a provider's answer: whether the call took effect is unknown
	FailureCheck         = "check"           // the engine's own check after a call found the provider not as it should be (Error says what)
	FailurePreflight     = "preflight"       // the reset's preflight found a check that fails: nothing was deleted
	FailureMountReadOnly = "mount_read_only" // args volume, app: Coolify refuses to remove a mount declared by compose or with backups
	FailureManualCleanup = "manual_cleanup"  // volumes left on the server need a manual clean-up before the slot retires
	FailureSensitive     = "sensitive"       // args target: Coolify shows the value only to a token with read:sensitive
	FailureEnvLocked     = "env_locked"      // args app, keys: the template application has locked env vars
	FailureEngineUnknown = "engine_unknown"  // the deleted database's engine is unknown: declare db_engine in the template
	FailureNotReady      = "not_ready"       // args bound: the wait on the provider reached its bound
	FailureDeploySkipped = "deploy_skipped"  // args app: Coolify skipped the deploy and lists no deployment of it
	FailureDeployFailed  = "deploy_failed"   // args deployment, app, provider_status: the deployment ended without success
	FailureAppUnhealthy  = "app_unhealthy"   // args app, provider_status: not healthy after its deployment finished
	FailureDBStartFailed = "db_start_failed" // args db, provider_status: the new database did not start
	// args source, branch: push_pr_head could not fetch the PR's head from
	// its source repository (a fork's); the status is StepFailed.HTTPStatus.
	FailurePRSourceUnreadable = "pr_source_unreadable"

	// A webhook attempt's failure (NotificationFailed.ErrorCode); the
	// status is NotificationFailed.Status.
	FailureWebhookURL      = "webhook_url"       // the webhook URL is not one a request can be made to
	FailureWebhookNoAnswer = "webhook_no_answer" // the connection failed or was cut before an answer
	FailureWebhookTimeout  = "webhook_timeout"   // args bound: no answer within the attempt's bound
	FailureWebhookRedirect = "webhook_redirect"  // a 3xx: not followed (it would re-post the body, and the secret URL as Referer, elsewhere)
	FailureWebhookRefused  = "webhook_refused"   // a 4xx: the receiver refused the message; not retried (but 408 and 429)
	FailureWebhookReceiver = "webhook_receiver"  // a 5xx, 408 or 429: the receiver's own trouble; retried

	// A reconcile run's failure (ReconcileFinished.ErrorCode).
	FailureReconcileAbandoned = "reconcile_abandoned" // the run's process stopped before it finished; the next run closed it
	FailureReconcileTimeout   = "reconcile_timeout"   // args bound: the run took longer than its bound
	FailureReconcileStopped   = "reconcile_stopped"   // the server stopped during the run
	FailureReconcileTracked   = "reconcile_tracked"   // the slots' tracked resources could not be read from the event log
)

// JobTimedOut ends an attempt at its deadline. The in-flight call was aborted.
type JobTimedOut struct {
	JobID          string     `json:"job_id"`
	Attempt        int        `json:"attempt"`
	UncertainStep  string     `json:"uncertain_step,omitempty"`
	Deadline       string     `json:"deadline"` // "step" or "job"
	CompletedSteps []string   `json:"completed_steps,omitempty"`
	Remaining      []Resource `json:"remaining,omitempty"`
}

// JobCancelled ends a job at a person's request.
type JobCancelled struct {
	JobID          string     `json:"job_id"`
	By             string     `json:"by"`
	Attempt        int        `json:"attempt,omitempty"`
	UncertainStep  string     `json:"uncertain_step,omitempty"`
	CompletedSteps []string   `json:"completed_steps,omitempty"`
	Remaining      []Resource `json:"remaining,omitempty"`
}

// JobAbandoned is appended by the rescuer when an attempt's lease expired.
type JobAbandoned struct {
	JobID          string     `json:"job_id"`
	Attempt        int        `json:"attempt"`
	Worker         string     `json:"worker"`
	LeaseUntil     time.Time  `json:"lease_until"`
	UncertainStep  string     `json:"uncertain_step,omitempty"`
	CompletedSteps []string   `json:"completed_steps,omitempty"`
	Remaining      []Resource `json:"remaining,omitempty"`
}

// JobSucceeded: every step is confirmed done.
type JobSucceeded struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
}

// JobFailed ends a job that cannot go on without a person.
type JobFailed struct {
	JobID   string `json:"job_id"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
	// ReasonCode and ReasonArgs are the failed step's ErrorCode and
	// ErrorArgs (StepFailed), Reason's words in any language.
	ReasonCode     string            `json:"reason_code,omitempty"`
	ReasonArgs     map[string]string `json:"reason_args,omitempty"`
	FailedStep     string            `json:"failed_step,omitempty"`
	CompletedSteps []string          `json:"completed_steps"`
	Remaining      []Resource        `json:"remaining,omitempty"`
}

// JobResumed re-queues a failed, timed-out or abandoned job; the next attempt
// starts at its first unconfirmed step, verifying an uncertain one first.
type JobResumed struct {
	JobID    string `json:"job_id"`
	By       string `json:"by"`
	FromStep string `json:"from_step"`
}

// ---- notify-<job id> ----

// NotificationSent is the old (at most once) claim of a job's k-th
// notification, appended before the POST. It is no longer written; it still
// decodes, and the notifier treats the k-th one as the k-th terminal event's
// delivery being done.
type NotificationSent struct {
	JobID   string `json:"job_id"`
	Outcome string `json:"outcome"`
	Status  int    `json:"status"`
}

// ---- auth-users, auth-tokens, auth-sessions (backend/auth) ----
//
// No secret is ever in an event: passwords are kept as argon2id hashes
// (bcrypt before argon2id), API tokens and session secrets as their SHA-256.

// UserCreated adds an account. Source is "local" (signs in with a
// password) or "oidc" (created at the first sign-in through the identity
// provider; Issuer and Subject name it there).
type UserCreated struct {
	UserID       string `json:"user_id"`
	Name         string `json:"name"`
	Role         string `json:"role"`
	Source       string `json:"source"`
	PasswordHash string `json:"password_hash,omitempty"`
	Issuer       string `json:"issuer,omitempty"`
	Subject      string `json:"subject,omitempty"`
}

// UserRoleGranted changes an account's role.
type UserRoleGranted struct {
	UserID string `json:"user_id"`
	Role   string `json:"role"`
}

// PasswordChanged replaces a local account's password hash.
type PasswordChanged struct {
	UserID       string `json:"user_id"`
	PasswordHash string `json:"password_hash"`
}

// TokenIssued creates an API token (Authorization: Bearer). Hash is the
// hex SHA-256 of the token; the token itself was shown once and is gone.
type TokenIssued struct {
	TokenID   string    `json:"token_id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"`
	Hash      string    `json:"hash"`
	ExpiresAt time.Time `json:"expires_at"`
}

// TokenRevoked ends an API token before its expiry.
type TokenRevoked struct {
	TokenID string `json:"token_id"`
}

// SessionStarted is a browser sign-in (stream auth-sessions). Hash is the
// hex SHA-256 of the session secret (the cookie); the secret itself is
// never stored. SessionID is a public id naming the session in later
// events. Method is password, oidc or demo. The metadata's time is when it
// started; ExpiresAt is its absolute expiry.
type SessionStarted struct {
	SessionID string    `json:"session_id"`
	UserID    string    `json:"user_id"`
	Hash      string    `json:"hash"`
	Method    string    `json:"method"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SessionActive records, coarsely (at most once per recording interval per
// session), that a session was used at the metadata's time, so that its
// idle expiry survives a restart and holds in every process.
type SessionActive struct {
	SessionID string `json:"session_id"`
}

// SessionEnded ends a session before its expiry. Reason is logout,
// rotated (a new sign-in from the same browser) or password_changed.
type SessionEnded struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason"`
}

// NotificationAttempted is appended before each POST of a delivery (one
// terminal job event's message). DeliveryID is stable across retries and
// restarts (the terminal event's id); receivers deduplicate on it. Until is
// when the POST gives up at the latest: an attempt without an outcome past
// it (a crash, a lost append) is retried.
type NotificationAttempted struct {
	JobID      string    `json:"job_id"`
	DeliveryID string    `json:"delivery_id"`
	Outcome    string    `json:"outcome"`
	Attempt    int       `json:"attempt"`
	Until      time.Time `json:"until"`
}

// NotificationDelivered records a 2xx answer to an attempt.
type NotificationDelivered struct {
	JobID      string `json:"job_id"`
	DeliveryID string `json:"delivery_id"`
	Attempt    int    `json:"attempt"`
	Status     int    `json:"status"`
}

// NotificationFailed records an attempt that got no 2xx (Status 0: no
// answer; Error says why, never with the webhook URL). Final: no more
// attempts (a 4xx other than 408/429, a redirect, or the attempts are used
// up); otherwise the next one follows after RetryAt.
type NotificationFailed struct {
	JobID      string    `json:"job_id"`
	DeliveryID string    `json:"delivery_id"`
	Attempt    int       `json:"attempt"`
	Status     int       `json:"status"`
	Error      string    `json:"error"`
	Final      bool      `json:"final"`
	RetryAt    time.Time `json:"retry_at,omitzero"`
	// ErrorCode (FailureWebhook*) and ErrorArgs are Error as a code and
	// its parts, as StepFailed's: the dashboard words them; Error is the
	// secondary detail. Empty in events written before the codes.
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
}

// issue 32: waits — a wait on the provider (a deployment's queue, build
// and start, the application's health, the new database's start) is the
// deploy step's own, with its own bound; what it waits for is recorded
// before the wait, so a later attempt follows the same deployment.

// DeploymentStarted: the deploy step waits for DeploymentUUID of AppUUID
// from here. How says where the uuid came from: DeployQueued (POST
// /deploy answered it), DeployFollowedSkipped (POST /deploy was skipped
// because a deployment of the app was already queued: the uuid it
// answered, SkippedUUID, was never created, and this is the queued one)
// or DeployFound (a verifying attempt found the app's deployment still
// queued or building). URL is its page in Coolify.
type DeploymentStarted struct {
	JobID          string `json:"job_id"`
	Step           string `json:"step"`
	Attempt        int    `json:"attempt"`
	AppUUID        string `json:"app_uuid"`
	DeploymentUUID string `json:"deployment_uuid"`
	How            string `json:"how"`
	SkippedUUID    string `json:"skipped_uuid,omitempty"`
	URL            string `json:"url,omitempty"`
}

// How a deploy step came to wait for its deployment (DeploymentStarted.How).
const (
	DeployQueued          = "queued"
	DeployFollowedSkipped = "followed_skipped"
	DeployFound           = "found"
)

// WaitPhase: a wait entered Phase (recorded on a change of phase or of
// the place in the queue only, never per poll). Since is when the phase
// began as Slotkeeper saw it; Ahead and Building are, while queued, the
// deployments before it in its server's queue and those building there;
// Status is the provider's own word for what it reports (Coolify's
// "running:unknown", "exited", …). URL is the deployment's page in Coolify.
type WaitPhase struct {
	JobID          string    `json:"job_id"`
	Step           string    `json:"step"`
	Attempt        int       `json:"attempt"`
	Phase          string    `json:"phase"`
	DeploymentUUID string    `json:"deployment_uuid,omitempty"`
	DBUUID         string    `json:"db_uuid,omitempty"`
	Ahead          int       `json:"ahead,omitempty"`
	Building       int       `json:"building,omitempty"`
	Status         string    `json:"status,omitempty"`
	Since          time.Time `json:"since"`
	URL            string    `json:"url,omitempty"`
}

// The phases of a wait (WaitPhase.Phase).
const (
	WaitQueued   = "queued"   // in the server's build queue
	WaitBuilding = "building" // Coolify's in_progress: build and start
	WaitStarting = "starting" // the deployment finished; the application is not running yet
	WaitHealth   = "health"   // running, its health check not passed yet (running:starting, restarting, unhealthy)
	WaitDatabase = "database" // the new database is not running yet
)

func (DeploymentStarted) EventType() string { return "DeploymentStarted" }
func (WaitPhase) EventType() string         { return "WaitPhase" }

func (SlotRegistered) EventType() string        { return "SlotRegistered" }
func (SlotOccupied) EventType() string          { return "SlotOccupied" }
func (OccupancyExtended) EventType() string     { return "OccupancyExtended" }
func (JobAccepted) EventType() string           { return "JobAccepted" }
func (JobReleased) EventType() string           { return "JobReleased" }
func (SlotVacated) EventType() string           { return "SlotVacated" }
func (TeardownIncomplete) EventType() string    { return "TeardownIncomplete" }
func (SlotRetired) EventType() string           { return "SlotRetired" }
func (SlotPromoted) EventType() string          { return "SlotPromoted" }
func (JobQueued) EventType() string             { return "JobQueued" }
func (JobClaimed) EventType() string            { return "JobClaimed" }
func (LeaseRenewed) EventType() string          { return "LeaseRenewed" }
func (StepStarted) EventType() string           { return "StepStarted" }
func (DBDeleted) EventType() string             { return "DBDeleted" }
func (EnvVarsDeleted) EventType() string        { return "EnvVarsDeleted" }
func (VolumeDeleted) EventType() string         { return "VolumeDeleted" }
func (VolumeMountsRemoved) EventType() string   { return "VolumeMountsRemoved" }
func (ForcePushed) EventType() string           { return "ForcePushed" }
func (AppDeleted) EventType() string            { return "AppDeleted" }
func (RepoDeleted) EventType() string           { return "RepoDeleted" }
func (ProjectDeleted) EventType() string        { return "ProjectDeleted" }
func (RepoCreated) EventType() string           { return "RepoCreated" }
func (CodePushed) EventType() string            { return "CodePushed" }
func (StepSucceeded) EventType() string         { return "StepSucceeded" }
func (StepFailed) EventType() string            { return "StepFailed" }
func (ResourcesListed) EventType() string       { return "ResourcesListed" }
func (DeleteAccepted) EventType() string        { return "DeleteAccepted" }
func (JobTimedOut) EventType() string           { return "JobTimedOut" }
func (JobCancelled) EventType() string          { return "JobCancelled" }
func (JobAbandoned) EventType() string          { return "JobAbandoned" }
func (JobSucceeded) EventType() string          { return "JobSucceeded" }
func (JobFailed) EventType() string             { return "JobFailed" }
func (JobResumed) EventType() string            { return "JobResumed" }
func (NotificationSent) EventType() string      { return "NotificationSent" }
func (NotificationAttempted) EventType() string { return "NotificationAttempted" }
func (NotificationDelivered) EventType() string { return "NotificationDelivered" }
func (NotificationFailed) EventType() string    { return "NotificationFailed" }
func (UserCreated) EventType() string           { return "UserCreated" }
func (UserRoleGranted) EventType() string       { return "UserRoleGranted" }
func (PasswordChanged) EventType() string       { return "PasswordChanged" }
func (TokenIssued) EventType() string           { return "TokenIssued" }
func (TokenRevoked) EventType() string          { return "TokenRevoked" }
func (SessionStarted) EventType() string        { return "SessionStarted" }
func (SessionActive) EventType() string         { return "SessionActive" }
func (SessionEnded) EventType() string          { return "SessionEnded" }

// SchemaVersion is the encoding version written into Metadata.Schema. Bump it
// when a payload changes incompatibly and teach Decode the old shape; adding a
// field needs no bump (unknown fields are ignored, missing ones are zero).
const SchemaVersion = 1

// Types lists every event type of the catalogue.
func Types() []string {
	out := make([]string, 0, len(constructors))
	for t := range constructors {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// constructors decode each known type's payload (the name is historical).
var constructors = map[string]func(data []byte) (Payload, error){
	"SlotRegistered":        decodeAs[SlotRegistered],
	"SlotOccupied":          decodeAs[SlotOccupied],
	"OccupancyExtended":     decodeAs[OccupancyExtended],
	"JobAccepted":           decodeAs[JobAccepted],
	"JobReleased":           decodeAs[JobReleased],
	"SlotVacated":           decodeAs[SlotVacated],
	"TeardownIncomplete":    decodeAs[TeardownIncomplete],
	"SlotRetired":           decodeAs[SlotRetired],
	"SlotPromoted":          decodeAs[SlotPromoted],
	"JobQueued":             decodeAs[JobQueued],
	"JobClaimed":            decodeAs[JobClaimed],
	"LeaseRenewed":          decodeAs[LeaseRenewed],
	"StepStarted":           decodeAs[StepStarted],
	"DBDeleted":             decodeAs[DBDeleted],
	"EnvVarsDeleted":        decodeAs[EnvVarsDeleted],
	"VolumeDeleted":         decodeAs[VolumeDeleted],
	"VolumeMountsRemoved":   decodeAs[VolumeMountsRemoved],
	"ForcePushed":           decodeAs[ForcePushed],
	"AppDeleted":            decodeAs[AppDeleted],
	"RepoDeleted":           decodeAs[RepoDeleted],
	"ProjectDeleted":        decodeAs[ProjectDeleted],
	"RepoCreated":           decodeAs[RepoCreated],
	"CodePushed":            decodeAs[CodePushed],
	"StepSucceeded":         decodeAs[StepSucceeded],
	"StepFailed":            decodeAs[StepFailed],
	"ResourcesListed":       decodeAs[ResourcesListed],
	"DeleteAccepted":        decodeAs[DeleteAccepted],
	"JobTimedOut":           decodeAs[JobTimedOut],
	"JobCancelled":          decodeAs[JobCancelled],
	"JobAbandoned":          decodeAs[JobAbandoned],
	"JobSucceeded":          decodeAs[JobSucceeded],
	"JobFailed":             decodeAs[JobFailed],
	"JobResumed":            decodeAs[JobResumed],
	"NotificationSent":      decodeAs[NotificationSent],
	"NotificationAttempted": decodeAs[NotificationAttempted],
	"NotificationDelivered": decodeAs[NotificationDelivered],
	"NotificationFailed":    decodeAs[NotificationFailed],
	"UserCreated":           decodeAs[UserCreated],
	"UserRoleGranted":       decodeAs[UserRoleGranted],
	"PasswordChanged":       decodeAs[PasswordChanged],
	"TokenIssued":           decodeAs[TokenIssued],
	"TokenRevoked":          decodeAs[TokenRevoked],
	"SessionStarted":        decodeAs[SessionStarted],
	"SessionActive":         decodeAs[SessionActive],
	"SessionEnded":          decodeAs[SessionEnded],
	// issue 32: waits
	"DeploymentStarted": decodeAs[DeploymentStarted],
	"WaitPhase":         decodeAs[WaitPhase],
}

// Unknown is what Decode returns for an event type this binary does not know
// (written by a newer version). Readers skip it; nothing fails.
type Unknown struct {
	Type string
	Data json.RawMessage
}

func (u Unknown) EventType() string { return u.Type }

// New encodes a payload as EventData with a fresh id and the given metadata.
// Time defaults to now (UTC) and Schema to SchemaVersion.
func New(p Payload, meta Metadata) EventData {
	data, err := json.Marshal(p)
	if err != nil {
		// Catalogue payloads are plain structs; failing to marshal one is a
		// programming error, not a runtime condition.
		panic(fmt.Sprintf("events: encode %s: %v", p.EventType(), err))
	}
	if meta.Time.IsZero() {
		meta.Time = time.Now().UTC()
	}
	if meta.Schema == 0 {
		meta.Schema = SchemaVersion
	}
	return EventData{ID: uuid.NewString(), Type: p.EventType(), Data: data, Meta: meta}
}

// Validate reports whether typ is a type of the catalogue and data decodes
// as its payload: what a consumer needs of an event to apply it. Decode
// tolerates unknown types (a newer version's, in a shared log); an import
// checks every line with Validate instead, so that nothing written by hand
// or by a broken tool reaches a consumer (issue 25).
func Validate(typ string, data []byte) error {
	mk, ok := constructors[typ]
	if !ok {
		return fmt.Errorf("unknown event type %.64q", typ)
	}
	if _, err := mk(data); err != nil {
		return fmt.Errorf("the %s payload does not decode: %w", typ, err)
	}
	return nil
}

// Is reports whether ev is of p's type (p is a zero payload, e.g.
// ev.Is(events.JobQueued{})): the comparison without the type's name
// written out as a string.
func (ev RecordedEvent) Is(p Payload) bool { return ev.Type == p.EventType() }

// Decode returns the typed payload of a recorded event as a value (not a
// pointer), e.g. events.JobQueued. Unknown types decode to Unknown; unknown
// fields are ignored. Only malformed JSON of a known type is an error.
func Decode(ev RecordedEvent) (Payload, error) {
	mk, ok := constructors[ev.Type]
	if !ok {
		return Unknown{Type: ev.Type, Data: ev.Data}, nil
	}
	p, err := mk(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("events: decode %s at %s@%d: %w", ev.Type, ev.Stream, ev.Revision, err)
	}
	return p, nil
}

// decodeAs decodes a T and returns it as a value, without the reflection a
// generic pointer-to-value step costs. Decode runs for every event a read
// model replays, so it uses segmentio's drop-in decoder (about 4x faster than
// encoding/json on these payloads, same results); when that one fails,
// encoding/json decodes again and has the last word, so errors (and any
// disagreement) are exactly encoding/json's.
func decodeAs[T Payload](data []byte) (Payload, error) {
	var v T
	if len(data) == 0 {
		return v, nil
	}
	if fastjson.Unmarshal(data, &v) == nil {
		return v, nil
	}
	v = *new(T)
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// EncodeMeta and DecodeMeta are the metadata's wire form, shared by the stores.
func EncodeMeta(m Metadata) []byte {
	b, _ := json.Marshal(m)
	return b
}

// DecodeMeta tolerates unknown fields and empty input.
func DecodeMeta(b []byte) (Metadata, error) {
	var m Metadata
	if len(b) == 0 {
		return m, nil
	}
	err := json.Unmarshal(b, &m)
	return m, err
}

// ---- issue 32: checks ----

// ResDockerContainer is a container left on a Coolify server (id = the
// name filter that finds it: the resource's uuid, which Coolify's container
// names carry); Name says where.
const ResDockerContainer = "docker_container"

// ResServer is a Coolify server, as a step's StepStarted names it when it
// reads the server's reachability (never a remaining resource).
const ResServer = "server"

// LeftOnServer is data or a container a queued Coolify delete left on its
// server: the server was unreachable, and Coolify's DeleteResourceJob
// catches the failed remote clean-up and deletes the rows anyway
// (DeleteResourceJob.php:57-100, 130 at v4.3.10-41). Kind is
// docker_volume or docker_container, ID the resource uuid the names
// contain, Server the server's name and uuid, Cleanup the exact command
// to run there.
type LeftOnServer struct {
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Server  string `json:"server"`
	Cleanup string `json:"cleanup"`
}

// Resource is how a left item is tracked among a slot's resources.
func (l LeftOnServer) Resource() Resource {
	return Resource{Kind: l.Kind, ID: l.ID, Name: l.Server, Cleanup: l.Cleanup}
}

// LeftOf is the left_on_server of a recorded DBDeleted or AppDeleted (nil
// for any other event).
func LeftOf(ev RecordedEvent) []LeftOnServer {
	if ev.Type != (DBDeleted{}).EventType() && ev.Type != (AppDeleted{}).EventType() {
		return nil
	}
	var r struct {
		Left []LeftOnServer `json:"left_on_server"`
	}
	_ = json.Unmarshal(ev.Data, &r)
	return r.Left
}
