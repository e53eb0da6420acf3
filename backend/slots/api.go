package slots

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// The command contract the HTTP API calls. Each command loads the slot (and
// job) stream, decides, and appends with the expected revision; a conflicting
// concurrent append is retried a bounded number of times, then reported as
// CodeConflict. Validation happens before anything is appended.

// Actor identifies who asks, and ties the events to the request.
type Actor struct {
	Name          string // person or "system:…"
	CorrelationID string // request id
}

// RegisterCmd imports an existing slot.
type RegisterCmd struct {
	Name         string         `json:"name"`
	ProjectUUID  string         `json:"project_uuid"`
	AppUUID      string         `json:"app_uuid"`
	DBUUID       string         `json:"db_uuid"`
	Repo         events.RepoRef `json:"repo"`
	TemplateRepo events.RepoRef `json:"template_repo"`
	TemplateRef  string         `json:"template_ref"`
	Branch       string         `json:"branch,omitempty"`
}

// OccupyCmd hands a vacant slot to By until Until.
type OccupyCmd struct {
	By    string    `json:"by"`
	Until time.Time `json:"until"`
}

// ExtendCmd moves the deadline of an occupied slot.
type ExtendCmd struct {
	Until time.Time `json:"until"`
}

// PromoteCmd copies the slot's code to a new repository.
type PromoteCmd struct {
	Project string `json:"project"`
	Name    string `json:"name"`
}

// JobAcceptedResult is returned by every command that queues a job.
type JobAcceptedResult struct {
	JobID     string    `json:"job_id"`
	Kind      string    `json:"kind"`
	Slot      string    `json:"slot"`
	NotBefore time.Time `json:"not_before"`
	Steps     []string  `json:"steps"`
}

// Plan is a dry run: what a job of this kind would do to this slot now.
type Plan struct {
	Kind      string            `json:"kind"`
	Slot      string            `json:"slot"`
	Steps     []string          `json:"steps"`
	Resources []events.Resource `json:"resources"`
	NotBefore time.Time         `json:"not_before"`
}

// Commands is implemented by *Service.
type Commands interface {
	Register(ctx context.Context, a Actor, c RegisterCmd) error
	Occupy(ctx context.Context, a Actor, slot string, c OccupyCmd) error
	Extend(ctx context.Context, a Actor, slot string, c ExtendCmd) error
	// Release queues a reset after the grace period.
	Release(ctx context.Context, a Actor, slot string) (JobAcceptedResult, error)
	Teardown(ctx context.Context, a Actor, slot string) (JobAcceptedResult, error)
	Promote(ctx context.Context, a Actor, slot string, c PromoteCmd) (JobAcceptedResult, error)
	// PlanJob is the dry run shown behind a confirmation.
	PlanJob(ctx context.Context, slot, kind string, params map[string]string) (Plan, error)
	Cancel(ctx context.Context, a Actor, jobID string) error
	Resume(ctx context.Context, a Actor, jobID string) (JobAcceptedResult, error)
}

// Code classifies command errors; the HTTP layer maps codes to statuses in
// one place.
type Code string

const (
	CodeInvalid       Code = "invalid"       // 400: bad name, body, time, an id the provider client refuses
	CodeForbidden     Code = "forbidden"     // 403: a resource outside the configured scope
	CodeNotFound      Code = "not_found"     // 404
	CodeConflict      Code = "conflict"      // 409: wrong state, blocking job, lost race, a resource another slot owns
	CodeUnprocessable Code = "unprocessable" // 422: a resource the provider says does not exist, or that does not belong
	CodeUpstream      Code = "upstream"      // 502: a provider could not answer a lookup
	CodeInternal      Code = "internal"      // 500: the store failed
)

// Error is every command's error.
type Error struct {
	Code    Code
	Message string
	// Details carries machine-readable context, e.g. {"blocking_job": id,
	// "state": "occupied"}.
	Details map[string]any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns err's Code (CodeInternal for foreign errors).
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
