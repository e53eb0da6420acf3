// Package coolify is the Coolify API v1 client (providers.PaaS).
//
// Coolify only queues the deletion of databases and applications (200
// "… deletion request queued."), so DeleteDatabase and DeleteApplication
// return only once a GET answers 404, polling with bounded backoff, or with
// CodeNotConfirmed while the resource is still there at the bound. Such a
// 404 proves only that Coolify's row is gone: its DeleteResourceJob deletes
// the row even when stopping the containers or removing the volumes on the
// server failed (app/Jobs/DeleteResourceJob.php:57-100, 130 at v4.3.10-41).
//
// Absent is read from one answer only: a 404 whose message is the one the
// endpoint's own controller writes for the missing resource (notFoundMsg).
// Coolify's catch-all for unknown paths (routes/api.php:431-433, 404
// {"message":"Not found.","docs":…}) — a base URL ending in /api, a proxy
// dropping /v1, a route the installed version lacks — is foreign.
package coolify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/httpc"
)

var _ providers.PaaS = (*Client)(nil)

// Options configure a Client. Zero fields take the defaults shown.
type Options struct {
	// BaseURL includes "/api/v1", e.g. "https://coolify.example/api/v1".
	BaseURL string
	Token   string
	// HTTP is the client used; default: no overall timeout (ctx bounds
	// every call) and redirects not followed.
	HTTP *http.Client
	// Confirm bounds the polling after a queued delete: default 250ms
	// doubling to 10s, giving up after ConfirmTotal. The real delete first
	// stops the application with its stop grace period (default 30 s, up to
	// 3,600 s), so the bound is above that; the step deadline of the job
	// calling it still applies.
	Confirm providers.Backoff
	// RateRetries (default 3) and MaxRetryAfter (default 60s: Coolify's
	// throttle answers Retry-After up to 60 s, RouteServiceProvider.php:47-53)
	// bound how 429 answers are waited out. A wait past ctx's deadline
	// gives up at once (CodeRateLimited, retryable).
	RateRetries   int
	MaxRetryAfter time.Duration
	// Clock times Retry-After waits and delete confirmations (tests pass
	// a clock.Fake); nil is the wall clock.
	Clock clock.Clock
}

// ConfirmTotal is the default bound on confirming a queued delete: above
// Coolify's longest stop grace period (3,600 s) plus a minute.
const ConfirmTotal = 3660 * time.Second

// Client talks to one Coolify instance.
type Client struct {
	c       httpc.Client
	confirm providers.Backoff
	root    string // the instance's UI root (BaseURL without /api/v1): deployment pages
}

// New returns a client; it does no I/O.
func New(o Options) *Client {
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = 60 * time.Second
	}
	if o.Confirm.Max <= 0 {
		o.Confirm.Max = 10 * time.Second
	}
	if o.Confirm.Total <= 0 {
		o.Confirm.Total = ConfirmTotal
	}
	c := &Client{
		c:       httpc.New(strings.TrimRight(o.BaseURL, "/"), o.Token, o.HTTP, o.RateRetries, o.MaxRetryAfter, message, nil),
		confirm: httpc.ConfirmDefaults(o.Confirm),
		root:    strings.TrimSuffix(strings.TrimRight(o.BaseURL, "/"), "/api/v1"),
	}
	c.c.Clock = o.Clock
	// One API budget per credential in the process (Coolify throttles per
	// user, RouteServiceProvider.php:47-53): every client of this base URL
	// and token — workers, polling, reconciliation, readiness — shares it.
	c.c.Budget = httpc.BudgetFor(c.c.Base, o.Token, o.Clock)
	return c
}

// BudgetStats is what the client's API budget saw: calls that waited for
// budget, 429 answers, and the last X-RateLimit-Limit / -Remaining.
type BudgetStats struct {
	Waited, Limited  int64
	Limit, Remaining int
}

// Budget reports the credential's API budget.
func (c *Client) Budget() BudgetStats {
	s := c.c.Budget.Stats()
	return BudgetStats{Waited: s.Waited, Limited: s.Limited, Limit: s.Limit, Remaining: s.Remaining}
}

