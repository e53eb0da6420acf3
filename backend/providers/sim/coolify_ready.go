package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The ready-slot reset's endpoints (issue 23), as Coolify 379abb25 answers
// them (DC = DatabasesController.php, AC = ApplicationsController.php,
// DeC = DeployController.php under app/Http/Controllers/Api).

// Endpoints of the ready-slot reset.
const (
	EndpointCreateDatabase = "coolify.CreateDatabase"
	EndpointCreateEnv      = "coolify.CreateEnv"
	EndpointDeploy         = "coolify.Deploy"
	EndpointGetDeployment  = "coolify.GetDeployment"
	// EndpointListDeployments is GET /deployments/applications/{uuid}.
	EndpointListDeployments = "coolify.ListDeployments"
	// EndpointActiveDeployments is GET /deployments (the servers' queues).
	EndpointActiveDeployments = "coolify.ActiveDeployments"
	EndpointCreateStorage     = "coolify.CreateStorage"
)

// ServerUUID is the simulated Coolify's one server (Coolify's own
// "localhost" server has a generated uuid like any other).
const ServerUUID = "simserver000000000000000"

const (
	msgServerNotFound = "Server not found."                                                    // DC:1818
	msgEnvExists      = "Environment variable already exists. Use PATCH request to update it." // AC:3808, 3841
	msgNoResources    = "No resources found."                                                  // DeC:466
	msgDeployment     = "Deployment not found."                                                // DeC:134, 138
)

// simEngines are the types routes/api.php:295-302 accepts, with the image
// Coolify defaults each to when none is given (and its database_type).
var simEngines = map[string]string{"postgresql": "postgres:16-alpine", "mysql": "mysql:8", "mariadb": "mariadb:11",
	"mongodb": "mongo:7", "redis": "redis:7.2", "clickhouse": "clickhouse/clickhouse-server:latest",
	"dragonfly": "docker.dragonflydb.io/dragonflydb/dragonfly", "keydb": "eqalpha/keydb:latest"}

// coolDeployment is an application_deployment_queues row
// (app/Models/ApplicationDeploymentQueue.php:12-43).
type coolDeployment struct {
	UUID, App, Status, Commit string
	seq                       int       // creation order: the server's FIFO (applications.php:122-125)
	started                   time.Time // when it went in_progress
	build                     time.Duration
	fail                      string
	commit                    string // the branch head, resolved when the build starts
}

// readyState is the part of the simulated Coolify the ready reset adds; it
// is not kept in state.json (deployments of a restarted simulator are
// gone, as its queue worker would be).
type readyState struct {
	deployments map[string]*coolDeployment
	seq         int
	appRepo     map[string][3]string // app → project, slug, branch it deploys
	failDeploy  map[string]string    // app → the deployment's failure
	images      map[string]string    // db → image
	dbURLs      map[string]string    // db → internal_db_url (with its password)
	deployDelay time.Duration        // every app's build time unless buildTime says otherwise
	buildTime   map[string]time.Duration
	healthCheck map[string]bool      // app → health_check_enabled
	runStatus   map[string]string    // app → its status after a finished deployment (a crashing app)
	concurrent  int                  // the server's concurrent_builds; 0 = Coolify's default 2
	dbStartTime time.Duration        // how long a new database takes to start
	failDBStart map[string]bool      // project → its new databases fail to start
	dbStarts    map[string]time.Time // db → when its start completes
}

func (s *Sim) readyLocked() *readyState {
	if s.ready == nil {
		s.ready = &readyState{deployments: map[string]*coolDeployment{}, appRepo: map[string][3]string{},
			failDeploy: map[string]string{}, images: map[string]string{}, dbURLs: map[string]string{},
			buildTime: map[string]time.Duration{}, healthCheck: map[string]bool{}, runStatus: map[string]string{}, failDBStart: map[string]bool{},
			dbStarts: map[string]time.Time{}, deployDelay: s.opts.BuildDuration}
	}
	return s.ready
}

// now is the simulator's time (Options.Clock).
func (s *Sim) now() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock.Now()
	}
	return time.Now()
}

// SetAppRepo says which repository branch app deploys (its deployment's
// commit is that branch's head at deploy time).
func (s *Sim) SetAppRepo(app, project, slug, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().appRepo[app] = [3]string{project, slug, branch}
}

