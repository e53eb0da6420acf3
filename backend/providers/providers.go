// Package providers holds the small interfaces that jobs use to act on the
// outside world (a PaaS, a git host, git pushes), and the error type every
// client returns. It imports nothing of Slotkeeper's: it speaks HTTP and git,
// not events. The clients live in coolify/, bitbucket/ and git/; the simulated
// services in sim/.
//
// Every method takes ctx first and must stop the instant ctx is done: the HTTP
// request or git subprocess in flight is aborted, not left to finish.
package providers

import (
	"context"
	"errors"
	"fmt"
)

// Lookup is the answer of an existence check. Only a 404 carrying the
// provider's own not-found body is Absent; any other failure (a foreign 404
// such as a proxy's HTML page, 401, 403, 5xx, timeout, reset) is Unknown,
// and callers that would act on "absent" must stop on Unknown (DESIGN.md
// invariant 6).
type Lookup int

const (
	Unknown Lookup = iota
	Found
	Absent
)

func (l Lookup) String() string {
	switch l {
	case Found:
		return "found"
	case Absent:
		return "absent"
	default:
		return "unknown"
	}
}

// DeleteOutcome says how a confirmed delete ended. A delete method returns
// a nil error only when the resource is confirmed gone.
type DeleteOutcome int

const (
	// Deleted: the provider accepted the delete and a later GET returned 404.
	Deleted DeleteOutcome = iota + 1
	// AlreadyAbsent: the provider said the resource did not exist (its own
	// 404 on delete; Bitbucket's 204). A foreign 404 is never this.
	AlreadyAbsent
)

func (o DeleteOutcome) String() string {
	switch o {
	case Deleted:
		return "deleted"
	case AlreadyAbsent:
		return "already_absent"
	default:
		return "none"
	}
}

type deleteAcceptedKey struct{}

// WithDeleteAccepted returns ctx carrying f. A delete that completes later
// (Coolify queues DeleteDatabase / DeleteApplication; Bitbucket answers 202
// to DeleteRepo) calls f with the HTTP status once the provider accepted it
// and before it polls for the confirmation, so the caller can record that
// the delete was sent and accepted (events.DeleteAccepted). If f returns an
// error the method stops and returns it, wrapped in an Uncertain *Error (the
// delete may still happen). Immediate deletes never call f.
func WithDeleteAccepted(ctx context.Context, f func(status int) error) context.Context {
	return context.WithValue(ctx, deleteAcceptedKey{}, f)
}

// DeleteAccepted is what a delete method calls once the provider accepted a
// delete it confirms later: it runs the function WithDeleteAccepted put in
// ctx, if any. A non-nil result is an Uncertain *Error for op and res.
func DeleteAccepted(ctx context.Context, op, res string, status int) *Error {
	f, _ := ctx.Value(deleteAcceptedKey{}).(func(int) error)
	if f == nil {
		return nil
	}
	if err := f(status); err != nil {
		return &Error{Op: op, Resource: res, Status: status, Code: CodeCanceled, Uncertain: true,
			Message: "delete accepted, but recording that failed", Err: err}
	}
	return nil
}

type requestHookKey struct{}

// WithRequestHook returns ctx carrying f: a provider client calls f right
// before each HTTP request it sends with ctx, and the function f returns
// once that request has ended. A job step waiting on the provider (a queued
// delete's confirmation) gives each request of the wait the step deadline
// this way, so one hung request ends the step as any call does.
func WithRequestHook(ctx context.Context, f func() (end func())) context.Context {
	return context.WithValue(ctx, requestHookKey{}, f)
}

// RequestStarting runs ctx's request hook, if any; the caller calls the
// result when the request has ended.
func RequestStarting(ctx context.Context) (end func()) {
	if f, _ := ctx.Value(requestHookKey{}).(func() func()); f != nil {
		return f()
	}
	return func() {}
}

// Database, Application, Project, EnvVar and Storage are what the PaaS holds.
// EnvironmentID is the numeric id of the project environment a resource
// lives in (0 when the provider did not say).
type Database struct {
	UUID          string
	Name          string
	Status        string
	EnvironmentID int64
	// Type is Coolify's database_type without "standalone-" (postgresql,
	// mysql, …), Image its image (e.g. "postgres:16-alpine").
	Type  string
	Image string
	// InternalURL is the connection URL inside the server's network, with
	// the password: a secret, never logged or recorded. Only CreateDatabase
	// returns it (DC:1952).
	InternalURL string `json:"-"`
}

type Application struct {
	UUID          string
	Name          string
	Status        string // Coolify's "state:health", e.g. "running:healthy"
	EnvironmentID int64
	// FQDN is the application's URL(s), comma-separated as Coolify keeps them.
	FQDN string
	// BuildPack is Coolify's build_pack (nixpacks, dockerfile,
	// dockercompose, …); a compose application's storages are read-only.
	BuildPack string
}