// Coolify's own not-found messages, by controller (app/Http/Controllers/Api
// at v4.3.10-41, 379abb25; AC = ApplicationsController.php, DC =
// DatabasesController.php, PC = ProjectController.php). Every lookup is
// filtered by the token's team first (Application::ownedByCurrentTeamAPI,
// queryDatabaseByUuidWithinTeam, Project::whereTeamId), so a live resource of
// another team answers the same words: see the jobs' project check.
const (
	msgAppGet      = "Application not found."          // AC:2373 GET; also AC:3942 delete env, AC:5060 delete storage
	msgAppBare     = "Application not found"           // AC:2557 DELETE, AC:3217 list envs, AC:4556 list storages
	msgDB          = "Database not found."             // DC:330 GET, DC:2584 DELETE
	msgProject     = "Project not found."              // PC:98 GET, PC:478 DELETE, PC:554 environments
	msgEnvVar      = "Environment variable not found." // AC:3954 delete env
	msgStorage     = "Storage not found."              // AC:5073 delete storage
	msgNoneIsOwned = ""                                // a team-wide list: no 404 is ours
)

// on returns the HTTP client for one endpoint: a 404 is Absent only when
// its message is want, exactly.
func (c *Client) on(want string) *httpc.Client {
	h := c.c
	if want != msgNoneIsOwned {
		h.NotFound = func(body []byte) bool { return notFoundMsg(body) == want }
	}
	return &h
}

// notFoundMsg is the message of a Coolify error body that carries only a
// message (the catch-all adds "docs": never an own answer), "" otherwise.
func notFoundMsg(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || len(m) != 1 {
		return ""
	}
	var msg string
	if json.Unmarshal(m["message"], &msg) != nil {
		return ""
	}
	return msg
}

