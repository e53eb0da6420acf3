// Package projections turns the event log into read models: the views the API
// and the dashboard read. Reducers are pure functions of (view, event); the
// memory and postgres stores apply the same reducers, so a rebuilt read model
// equals the live one. The JSON tags here are the REST/SSE contract.
package projections

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Slot lifecycles.
const (
	LifecycleVacant      = "vacant"
	LifecycleOccupied    = "occupied"
	LifecycleResetting   = "resetting" // a reset job holds the lock
	LifecycleTearingDown = "tearing_down"
	LifecyclePromoting   = "promoting"
	LifecycleIncomplete  = "teardown_incomplete"
	LifecycleRetired     = "retired"
)

// Job states: the statuses of events.JobState (events/jobs.go), in the
// words of the REST/SSE contract.
const (
	JobQueued    = events.StatusQueued
	JobRunning   = events.StatusRunning
	JobSucceeded = events.StatusSucceeded
	JobFailed    = events.StatusFailed
	JobTimedOut  = events.StatusTimedOut
	JobCancelled = events.StatusCancelled
	JobAbandoned = events.StatusAbandoned
)

// Step states.
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepDone      = "done"
	StepFailed    = "failed"
	StepUncertain = "uncertain"
)

// JobRef is a short reference to a job, as shown on a slot.
type JobRef struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	CurrentStep string `json:"current_step,omitempty"`
	StepsDone   int    `json:"steps_done"`
	StepsTotal  int    `json:"steps_total"`
	// NotBefore is when a queued job may start (JobQueued.NotBefore, the
	// end of the grace period), so the board can say "starts in 23 s";
	// absent once the job runs or ends.
	NotBefore time.Time `json:"not_before,omitzero"`
}

// Recovery is what a person needs after an interrupted or failed job.
type Recovery struct {
	JobID          string            `json:"job_id"`
	State          string            `json:"state"`
	CompletedSteps []string          `json:"completed_steps"`
	UncertainStep  string            `json:"uncertain_step,omitempty"`
	Remaining      []events.Resource `json:"remaining"`
}

// SlotView is one slot as the board and the slot page show it.
type SlotView struct {
	Name      string `json:"name"`
	Lifecycle string `json:"lifecycle"`
	Occupant  string `json:"occupant,omitempty"`
	// OccupantID is the occupant's stable subject id (SlotOccupied.ByID);
	// empty for an occupant recorded by name only.
	OccupantID   string         `json:"occupant_id,omitempty"`
	OccupiedAt   *time.Time     `json:"occupied_at,omitempty"`
	Deadline     *time.Time     `json:"deadline,omitempty"`
	ProjectUUID  string         `json:"project_uuid"`
	AppUUID      string         `json:"app_uuid"`
	DBUUID       string         `json:"db_uuid"`
	Repo         events.RepoRef `json:"repo"`
	TemplateRepo events.RepoRef `json:"template_repo"`
	TemplateRef  string         `json:"template_ref"`
	Branch       string         `json:"branch"`
	ActiveJob    *JobRef        `json:"active_job,omitempty"`
	// LatestJobs maps a job kind to the newest job of that kind.
	LatestJobs map[string]JobRef `json:"latest_jobs"`
	// Resources are the outside resources the slot still owns, with ids; an
	// id leaves this list only after its deletion is confirmed.
	Resources []events.Resource `json:"resources"`
	// Deleting lists the resources of Resources whose delete the provider
	// accepted (DeleteAccepted) and nobody has confirmed yet: "deleting
	// (accepted at …)", not "never sent". An entry leaves with its resource.
	Deleting    []PendingDelete  `json:"deleting,omitempty"`
	PromotedTo  []events.RepoRef `json:"promoted_to,omitempty"`
	StateReason string           `json:"state_reason,omitempty"`
	// StateReasonCode and StateReasonArgs are StateReason as a code
	// (Reason*) and its parts, which the dashboard words in the reader's
	// language (issue 26); StateReason stays for the CLI and older clients.
	StateReasonCode string            `json:"state_reason_code,omitempty"`
	StateReasonArgs map[string]string `json:"state_reason_args,omitempty"`
	// Recovery is set while the newest job of the slot ended without success.
	Recovery  *Recovery       `json:"recovery,omitempty"`
	Revision  events.Revision `json:"revision"`
	UpdatedAt time.Time       `json:"updated_at"`
	// Position is the store position of the last event that changed this
	// view (slot events and its jobs' events alike); it only grows, so
	// clients keep the view with the highest position.
	Position events.Position `json:"position"`

	// HasTemplate: the slot was registered with a template, so a reset
	// brings it back to it (issue 23).
	HasTemplate bool `json:"has_template"`
	// Deployed is what the newest ready reset deployed (nil until one did,
	// and while a reset is in progress).
	Deployed *Deployed `json:"deployed,omitempty"`
	// Ready is true for a vacant slot whose last reset brought it back to
	// its template, running:healthy; Missing otherwise says what it lacks
	// (only for a vacant slot).
	Ready   bool     `json:"ready"`
	Missing []string `json:"missing,omitempty"`
	// MissingCode and MissingArgs are Missing as a code (Missing*) and its
	// parts, which the dashboard words in the reader's language (issue 35).
	MissingCode string            `json:"missing_code,omitempty"`
	MissingArgs map[string]string `json:"missing_args,omitempty"`
	// PullRequest is the pull request that holds the slot (issue 34), from
	// its stream's PRSlotTaken until the slot is vacated.
	PullRequest *SlotPR `json:"pull_request,omitempty"`
}