// Project lists the ids of its environments: an application or database
// belongs to the project when its EnvironmentID is one of them.
type Project struct {
	UUID         string
	Name         string
	Environments []int64
}

type EnvVar struct {
	UUID string
	Key  string
	// Value is the variable's value: a secret, never logged or recorded.
	// Hidden: Coolify did not show it (the token lacks read:sensitive, or
	// the variable is Locked).
	Value  string `json:"-"`
	Hidden bool
	// Preview: the variable is the preview-deployment copy Coolify keeps
	// beside each normal one (is_preview; the listing holds both, AC:3223,
	// and creating a normal var creates its copy, EnvironmentVariable.php
	// :95-120). Locked: is_shown_once — its value is hidden from every
	// token, root included (AC:129-131).
	Preview bool
	Locked  bool
}

// Server is a Coolify server as GET /servers/{uuid} shows it: whether
// Coolify can reach it (settings.is_reachable) and use it
// (settings.is_usable), as its last check recorded (ServersController.php
// :88-109, 149-184).
type Server struct {
	UUID      string
	Name      string
	Reachable bool
	Usable    bool
}

// DatabaseSpec is a database to create (POST /databases/<Engine>).
type DatabaseSpec struct {
	Engine, Name, Image                      string
	ProjectUUID, EnvironmentName, ServerUUID string
}

// Deployment is one deployment of an application (Coolify's
// application_deployment_queues row): Status queued, in_progress,
// finished, failed or cancelled-by-user.
type Deployment struct {
	UUID   string
	Status string
	Commit string
	// ServerID is the Coolify server whose build queue holds it (one
	// queue per server, bootstrap/helpers/applications.php:119-166).
	ServerID int64
	// URL is the deployment's page in Coolify's UI ("" when not told):
	// the instance's root plus the row's deployment_url.
	URL string
	// Skipped is set by Deploy when Coolify skipped the deploy because a
	// deployment of the application's commit is already queued or in
	// progress: it then still answers a freshly minted deployment_uuid
	// that was never created (GET → 404), not the queued one's
	// (DeployController.php:539-553; applications.php:46-65 at 379abb25).
	Skipped bool
}

// Storage is a persistent volume or a file storage of an application. A
// persistent storage's Name is its Docker volume's name on the server,
// unless HostPath says it bind-mounts that host directory instead.
type Storage struct {
	UUID      string
	Name      string
	Kind      string // "persistent" or "file"
	HostPath  string
	MountPath string
}

// PaaS is what jobs need from Coolify.
type PaaS interface {
	// GetDatabase returns the database or an *Error; Lookup tells found /
	// absent (the provider's own 404 only) / unknown.
	GetDatabase(ctx context.Context, uuid string) (Database, Lookup, error)
	// DeleteDatabase deletes and waits until a GET answers 404.
	DeleteDatabase(ctx context.Context, uuid string) (DeleteOutcome, error)
	GetApplication(ctx context.Context, uuid string) (Application, Lookup, error)
	DeleteApplication(ctx context.Context, uuid string) (DeleteOutcome, error)
	ListEnvs(ctx context.Context, appUUID string) ([]EnvVar, error)
	DeleteEnv(ctx context.Context, appUUID, envUUID string) (DeleteOutcome, error)
	ListStorages(ctx context.Context, appUUID string) ([]Storage, error)
	DeleteStorage(ctx context.Context, appUUID, storageUUID string) (DeleteOutcome, error)
	GetProject(ctx context.Context, uuid string) (Project, Lookup, error)
	// DeleteProject returns an *Error with Code CodeNotEmpty while the project
	// still has resources.
	DeleteProject(ctx context.Context, uuid string) (DeleteOutcome, error)

	// The ready-slot reset's calls (issue 23).

	// ListDatabases lists every database the token can see (a verifying
	// create_db finds its database by name there).
	ListDatabases(ctx context.Context) ([]Database, error)
	// CreateDatabase answers the new database only for a 201 with its uuid;
	// anything else is an *Error (Uncertain when the create may have happened).
	CreateDatabase(ctx context.Context, spec DatabaseSpec) (Database, error)
	// CreateEnv adds one env var to an application (409 when the key exists:
	// CodeConflict).
	CreateEnv(ctx context.Context, appUUID, key, value string) (string, error)
	// Deploy queues a deployment of the application; returns its uuid
	// (Status "queued"), or Skipped with a uuid Coolify never created.
	Deploy(ctx context.Context, appUUID string) (Deployment, error)
	GetDeployment(ctx context.Context, uuid string) (Deployment, Lookup, error)
	// ListDeployments lists the application's newest deployments, newest
	// first, without its previews' (GET /deployments/applications/{uuid},
	// DeployController.php:696-739).
	ListDeployments(ctx context.Context, appUUID string) ([]Deployment, error)
	// ActiveDeployments lists the queued and in-progress deployments on
	// the team's servers, oldest first (GET /deployments,
	// DeployController.php:69-82): a queued one's place in its server's queue.
	ActiveDeployments(ctx context.Context) ([]Deployment, error)
	// CreateStorage adds a persistent storage (a new Docker volume) to an
	// application, mounted at mountPath.
	CreateStorage(ctx context.Context, appUUID, name, mountPath string) (Storage, error)

	// The checks before destroying (issue 32).

	// HasAbility tells, read-only, whether the token has a Sanctum ability
	// ("write", "deploy").
	HasAbility(ctx context.Context, ability string) (bool, error)
	// GetServer reads one server (its reachability); ListServers every
	// server of the token's team.
	GetServer(ctx context.Context, uuid string) (Server, Lookup, error)
	ListServers(ctx context.Context) ([]Server, error)
}