// message reads Coolify's {"message": …, "errors": {field: [msgs]}}.
func message(body []byte) string {
	var m struct {
		Message string              `json:"message"`
		Errors  map[string][]string `json:"errors"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	msg := m.Message
	for k, v := range m.Errors {
		msg += fmt.Sprintf(" %s: %s;", k, strings.Join(v, " "))
	}
	return strings.TrimSuffix(msg, ";")
}

// fail maps an unexpected answer to an *Error (httpc.Unexpected: a 5xx or a
// foreign 404 to a mutating call is Uncertain). A 400 is Coolify's "Invalid
// token." (unauthorized) when its message says so. A 404 in the words of
// the parent (the application of an env var or a storage) is its own
// CodeNotFound error, never the child's absence: the parent may be gone, or
// be another team's.
func fail(h *httpc.Client, op, res string, resp *httpc.Response, mutating bool) *providers.Error {
	e := h.Unexpected(op, res, resp, mutating)
	switch msg := notFoundMsg(resp.Body); {
	case resp.Status == http.StatusBadRequest && strings.Contains(strings.ToLower(message(resp.Body)), "token"):
		e.Code = providers.CodeUnauthorized
	case resp.Status == http.StatusNotFound && (msg == msgAppGet || msg == msgAppBare):
		e.Code, e.Uncertain = providers.CodeNotFound, false
		e.Message = msg + " (the application: deleted, or not visible to this token's team)"
	}
	return e
}

func (c *Client) get(ctx context.Context, op, id, path, own string, out any) (providers.Lookup, error) {
	if err := providers.ValidateUUID(id); err != nil {
		return providers.Unknown, providers.Invalid(op, id, err)
	}
	h := c.on(own)
	resp, perr := h.Do(ctx, op, id, http.MethodGet, path, nil, nil, false)
	if perr != nil {
		return providers.Unknown, perr
	}
	switch l, perr := h.Lookup(op, id, resp); l {
	case providers.Absent:
		return l, perr
	case providers.Unknown:
		return l, fail(h, op, id, resp, false) // with Coolify's reading of a 400
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return providers.Unknown, unreadable(op, id, resp, err)
	}
	return providers.Found, nil
}

type resourceJSON struct {
	UUID          string `json:"uuid"`
	Name          string `json:"name"`
	Status        string `json:"status"`
	EnvironmentID int64  `json:"environment_id"`
	DatabaseType  string `json:"database_type"`
	Image         string `json:"image"`
	FQDN          string `json:"fqdn"`
	BuildPack     string `json:"build_pack"`
	// InternalDBURL is shown only to a token with read:sensitive (DC:62-66).
	InternalDBURL string `json:"internal_db_url"`
	// Environments come with a project (Coolify loads them into its GET).
	Environments []struct {
		ID int64 `json:"id"`
	} `json:"environments"`
}

func (r resourceJSON) database() providers.Database {
	return providers.Database{UUID: r.UUID, Name: r.Name, Status: r.Status, EnvironmentID: r.EnvironmentID,
		Type: strings.TrimPrefix(r.DatabaseType, "standalone-"), Image: r.Image, InternalURL: r.InternalDBURL}
}

func (r resourceJSON) application() providers.Application {
	return providers.Application{UUID: r.UUID, Name: r.Name, Status: r.Status, EnvironmentID: r.EnvironmentID, FQDN: r.FQDN, BuildPack: r.BuildPack}
}

func (r resourceJSON) project() providers.Project {
	p := providers.Project{UUID: r.UUID, Name: r.Name}
	for _, e := range r.Environments {
		if e.ID != 0 {
			p.Environments = append(p.Environments, e.ID)
		}
	}
	return p
}

// GetDatabase returns the database. Lookup is Absent (with a CodeNotFound
// error) only on a 404 with Coolify's own body; any other failure — a
// foreign 404 (CodeForeign) included — is Unknown.
func (c *Client) GetDatabase(ctx context.Context, uuid string) (providers.Database, providers.Lookup, error) {
	var r resourceJSON
	l, err := c.get(ctx, "coolify.GetDatabase", uuid, "/databases/"+uuid, msgDB, &r)
	return r.database(), l, err
}

// GetApplication returns the application; Lookup as for GetDatabase.
func (c *Client) GetApplication(ctx context.Context, uuid string) (providers.Application, providers.Lookup, error) {
	var r resourceJSON
	l, err := c.get(ctx, "coolify.GetApplication", uuid, "/applications/"+uuid, msgAppGet, &r)
	return r.application(), l, err
}

// GetProject returns the project; Lookup as for GetDatabase.
func (c *Client) GetProject(ctx context.Context, uuid string) (providers.Project, providers.Lookup, error) {
	var r resourceJSON
	l, err := c.get(ctx, "coolify.GetProject", uuid, "/projects/"+uuid, msgProject, &r)
	return r.project(), l, err
}

// deleteQuery spells out Coolify's defaults so a change of default on the
// server cannot leave volumes or configurations behind.
var deleteQuery = url.Values{
	"delete_configurations":     {"true"},
	"delete_volumes":            {"true"},
	"docker_cleanup":            {"true"},
	"delete_connected_networks": {"true"},
}

// DeleteDatabase queues the deletion and waits until GET answers Coolify's
// own 404. Returns AlreadyAbsent on such a 404 to the delete (a foreign 404
// is CodeForeign, Uncertain); CodeNotConfirmed (Uncertain) if the database
// is still there — or no GET got Coolify's answer — when the confirmation
// bound passes.
func (c *Client) DeleteDatabase(ctx context.Context, uuid string) (providers.DeleteOutcome, error) {
	return c.deleteQueued(ctx, "coolify.DeleteDatabase", uuid, "/databases/"+uuid, msgDB, msgDB)
}

// DeleteApplication is DeleteDatabase for applications (with its volumes,
// configurations and networks).
func (c *Client) DeleteApplication(ctx context.Context, uuid string) (providers.DeleteOutcome, error) {
	return c.deleteQueued(ctx, "coolify.DeleteApplication", uuid, "/applications/"+uuid, msgAppBare, msgAppGet)
}

// deleteQueued: ownDel is the DELETE's own not-found message, ownGet the
// GET's (they differ for applications: AC:2557 vs AC:2373).
func (c *Client) deleteQueued(ctx context.Context, op, id, path, ownDel, ownGet string) (providers.DeleteOutcome, error) {
	if err := providers.ValidateUUID(id); err != nil {
		return 0, providers.Invalid(op, id, err)
	}
	h := c.on(ownDel)
	resp, perr := h.Do(ctx, op, id, http.MethodDelete, path, deleteQuery, nil, true)
	if perr != nil {
		return 0, perr
	}
	switch {
	case h.Absent(resp):
		return providers.AlreadyAbsent, nil
	case resp.Status < 200 || resp.Status > 299:
		return 0, fail(h, op, id, resp, true)
	}
	if pe := providers.DeleteAccepted(ctx, op, id, resp.Status); pe != nil {
		return 0, pe
	}
	return c.confirmGone(ctx, op, id, path, ownGet)
}

// confirmGone polls GET path until Coolify's own 404. Transient failures
// (5xx, 429, transport, a foreign 404 — an ingress may misroute for a
// while) keep polling; 401/403 and other definite refusals stop it. The
// 404 proves only that the row is gone (see the package comment).
func (c *Client) confirmGone(ctx context.Context, op, id, path, own string) (providers.DeleteOutcome, error) {
	h := c.on(own)
	var last *providers.Error
	gone, err := c.c.Poll(ctx, c.confirm, func() (bool, error) {
		resp, perr := h.Do(ctx, op, id, http.MethodGet, path, nil, nil, false)
		switch {
		case perr != nil && perr.Code == providers.CodeCanceled:
			return false, perr
		case perr != nil:
			last = perr
			return false, nil
		case h.Absent(resp):
			return true, nil
		case resp.Status == http.StatusOK:
			last = nil
			return false, nil
		case resp.Status >= 500 || h.CodeFor(resp) == providers.CodeForeign:
			last = fail(h, op, id, resp, false)
			return false, nil
		}
		return false, fail(h, op, id, resp, false)
	})
	if gone {
		return providers.Deleted, nil
	}
	if pe, ok := providers.AsError(err); ok {
		pe.Uncertain = true // the delete was accepted; it may still happen
		return 0, pe
	}
	if err != nil {
		return 0, &providers.Error{Op: op, Resource: id, Code: providers.CodeCanceled, Uncertain: true, Message: "canceled while confirming the delete", Err: err}
	}
	ne := &providers.Error{Op: op, Resource: id, Code: providers.CodeNotConfirmed, Uncertain: true, Message: "delete accepted but the resource is still there"}
	if last != nil {
		ne.Status, ne.Message, ne.Err = last.Status, ne.Message+"; last check: "+last.Error(), last
	}
	return 0, ne
}

// ListEnvs lists an application's environment variables.
func (c *Client) ListEnvs(ctx context.Context, appUUID string) ([]providers.EnvVar, error) {
	const op = "coolify.ListEnvs"
	var raw []struct {
		UUID      string  `json:"uuid"`
		Key       string  `json:"key"`
		Value     *string `json:"value"`
		IsPreview bool    `json:"is_preview"`
		Locked    bool    `json:"is_shown_once"`
	}
	if err := c.list(ctx, op, appUUID, "/applications/"+appUUID+"/envs", msgAppBare, &raw); err != nil {
		return nil, err
	}
	out := make([]providers.EnvVar, 0, len(raw))
	for _, e := range raw {
		// Values are shown only to a token with read:sensitive
		// (AC:108-119, ApiSensitiveData.php:12-21), and never for a locked
		// variable (is_shown_once, AC:129-131). The listing holds the
		// normal vars and their preview copies (AC:3223).
		ev := providers.EnvVar{UUID: e.UUID, Key: e.Key, Hidden: e.Value == nil, Preview: e.IsPreview, Locked: e.Locked}
		if e.Value != nil {
			ev.Value = *e.Value
		}
		out = append(out, ev)
	}
	return out, nil
}

// ListStorages lists an application's persistent volumes and file storages
// (GET /applications/{uuid}/storages →
// {"persistent_storages":[…],"file_storages":[…]}).
func (c *Client) ListStorages(ctx context.Context, appUUID string) ([]providers.Storage, error) {
	const op = "coolify.ListStorages"
	type storage struct {
		UUID      string  `json:"uuid"`
		Name      string  `json:"name"`
		MountPath string  `json:"mount_path"`
		HostPath  *string `json:"host_path"`
	}
	var raw struct {
		Persistent []storage `json:"persistent_storages"`
		Files      []storage `json:"file_storages"`
	}
	if err := c.list(ctx, op, appUUID, "/applications/"+appUUID+"/storages", msgAppBare, &raw); err != nil {
		return nil, err
	}
	out := make([]providers.Storage, 0, len(raw.Persistent)+len(raw.Files))
	for _, s := range raw.Persistent {
		// A persistent storage's name is its Docker volume's name; with a
		// host_path it is a bind mount of that directory instead.
		st := providers.Storage{UUID: s.UUID, Name: s.Name, Kind: "persistent", MountPath: s.MountPath}
		if s.HostPath != nil {
			st.HostPath = *s.HostPath
		}
		out = append(out, st)
	}
	for _, s := range raw.Files {
		// File storages have no name; the mount path identifies them.
		out = append(out, providers.Storage{UUID: s.UUID, Name: s.MountPath, Kind: "file"})
	}
	return out, nil
}

// list GETs a collection of resource id; any non-200 (404 included) is an
// error (CodeNotFound only for the message own).
func (c *Client) list(ctx context.Context, op, id, path, own string, out any) error {
	if err := providers.ValidateUUID(id); err != nil {
		return providers.Invalid(op, id, err)
	}
	return c.getJSON(ctx, op, id, path, own, out)
}

// getJSON GETs path and decodes a 200 answer into out; any other status is
// an error about res.
func (c *Client) getJSON(ctx context.Context, op, res, path, own string, out any) error {
	h := c.on(own)
	resp, perr := h.Do(ctx, op, res, http.MethodGet, path, nil, nil, false)
	if perr != nil {
		return perr
	}
	if resp.Status != http.StatusOK {
		return fail(h, op, res, resp, false)
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return unreadable(op, res, resp, err)
	}
	return nil
}

// unreadable is the error for a 2xx answer whose body cannot be decoded.
func unreadable(op, res string, resp *httpc.Response, err error) *providers.Error {
	return &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable answer", Err: err}
}

// DeleteEnv deletes one env var; Coolify deletes it at once (no polling,
// forceDelete AC:3959). "Environment variable not found." = AlreadyAbsent;
// the application's "Application not found." is a CodeNotFound error.
func (c *Client) DeleteEnv(ctx context.Context, appUUID, envUUID string) (providers.DeleteOutcome, error) {
	return c.deleteNow(ctx, "coolify.DeleteEnv", appUUID, envUUID, "/applications/"+appUUID+"/envs/"+envUUID, msgEnvVar)
}

// DeleteStorage removes one storage's definition (DELETE
// /applications/{uuid}/storages/{storage_uuid}); immediate. For a
// persistent volume that is only the mount definition row
// ($storage->delete(), AC:5090): the Docker volume and its data stay on the
// server. A storage declared by docker-compose or a service answers 422
// (read-only, AC:5076-5080), as does one with scheduled volume backups:
// CodeUnprocessable, not retryable. "Storage not found." = AlreadyAbsent.
func (c *Client) DeleteStorage(ctx context.Context, appUUID, storageUUID string) (providers.DeleteOutcome, error) {
	return c.deleteNow(ctx, "coolify.DeleteStorage", appUUID, storageUUID, "/applications/"+appUUID+"/storages/"+storageUUID, msgStorage)
}

func (c *Client) deleteNow(ctx context.Context, op, parent, id, path, own string) (providers.DeleteOutcome, error) {
	for _, v := range []string{parent, id} {
		if err := providers.ValidateUUID(v); err != nil {
			return 0, providers.Invalid(op, v, err)
		}
	}
	res := parent + "/" + id
	h := c.on(own)
	resp, perr := h.Do(ctx, op, res, http.MethodDelete, path, nil, nil, true)
	if perr != nil {
		return 0, perr
	}
	switch {
	case h.Absent(resp):
		return providers.AlreadyAbsent, nil
	case resp.Status >= 200 && resp.Status <= 299:
		return providers.Deleted, nil
	}
	return 0, fail(h, op, res, resp, true)
}

// DeleteProject deletes an empty project (immediate). While it still has
// resources Coolify answers 400 "Project has resources…": CodeNotEmpty.
// 404 = AlreadyAbsent.
func (c *Client) DeleteProject(ctx context.Context, uuid string) (providers.DeleteOutcome, error) {
	const op = "coolify.DeleteProject"
	if err := providers.ValidateUUID(uuid); err != nil {
		return 0, providers.Invalid(op, uuid, err)
	}
	h := c.on(msgProject)
	resp, perr := h.Do(ctx, op, uuid, http.MethodDelete, "/projects/"+uuid, nil, nil, true)
	if perr != nil {
		return 0, perr
	}
	switch {
	case h.Absent(resp):
		return providers.AlreadyAbsent, nil
	case resp.Status >= 200 && resp.Status <= 299:
		return providers.Deleted, nil
	case resp.Status == http.StatusBadRequest && strings.Contains(message(resp.Body), "has resources"):
		return 0, h.Fail(op, uuid, resp, providers.CodeNotEmpty, false)
	}
	return 0, fail(h, op, uuid, resp, true)
}

// ListDatabases, ListApplications and ListProjects list everything the
// token can see (for reconciliation: finding what no slot tracks). They are
// not part of providers.PaaS.
func (c *Client) ListDatabases(ctx context.Context) ([]providers.Database, error) {
	return listAll(ctx, c, "coolify.ListDatabases", "/databases", resourceJSON.database)
}

// ListApplications lists every application; see ListDatabases.
func (c *Client) ListApplications(ctx context.Context) ([]providers.Application, error) {
	return listAll(ctx, c, "coolify.ListApplications", "/applications", resourceJSON.application)
}

// ListProjects lists every project; see ListDatabases.
func (c *Client) ListProjects(ctx context.Context) ([]providers.Project, error) {
	return listAll(ctx, c, "coolify.ListProjects", "/projects", resourceJSON.project)
}

// listAll GETs a top-level collection (the path names it in errors).
func listAll[T any](ctx context.Context, c *Client, op, path string, conv func(resourceJSON) T) ([]T, error) {
	var raw []resourceJSON
	if err := c.getJSON(ctx, op, path, path, msgNoneIsOwned, &raw); err != nil {
		return nil, err
	}
	out := make([]T, 0, len(raw))
	for _, r := range raw {
		out = append(out, conv(r))
	}
	return out, nil
}

// msgServer is GET /servers/{uuid}'s own 404 (ServersController.php:158).
const msgServer = "Server not found."

type serverJSON struct {
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	Settings struct {
		IsReachable *bool `json:"is_reachable"`
		IsUsable    *bool `json:"is_usable"`
	} `json:"settings"`
	// The list answer also copies them to the top level
	// (ServersController.php:95-96).
	IsReachable *bool `json:"is_reachable"`
	IsUsable    *bool `json:"is_usable"`
}

func (r serverJSON) server() providers.Server {
	pick := func(a, b *bool) bool {
		if a != nil {
			return *a
		}
		return b != nil && *b
	}
	return providers.Server{UUID: r.UUID, Name: r.Name, Reachable: pick(r.Settings.IsReachable, r.IsReachable), Usable: pick(r.Settings.IsUsable, r.IsUsable)}
}

// GetServer reads one server of the token's team (GET /servers/{uuid},
// ServersController.php:149-184, behind api.ability:read,
// routes/api.php:152): its settings say whether Coolify could reach it at
// its last check. A missing field reads as not reachable.
func (c *Client) GetServer(ctx context.Context, uuid string) (providers.Server, providers.Lookup, error) {
	var r serverJSON
	l, err := c.get(ctx, "coolify.GetServer", uuid, "/servers/"+uuid, msgServer, &r)
	return r.server(), l, err
}

// ListServers lists the team's servers (GET /servers,
// ServersController.php:88-109).
func (c *Client) ListServers(ctx context.Context) ([]providers.Server, error) {
	var raw []serverJSON
	if err := c.getJSON(ctx, "coolify.ListServers", "/servers", "/servers", msgNoneIsOwned, &raw); err != nil {
		return nil, err
	}
	out := make([]providers.Server, 0, len(raw))
	for _, r := range raw {
		out = append(out, r.server())
	}
	return out, nil
}
