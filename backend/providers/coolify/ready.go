package coolify

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// The ready-slot reset's calls (issue 23), read against coollabsio/coolify
// 379abb25 (DC = DatabasesController.php, AC = ApplicationsController.php,
// DeC = DeployController.php under app/Http/Controllers/Api).

// Engines are the database types POST /databases/<engine> accepts
// (routes/api.php:295-302).
var Engines = map[string]bool{"postgresql": true, "mysql": true, "mariadb": true, "mongodb": true,
	"redis": true, "clickhouse": true, "dragonfly": true, "keydb": true}

const (
	msgDeployment  = "Deployment not found."                                                // DeC:134, 138
	msgNoResources = "No resources found."                                                  // DeC:466: deploy of an unknown (or another team's) uuid
	msgEnvExists   = "Environment variable already exists. Use PATCH request to update it." // AC:3808, 3841
)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// CreateDatabase creates a database of spec.Engine in the slot's project,
// environment and server, started at once (instant_deploy, DC:1944). Only a
// 201 with a uuid is a creation (DC:1950-1968: {uuid, internal_db_url});
// a 5xx, reset or foreign 404 may have created it (Uncertain): the caller
// finds it by name before creating again.
func (c *Client) CreateDatabase(ctx context.Context, spec providers.DatabaseSpec) (providers.Database, error) {
	const op = "coolify.CreateDatabase"
	if !Engines[spec.Engine] {
		return providers.Database{}, providers.Invalid(op, spec.Engine, errString("unknown database engine "+spec.Engine))
	}
	if !nameRe.MatchString(spec.Name) {
		return providers.Database{}, providers.Invalid(op, spec.Name, errString("invalid database name"))
	}
	for _, v := range []string{spec.ProjectUUID, spec.ServerUUID} {
		if err := providers.ValidateUUID(v); err != nil {
			return providers.Database{}, providers.Invalid(op, v, err)
		}
	}
	body := map[string]any{"name": spec.Name, "project_uuid": spec.ProjectUUID, "environment_name": spec.EnvironmentName,
		"server_uuid": spec.ServerUUID, "instant_deploy": true}
	if spec.Image != "" {
		body["image"] = spec.Image
	}
	// The project's own 404 (DC:1807) says the project is gone or another
	// team's; it creates nothing.
	h := c.on(msgProject)
	resp, perr := h.Do(ctx, op, spec.Name, http.MethodPost, "/databases/"+spec.Engine, nil, body, true)
	if perr != nil {
		return providers.Database{}, perr
	}
	if resp.Status != http.StatusCreated {
		e := fail(h, op, spec.Name, resp, true)
		if resp.Status == http.StatusNotFound && h.Absent(resp) {
			e.Code, e.Uncertain = providers.CodeNotFound, false
		}
		if resp.Status == http.StatusUnprocessableEntity || resp.Status == http.StatusBadRequest {
			e.Uncertain = false // refused by validation before any create (DC:1790-1848)
		}
		return providers.Database{}, e
	}
	var r struct {
		UUID        string `json:"uuid"`
		InternalURL string `json:"internal_db_url"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil || providers.ValidateUUID(r.UUID) != nil {
		e := unreadable(op, spec.Name, resp, err)
		e.Uncertain = true // a 201 without a usable uuid: it was created
		return providers.Database{}, e
	}
	return providers.Database{UUID: r.UUID, Name: spec.Name, Type: spec.Engine, Image: spec.Image, InternalURL: r.InternalURL}, nil
}

// CreateEnv adds key=value to the application (POST
// /applications/{uuid}/envs, 201 {uuid}, AC:3867; 409 when the key exists,
// AC:3841). The value is sent in the body only, never in a URL or error.
func (c *Client) CreateEnv(ctx context.Context, appUUID, key, value string) (string, error) {
	const op = "coolify.CreateEnv"
	if err := providers.ValidateUUID(appUUID); err != nil {
		return "", providers.Invalid(op, appUUID, err)
	}
	h := c.on(msgNoneIsOwned)
	resp, perr := h.Do(ctx, op, appUUID+"/"+key, http.MethodPost, "/applications/"+appUUID+"/envs", nil,
		map[string]any{"key": key, "value": value, "is_preview": false}, true)
	if perr != nil {
		return "", perr
	}
	switch resp.Status {
	case http.StatusCreated:
		var r struct {
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(resp.Body, &r) != nil || r.UUID == "" {
			e := unreadable(op, appUUID+"/"+key, resp, nil)
			e.Uncertain = true
			return "", e
		}
		return r.UUID, nil
	case http.StatusConflict:
		return "", h.Fail(op, appUUID+"/"+key, resp, providers.CodeConflict, false)
	}
	return "", fail(h, op, appUUID+"/"+key, resp, true)
}

// Deploy queues a deployment (POST /deploy?uuid=…, DeC:384-466, behind the
// deploy ability): 200 {"deployments":[{message, resource_uuid,
// deployment_uuid}]}. When a deployment of the app's commit is already
// queued or in progress, Coolify skips the deploy but still answers a
// freshly minted deployment_uuid that was never created (DeC:539-553 mints
// it before queue_application_deployment, whose "skipped" answer carries
// the queued one's uuid, bootstrap/helpers/applications.php:46-65, but
// DeC:550-551 keeps only its message, DeC:599): the answer is then Skipped. A 200
// without a deployment uuid (Coolify said why in message) is an error; "No
// resources found." (DeC:466) is the app's not-found (another team's or
// gone).
func (c *Client) Deploy(ctx context.Context, appUUID string) (providers.Deployment, error) {
	const op = "coolify.Deploy"
	if err := providers.ValidateUUID(appUUID); err != nil {
		return providers.Deployment{}, providers.Invalid(op, appUUID, err)
	}
	h := c.on(msgNoResources)
	resp, perr := h.Do(ctx, op, appUUID, http.MethodPost, "/deploy", url.Values{"uuid": {appUUID}}, nil, true)
	if perr != nil {
		return providers.Deployment{}, perr
	}
	if resp.Status != http.StatusOK {
		e := fail(h, op, appUUID, resp, true)
		if h.Absent(resp) {
			e.Code, e.Uncertain = providers.CodeNotFound, false
		}
		return providers.Deployment{}, e
	}
	var r struct {
		Deployments []struct {
			Message        string `json:"message"`
			DeploymentUUID string `json:"deployment_uuid"`
		} `json:"deployments"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil || len(r.Deployments) == 0 {
		e := unreadable(op, appUUID, resp, err)
		e.Uncertain = true
		return providers.Deployment{}, e
	}
	if d := r.Deployments[0]; d.DeploymentUUID != "" {
		return providers.Deployment{UUID: d.DeploymentUUID, Status: "queued", Skipped: d.Message == MsgDeploySkipped}, nil
	}
	return providers.Deployment{}, &providers.Error{Op: op, Resource: appUUID, Status: resp.Status, Code: providers.CodeConflict, Message: r.Deployments[0].Message}
}

// MsgDeploySkipped is the message of a skipped deploy
// (bootstrap/helpers/applications.php:60).
const MsgDeploySkipped = "Deployment already queued for this commit."

// deploymentJSON is an application_deployment_queues row as the API shows it
// (app/Models/ApplicationDeploymentQueue.php:12-43; logs hidden for tokens
// without read:sensitive).
type deploymentJSON struct {
	ID             int64  `json:"id"`
	PullRequestID  int64  `json:"pull_request_id"`
	DeploymentUUID string `json:"deployment_uuid"`
	Status         string `json:"status"`
	Commit         string `json:"commit"`
	ServerID       int64  `json:"server_id"`
	DeploymentURL  string `json:"deployment_url"`
}

func (c *Client) deployment(r deploymentJSON) providers.Deployment {
	d := providers.Deployment{UUID: r.DeploymentUUID, Status: r.Status, Commit: r.Commit, ServerID: r.ServerID}
	// deployment_url is the page's path (applications.php:18-19).
	if strings.HasPrefix(r.DeploymentURL, "/") {
		d.URL = c.root + r.DeploymentURL
	}
	return d
}

// GetDeployment reads one deployment (GET /deployments/{uuid}, DeC:122-141);
// "Deployment not found." is Absent.
func (c *Client) GetDeployment(ctx context.Context, uuid string) (providers.Deployment, providers.Lookup, error) {
	var r deploymentJSON
	l, err := c.get(ctx, "coolify.GetDeployment", uuid, "/deployments/"+uuid, msgDeployment, &r)
	return c.deployment(r), l, err
}

// ListDeployments is GET /deployments/applications/{uuid} (DeC:696-739):
// {count, deployments: [...]} newest first, ten by default
// (app/Models/Application.php:1118-1217). Its 404 "Application not found"
// (DeC:720) is an error here: the caller looks for a deployment of an app
// it knows. Preview deployments (pull_request_id > 0) are left out: a
// deploy of the application never follows one.
func (c *Client) ListDeployments(ctx context.Context, appUUID string) ([]providers.Deployment, error) {
	var r struct {
		Deployments []deploymentJSON `json:"deployments"`
	}
	if err := c.list(ctx, "coolify.ListDeployments", appUUID, "/deployments/applications/"+appUUID, msgNoneIsOwned, &r); err != nil {
		return nil, err
	}
	out := make([]providers.Deployment, 0, len(r.Deployments))
	for _, d := range r.Deployments {
		if d.PullRequestID > 0 {
			continue // a preview's deployment, not the application's own
		}
		out = append(out, c.deployment(d))
	}
	return out, nil
}

// ActiveDeployments is GET /deployments (DeC:69-82): the queued and
// in-progress deployments on the team's servers, sorted by id (oldest
// first). Coolify sorts the collection with sortBy('id'), which keeps the
// rows' keys: when the database returned them in another order, the JSON
// is an object keyed by those indexes, not an array (Laravel's
// Collection::sortBy; json_encode of a non-list array). Both are read,
// and the rows are put in id order here.
func (c *Client) ActiveDeployments(ctx context.Context) ([]providers.Deployment, error) {
	const op = "coolify.ActiveDeployments"
	var raw json.RawMessage
	if err := c.getJSON(ctx, op, "deployments", "/deployments", msgNoneIsOwned, &raw); err != nil {
		return nil, err
	}
	var rows []deploymentJSON
	if err := json.Unmarshal(raw, &rows); err != nil {
		var keyed map[string]deploymentJSON
		if err2 := json.Unmarshal(raw, &keyed); err2 != nil {
			return nil, &providers.Error{Op: op, Resource: "deployments", Status: 200, Code: providers.CodeServer, Message: "unreadable answer", Err: err}
		}
		rows = rows[:0]
		for _, r := range keyed {
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b deploymentJSON) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]providers.Deployment, 0, len(rows))
	for _, d := range rows {
		out = append(out, c.deployment(d))
	}
	return out, nil
}

