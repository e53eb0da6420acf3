package sim

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
)

// Coolify's own messages, as its controllers write them
// (app/Http/Controllers/Api at v4.3.10-41; AC = ApplicationsController.php,
// DC = DatabasesController.php, PC = ProjectController.php). The not-found
// words differ per endpoint, and the client reads only each endpoint's own.
const (
	msgUnauthenticated = "Unauthenticated."                                                                                   // app/Exceptions/Handler.php:51-98
	msgInvalidToken    = "Invalid token."                                                                                     // EnsureTokenBelongsToCurrentTeamMember.php:17-27
	msgProjectBusy     = "Project has resources, so it cannot be deleted."                                                    // PC:482
	msgAppGet          = "Application not found."                                                                             // AC:2373 GET, AC:3942 delete env, AC:5060 delete storage
	msgAppBare         = "Application not found"                                                                              // AC:2557 DELETE, AC:3217 list envs, AC:4556 list storages
	msgDB              = "Database not found."                                                                                // DC:330 GET, DC:2584 DELETE
	msgProject         = "Project not found."                                                                                 // PC:98, PC:478, PC:554
	msgEnvVar          = "Environment variable not found."                                                                    // AC:3954
	msgStorage         = "Storage not found."                                                                                 // AC:5073
	msgStorageReadOnly = "This storage is read-only (managed by docker-compose or service definition) and cannot be deleted." // AC:5076-5080
	msgTooManyAttempts = "Too Many Attempts."                                                                                 // Laravel ThrottleRequestsException
)

// catchAllBody is what routes/api.php:431-433 answers every unknown path
// under /api with (404): JSON with a message, like a resource's own 404,
// plus "docs".
const catchAllBody = `{"message":"Not found.","docs":"https://coolify.io/docs"}`

type coolProject struct {
	UUID, Name string
	Team       int64
}

type coolApp struct {
	UUID, Name, Project, Status string
	BuildPack                   string // "dockercompose": storages read-only
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
	return map[string]any{"uuid": a.UUID, "name": a.Name, "status": a.Status, "environment_id": environmentID(a.Project), "fqdn": fqdn(a.UUID), "build_pack": a.buildPack()}
}

// coolEnv is an env var row; Preview is its is_preview, Locked its
// is_shown_once (coolify_checks.go).
type coolEnv struct {
	UUID, App, Key, Value string
	Preview, Locked       bool
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
	// volumes are the server's Docker volumes, by name: apart from the
	// storage rows that mount them.
	volumes map[string]*dockerVolume

	tokens       map[string]coolToken
	teams        map[int64]string
	version      string
	cleanupFails bool
	rateLimit    int
	// rate is each user's throttle window; unreachable says Coolify cannot
	// reach its server; leftContainers are containers of deleted rows still
	// on the server, by name (coolify_checks.go).
	rate           map[int64]*rateWindow
	unreachable    bool
	leftContainers map[string]string
}

func (c *coolState) init() {
	c.projects = map[string]*coolProject{}
	c.apps = map[string]*coolApp{}
	c.dbs = map[string]*coolDB{}
	c.envs = map[string]*coolEnv{}
	c.storages = map[string]*coolStorage{}
	c.volumes = map[string]*dockerVolume{}
	c.tokens = map[string]coolToken{}
	c.teams = map[int64]string{RootTeam: "Root Team"}
	c.version = DefaultCoolifyVersion
	c.rate = map[int64]*rateWindow{}
	c.leftContainers = map[string]string{}
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
		return catchAllBody // a path fault: what an unknown path answers
	case 422:
		b, _ := json.Marshal(map[string]any{"message": "Validation error.", "errors": map[string][]string{"uuid": {"The uuid field is invalid."}}})
		return string(b)
	case 429:
		msg = msgTooManyAttempts
	case 500:
		msg = "Server Error"
	}
	b, _ := json.Marshal(map[string]string{"message": msg})
	return string(b)
}

