package sim

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What the simulated Coolify does for the checks before destroying (issue
// 32), each as the real one at coollabsio/coolify 379abb25 (v4.3.10-41)
// does it: env vars and their preview copies, locked values, servers and
// their reachability (a queued delete on an unreachable server removes the
// rows and leaves volumes and containers), and the per-user throttle.

// Endpoints of the servers.
const (
	EndpointGetServer   = "coolify.GetServer"
	EndpointListServers = "coolify.ListServers"
)

// addEnvLocked creates an env var row and returns its uuid. Creating a
// normal var of an application also creates its preview copy, with the
// same key and value, unless a preview var of that key exists: Coolify's
// model does it on every create, API and UI alike
// (app/Models/EnvironmentVariable.php:95-120).
func (s *Sim) addEnvLocked(app, key, value string, preview, locked bool) string {
	id := newUUID()
	s.cool.envs[id] = &coolEnv{UUID: id, App: app, Key: key, Value: value, Preview: preview, Locked: locked}
	if preview {
		return id
	}
	for _, e := range s.cool.envs {
		if e.App == app && e.Preview && e.Key == key {
			return id
		}
	}
	cp := newUUID()
	s.cool.envs[cp] = &coolEnv{UUID: cp, App: app, Key: key, Value: value, Preview: true}
	return id
}

// envListingLocked is GET /applications/{uuid}/envs's order: the normal
// vars, then the preview copies (AC:3223: environment_variables merged
// with environment_variables_preview).
func (s *Sim) envListingLocked(app string) []*coolEnv {
	all := s.envsLocked(app)
	sort.SliceStable(all, func(i, j int) bool { return !all[i].Preview && all[j].Preview })
	return all
}

// PreviewEnvs returns an application's preview env vars, by key.
func (s *Sim) PreviewEnvs(appUUID string) []Env {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Env
	for _, e := range s.envsLocked(appUUID) {
		if e.Preview {
			out = append(out, Env{UUID: e.UUID, Key: e.Key, Value: e.Value})
		}
	}
	return out
}

// LockEnv locks an application's normal env var key (Coolify's "lock":
// is_shown_once): its value is hidden from every API token from then on,
// root included (ApplicationsController.php:129-131).
func (s *Sim) LockEnv(app, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.cool.envs {
		if e.App == app && e.Key == key && !e.Preview {
			e.Locked = true
			return s.persistLocked()
		}
	}
	return ErrNotFound
}

// user is the user a token belongs to. The simulator has one user per
// team, who made every token of it: Coolify's throttle counts per user
// (RouteServiceProvider.php:47-53), so all of a team's tokens share one
// budget here.
func (t coolToken) user() int64 { return t.Team }

// rateWindow is one user's throttle window: Laravel's RateLimiter counts
// hits under the key and starts the decay (60 s) at the first hit after
// the last window expired (Illuminate\Cache\RateLimiter::hit).
type rateWindow struct {
	start time.Time
	count int
}

// throttle counts one request of user against the rate limit. Every
// answer carries X-RateLimit-Limit and X-RateLimit-Remaining; past the
// limit it answers 429 "Too Many Attempts." with Retry-After (the seconds
// left in the window, 0-60) and X-RateLimit-Reset, as Laravel's
// ThrottleRequests does (getHeaders, buildException). It reports whether
// it refused.
func (s *Sim) throttle(w http.ResponseWriter, user int64) bool {
	s.mu.Lock()
	limit := s.cool.rateLimit
	if limit <= 0 {
		s.mu.Unlock()
		return false
	}
	now := s.now()
	rw := s.cool.rate[user]
	if rw == nil || now.Sub(rw.start) >= time.Minute {
		rw = &rateWindow{start: now}
		s.cool.rate[user] = rw
	}
	over := rw.count >= limit
	if !over {
		rw.count++
	}
	left := max(0, limit-rw.count)
	end := rw.start.Add(time.Minute)
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(left))
	if !over {
		return false
	}
	retry := int((end.Sub(now) + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(min(max(retry, 0), 60)))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
	coolMsg(w, http.StatusTooManyRequests, msgTooManyAttempts)
	return true
}

// ThrottledCount is how many requests the throttle refused with 429 so
// far (from the recorded requests).
func (s *Sim) ThrottledCount() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Server == "coolify" && r.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// SetServerReachable says whether Coolify can reach its server: GET
// /servers/{uuid} shows it in settings.is_reachable / is_usable
// (ServersController.php:149-184). While it cannot, a queued delete of an
// application or database catches the failure of the remote clean-up and
// deletes the rows anyway (DeleteResourceJob.php:57-100, 130): the
// containers and volumes stay on the server (DockerContainers,
// DockerVolumes; the control API's coolify/server and state).
func (s *Sim) SetServerReachable(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.unreachable = !ok
}

// cleanupFailsLocked: the server side of a queued delete fails (the server
// unreachable, or FailServerCleanup).
func (s *Sim) cleanupFailsLocked() bool { return s.cool.cleanupFails || s.cool.unreachable }

// serverCleanupLocked is the remote part of deleting database id: stop
// its container and remove its volume (StopDatabase, deleteVolumes). When
// it fails, both stay on the server.
func (s *Sim) serverCleanupLocked(id, volume string) {
	if !s.cleanupFailsLocked() {
		return
	}
	s.cool.leftContainers[id] = SimServer
	if volume != "" {
		if _, ok := s.cool.volumes[volume]; !ok {
			s.cool.volumes[volume] = &dockerVolume{Name: volume, Server: SimServer, Data: "data of database " + id}
		}
	}
}

// dbVolumeName is the Docker volume Coolify makes for a database's data:
// "<engine>-data-<uuid>" (app/Models/StandalonePostgresql.php:107,
// StandaloneMysql.php:91, StandaloneMariadb.php:89, StandaloneRedis.php:83,
// StandaloneKeydb.php:85, StandaloneDragonfly.php:84,
// StandaloneClickhouse.php:85; MongoDB's "mongodb-db-<uuid>",
// StandaloneMongodb.php:94). The simulator lists it only once it outlives
// its database.
func dbVolumeName(d *coolDB) string {
	if d == nil {
		return ""
	}
	engine := strings.TrimPrefix(d.Type, "standalone-")
	switch engine {
	case "postgresql":
		return "postgres-data-" + d.UUID
	case "mongodb":
		return "mongodb-db-" + d.UUID
	}
	return engine + "-data-" + d.UUID
}

// DockerContainer is a container on the simulated server.
type DockerContainer struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// Left is true for the container of a deleted application or
	// database that the delete could not remove.
	Left bool `json:"left,omitempty"`
}

