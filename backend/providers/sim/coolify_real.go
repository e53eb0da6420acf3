package sim

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// What the simulated Coolify does beyond one resource's CRUD, each as the
// real one at coollabsio/coolify main 379abb25 (v4.3.10-41) does it: teams
// and token abilities, the server's Docker volumes apart from the storage
// definitions, read-only compose storages, server cleanup that can fail
// inside a queued delete, the rate limit, /version and /team.

// RootTeam is the team of the token the simulator starts with (Coolify's
// root team has id 0, app/Models/Team.php:164).
const RootTeam int64 = 0

// DefaultCoolifyVersion is what GET /version answers by default
// (config/constants.php:5 at v4.3.10-41).
const DefaultCoolifyVersion = "4.3.11"

// coolToken is an API token: its team (personal_access_tokens.team_id,
// the team selected when it was made) and its abilities.
type coolToken struct {
	Team      int64
	Abilities []string
}

// can reports whether the token has ability ("root" has them all,
// app/Http/Middleware/ApiAbility.php:38-40).
func (t coolToken) can(ability string) bool {
	return slices.Contains(t.Abilities, "root") || slices.Contains(t.Abilities, ability)
}

// dockerVolume is a Docker volume on the Coolify server: it lives apart
// from the storage row that mounts it (LocalPersistentVolume's name is the
// volume's name). Deleting the storage row leaves it (AC:5090); a storage
// added later with the same name mounts it again, data and all.
type dockerVolume struct {
	Name, Server, Data string
}

// DockerVolume is a Docker volume as the simulator's server holds it.
type DockerVolume struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Data   string `json:"data"`
}

// SimServer is the name of the one server the simulated Coolify deploys to
// (a fresh Coolify names its own server "localhost").
const SimServer = "localhost"

// AddCoolifyToken makes another API token, of team (a team the simulator
// creates on first use, named name) with abilities (e.g. "read", "write",
// "deploy"; "root" is all of them), and returns it.
func (s *Sim) AddCoolifyToken(team int64, name string, abilities ...string) string {
	tok := "coolify-sim-" + newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.tokens[tok] = coolToken{Team: team, Abilities: abilities}
	if _, ok := s.cool.teams[team]; !ok {
		s.cool.teams[team] = name
	}
	return tok
}

// AddProjectInTeam creates a Coolify project owned by team.
func (s *Sim) AddProjectInTeam(team int64, name string) (string, error) {
	id := newUUID()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.projects[id] = &coolProject{UUID: id, Name: name, Team: team}
	return id, s.persistLocked()
}

// SetCoolifyVersion sets what GET /version answers.
func (s *Sim) SetCoolifyVersion(v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.version = v
}

// SetAppBuildPack sets an application's build pack. With "dockercompose"
// its storages are declared by the compose file and read-only: the API
// refuses to delete them with 422 (LocalPersistentVolume.php:101-131
// shouldBeReadOnlyInUI; AC:5076-5080).
func (s *Sim) SetAppBuildPack(app, pack string) error {
	return s.changeApp(app, func(a *coolApp) { a.BuildPack = pack })
}

// FailServerCleanup makes the server side of queued deletes fail (the
// server unreachable, the stop failing): Coolify's DeleteResourceJob logs
// it and deletes the rows anyway (DeleteResourceJob.php:57-100, 130), so the
// resource answers 404 while its Docker volumes stay on the server.
func (s *Sim) FailServerCleanup(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.cleanupFails = fail
}

// SetCoolifyRateLimit limits the API to perMinute requests a minute per
// user (0: no limit), as Coolify's throttle:api does (app/Http/Kernel.php:85,
// RouteServiceProvider.php:47-53; default 200, config/api.php): see
// throttle in coolify_checks.go.
func (s *Sim) SetCoolifyRateLimit(perMinute int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cool.rateLimit, s.cool.rate = perMinute, map[int64]*rateWindow{}
}