// coolAuth is the API's middleware in order: sanctum's token, then the
// throttle keyed by the token's user (app/Http/Kernel.php:43: auth runs
// before throttle:api; RouteServiceProvider.php:47-53).
func (s *Sim) coolAuth(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	t, ok := s.tokenLocked(r)
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusUnauthorized, msgUnauthenticated)
		return false
	}
	return !s.throttle(w, t.user())
}

func (s *Sim) coolifyMux() http.Handler {
	mux := http.NewServeMux()
	uuid := func(r *http.Request) string { return r.PathValue("uuid") }
	sub := func(name string) func(*http.Request) string {
		return func(r *http.Request) string { return r.PathValue(name) }
	}
	h := func(pattern, endpoint string, res func(*http.Request) string, f http.HandlerFunc) {
		mux.Handle(pattern, s.route("coolify", endpoint, res, s.coolAuth, coolErrBody, func(w http.ResponseWriter, r *http.Request) {
			// The build queue and database starts follow the clock
			// (advanceLocked), so every answer sees them as of now.
			s.mu.Lock()
			s.advanceLocked()
			s.mu.Unlock()
			f(w, r)
		}))
	}
	// Abilities as routes/api.php declares them: reads need "read",
	// deletes "write" (routes/api.php:97-115, 144-278).
	read := func(f http.HandlerFunc) http.HandlerFunc { return s.ability("read", f) }
	write := func(f http.HandlerFunc) http.HandlerFunc { return s.ability("write", f) }
	h("GET /api/v1/version", EndpointVersion, nil, read(s.coolVersion))
	h("GET /api/v1/team", EndpointTeam, nil, read(s.coolTeam))
	h("GET /api/v1/teams/current", EndpointTeam, nil, read(s.coolTeam))
	h("GET /api/v1/enable", EndpointAbilityProbe, nil, write(postRequired))
	h("GET /api/v1/deploy", EndpointAbilityProbe, nil, s.ability("deploy", postRequired))
	h("GET /api/v1/databases/{uuid}", EndpointGetDatabase, uuid, read(s.coolGetDB))
	h("DELETE /api/v1/databases/{uuid}", EndpointDeleteDatabase, uuid, write(s.coolDeleteDB))
	h("GET /api/v1/applications/{uuid}", EndpointGetApplication, uuid, read(s.coolGetApp))
	h("DELETE /api/v1/applications/{uuid}", EndpointDeleteApplication, uuid, write(s.coolDeleteApp))
	h("GET /api/v1/applications/{uuid}/envs", EndpointListEnvs, uuid, read(s.coolListEnvs))
	h("DELETE /api/v1/applications/{uuid}/envs/{env_uuid}", EndpointDeleteEnv, sub("env_uuid"), write(s.coolDeleteEnv))
	h("GET /api/v1/applications/{uuid}/storages", EndpointListStorages, uuid, read(s.coolListStorages))
	h("DELETE /api/v1/applications/{uuid}/storages/{storage_uuid}", EndpointDeleteStorage, sub("storage_uuid"), write(s.coolDeleteStorage))
	s.readyRoutes(h)
	s.checkRoutes(h)
	h("GET /api/v1/projects", EndpointListProjects, nil, read(s.coolListProjects))
	h("GET /api/v1/databases", EndpointListDatabases, nil, read(s.coolListDBs))
	h("GET /api/v1/applications", EndpointListApplications, nil, read(s.coolListApps))
	h("GET /api/v1/projects/{uuid}", EndpointGetProject, uuid, read(s.coolGetProject))
	h("GET /api/v1/projects/{uuid}/environments", EndpointListEnvironments, uuid, read(s.coolListEnvironments))
	h("DELETE /api/v1/projects/{uuid}", EndpointDeleteProject, uuid, write(s.coolDeleteProject))
	// GET /api/health answers without a token (routes/api.php:40-45).
	mux.Handle("GET /api/health", s.route("coolify", "", nil, nil, coolErrBody, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "OK")
	}))
	// Anything else under /api: the catch-all route's JSON 404
	// (routes/api.php:431-433), with no authentication. Outside /api the
	// web application answers, here a proxy's HTML page. Both are still
	// subject to path faults.
	mux.Handle("/", s.route("coolify", "", nil, nil, coolErrBody, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api" && !strings.HasPrefix(r.URL.Path, "/api/") {
			foreign404(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, catchAllBody)
	}))
	return mux
}