// FailDeploy makes app's next deployments fail with reason ("" heals).
func (s *Sim) FailDeploy(app, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if reason == "" {
		delete(s.readyLocked().failDeploy, app)
		return
	}
	s.readyLocked().failDeploy[app] = reason
}

// SetDeployDelay is how long every application's deployment builds once it
// left the queue (SetBuildDuration overrides it per app). Real builds take
// 1–40 minutes (REAL-BEHAVIOUR.md, "build times").
func (s *Sim) SetDeployDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().deployDelay = d
}

// SetBuildDuration is how long app's deployments build (in_progress) once
// they left the server's queue; a negative d goes back to SetDeployDelay's.
func (s *Sim) SetBuildDuration(app string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d < 0 {
		delete(s.readyLocked().buildTime, app)
		return
	}
	s.readyLocked().buildTime[app] = d
}

// SetConcurrentBuilds is the server's concurrent_builds (0: Coolify's
// default, 2 — migration 2024_01_24_095449…:15).
func (s *Sim) SetConcurrentBuilds(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().concurrent = max(n, 0)
}

// EnableHealthCheck sets app's health_check_enabled. New applications have
// it off (migration 2024_07_19_132617…:15; PublicGitRepository.php:332-334):
// their deployment finishes without a health wait and the app runs as
// running:unknown (ADJ:1985-1995; ContainerStatusAggregator.php:244-251);
// with it on, as running:healthy.
func (s *Sim) EnableHealthCheck(app string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().healthCheck[app] = on
}

// SetRunStatus makes app read status once its deployment finished (""
// heals): an application whose container crashes and restarts reads
// "restarting…", one that stopped "exited…" — Coolify's words for what
// its containers do (GetContainersStatus.php; ContainerStatusAggregator.php).
func (s *Sim) SetRunStatus(app, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == "" {
		delete(s.readyLocked().runStatus, app)
		return
	}
	s.readyLocked().runStatus[app] = status
}

// SetDatabaseStart is how long a new database takes from its create to
// running (its row reads "exited", the column's default, until then:
// migration 2023_08_07_142950…:27).
func (s *Sim) SetDatabaseStart(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().dbStartTime = max(d, 0)
}

// FailDatabaseStart makes the databases created in project from now on
// fail to start: they stay "exited", Coolify does not retry
// (StartPostgresql.php:221-230; GetContainersStatus.php:411-430). false heals
// later creates.
func (s *Sim) FailDatabaseStart(project string, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readyLocked().failDBStart[project] = fail
}

// Deployments lists app's deployments (tests).
func (s *Sim) Deployments(app string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.advanceLocked()
	var out []string
	for _, d := range s.readyLocked().sorted() {
		if d.App == app {
			out = append(out, d.UUID+":"+d.Status)
		}
	}
	return out
}

// sorted is every deployment, oldest first.
func (rs *readyState) sorted() []*coolDeployment {
	out := make([]*coolDeployment, 0, len(rs.deployments))
	for _, d := range rs.deployments {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *coolDeployment) int { return a.seq - b.seq })
	return out
}

func (rs *readyState) buildOf(app string) time.Duration {
	if d, ok := rs.buildTime[app]; ok {
		return d
	}
	return rs.deployDelay
}

// advanceLocked brings the build queue and the database starts to the
// simulator's now, in time order: a build in progress finishes at its
// start plus its build time, and the server's queue then starts the
// oldest queued deployments that may run (next_queuable: fewer than
// concurrent_builds in progress, none of the same app,
// bootstrap/helpers/applications.php:119-166). Every request to the
// simulated Coolify runs it first, so its answers follow the clock
// without a timer of their own (a test's fake clock drives them).
func (s *Sim) advanceLocked() {
	rs := s.readyLocked()
	now := s.now()
	for db, at := range rs.dbStarts {
		if !at.After(now) {
			if d := s.cool.dbs[db]; d != nil && !d.Deleting {
				d.Status = "running:healthy"
			}
			delete(rs.dbStarts, db)
		}
	}
	for {
		s.startQueuedLocked(now)
		var next *coolDeployment
		for _, d := range rs.deployments {
			if d.Status == "in_progress" && (next == nil || d.started.Add(d.build).Before(next.started.Add(next.build))) {
				next = d
			}
		}
		if next == nil {
			return
		}
		end := next.started.Add(next.build)
		if end.After(now) {
			return
		}
		s.finishLocked(next)
		s.startQueuedLocked(end)
	}
}