// CreateStorage adds a persistent storage to the application (POST
// /applications/{uuid}/storages, AC:4834-4905): Coolify names it
// "<app uuid>-<name>" (AC:4898) and answers 201 with the storage row
// (AC:4905). The application's own 404 "Application not found." (AC:4848)
// creates nothing.
func (c *Client) CreateStorage(ctx context.Context, appUUID, name, mountPath string) (providers.Storage, error) {
	const op = "coolify.CreateStorage"
	if err := providers.ValidateUUID(appUUID); err != nil {
		return providers.Storage{}, providers.Invalid(op, appUUID, err)
	}
	if !nameRe.MatchString(name) {
		return providers.Storage{}, providers.Invalid(op, name, errString("invalid volume name"))
	}
	h := c.on(msgNoneIsOwned)
	resp, perr := h.Do(ctx, op, appUUID+"/"+name, http.MethodPost, "/applications/"+appUUID+"/storages", nil,
		map[string]any{"type": "persistent", "name": name, "mount_path": mountPath}, true)
	if perr != nil {
		return providers.Storage{}, perr
	}
	if resp.Status != http.StatusCreated {
		e := fail(h, op, appUUID+"/"+name, resp, true)
		if resp.Status == http.StatusUnprocessableEntity {
			e.Uncertain = false // validation refused it (AC:4874-4896)
		}
		return providers.Storage{}, e
	}
	var r struct {
		UUID      string `json:"uuid"`
		Name      string `json:"name"`
		MountPath string `json:"mount_path"`
	}
	if err := json.Unmarshal(resp.Body, &r); err != nil || r.UUID == "" {
		e := unreadable(op, appUUID+"/"+name, resp, err)
		e.Uncertain = true
		return providers.Storage{}, e
	}
	return providers.Storage{UUID: r.UUID, Name: r.Name, Kind: "persistent", MountPath: r.MountPath}, nil
}

type errString string

func (e errString) Error() string { return string(e) }