// queuedResource is a Coolify resource whose DELETE is only queued (databases
// and applications).
type queuedResource interface {
	wire() map[string]any
	markDeleting()
	project() string
}

func (d *coolDB) markDeleting()    { d.Deleting = true }
func (a *coolApp) markDeleting()   { a.Deleting = true }
func (d *coolDB) project() string  { return d.Project }
func (a *coolApp) project() string { return a.Project }

// coolGetOne answers a GET of one database or application from table; one
// of another team's is "not found" like a missing one.
func coolGetOne[T queuedResource](s *Sim, w http.ResponseWriter, r *http.Request, table map[string]T, id, missing string) {
	team := s.teamOf(r)
	s.mu.Lock()
	res, ok := table[id]
	ok = ok && s.projectVisibleLocked(res.project(), team)
	var body map[string]any
	if ok {
		body = res.wire()
		if r.Context().Value(sensitiveKey{}) != nil {
			body["internal_db_url"] = s.dbURLLocked(id)
		}
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
}](s *Sim, w http.ResponseWriter, r *http.Request, table map[string]T, id, missing, queued string, drop func(id string)) {
	team := s.teamOf(r)
	s.mu.Lock()
	res, ok := table[id]
	ok = ok && s.projectVisibleLocked(res.project(), team)
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
	if s.canReadSensitive(r) {
		// internal_db_url is made visible with read:sensitive only (DC:62-66).
		r = r.WithContext(context.WithValue(r.Context(), sensitiveKey{}, true))
	}
	coolGetOne(s, w, r, s.cool.dbs, r.PathValue("uuid"), msgDB)
}

// coolDeleteDB queues the database's deletion.
func (s *Sim) coolDeleteDB(w http.ResponseWriter, r *http.Request) {
	coolQueueDelete(s, w, r, s.cool.dbs, r.PathValue("uuid"), msgDB, "Database deletion request queued.", s.dropDBLocked)
}

func (s *Sim) coolGetApp(w http.ResponseWriter, r *http.Request) {
	coolGetOne(s, w, r, s.cool.apps, r.PathValue("uuid"), msgAppGet)
}

// coolDeleteApp queues the deletion; the app's storages and env vars go
// with its row, and with delete_volumes (default true, AC:2565) the server
// removes its Docker volumes — unless the server cleanup fails
// (FailServerCleanup), which DeleteResourceJob ignores.
func (s *Sim) coolDeleteApp(w http.ResponseWriter, r *http.Request) {
	volumes := r.URL.Query().Get("delete_volumes") != "false" && r.URL.Query().Get("delete_volumes") != "0"
	coolQueueDelete(s, w, r, s.cool.apps, r.PathValue("uuid"), msgAppBare, "Application deletion request queued.", func(id string) {
		if volumes {
			s.removeVolumesLocked(id)
		}
		s.dropAppLocked(id)
	})
}

// appVisibleLocked: the application exists and its project is the team's.
func (s *Sim) appVisibleLocked(id string, team int64) bool {
	a, ok := s.cool.apps[id]
	return ok && s.projectVisibleLocked(a.Project, team)
}