// startQueuedLocked starts the queued deployments that may run at t.
func (s *Sim) startQueuedLocked(t time.Time) {
	rs := s.readyLocked()
	limit := rs.concurrent
	if limit == 0 {
		limit = 2
	}
	all := rs.sorted()
	running, busy := 0, map[string]bool{}
	for _, d := range all {
		if d.Status == "in_progress" {
			running++
			busy[d.App] = true
		}
	}
	for _, d := range all {
		if running >= limit {
			return
		}
		if d.Status != "queued" || busy[d.App] {
			continue
		}
		d.Status, d.started, d.build = "in_progress", t, rs.buildOf(d.App)
		if d.commit != "" {
			d.Commit = d.commit // ls-remote resolved HEAD (ADJ:2396-2398)
		}
		running++
		busy[d.App] = true
	}
}

// finishLocked ends an in-progress deployment: finished, the app running
// (running:healthy with a health check, running:unknown without), or
// failed, the app exited.
func (s *Sim) finishLocked(d *coolDeployment) {
	rs := s.readyLocked()
	a := s.cool.apps[d.App]
	if d.fail != "" {
		d.Status = "failed"
		if a != nil {
			a.Status = "exited:unhealthy"
		}
		return
	}
	d.Status = "finished"
	if a != nil {
		a.Status = "running:unknown"
		if rs.healthCheck[d.App] {
			a.Status = "running:healthy"
		}
		if st := rs.runStatus[d.App]; st != "" {
			a.Status = st
		}
	}
	_ = s.persistLocked()
}

func (s *Sim) readyRoutes(h func(pattern, endpoint string, res func(*http.Request) string, f http.HandlerFunc)) {
	uuid := func(r *http.Request) string { return r.PathValue("uuid") }
	engine := func(r *http.Request) string { return r.PathValue("engine") }
	h("POST /api/v1/databases/{engine}", EndpointCreateDatabase, engine, s.ability("write", s.coolCreateDB))
	h("POST /api/v1/applications/{uuid}/envs", EndpointCreateEnv, uuid, s.ability("write", s.coolCreateEnv))
	h("POST /api/v1/deploy", EndpointDeploy, func(r *http.Request) string { return r.URL.Query().Get("uuid") }, s.ability("deploy", s.coolDeploy))
	h("GET /api/v1/deployments/{uuid}", EndpointGetDeployment, uuid, s.ability("read", s.coolGetDeployment))
	h("GET /api/v1/deployments", EndpointActiveDeployments, nil, s.ability("read", s.coolActiveDeployments))
	h("GET /api/v1/deployments/applications/{uuid}", EndpointListDeployments, uuid, s.ability("read", s.coolListDeployments))
	h("POST /api/v1/applications/{uuid}/storages", EndpointCreateStorage, uuid, s.ability("write", s.coolCreateStorage))
}

