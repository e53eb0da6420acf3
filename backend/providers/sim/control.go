package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ControlHandler returns the HTTP control API, for the demo server (which
// mounts it under /api/sim/) and browser tests. It works mounted with or
// without that prefix. JSON in and out:
//
//	GET    faults            → {"faults":[Fault]}
//	POST   faults            Fault (+ "latency_ms") → 201 {"id":N}
//	DELETE faults            → 204, clears all
//	DELETE faults/{id}       → 204, or 404
//	GET    requests[?after=RFC3339Nano] → {"requests":[Request]}
//	DELETE requests          → 204, forgets recorded requests
//	GET    state             → {"coolify":{…},"bitbucket":{…}}
//	GET    coolify/volumes   → {"volumes":[DockerVolume]} (the server's Docker volumes)
//	DELETE coolify/volumes/{name} → 204, or 404 (the manual `docker volume rm`)
//	GET    coolify/containers → {"containers":[DockerContainer]} (left ones marked)
//	DELETE coolify/containers/{name} → 204, or 404 (the manual `docker rm -f`)
//	GET    coolify/server    → the server as GET /servers/{uuid} shows it
//	PUT    coolify/server    {"reachable":bool} → 204 (SetServerReachable)
//	PUT    coolify/rate-limit {"per_minute":N} → 204 (SetCoolifyRateLimit)
//	POST   slots             {"name":"x"} → 201 SlotFixture (SeedSlot)
//	POST   coolify/builds    {"app"?, "seconds", "concurrent_builds"?} → 204: an app's
//	                         build time (every app's without "app"); the server's concurrent_builds
//	POST   coolify/health-check {"app", "enabled"} → 204 (health_check_enabled)
//	POST   coolify/database-start {"project"?, "seconds"?, "fail"} → 204: new databases take
//	                         seconds to start; with fail, the project's new databases stay exited
//	GET    projects          → {"coolify":[uuid],"bitbucket":[key]} (Projects: the demo's scope)
//
//	POST   pull-requests     {"project","repo","branch"} → 201 {"id","head","event_key","request_id","payload"}:
//	                         the repo made if missing, a new commit on branch, a PR opened; the delivery
//	                         Bitbucket would send (pullrequests.go)
//	POST   pull-requests/{project}/{repo}/{id}/merge|decline|push → 201, the same shape
//	GET    pull-requests/{project}/{repo}/{id} → {"comments"}; GET builds/{sha} → {"statuses"}
//
// It has no authentication: mount it only in demo or test servers.
func (s *Sim) ControlHandler() http.Handler {
	mux := controlMux{http.NewServeMux()}
	s.prControl(mux)
	mux.HandleFunc("GET /faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"faults": s.Faults()})
	})
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Fault
			LatencyMS int `json:"latency_ms"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			ctlError(w, http.StatusBadRequest, "bad fault: "+err.Error())
			return
		}
		if in.Status != 0 && (in.Status < 100 || in.Status > 599) || in.Times < 0 || in.Skip < 0 || in.LatencyMS < 0 || in.Latency < 0 {
			ctlError(w, http.StatusBadRequest, "bad fault: status, times or latency out of range")
			return
		}
		if in.LatencyMS > 0 {
			in.Latency = time.Duration(in.LatencyMS) * time.Millisecond
		}
		writeJSON(w, http.StatusCreated, map[string]int{"id": s.AddFault(in.Fault)})
	})
	mux.HandleFunc("DELETE /faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /faults/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(r.PathValue("id"))
		if err != nil || !s.RemoveFault(id) {
			ctlError(w, http.StatusNotFound, "no such fault")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /requests", func(w http.ResponseWriter, r *http.Request) {
		reqs := s.Requests()
		if a := r.URL.Query().Get("after"); a != "" {
			t, err := time.Parse(time.RFC3339Nano, a)
			if err != nil {
				ctlError(w, http.StatusBadRequest, "after: want RFC 3339 time")
				return
			}
			reqs = s.RequestsAfter(t)
		}
		if reqs == nil {
			reqs = []Request{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"requests": reqs})
	})
	mux.HandleFunc("DELETE /requests", func(w http.ResponseWriter, r *http.Request) {
		s.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /coolify/volumes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"volumes": s.DockerVolumes()})
	})
	mux.HandleFunc("DELETE /coolify/volumes/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !s.RemoveDockerVolume(r.PathValue("name")) {
			ctlError(w, http.StatusNotFound, "no such volume")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.State())
	})
	mux.HandleFunc("GET /coolify/containers", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"containers": s.DockerContainers()})
	})
	mux.HandleFunc("DELETE /coolify/containers/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !s.RemoveDockerContainer(r.PathValue("name")) {
			ctlError(w, http.StatusNotFound, "no such left container")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /coolify/server", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body := s.serverWireLocked(false)
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("PUT /coolify/server", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Reachable *bool `json:"reachable"`
		}
		if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&in) != nil || in.Reachable == nil {
			ctlError(w, http.StatusBadRequest, `want {"reachable": true|false}`)
			return
		}
		s.SetServerReachable(*in.Reachable)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /coolify/rate-limit", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			PerMinute *int `json:"per_minute"`
		}
		if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&in) != nil || in.PerMinute == nil || *in.PerMinute < 0 {
			ctlError(w, http.StatusBadRequest, `want {"per_minute": N ≥ 0}`)
			return
		}
		s.SetCoolifyRateLimit(*in.PerMinute)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /projects", func(w http.ResponseWriter, r *http.Request) {
		cool, bb, _ := s.Projects(r.Context())
		writeJSON(w, http.StatusOK, ProjectList{Coolify: nonNil(cool), Bitbucket: nonNil(bb)})
	})
	mux.HandleFunc("POST /slots", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Name string `json:"name"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || !validSeedName(in.Name) {
			ctlError(w, http.StatusBadRequest, "want {\"name\": lower-case letters, digits and '-' (1-40)}")
			return
		}
		fx, err := s.SeedSlot(in.Name)
		if err == errRepoExists {
			ctlError(w, http.StatusConflict, "slot already seeded")
			return
		}
		if err != nil {
			ctlError(w, http.StatusInternalServerError, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, fx)
	})
	mux.HandleFunc("POST /coolify/builds", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			App              string   `json:"app"`
			Seconds          *float64 `json:"seconds"`
			ConcurrentBuilds *int     `json:"concurrent_builds"`
		}
		if !decodeCtl(w, r, &in) {
			return
		}
		if in.Seconds != nil && (*in.Seconds < 0 || *in.Seconds > 86400) || in.ConcurrentBuilds != nil && (*in.ConcurrentBuilds < 1 || *in.ConcurrentBuilds > 100) {
			ctlError(w, http.StatusBadRequest, "seconds: 0 to 86400; concurrent_builds: 1 to 100")
			return
		}
		if in.Seconds != nil {
			d := time.Duration(*in.Seconds * float64(time.Second))
			if in.App == "" {
				s.SetDeployDelay(d)
			} else {
				s.SetBuildDuration(in.App, d)
			}
		}
		if in.ConcurrentBuilds != nil {
			s.SetConcurrentBuilds(*in.ConcurrentBuilds)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /coolify/health-check", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			App     string `json:"app"`
			Enabled bool   `json:"enabled"`
		}
		if !decodeCtl(w, r, &in) {
			return
		}
		if in.App == "" {
			ctlError(w, http.StatusBadRequest, `want {"app": uuid, "enabled": bool}`)
			return
		}
		s.EnableHealthCheck(in.App, in.Enabled)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /coolify/database-start", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Project string   `json:"project"`
			Seconds *float64 `json:"seconds"`
			Fail    bool     `json:"fail"`
		}
		if !decodeCtl(w, r, &in) {
			return
		}
		if in.Seconds != nil && (*in.Seconds < 0 || *in.Seconds > 86400) || in.Fail && in.Project == "" {
			ctlError(w, http.StatusBadRequest, "seconds: 0 to 86400; fail needs a project")
			return
		}
		if in.Seconds != nil {
			s.SetDatabaseStart(time.Duration(*in.Seconds * float64(time.Second)))
		}
		if in.Project != "" {
			s.FailDatabaseStart(in.Project, in.Fail)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// POST /resources creates a resource no slot knows (an orphan, for
	// tests and the demo of reconciliation): {"kind": "application" |
	// "database" (in Coolify project "project") | "repository" (in
	// Bitbucket project "project"), "name"}.
	mux.HandleFunc("POST /resources", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Kind    string `json:"kind"`
			Project string `json:"project"`
			Name    string `json:"name"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil || !validSeedName(in.Name) || in.Project == "" || len(in.Project) > 64 {
			ctlError(w, http.StatusBadRequest, `want {"kind": "application"|"database"|"repository", "project", "name": lower-case letters, digits and '-' (1-40)}`)
			return
		}
		var id string
		var err error
		switch in.Kind {
		case "application":
			id, err = s.AddApp(in.Project, in.Name)
		case "database":
			id, err = s.AddDatabase(in.Project, in.Name)
		case "repository":
			var rf RepoFixture
			rf, err = s.AddRepo(in.Project, in.Name)
			id = rf.Project + "/" + rf.Slug
		default:
			ctlError(w, http.StatusBadRequest, "kind must be application, database or repository")
			return
		}
		if err == errRepoExists {
			ctlError(w, http.StatusConflict, "repository already exists")
			return
		}
		if err != nil {
			ctlError(w, http.StatusUnprocessableEntity, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, map[string]string{"kind": in.Kind, "id": id})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		if p, ok := strings.CutPrefix(r.URL.Path, "/api/sim"); ok {
			r2.URL.Path = p
			r2.URL.RawPath = ""
		}
		mux.ServeHTTP(w, r2)
	})
}

// ControlRoutes are the control API's routes (method and path under /sim),
// the one list: ControlHandler registers nothing else (it panics on a
// route missing here), and serve's --sim-url proxy forwards only these.
var ControlRoutes = []string{
	"GET /faults",
	"POST /faults",
	"DELETE /faults",
	"DELETE /faults/{id}",
	"GET /requests",
	"DELETE /requests",
	"GET /coolify/volumes",
	"DELETE /coolify/volumes/{name}",
	"GET /state",
	"GET /coolify/containers",
	"DELETE /coolify/containers/{name}",
	"GET /coolify/server",
	"PUT /coolify/server",
	"PUT /coolify/rate-limit",
	"GET /projects",
	"POST /slots",
	"POST /coolify/builds",
	"POST /coolify/health-check",
	"POST /coolify/database-start",
	"POST /resources",
	"POST /pull-requests",
	"POST /pull-requests/{project}/{repo}/{id}/merge",
	"POST /pull-requests/{project}/{repo}/{id}/decline",
	"POST /pull-requests/{project}/{repo}/{id}/push",
	"POST /pull-requests/{project}/{repo}/{id}/force-push",
	"GET /pull-requests/{project}/{repo}/{id}",
	"GET /builds/{sha}",
}

// controlMux is a ServeMux that registers only ControlRoutes.
type controlMux struct{ *http.ServeMux }

func (m controlMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	if !slices.Contains(ControlRoutes, pattern) {
		panic("sim: control route " + pattern + " is not in ControlRoutes")
	}
	m.ServeMux.HandleFunc(pattern, h)
}

// decodeCtl reads a small JSON body with no unknown fields (400 otherwise).
func decodeCtl(w http.ResponseWriter, r *http.Request, out any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		ctlError(w, http.StatusBadRequest, "bad body: "+err.Error())
		return false
	}
	return true
}

// ProjectList is GET projects' answer.
type ProjectList struct {
	Coolify   []string `json:"coolify"`
	Bitbucket []string `json:"bitbucket"`
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func ctlError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": http.StatusText(status), "message": msg}})
}

func validSeedName(n string) bool {
	if n == "" || len(n) > 40 || n[0] == '-' {
		return false
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// StateDump is the simulator's state as the control API shows it.
type StateDump struct {
	Coolify struct {
		Projects     []map[string]any `json:"projects"`
		Applications []map[string]any `json:"applications"`
		Databases    []map[string]any `json:"databases"`
		Envs         []map[string]any `json:"envs"`
		Storages     []map[string]any `json:"storages"`
		// DockerVolumes are the server's volumes, apart from the storage
		// rows: deleting a storage leaves its volume here.
		DockerVolumes []DockerVolume `json:"docker_volumes"`
		// DockerContainers are the server's containers, with those a
		// delete on an unreachable server left (issue 32).
		DockerContainers []DockerContainer `json:"docker_containers"`
	} `json:"coolify"`
	Bitbucket struct {
		Repos []map[string]any `json:"repos"`
	} `json:"bitbucket"`
}

// State returns a snapshot of everything the simulator holds.
func (s *Sim) State() StateDump {
	var d StateDump
	s.mu.Lock()
	for _, p := range s.cool.projects {
		d.Coolify.Projects = append(d.Coolify.Projects, map[string]any{"uuid": p.UUID, "name": p.Name})
	}
	for _, a := range s.cool.apps {
		d.Coolify.Applications = append(d.Coolify.Applications, map[string]any{"uuid": a.UUID, "name": a.Name, "project": a.Project, "status": a.Status, "deleting": a.Deleting})
	}
	for _, db := range s.cool.dbs {
		d.Coolify.Databases = append(d.Coolify.Databases, map[string]any{"uuid": db.UUID, "name": db.Name, "project": db.Project, "status": db.Status, "deleting": db.Deleting})
	}
	for _, e := range s.cool.envs {
		d.Coolify.Envs = append(d.Coolify.Envs, map[string]any{"uuid": e.UUID, "app": e.App, "key": e.Key, "is_preview": e.Preview})
	}
	for _, st := range s.cool.storages {
		d.Coolify.Storages = append(d.Coolify.Storages, map[string]any{"uuid": st.UUID, "app": st.App, "name": st.Name, "kind": st.Kind})
	}
	s.mu.Unlock()
	d.Coolify.DockerVolumes = s.DockerVolumes()
	d.Coolify.DockerContainers = s.DockerContainers()
	s.mu.Lock()
	var repos []bbRepo
	for _, rp := range s.bb.repos {
		repos = append(repos, *rp)
	}
	s.mu.Unlock()
	for _, rp := range repos {
		head, _ := s.RepoHeadSHA(rp.Project, rp.Slug, DefaultBranch)
		d.Bitbucket.Repos = append(d.Bitbucket.Repos, map[string]any{"project": rp.Project, "slug": rp.Slug, "name": rp.Name, "deleting": rp.Deleting, "main": head})
	}
	for _, l := range [][]map[string]any{d.Coolify.Projects, d.Coolify.Applications, d.Coolify.Databases, d.Coolify.Envs, d.Coolify.Storages, d.Bitbucket.Repos} {
		sortByName(l)
	}
	return d
}

// sortByName orders a dump list stably for display: by name (or key, or
// slug), then uuid.
func sortByName(l []map[string]any) {
	key := func(m map[string]any) string {
		return fmt.Sprint(m["project"], "/", m["name"], m["key"], m["slug"], "/", m["uuid"])
	}
	slices.SortFunc(l, func(a, b map[string]any) int { return strings.Compare(key(a), key(b)) })
}