// DockerContainers lists the server's containers: one per application and
// database (named by its uuid, StartPostgresql.php:28), and those of
// deleted rows left behind.
func (s *Sim) DockerContainers() []DockerContainer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DockerContainer
	for id := range s.cool.apps {
		out = append(out, DockerContainer{Name: id, Server: SimServer})
	}
	for id := range s.cool.dbs {
		out = append(out, DockerContainer{Name: id, Server: SimServer})
	}
	for id, srv := range s.cool.leftContainers {
		if s.cool.apps[id] == nil && s.cool.dbs[id] == nil {
			out = append(out, DockerContainer{Name: id, Server: srv, Left: true})
		}
	}
	slices.SortFunc(out, func(a, b DockerContainer) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RemoveDockerContainer is the manual `docker rm -f` of a left container.
func (s *Sim) RemoveDockerContainer(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.cool.leftContainers[name]
	delete(s.cool.leftContainers, name)
	return ok
}

// serverWire is a server as GET /servers/{uuid} shows it (settings loaded,
// ServersController.php:176-183) and GET /servers lists it (with
// is_reachable / is_usable copied to the top, :95-96).
func (s *Sim) serverWireLocked(list bool) map[string]any {
	ok := !s.cool.unreachable
	m := map[string]any{"uuid": ServerUUID, "name": SimServer, "ip": "host.docker.internal", "user": "root", "port": 22,
		"settings": map[string]any{"is_reachable": ok, "is_usable": ok, "is_build_server": false, "force_disabled": false}}
	if list {
		m["is_reachable"], m["is_usable"] = ok, ok
	}
	return m
}

// coolGetServer is server_by_uuid (ServersController.php:149-184): the
// team's server or 404 "Server not found." (:158).
func (s *Sim) coolGetServer(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	var body map[string]any
	if r.PathValue("uuid") == ServerUUID && team == RootTeam {
		body = s.serverWireLocked(false)
	}
	s.mu.Unlock()
	if body == nil {
		coolMsg(w, http.StatusNotFound, msgServerNotFound)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// coolListServers is servers (ServersController.php:88-109).
func (s *Sim) coolListServers(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	out := []map[string]any{}
	if team == RootTeam {
		out = append(out, s.serverWireLocked(true))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) checkRoutes(h func(pattern, endpoint string, res func(*http.Request) string, f http.HandlerFunc)) {
	read := func(f http.HandlerFunc) http.HandlerFunc { return s.ability("read", f) }
	// routes/api.php:151-152, behind api.ability:read.
	h("GET /api/v1/servers", EndpointListServers, nil, read(s.coolListServers))
	h("GET /api/v1/servers/{uuid}", EndpointGetServer, func(r *http.Request) string { return r.PathValue("uuid") }, read(s.coolGetServer))
}
