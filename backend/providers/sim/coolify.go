package sim

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
)

// Coolify's own messages (Laravel controllers and the published spec).
const (
	msgUnauthenticated = "Unauthenticated."
	msgInvalidToken    = "Invalid token."
	msgProjectBusy     = "Project has resources, so it cannot be deleted."
)

type coolProject struct {
	UUID, Name string
}

type coolApp struct {
	UUID, Name, Project, Status string
	Deleting                    bool
}

type coolDB struct {
	UUID, Name, Project, Status, Type string
	Deleting                          bool
}

// wire is the database as Coolify's GET and list answers show it.
func (d *coolDB) wire() map[string]any {
	return map[string]any{"uuid": d.UUID, "name": d.Name, "status": d.Status, "database_type": d.Type, "environment_id": environmentID(d.Project)}
}

// wire is the application as Coolify's GET and list answers show it.
func (a *coolApp) wire() map[string]any {
	return map[string]any{"uuid": a.UUID, "name": a.Name, "status": a.Status, "environment_id": environmentID(a.Project)}
}

type coolEnv struct {
	UUID, App, Key, Value string
}

type coolStorage struct {
	UUID, App, Name, Kind, MountPath string
}

type coolState struct {
	projects map[string]*coolProject
	apps     map[string]*coolApp
	dbs      map[string]*coolDB
	envs     map[string]*coolEnv
	storages map[string]*coolStorage
}

func (c *coolState) init() {
	c.projects = map[string]*coolProject{}
	c.apps = map[string]*coolApp{}
	c.dbs = map[string]*coolDB{}
	c.envs = map[string]*coolEnv{}
	c.storages = map[string]*coolStorage{}
}

// newUUID returns a Coolify-style id: 24 lowercase base-36 characters (Coolify
// uses cuid2 ids of this shape, e.g. "nc0k04gk8g0cgsk440g0koko").
func newUUID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	b[0] = alphabet[int(b[0])%26] // cuid2 ids start with a letter
	return string(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func coolMsg(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"message": msg})
}

// coolErrBody is the default body of an injected Coolify fault.
func coolErrBody(status int) string {
	msg := http.StatusText(status)
	switch status {
	case 400:
		msg = msgInvalidToken
	case 401:
		msg = msgUnauthenticated
	case 403:
		msg = "You are not allowed to perform this action."
	case 404:
		msg = "Resource not found."
	case 422:
		b, _ := json.Marshal(map[string]any{"message": "Validation error.", "errors": map[string][]string{"uuid": {"The uuid field is invalid."}}})
		return string(b)
	case 429:
		msg = "Rate limit exceeded. Please try again later."
	case 500:
		msg = "Server Error"
	}
	b, _ := json.Marshal(map[string]string{"message": msg})
	return string(b)
}

func (s *Sim) coolAuth(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := bearer(r)
	if !ok || tok != s.opts.CoolifyToken {
		coolMsg(w, http.StatusUnauthorized, msgUnauthenticated)
		return false
	}
	return true
}

