package coolify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"

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
// deployment_uuid}]}. A 200 without a deployment uuid (Coolify said why in
// message, e.g. a deployment already queued) is an error; "No resources
// found." (DeC:466) is the app's not-found (another team's or gone).
func (c *Client) Deploy(ctx context.Context, appUUID string) (string, error) {
	const op = "coolify.Deploy"
	if err := providers.ValidateUUID(appUUID); err != nil {
		return "", providers.Invalid(op, appUUID, err)
	}
	h := c.on(msgNoResources)
	resp, perr := h.Do(ctx, op, appUUID, http.MethodPost, "/deploy", url.Values{"uuid": {appUUID}}, nil, true)
	if perr != nil {
		return "", perr
	}
	if resp.Status != http.StatusOK {
		e := fail(h, op, appUUID, resp, true)
		if h.Absent(resp) {
			e.Code, e.Uncertain = providers.CodeNotFound, false
		}
		return "", e
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
		return "", e
	}
	if d := r.Deployments[0]; d.DeploymentUUID != "" {
		return d.DeploymentUUID, nil
	}
	return "", &providers.Error{Op: op, Resource: appUUID, Status: resp.Status, Code: providers.CodeConflict, Message: r.Deployments[0].Message}
}

// GetDeployment reads one deployment (GET /deployments/{uuid}, DeC:122-141);
// "Deployment not found." is Absent.
func (c *Client) GetDeployment(ctx context.Context, uuid string) (providers.Deployment, providers.Lookup, error) {
	var r struct {
		DeploymentUUID string `json:"deployment_uuid"`
		Status         string `json:"status"`
		Commit         string `json:"commit"`
	}
	l, err := c.get(ctx, "coolify.GetDeployment", uuid, "/deployments/"+uuid, msgDeployment, &r)
	return providers.Deployment{UUID: r.DeploymentUUID, Status: r.Status, Commit: r.Commit}, l, err
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