// SlotPR is the pull request holding a slot, as Bitbucket described it when
// it took the slot (PRSlotTaken), with the head of its newest pr_deploy job
// (PRDeployQueued). What the slot runs is Deployed.Commit.
type SlotPR struct {
	Repo   events.RepoRef `json:"repo"`
	ID     int64          `json:"id"`
	Title  string         `json:"title,omitempty"`
	Author string         `json:"author,omitempty"`
	Branch string         `json:"branch"`
	Link   string         `json:"link,omitempty"`
	Head   string         `json:"head"`
	// JobID is the newest pr_deploy job queued for the PR ("" until one is).
	JobID string `json:"job_id,omitempty"`
}

// The codes of why a vacant slot is not ready (SlotView.MissingCode).
const (
	MissingNeverReset      = "never_reset"       // not reset to its template yet: as it was registered
	MissingNoTemplate      = "no_template"       // registered without a template: a reset re-creates nothing
	MissingNoTemplateReset = "no_template_reset" // the same, after a reset that deleted and re-created nothing
	MissingNotHealthy      = "not_healthy"       // args status: the deployed application is not running:healthy
	MissingResetIncomplete = "reset_incomplete"  // its last reset did not finish bringing it back
)

// Deployed is the application a ready reset deployed: its URL (Coolify's
// fqdn), the health Coolify reported and the commit it runs.
type Deployed struct {
	FQDN   string `json:"fqdn,omitempty"`
	Status string `json:"status"`
	// NoHealthCheck: Coolify reports it running:unknown — running, with
	// no health check (the default for a new application); ready all the
	// same (issue 32).
	NoHealthCheck bool      `json:"no_health_check,omitempty"`
	Commit        string    `json:"commit,omitempty"`
	JobID         string    `json:"job_id"`
	DeployedAt    time.Time `json:"deployed_at"`
}

// PendingDelete is a delete the provider accepted (Coolify queued it,
// Bitbucket answered 202) that is not confirmed yet.
type PendingDelete struct {
	Kind       string    `json:"kind"`
	ID         string    `json:"id"`
	AcceptedAt time.Time `json:"accepted_at"`
	JobID      string    `json:"job_id"`
}