func (s *Sim) coolifyMux() http.Handler {
	mux := http.NewServeMux()
	uuid := func(r *http.Request) string { return r.PathValue("uuid") }
	sub := func(name string) func(*http.Request) string {
		return func(r *http.Request) string { return r.PathValue(name) }
	}
	h := func(pattern, endpoint string, res func(*http.Request) string, f http.HandlerFunc) {
		mux.Handle(pattern, s.route("coolify", endpoint, res, s.coolAuth, coolErrBody, f))
	}
	h("GET /api/v1/databases/{uuid}", EndpointGetDatabase, uuid, s.coolGetDB)
	h("DELETE /api/v1/databases/{uuid}", EndpointDeleteDatabase, uuid, s.coolDeleteDB)
	h("GET /api/v1/applications/{uuid}", EndpointGetApplication, uuid, s.coolGetApp)
	h("DELETE /api/v1/applications/{uuid}", EndpointDeleteApplication, uuid, s.coolDeleteApp)
	h("GET /api/v1/applications/{uuid}/envs", EndpointListEnvs, uuid, s.coolListEnvs)
	h("DELETE /api/v1/applications/{uuid}/envs/{env_uuid}", EndpointDeleteEnv, sub("env_uuid"), s.coolDeleteEnv)
	h("GET /api/v1/applications/{uuid}/storages", EndpointListStorages, uuid, s.coolListStorages)
	h("DELETE /api/v1/applications/{uuid}/storages/{storage_uuid}", EndpointDeleteStorage, sub("storage_uuid"), s.coolDeleteStorage)
	h("GET /api/v1/projects", EndpointListProjects, nil, s.coolListProjects)
	h("GET /api/v1/databases", EndpointListDatabases, nil, s.coolListDBs)
	h("GET /api/v1/applications", EndpointListApplications, nil, s.coolListApps)
	h("GET /api/v1/projects/{uuid}", EndpointGetProject, uuid, s.coolGetProject)
	h("GET /api/v1/projects/{uuid}/environments", EndpointListEnvironments, uuid, s.coolListEnvironments)
	h("DELETE /api/v1/projects/{uuid}", EndpointDeleteProject, uuid, s.coolDeleteProject)
	// Anything else under the API: Laravel's JSON 404. Outside it (a base
	// URL without /api/v1) the web application answers, with an HTML page.
	// Both are still subject to path faults.
	mux.Handle("/", s.route("coolify", "", nil, nil, coolErrBody, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/") {
			foreign404(w)
			return
		}
		coolMsg(w, http.StatusNotFound, "Not found.")
	}))
	return mux
}

// queuedResource is a Coolify resource whose DELETE is only queued (databases
// and applications).
type queuedResource interface {
	wire() map[string]any
	markDeleting()
}

func (d *coolDB) markDeleting()  { d.Deleting = true }
func (a *coolApp) markDeleting() { a.Deleting = true }

