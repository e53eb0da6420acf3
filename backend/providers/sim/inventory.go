package sim

import (
	"hash/crc32"
	"net/http"
)

// EndpointListEnvironments is GET /projects/{uuid}/environments.
const EndpointListEnvironments = "coolify.ListEnvironments"

// environmentID is the id of a project's one ("production") environment.
// Coolify's ids are integers; deriving it from the project's uuid keeps it
// stable across restarts without adding it to the saved state.
func environmentID(projectUUID string) int {
	return int(crc32.ChecksumIEEE([]byte(projectUUID))&0x3fffffff) + 1
}

// coolListEnvironments answers like Coolify: the project's environments, or
// 404 "Project not found." for an unknown project or another team's (PC:541-560).
func (s *Sim) coolListEnvironments(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("uuid")
	team := s.teamOf(r)
	s.mu.Lock()
	p, ok := s.cool.projects[id]
	ok = ok && p.Team == team
	s.mu.Unlock()
	if !ok {
		coolMsg(w, http.StatusNotFound, msgProject)
		return
	}
	writeJSON(w, http.StatusOK, []map[string]any{{
		"id": environmentID(p.UUID), "name": "production", "project_id": environmentID(p.UUID), "description": nil,
	}})
}

// AddListedRepos adds repositories that exist only in the REST API's
// answers, with no git repository behind them: for list-heavy tests and
// benchmarks (thousands of repositories without thousands of `git init`).
// Pushing to or cloning them fails; they are not saved across a restart.
func (s *Sim) AddListedRepos(project string, slugs []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, slug := range slugs {
		rp := &bbRepo{ID: int(s.bb.nextID.Add(1)), Project: project, Slug: slug, Name: slug}
		s.bb.repos[repoKey(project, slug)] = rp
	}
	s.bb.projects[project] = true
}