// Attempt is one claim of a job by a worker.
type Attempt struct {
	Number     int        `json:"number"`
	Worker     string     `json:"worker"`
	ClaimedAt  time.Time  `json:"claimed_at"`
	LeaseUntil time.Time  `json:"lease_until"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	Outcome    string     `json:"outcome,omitempty"`
}

// StepView is one step of a job.
type StepView struct {
	Name       string     `json:"name"`
	State      string     `json:"state"`
	Attempt    int        `json:"attempt,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	HTTPStatus int        `json:"http_status,omitempty"`
	Error      string     `json:"error,omitempty"`
	// ErrorCode and ErrorArgs are the failure as a code (events.Failure*)
	// and its parts, which the dashboard words in the reader's language;
	// Error is the provider's and the engine's own English, shown beside.
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
	Resource  *events.Resource  `json:"resource,omitempty"`
	Detail    string            `json:"detail,omitempty"`
	// DetailCode is Detail as a code (events.Detail*), which the dashboard
	// words in the reader's language (issue 26); empty for a detail that
	// is data (a commit, a provider's answer), shown as written.
	DetailCode string `json:"detail_code,omitempty"`
	// DetailArgs are DetailCode's parts (issue 35: step details in the
	// reader's language, not only the fixed sentences).
	DetailArgs map[string]string `json:"detail_args,omitempty"`
	// Left is what the step could not delete through the provider's API
	// and left on the server, with the manual clean-up (delete_volumes:
	// the Docker volumes whose mount definitions it removed).
	Left []events.LeftVolume `json:"left_on_server,omitempty"`
	// Wait is the phase of the step's wait on the provider, as last
	// recorded (issue 32): queued behind Ahead others, building since
	// Since, starting, health; with the deployment's page in Coolify.
	Wait *WaitView `json:"wait,omitempty"`
	// NoHealthCheck: the step found the application running without a
	// health check (Coolify's running:unknown).
	NoHealthCheck bool `json:"no_health_check,omitempty"`
}

// WaitView is a step's wait on the provider (events.WaitPhase).
type WaitView struct {
	Phase          string    `json:"phase"`
	Since          time.Time `json:"since"`
	Ahead          int       `json:"ahead,omitempty"`
	Building       int       `json:"building,omitempty"`
	Status         string    `json:"status,omitempty"`
	DeploymentUUID string    `json:"deployment_uuid,omitempty"`
	DBUUID         string    `json:"db_uuid,omitempty"`
	URL            string    `json:"url,omitempty"`
}

// The codes of a slot's state reason (SlotView.StateReasonCode); setReason
// makes the English sentence of each.
const (
	ReasonJob                 = "job"         // args kind, id: the job that holds the slot
	ReasonJobResumed          = "job_resumed" // args kind, id: the same, accepted again by a resume
	ReasonLastJob             = "last_job"    // args outcome: how the newest job ended, without success
	ReasonTeardownUnconfirmed = "teardown_unconfirmed"
)

// setReason sets the slot's state reason from its code and parts, and the
// English sentence from them, in one place so the two never disagree. An
// empty code clears it.
func (v *SlotView) setReason(code string, args map[string]string) {
	v.StateReasonCode, v.StateReasonArgs = code, args
	switch code {
	case ReasonJob:
		v.StateReason = args["kind"] + " job " + args["id"]
	case ReasonJobResumed:
		v.StateReason = args["kind"] + " job " + args["id"] + " (resumed)"
	case ReasonLastJob:
		v.StateReason = "last job " + args["outcome"]
	case ReasonTeardownUnconfirmed:
		v.StateReason = "teardown could not confirm every deletion"
	default:
		v.StateReason = ""
	}
}