// Repo is a git host repository.
type Repo struct {
	Project string
	Slug    string
	Name    string
	// CloneURL is the HTTP clone URL the host reports (no credentials).
	CloneURL string
}

// CreateOutcome says how CreateRepo ended.
type CreateOutcome int

const (
	// Created: a real 201.
	Created CreateOutcome = iota + 1
	// Existed: 409. Never success for a caller that asked to create.
	Existed
)

// GitHost is what jobs need from Bitbucket.
type GitHost interface {
	GetRepo(ctx context.Context, project, slug string) (Repo, Lookup, error)
	// CreateRepo returns Created with the slug read from the 201 body, or
	// Existed (with an *Error of Code CodeConflict) on 409.
	CreateRepo(ctx context.Context, project, name string) (Repo, CreateOutcome, error)
	// DeleteRepo accepts 202 and confirms by GET → 404; 204 = AlreadyAbsent.
	DeleteRepo(ctx context.Context, project, slug string) (DeleteOutcome, error)
	ListRepos(ctx context.Context, project string) ([]Repo, error)
}

// Pusher moves git history between repositories. Remote URLs carry no
// credentials; the implementation supplies them out of band.
type Pusher interface {
	// RemoteSHA returns the sha of refs/heads/<branch> at remote, or "" when
	// the branch does not exist.
	RemoteSHA(ctx context.Context, remoteURL, branch string) (string, error)
	// ForcePushWithLease overwrites dst's branch with src's ref, but only if
	// dst's branch is still at expectedOld (--force-with-lease). Returns the
	// new sha. If the remote moved, returns an *Error with Code CodeConflict
	// and changes nothing.
	ForcePushWithLease(ctx context.Context, srcURL, srcRef, dstURL, dstBranch, expectedOld string) (newSHA string, err error)
	// PushNew pushes src's branch to dst's branch without force; it fails with
	// CodeConflict if dst already has that branch at a different commit.
	PushNew(ctx context.Context, srcURL, srcBranch, dstURL, dstBranch string) (sha string, err error)
}

// Code classifies provider errors for callers (retry? uncertain? conflict?).
type Code string

const (
	CodeInvalid       Code = "invalid"       // rejected before any request (bad id / name)
	CodeUnauthorized  Code = "unauthorized"  // 400 invalid token, 401
	CodeForbidden     Code = "forbidden"     // 403
	CodeNotFound      Code = "not_found"     // 404 in the provider's own words: absent
	CodeForeign       Code = "foreign"       // 404 not in the provider's words (proxy page, wrong base URL): nothing known
	CodeConflict      Code = "conflict"      // 409, lease refused, non-fast-forward
	CodeNotEmpty      Code = "not_empty"     // Coolify project still has resources
	CodeUnprocessable Code = "unprocessable" // 422
	CodeRateLimited   Code = "rate_limited"  // 429 after bounded retries
	CodeServer        Code = "server"        // 5xx
	CodeTransport     Code = "transport"     // connection reset, EOF, DNS …
	CodeCanceled      Code = "canceled"      // ctx done (deadline or fence)
	CodeNotConfirmed  Code = "not_confirmed" // delete accepted but still present
	CodeGit           Code = "git"           // git exited non-zero for another reason
)

// Error is every client's error. It never contains a token.
type Error struct {
	Op       string // e.g. "coolify.DeleteDatabase"
	Resource string // the id or repo the call was about
	Status   int    // HTTP status, 0 when no response
	Code     Code
	Message  string // the provider's own message
	// Uncertain is true when the request may have taken effect (it was sent
	// and no definite answer came back).
	Uncertain bool
	Err       error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s %s: %s", e.Op, e.Resource, e.Code)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && e.Message == "" {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying the same call again later may succeed.
func (e *Error) Retryable() bool {
	switch e.Code {
	case CodeServer, CodeTransport, CodeRateLimited, CodeCanceled, CodeNotConfirmed:
		return true
	}
	return false
}

// AsError returns err's *Error, if any.
func AsError(err error) (*Error, bool) {
	var pe *Error
	ok := errors.As(err, &pe)
	return pe, ok
}

// CodeOf returns err's Code, or "" when err is not a provider error.
func CodeOf(err error) Code {
	if pe, ok := AsError(err); ok {
		return pe.Code
	}
	return ""
}