func (s *Sim) coolListEnvs(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	team := s.teamOf(r)
	sensitive := s.canReadSensitive(r)
	s.mu.Lock()
	ok := s.appVisibleLocked(id, team)
	out := []map[string]any{}
	for _, e := range s.envListingLocked(id) {
		env := map[string]any{"uuid": e.UUID, "key": e.Key, "is_preview": e.Preview, "is_shown_once": e.Locked}
		if sensitive && !e.Locked {
			// Hidden without read:sensitive (AC:108-119), and for a locked
			// variable from every token, root included (AC:129-131).
			env["value"], env["real_value"] = e.Value, e.Value
		}
		out = append(out, env)
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, msgAppBare)
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
// answering like Coolify: the app must exist (and be the team's), then the
// child; refuse, if set, may refuse the child with 422.
func coolDeleteChild[T appChild](s *Sim, w http.ResponseWriter, r *http.Request, table map[string]T, app, id, missing, deleted string, refuse func(T) string) {
	team := s.teamOf(r)
	s.mu.Lock()
	appOK := s.appVisibleLocked(app, team)
	c, ok := table[id]
	ok = ok && c.owner() == app
	refused := ""
	if ok && appOK && refuse != nil {
		refused = refuse(c)
	}
	var err error
	if ok && appOK && refused == "" {
		delete(table, id)
		err = s.persistLocked()
	}
	s.mu.Unlock()
	switch {
	case !appOK:
		coolMsg(w, http.StatusNotFound, msgAppGet)
	case !ok:
		coolMsg(w, http.StatusNotFound, missing)
	case refused != "":
		coolMsg(w, http.StatusUnprocessableEntity, refused)
	case err != nil:
		coolMsg(w, http.StatusInternalServerError, err.Error())
	default:
		coolMsg(w, http.StatusOK, deleted)
	}
}

func (s *Sim) coolDeleteEnv(w http.ResponseWriter, r *http.Request) {
	coolDeleteChild(s, w, r, s.cool.envs, r.PathValue("uuid"), r.PathValue("env_uuid"), msgEnvVar, "Environment variable deleted.", nil)
}

func (s *Sim) coolListStorages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	team := s.teamOf(r)
	s.mu.Lock()
	ok := s.appVisibleLocked(id, team)
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
		coolMsg(w, http.StatusNotFound, msgAppBare)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"persistent_storages": persistent, "file_storages": files})
}

// coolDeleteStorage deletes the storage's row only: for a persistent
// volume no `docker volume rm` runs, the volume and its data stay on the
// server (AC:5084-5090: only a file storage is removed on the server,
// deleteStorageOnServer). A compose application's storages are read-only:
// 422 (AC:5076-5080).
func (s *Sim) coolDeleteStorage(w http.ResponseWriter, r *http.Request) {
	app := r.PathValue("uuid")
	coolDeleteChild(s, w, r, s.cool.storages, app, r.PathValue("storage_uuid"), msgStorage, "Storage deleted.", func(st *coolStorage) string {
		if a := s.cool.apps[app]; a != nil && a.BuildPack == "dockercompose" {
			return msgStorageReadOnly
		}
		return ""
	})
}

func (s *Sim) coolListProjects(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	out := []map[string]any{}
	for _, p := range s.cool.projects {
		if p.Team == team {
			out = append(out, map[string]any{"uuid": p.UUID, "name": p.Name})
		}
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolListDBs(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	out := []map[string]any{}
	for _, d := range s.cool.dbs {
		if s.projectVisibleLocked(d.Project, team) {
			out = append(out, d.wire())
		}
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolListApps(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	out := []map[string]any{}
	for _, a := range s.cool.apps {
		if s.projectVisibleLocked(a.Project, team) {
			out = append(out, a.wire())
		}
	}
	s.mu.Unlock()
	sortByName(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) coolGetProject(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	p, ok := s.cool.projects[r.PathValue("uuid")]
	ok = ok && p.Team == team
	var body map[string]any
	if ok {
		body = map[string]any{"uuid": p.UUID, "name": p.Name, "environments": []map[string]any{{"id": environmentID(p.UUID), "name": "production"}}}
	}
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, msgProject)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// coolDeleteProject refuses while any application or database (even one
// whose deletion is still queued) belongs to the project, as Coolify does.
func (s *Sim) coolDeleteProject(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	team := s.teamOf(r)
	s.mu.Lock()
	ok := s.projectVisibleLocked(id, team)
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
		coolMsg(w, http.StatusNotFound, msgProject)
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

// buildPack is the application's build_pack as Coolify shows it (nixpacks
// is Coolify's default).
func (a *coolApp) buildPack() string {
	if a.BuildPack == "" {
		return "nixpacks"
	}
	return a.BuildPack
}