// JobView is one job with its whole story.
type JobView struct {
	ID            string            `json:"id"`
	Kind          string            `json:"kind"`
	Slot          string            `json:"slot"`
	State         string            `json:"state"`
	RequestedBy   string            `json:"requested_by"`
	Params        map[string]string `json:"params,omitempty"`
	QueuedAt      time.Time         `json:"queued_at"`
	NotBefore     time.Time         `json:"not_before"`
	EndedAt       *time.Time        `json:"ended_at,omitempty"`
	Attempts      []Attempt         `json:"attempts"`
	Steps         []StepView        `json:"steps"`
	UncertainStep string            `json:"uncertain_step,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	// ReasonCode and ReasonArgs: Reason as a code and parts (events.JobFailed).
	ReasonCode    string            `json:"reason_code,omitempty"`
	ReasonArgs    map[string]string `json:"reason_args,omitempty"`
	Remaining     []events.Resource `json:"remaining"`
	Resumable     bool              `json:"resumable"`
	Cancellable   bool              `json:"cancellable"`
	CorrelationID string            `json:"correlation_id,omitempty"`
	Revision      events.Revision   `json:"revision"`
	UpdatedAt     time.Time         `json:"updated_at"`
	// Position is the store position of the job's last event.
	Position events.Position `json:"position"`
	// QueuedPosition is the position of JobQueued: the "newest first" order
	// of a slot's jobs and the paging cursor.
	QueuedPosition events.Position `json:"queued_position"`
}

// AuditEntry is one event of the log, as the audit feed lists it.
type AuditEntry struct {
	Position events.Position `json:"position"`
	Stream   string          `json:"stream"`
	Type     string          `json:"type"`
	Slot     string          `json:"slot,omitempty"`
	JobID    string          `json:"job_id,omitempty"`
	Actor    string          `json:"actor,omitempty"`
	// ActorID is the actor's stable subject id (events.Metadata.ActorID:
	// "user:<id>", "token:<id>"); Actor is its display name.
	ActorID string `json:"actor_id,omitempty"`
	// ActorKind is user, token, system or worker (empty: a name recorded
	// without an id, e.g. the demo's seeded people). Only users and tokens
	// are people an audit filter offers.
	ActorKind     string    `json:"actor_kind,omitempty"`
	CorrelationID string    `json:"correlation_id,omitempty"`
	Time          time.Time `json:"time"`
	Summary       string    `json:"summary"`
	// Args are the summary's parts as data (step, kind, by, until, …), so a
	// dashboard can say the same in the reader's language; see AuditLine.
	Args map[string]string `json:"args,omitempty"`
	// Plumbing marks a record of the machinery, not of a decision
	// (IsPlumbing): kept in the log, left out of the audit unless asked.
	Plumbing bool `json:"plumbing,omitempty"`
}

// AuditFilter selects audit entries; empty fields match everything.
// Plumbing entries match only with Plumbing set.
type AuditFilter struct {
	Slot, JobID, Actor, Type string
	ActorID                  string
	Plumbing                 bool
	Since                    time.Time
	After                    events.Position // exclusive, for paging
	// Before (exclusive; 0: none) and Newest page backwards: with Newest
	// the entries come newest first, the next page is Before the last one.
	Before events.Position
	Newest bool
	Limit  int
}

// JobStateUncertain is a JobFilter.State that is not a job state: it
// selects jobs with an uncertain step (a step that may or may not have
// taken effect), whatever their state.
const JobStateUncertain = "uncertain"

// JobFilter selects jobs across slots; empty fields match everything.
// Limit and Cursor page as in JobsBySlot.
type JobFilter struct {
	State, Kind, Slot, Actor string
	Limit                    int
	Cursor                   string
}

// Match reports whether a job passes the filter (paging is the caller's
// business). Actor is the person who asked for the job (RequestedBy).
func (f JobFilter) Match(j JobView) bool {
	switch {
	case f.State == JobStateUncertain:
		if j.UncertainStep == "" {
			return false
		}
	case f.State != "" && j.State != f.State:
		return false
	}
	return (f.Kind == "" || j.Kind == f.Kind) && (f.Slot == "" || j.Slot == f.Slot) &&
		(f.Actor == "" || j.RequestedBy == f.Actor)
}

// JobFilterStates are the values JobFilter.State accepts.
var JobFilterStates = []string{JobQueued, JobRunning, JobSucceeded, JobFailed, JobTimedOut, JobCancelled, JobAbandoned, JobStateUncertain}

// RemainingResource is a resource some slot still owns, across all slots
// (retired and teardown-incomplete ones included).
type RemainingResource struct {
	Slot      string          `json:"slot"`
	Lifecycle string          `json:"lifecycle"`
	Resource  events.Resource `json:"resource"`
	JobID     string          `json:"job_id,omitempty"`
	// DeleteAcceptedAt is set while a delete of it was accepted and not
	// confirmed (the slot's Deleting entry).
	DeleteAcceptedAt *time.Time `json:"delete_accepted_at,omitempty"`
	// Cleanup, for a docker_volume or docker_container, is the manual step
	// that removes it (Coolify's API cannot).
	Cleanup string `json:"cleanup,omitempty"`
	// CleanupCode (Cleanup*) and CleanupCommand are Cleanup as a code and
	// the shell command alone, so the dashboard says it in the reader's
	// language and offers the command to copy (issue 35).
	CleanupCode    string `json:"cleanup_code,omitempty"`
	CleanupCommand string `json:"cleanup_command,omitempty"`
}

// The codes of a remaining resource's manual clean-up.
const (
	CleanupDockerVolume = "docker_volume_rm" // run CleanupCommand on the server the resource's name says
	CleanupBindMount    = "bind_mount_rm"    // remove the directory (the resource id) if its data is not wanted
	// CleanupUnreachable: Coolify deleted its row while it could not reach
	// the server (issue 32); run CleanupCommand there (issue 35: it was English only).
	CleanupUnreachable = "unreachable_rm"
)

// Page is a cursor-paged list of jobs (newest first).
type Page struct {
	Jobs       []JobView `json:"jobs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// Change tells the SSE layer that views changed at a position.
type Change struct {
	Position events.Position `json:"position"`
	Slot     *SlotView       `json:"slot,omitempty"`
	Job      *JobView        `json:"job,omitempty"`
	// PullRequest is the pull request's view when a PR stream's event
	// changed it (the dashboard's list of PRs follows it live).
	PullRequest *PRView     `json:"pull_request,omitempty"`
	Audit       *AuditEntry `json:"audit,omitempty"`
}

// ErrNotFound is returned by queries for a missing slot or job.
var ErrNotFound = errors.New("projections: not found")

// ErrUnavailable is wrapped by a shared read model's errors when its
// database cannot be reached (connection refused or lost, shutting down):
// the query may succeed later, so the API answers 503 with Retry-After,
// not 500.
var ErrUnavailable = errors.New("projections: read model unavailable")

// ReadModel is what the API and the dashboard read. Every query is indexed.
type ReadModel interface {
	ListSlots(ctx context.Context) ([]SlotView, error)
	Slot(ctx context.Context, name string) (SlotView, error)
	Job(ctx context.Context, id string) (JobView, error)
	// LatestJob returns the newest job of kind for slot (ErrNotFound if none).
	LatestJob(ctx context.Context, slot, kind string) (JobView, error)
	// JobsBySlot pages a slot's jobs newest first; kind "" means any.
	JobsBySlot(ctx context.Context, slot, kind string, limit int, cursor string) (Page, error)
	// Jobs pages every job across slots newest first (by QueuedPosition),
	// filtered by f; ErrInvalid for a bad limit or cursor.
	Jobs(ctx context.Context, f JobFilter) (Page, error)
	// JobEvents returns a job's raw events in order.
	JobEvents(ctx context.Context, id string) ([]events.RecordedEvent, error)
	Audit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
	RemainingResources(ctx context.Context) ([]RemainingResource, error)
	// Position is the last event applied; snapshots are tagged with it.
	Position(ctx context.Context) (events.Position, error)
}