// coolCreateDB is create_database (DC:1764-1968): the project must be the
// token's team's (404 "Project not found.", DC:1805-1807), the
// environment given by name (422, DC:1796-1814), the server the team's
// (404 "Server not found.", DC:1816-1818); 201 {uuid, internal_db_url}.
func (s *Sim) coolCreateDB(w http.ResponseWriter, r *http.Request) {
	img, ok := simEngines[r.PathValue("engine")]
	if !ok {
		// An unknown engine matches no route: the catch-all.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(catchAllBody))
		return
	}
	var in struct {
		Name, Image, ProjectUUID, EnvironmentName, ServerUUID string
	}
	var raw map[string]any
	if json.NewDecoder(r.Body).Decode(&raw) != nil {
		coolMsg(w, http.StatusBadRequest, "Invalid request.")
		return
	}
	str := func(k string) string { v, _ := raw[k].(string); return v }
	in.Name, in.Image, in.ProjectUUID, in.EnvironmentName, in.ServerUUID = str("name"), str("image"), str("project_uuid"), str("environment_name"), str("server_uuid")
	if in.EnvironmentName == "" && str("environment_uuid") == "" {
		coolMsg(w, http.StatusUnprocessableEntity, "You need to provide at least one of environment_name or environment_uuid.")
		return
	}
	team := s.teamOf(r)
	s.mu.Lock()
	if !s.projectVisibleLocked(in.ProjectUUID, team) {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, msgProject)
		return
	}
	if in.EnvironmentName != "production" {
		s.mu.Unlock()
		coolMsg(w, http.StatusUnprocessableEntity, "You need to provide a valid environment_name or environment_uuid.")
		return
	}
	if in.ServerUUID != ServerUUID || team != RootTeam {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, msgServerNotFound)
		return
	}
	if in.Image != "" {
		img = in.Image
	}
	id := newUUID()
	// The row starts "exited" (the column's default, migration
	// 2023_08_07_142950…:27) until StartDatabase ran; a failed start
	// leaves it so (StartPostgresql.php:221-230).
	rs := s.readyLocked()
	s.cool.dbs[id] = &coolDB{UUID: id, Name: in.Name, Project: in.ProjectUUID, Status: "exited", Type: "standalone-" + r.PathValue("engine")}
	if !rs.failDBStart[in.ProjectUUID] {
		rs.dbStarts[id] = s.now().Add(rs.dbStartTime)
		s.advanceLocked()
	}
	rs.images[id] = img
	u := s.dbURLLocked(id)
	err := s.persistLocked()
	s.mu.Unlock()
	if err != nil {
		coolMsg(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"uuid": id, "internal_db_url": u})
}