// coolGetOne answers a GET of one database or application from table.
func coolGetOne[T queuedResource](s *Sim, w http.ResponseWriter, table map[string]T, id, missing string) {
	s.mu.Lock()
	res, ok := table[id]
	var body map[string]any
	if ok {
		body = res.wire()
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, missing)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// coolQueueDelete queues a deletion like Coolify's DeleteResourceJob: the
// resource stays visible (marked deleting) until DeleteDelay has passed, then
// drop removes it — unless it was replaced in the meantime.
func coolQueueDelete[T interface {
	comparable
	queuedResource
}](s *Sim, w http.ResponseWriter, table map[string]T, id, missing, queued string, drop func(id string)) {
	s.mu.Lock()
	res, ok := table[id]
	var err error
	if ok {
		res.markDeleting()
		err = s.persistLocked()
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, missing)
		return
	}
	if err != nil {
		coolMsg(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.after(s.opts.DeleteDelay, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if table[id] == res {
			drop(id)
			_ = s.persistLocked() // a snapshot still naming it completes the delete on load
		}
	})
	coolMsg(w, http.StatusOK, queued)
}

func (s *Sim) coolGetDB(w http.ResponseWriter, r *http.Request) {
	coolGetOne(s, w, s.cool.dbs, r.PathValue("uuid"), "Database not found.")
}

// coolDeleteDB queues the database's deletion.
func (s *Sim) coolDeleteDB(w http.ResponseWriter, r *http.Request) {
	coolQueueDelete(s, w, s.cool.dbs, r.PathValue("uuid"), "Database not found.", "Database deletion request queued.", s.dropDBLocked)
}

func (s *Sim) coolGetApp(w http.ResponseWriter, r *http.Request) {
	coolGetOne(s, w, s.cool.apps, r.PathValue("uuid"), "Application not found.")
}

// coolDeleteApp queues the deletion; with delete_volumes (default true) the
// app's storages and env vars go with it (dropAppLocked).
func (s *Sim) coolDeleteApp(w http.ResponseWriter, r *http.Request) {
	coolQueueDelete(s, w, s.cool.apps, r.PathValue("uuid"), "Application not found.", "Application deletion request queued.", s.dropAppLocked)
}

func (s *Sim) coolListEnvs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	s.mu.Lock()
	_, ok := s.cool.apps[id]
	out := []map[string]any{}
	for _, e := range s.envsLocked(id) {
		out = append(out, map[string]any{"uuid": e.UUID, "key": e.Key, "value": e.Value, "is_preview": false})
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, "Application not found.")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// appChild is a resource Coolify deletes at once, addressed under its
// application (env vars, storages).
type appChild interface{ owner() string }

func (e *coolEnv) owner() string      { return e.App }
func (st *coolStorage) owner() string { return st.App }

// coolDeleteChild deletes table[id] if it belongs to application app,
// answering like Coolify: the app must exist, then the child.
func coolDeleteChild[T appChild](s *Sim, w http.ResponseWriter, table map[string]T, app, id, missing, deleted string) {
	s.mu.Lock()
	_, appOK := s.cool.apps[app]
	c, ok := table[id]
	ok = ok && c.owner() == app
	var err error
	if ok {
		delete(table, id)
		err = s.persistLocked()
	}
	s.mu.Unlock()
	switch {
	case !appOK:
		coolMsg(w, http.StatusNotFound, "Application not found.")
	case !ok:
		coolMsg(w, http.StatusNotFound, missing)
	case err != nil:
		coolMsg(w, http.StatusInternalServerError, err.Error())
	default:
		coolMsg(w, http.StatusOK, deleted)
	}
}

func (s *Sim) coolDeleteEnv(w http.ResponseWriter, r *http.Request) {
	coolDeleteChild(s, w, s.cool.envs, r.PathValue("uuid"), r.PathValue("env_uuid"), "Environment variable not found.", "Environment variable deleted.")
}

func (s *Sim) coolListStorages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	s.mu.Lock()
	_, ok := s.cool.apps[id]
	persistent, files := []map[string]any{}, []map[string]any{}
	for _, st := range s.storagesLocked(id) {
		if st.Kind == "file" {
			files = append(files, map[string]any{"uuid": st.UUID, "fs_path": "/data/coolify/applications/" + id + st.MountPath, "mount_path": st.MountPath, "is_directory": false})
		} else {
			persistent = append(persistent, map[string]any{"uuid": st.UUID, "name": st.Name, "mount_path": st.MountPath, "host_path": nil})
		}
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, "Application not found.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"persistent_storages": persistent, "file_storages": files})
}

func (s *Sim) coolDeleteStorage(w http.ResponseWriter, r *http.Request) {
	coolDeleteChild(s, w, s.cool.storages, r.PathValue("uuid"), r.PathValue("storage_uuid"), "Storage not found.", "Storage deleted.")
}

func (s *Sim) coolListProjects(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := []map[string]any{}
	for _, p := range s.cool.projects {
		out = append(out, map[string]any{"uuid": p.UUID, "name": p.Name})
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolListDBs(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := []map[string]any{}
	for _, d := range s.cool.dbs {
		out = append(out, d.wire())
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolListApps(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	out := []map[string]any{}
	for _, a := range s.cool.apps {
		out = append(out, a.wire())
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolGetProject(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	p, ok := s.cool.projects[r.PathValue("uuid")]
	var body map[string]any
	if ok {
		body = map[string]any{"uuid": p.UUID, "name": p.Name, "environments": []map[string]any{{"id": environmentID(p.UUID), "name": "production"}}}
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, "Project not found.")
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// coolDeleteProject refuses while any application or database (even one
// whose deletion is still queued) belongs to the project, as Coolify does.
func (s *Sim) coolDeleteProject(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	s.mu.Lock()
	_, ok := s.cool.projects[id]
	busy := false
	for _, a := range s.cool.apps {
		busy = busy || a.Project == id
	}
	for _, d := range s.cool.dbs {
		busy = busy || d.Project == id
	}
	var err error
	if ok && !busy {
		delete(s.cool.projects, id)
		err = s.persistLocked()
	}
	s.mu.Unlock()
	switch {
	case !ok:
		coolMsg(w, http.StatusNotFound, "Project not found.")
	case busy:
		coolMsg(w, http.StatusBadRequest, msgProjectBusy)
	case err != nil:
		coolMsg(w, http.StatusInternalServerError, err.Error())
	default:
		coolMsg(w, http.StatusOK, "Project deleted.")
	}
}

func (s *Sim) envsLocked(app string) []*coolEnv {
	var out []*coolEnv
	for _, e := range s.cool.envs {
		if e.App == app {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (s *Sim) storagesLocked(app string) []*coolStorage {
	var out []*coolStorage
	for _, st := range s.cool.storages {
		if st.App == app {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