// DockerVolumes lists the Docker volumes on the simulated server, by name.
func (s *Sim) DockerVolumes() []DockerVolume {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []DockerVolume
	for _, v := range s.cool.volumes {
		out = append(out, DockerVolume{Name: v.Name, Server: v.Server, Data: v.Data})
	}
	slices.SortFunc(out, func(a, b DockerVolume) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// HasDockerVolume reports whether the server still holds the volume.
func (s *Sim) HasDockerVolume(name string) bool {
	return s.has(func() bool { _, ok := s.cool.volumes[name]; return ok })
}

// RemoveDockerVolume is the manual `docker volume rm <name>` on the server.
func (s *Sim) RemoveDockerVolume(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.cool.volumes[name]
	delete(s.cool.volumes, name)
	_ = s.persistLocked()
	return ok
}

// tokenLocked returns the token of r's bearer header.
func (s *Sim) tokenLocked(r *http.Request) (coolToken, bool) {
	tok, ok := bearer(r)
	if !ok {
		return coolToken{}, false
	}
	t, ok := s.cool.tokens[tok]
	return t, ok
}

// teamOf is the team of the request's token (coolAuth has checked it).
func (s *Sim) teamOf(r *http.Request) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, _ := s.tokenLocked(r)
	return t.Team
}

// projectVisibleLocked: every lookup is filtered by the token's team
// (Project::whereTeamId, PC:96; Application::ownedByCurrentTeamAPI,
// app/Models/Application.php:480-483; queryDatabaseByUuidWithinTeam, DC:328).
func (s *Sim) projectVisibleLocked(project string, team int64) bool {
	p, ok := s.cool.projects[project]
	return ok && p.Team == team
}

// ability wraps a handler with Coolify's api.ability middleware: a token
// without it gets 403 "Missing required permissions: <ability>"
// (ApiAbility.php:59-61).
func (s *Sim) ability(name string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		t, _ := s.tokenLocked(r)
		s.mu.Unlock()
		if !t.can(name) {
			coolMsg(w, http.StatusForbidden, "Missing required permissions: "+name)
			return
		}
		h(w, r)
	}
}

// coolVersion answers GET /version with the bare version text
// (OtherController.php:47-50: response(config('constants.coolify.version'))).
func (s *Sim) coolVersion(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	v := s.cool.version
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=UTF-8")
	io.WriteString(w, v)
}

// coolTeam answers GET /team with the token's team
// (TeamController.php:211-225).
func (s *Sim) coolTeam(w http.ResponseWriter, r *http.Request) {
	team := s.teamOf(r)
	s.mu.Lock()
	name, ok := s.cool.teams[team]
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, "Team not found.")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": team, "name": name, "description": nil, "personal_team": team == RootTeam})
}

// postRequired is what Coolify answers a GET on a POST-only route
// (OtherController.php:13-18); GET /enable and GET /deploy sit behind the
// write and deploy abilities, so they tell abilities without changing
// anything.
func postRequired(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", "POST")
	coolMsg(w, http.StatusMethodNotAllowed, "This endpoint has changed to a POST request.")
}

// removeVolumesLocked is the server side of deleting an application with
// delete_volumes: `docker volume rm` of each persistent storage's volume,
// which fails silently (Application::deleteVolumes runs instant_remote_process
// with throwError=false, app/Models/Application.php:522-536).
func (s *Sim) removeVolumesLocked(app string) {
	if s.cleanupFailsLocked() {
		s.cool.leftContainers[app] = SimServer // StopApplication failed too
		return
	}
	for _, st := range s.cool.storages {
		if st.App == app && st.Kind == "persistent" {
			delete(s.cool.volumes, st.Name)
		}
	}
}

// ensureVolumeLocked creates the Docker volume a persistent storage names,
// if the server does not hold it yet (Docker creates a named volume on the
// first container start that mounts it).
func (s *Sim) ensureVolumeLocked(name string) {
	if _, ok := s.cool.volumes[name]; !ok {
		s.cool.volumes[name] = &dockerVolume{Name: name, Server: SimServer, Data: fmt.Sprintf("data written into %s", name)}
	}
}