// coolCreateEnv is create_env (AC:3753-3870): the app's 404 "Application
// not found." (team-scoped), 409 when the key exists (AC:3841), 201 {uuid}.
func (s *Sim) coolCreateEnv(w http.ResponseWriter, r *http.Request) {
	app := r.PathValue("uuid")
	var in struct {
		Key     string `json:"key"`
		Value   string `json:"value"`
		Preview bool   `json:"is_preview"`
		Locked  bool   `json:"is_shown_once"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || in.Key == "" {
		coolMsg(w, http.StatusUnprocessableEntity, "Validation failed.")
		return
	}
	// Coolify trims the key and replaces spaces (AC:3800).
	in.Key = strings.ReplaceAll(strings.TrimSpace(in.Key), " ", "_")
	team := s.teamOf(r)
	s.mu.Lock()
	if !s.appVisibleLocked(app, team) {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, msgAppGet)
		return
	}
	for _, e := range s.envListingLocked(app) {
		if e.Key == in.Key && e.Preview == in.Preview {
			// 409 only for a var of the same kind (AC:3804-3842).
			s.mu.Unlock()
			coolMsg(w, http.StatusConflict, msgEnvExists)
			return
		}
	}
	id := s.addEnvLocked(app, in.Key, in.Value, in.Preview, in.Locked)
	err := s.persistLocked()
	s.mu.Unlock()
	if err != nil {
		coolMsg(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"uuid": id})
}

// coolDeploy is deploy by uuid (DeC:384-466): an unknown or another team's
// uuid is skipped, and with nothing deployed the answer is 404 "No
// resources found."; otherwise 200 {"deployments":[{message,
// resource_uuid, deployment_uuid}]}. The deployment joins the server's
// queue (queued, commit "HEAD" until it starts), builds for the app's
// build time once at most concurrent_builds run (advanceLocked), then
// finishes (the app running) or fails (the app exited:unhealthy). A
// deploy of an app whose deployment of the same commit is still queued or
// in progress is skipped, yet answers a freshly minted uuid that was never
// created (DeC:539-553; applications.php:46-65): a GET of it is 404.
func (s *Sim) coolDeploy(w http.ResponseWriter, r *http.Request) {
	app := r.URL.Query().Get("uuid")
	if app == "" {
		coolMsg(w, http.StatusBadRequest, "You must provide uuid or tag.")
		return
	}
	team := s.teamOf(r)
	s.mu.Lock()
	a := s.cool.apps[app]
	if a == nil || !s.projectVisibleLocked(a.Project, team) {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, msgNoResources)
		return
	}
	repo := s.readyLocked().appRepo[app]
	if repo[1] == "" && strings.HasPrefix(a.Name, "app-") {
		// A simulator restarted from state.json forgot SetAppRepo: a
		// seeded slot's app deploys its slot repository (SeedSlot's names).
		repo = [3]string{SlotRepoProject, "slot-" + strings.TrimPrefix(a.Name, "app-"), DefaultBranch}
	}
	s.mu.Unlock()
	// The branch head the build will resolve (read outside the lock: git).
	commit := ""
	if repo[1] != "" {
		commit, _ = s.RepoHeadSHA(repo[0], repo[1], repo[2])
	}
	s.mu.Lock()
	rs := s.readyLocked()
	s.advanceLocked()
	for _, d := range rs.deployments {
		if d.App == app && (d.Status == "queued" || d.Status == "in_progress") {
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, map[string]any{"deployments": []map[string]string{{
				"message": msgDeploySkipped, "resource_uuid": app, "deployment_uuid": newUUID()}}})
			return
		}
	}
	rs.seq++
	d := &coolDeployment{UUID: newUUID(), App: app, Status: "queued", Commit: "HEAD", seq: rs.seq, fail: rs.failDeploy[app], commit: commit}
	rs.deployments[d.UUID] = d
	a.Status = "starting:unknown"
	s.advanceLocked()
	name := a.Name
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"deployments": []map[string]string{{
		"message": "Application " + name + " deployment queued.", "resource_uuid": app, "deployment_uuid": d.UUID}}})
}

// msgDeploySkipped is a skipped deploy's message (applications.php:60).
const msgDeploySkipped = "Deployment already queued for this commit."

// wireLocked is the row as the API shows it (logs hidden: the simulator
// keeps none). deployment_url is the page's path (applications.php:18-19;
// routes/web.php:261, 287).
func (s *Sim) wireDeploymentLocked(d *coolDeployment) map[string]any {
	project := ""
	if a := s.cool.apps[d.App]; a != nil {
		project = a.Project
	}
	return map[string]any{"id": d.seq, "deployment_uuid": d.UUID, "application_id": d.App, "status": d.Status, "commit": d.Commit, "pull_request_id": 0,
		"server_id": 1, "server_name": "localhost",
		"deployment_url": "/project/" + project + "/environment/production/application/" + d.App + "/deployment/" + d.UUID}
}

// coolGetDeployment is deployment_by_uuid (DeC:122-141).
func (s *Sim) coolGetDeployment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	d := s.readyLocked().deployments[r.PathValue("uuid")]
	var body map[string]any
	if d != nil {
		body = s.wireDeploymentLocked(d)
	}
	s.mu.Unlock()
	if d == nil {
		coolMsg(w, http.StatusNotFound, msgDeployment)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// coolActiveDeployments is GET /deployments (DeC:69-82): the queued and
// in-progress deployments of the team's servers, by id.
func (s *Sim) coolActiveDeployments(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	out := []map[string]any{}
	for _, d := range s.readyLocked().sorted() {
		if (d.Status == "queued" || d.Status == "in_progress") && s.appVisibleLocked(d.App, team) {
			out = append(out, s.wireDeploymentLocked(d))
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// coolListDeployments is GET /deployments/applications/{uuid}
// (DeC:696-739): 404 "Application not found" (DeC:720), else {count,
// deployments} newest first, ten (Application.php:1118-1217).
func (s *Sim) coolListDeployments(w http.ResponseWriter, r *http.Request) {
	app := r.PathValue("uuid")
	team := s.teamOf(r)
	s.mu.Lock()
	if !s.appVisibleLocked(app, team) {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, "Application not found")
		return
	}
	var mine []map[string]any
	all := s.readyLocked().sorted()
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].App == app {
			mine = append(mine, s.wireDeploymentLocked(all[i]))
		}
	}
	s.mu.Unlock()
	count := len(mine)
	if len(mine) > 10 {
		mine = mine[:10]
	}
	if mine == nil {
		mine = []map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": count, "deployments": mine})
}

// fqdn is the simulated application's URL (Coolify's generated domain
// shape: http://<uuid>.<server's wildcard domain>).
func fqdn(app string) string { return "http://" + app + ".sim.localhost" }

// canReadSensitive is ApiSensitiveData (app/Http/Middleware/ApiSensitiveData.php:12-21):
// values of env vars and a database's internal_db_url are shown only to a
// token with root or read:sensitive (whose user is the team's admin; every
// simulated token's user is).
func (s *Sim) canReadSensitive(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _ := s.tokenLocked(r)
	return t.can("read:sensitive")
}

type sensitiveKey struct{}

// dbURLLocked is db's internal_db_url; the password in it is generated by
// Coolify.
func (s *Sim) dbURLLocked(db string) string {
	rs := s.readyLocked()
	if u, ok := rs.dbURLs[db]; ok {
		return u
	}
	// Derived from the uuid, so it is the same after a restart of a
	// simulator whose state is kept (state.json holds no passwords).
	sum := sha256.Sum256([]byte("sim-db-password:" + db))
	u := "postgres://postgres:" + hex.EncodeToString(sum[:12]) + "@" + db + ":5432/postgres"
	rs.dbURLs[db] = u
	return u
}

// Template application of the demo pool.
const (
	TemplateAppProject = "templates"
	TemplateAppName    = "template-app"
)

// EnsureTemplateApp returns the template application whose env vars a
// ready reset copies (project "templates", application "template-app",
// env vars APP_ENV=preview and LOG_LEVEL=info), creating it the first time.
func (s *Sim) EnsureTemplateApp() (string, error) {
	s.mu.Lock()
	for _, a := range s.cool.apps {
		if p := s.cool.projects[a.Project]; p != nil && p.Name == TemplateAppProject && a.Name == TemplateAppName {
			s.mu.Unlock()
			return a.UUID, nil
		}
	}
	s.mu.Unlock()
	app, err := s.AddApp(s.AddProject(TemplateAppProject), TemplateAppName)
	if err != nil {
		return "", err
	}
	for _, kv := range [][2]string{{"APP_ENV", "preview"}, {"LOG_LEVEL", "info"}} {
		if _, err := s.AddEnv(app, kv[0], kv[1]); err != nil {
			return "", err
		}
	}
	return app, nil
}

// DatabaseURL is db's internal_db_url, with its password (tests).
func (s *Sim) DatabaseURL(db string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dbURLLocked(db)
}

// AppStatus is the application's status ("" when it does not exist).
func (s *Sim) AppStatus(app string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.cool.apps[app]; a != nil {
		return a.Status
	}
	return ""
}

// DatabaseNames lists the names of project's databases (tests).
func (s *Sim) DatabaseNames(project string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, d := range s.cool.dbs {
		if d.Project == project {
			out = append(out, d.Name)
		}
	}
	return out
}

// coolCreateStorage is create_storage for a persistent volume (AC:4834-4905):
// the app's 404 (AC:4848), name required (422, AC:4882-4886), the row named
// "<app uuid>-<name>" (AC:4898), 201 with the row. Its Docker volume is new
// and empty unless one of that name is still on the server.
func (s *Sim) coolCreateStorage(w http.ResponseWriter, r *http.Request) {
	app := r.PathValue("uuid")
	var in struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		MountPath string `json:"mount_path"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || in.MountPath == "" || in.Type != "persistent" || in.Name == "" {
		coolMsg(w, http.StatusUnprocessableEntity, "Validation failed.")
		return
	}
	team := s.teamOf(r)
	s.mu.Lock()
	if !s.appVisibleLocked(app, team) {
		s.mu.Unlock()
		coolMsg(w, http.StatusNotFound, msgAppGet)
		return
	}
	id := newUUID()
	st := &coolStorage{UUID: id, App: app, Name: app + "-" + in.Name, Kind: "persistent", MountPath: in.MountPath}
	s.cool.storages[id] = st
	if _, ok := s.cool.volumes[st.Name]; !ok {
		s.cool.volumes[st.Name] = &dockerVolume{Name: st.Name, Server: SimServer} // a new volume is empty
	}
	err := s.persistLocked()
	s.mu.Unlock()
	if err != nil {
		coolMsg(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"uuid": id, "name": st.Name, "mount_path": st.MountPath, "host_path": nil})
}

// VolumeData is the data of the Docker volume name ("" when empty or absent).
func (s *Sim) VolumeData(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.cool.volumes[name]; v != nil {
		return v.Data
	}
	return ""
}
