package sim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/cgi"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

type bbRepo struct {
	ID       int
	Project  string // key, upper case
	Slug     string
	Name     string
	Deleting bool
	// Origin is the "PROJECT/slug" a fork was forked from ("" for none).
	Origin string
}

type bbState struct {
	repos    map[string]*bbRepo // "PROJECT/slug"
	projects map[string]bool    // keys, upper case
	nextID   atomic.Int64
	tokens   map[string]BitbucketToken // added tokens (bitbucket_auth.go); never saved
}

func (b *bbState) init() {
	b.repos = map[string]*bbRepo{}
	b.projects = map[string]bool{}
}

func repoKey(project, slug string) string { return strings.ToUpper(project) + "/" + slug }

// bbError is Bitbucket's error body.
func bbError(context any, msg string, exception any) map[string]any {
	return map[string]any{"errors": []map[string]any{{"context": context, "message": msg, "exceptionName": exception}}}
}

func bbErrBody(status int) string {
	var body map[string]any
	switch status {
	case 401:
		body = bbError(nil, "Authentication failed. Please check your credentials and try again.", "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException")
	case 403:
		body = bbError(nil, "You are not permitted to access this resource", "com.atlassian.bitbucket.AuthorisationException")
	case 404:
		body = bbError(nil, "Repository does not exist.", "com.atlassian.bitbucket.repository.NoSuchRepositoryException")
	case 409:
		body = bbError("name", "This repository URL is already taken.", nil)
	case 429:
		body = bbError(nil, "Too many requests. Please try again later.", "com.atlassian.bitbucket.throttle.ThrottledException")
	default:
		body = bbError(nil, http.StatusText(status), nil)
	}
	b, _ := json.Marshal(body)
	return string(b)
}

// bbAuth lets in a known token: Bearer of any kind, Basic only for a
// personal token with its owner's user name (bitbucket_auth.go). Each
// handler then checks the permission its operation needs.
func (s *Sim) bbAuth(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := s.bbCaller(r); !ok {
		writeJSON(w, http.StatusUnauthorized, bbError(nil, "Authentication failed. Please check your credentials and try again.", "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException"))
		return false
	}
	return true
}

// gitAuth applies the same token rules to git smart HTTP (the Atlassian
// page says "In Git and API calls"): a project or repository token only as
// Bearer, a personal one as Bearer or Basic with its owner's user name.
// Fetching needs repository read, pushing repository write; without the
// permission git gets 401 too, as the REST API answers (the 9.4 OpenAPI;
// the docs do not give git's status, so the simulator keeps the REST rule).
// Unknown credentials are asked for with a Basic challenge, as Bitbucket
// does, so git calls its askpass helper.
func (s *Sim) gitAuth(w http.ResponseWriter, r *http.Request) bool {
	t, ok := s.bbCaller(r)
	want := PermRead
	if strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack" {
		want = PermWrite
	}
	if ok && atLeast(t.repoPerm(r.PathValue("project"), strings.TrimSuffix(r.PathValue("repo"), ".git")), want) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="Atlassian Bitbucket"`)
	http.Error(w, "Authentication failed.", http.StatusUnauthorized)
	return false
}

func (s *Sim) bitbucketMux() http.Handler {
	mux := http.NewServeMux()
	res := func(r *http.Request) string {
		return repoKey(r.PathValue("project"), r.PathValue("slug"))
	}
	proj := func(r *http.Request) string { return strings.ToUpper(r.PathValue("project")) }
	for _, base := range []string{"/rest/api/1.0", "/rest/api/latest"} {
		h := func(pattern, endpoint string, rf func(*http.Request) string, f http.HandlerFunc) {
			mux.Handle(pattern, s.route("bitbucket", endpoint, rf, s.bbAuth, bbErrBody, f))
		}
		h("GET "+base+"/projects/{project}/repos/{slug}", EndpointGetRepo, res, s.bbGetRepo)
		h("GET "+base+"/projects/{project}/repos/{slug}/default-branch", EndpointDefaultBranch, res, s.bbDefaultBranch)
		h("DELETE "+base+"/projects/{project}/repos/{slug}", EndpointDeleteRepo, res, s.bbDeleteRepo)
		h("POST "+base+"/projects/{project}/repos", EndpointCreateRepo, proj, s.bbCreateRepo)
		h("POST "+base+"/projects/{project}/repos/{slug}", EndpointForkRepo, res, s.bbForkRepo)
		h("GET "+base+"/projects/{project}/repos", EndpointListRepos, proj, s.bbListRepos)
		h("GET "+base+"/projects/{project}", EndpointBBGetProject, proj, s.bbGetProject)
		h("GET "+base+"/projects", EndpointBBListProjects, nil, s.bbListProjects)
		s.prRoutes(mux, base)
	}
	gitRes := func(r *http.Request) string {
		return repoKey(r.PathValue("project"), strings.TrimSuffix(r.PathValue("repo"), ".git"))
	}
	g := func(pattern, endpoint string) {
		mux.Handle(pattern, s.route("bitbucket", endpoint, gitRes, s.gitAuth, bbErrBody, s.serveGit))
	}
	g("GET /scm/{project}/{repo}/info/refs", EndpointGitInfoRefs)
	g("POST /scm/{project}/{repo}/git-upload-pack", EndpointGitUploadPack)
	g("POST /scm/{project}/{repo}/git-receive-pack", EndpointGitReceivePack)
	mux.Handle("/", s.route("bitbucket", "", nil, nil, bbErrBody, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, bbError(nil, "Not found.", nil))
	}))
	return mux
}

// repoJSON is a repository as Bitbucket DC represents it, in REST answers
// and in webhook payloads alike (prJSON): the Event payload page gives its
// Repository entity "consistent representations in all the payloads where
// they appear", and a real server's delivery carries the REST answer's
// fields, links included (argoproj/argo-cd,
// util/webhook/testdata/bitbucket-server-event.json: a repo:refs_changed
// delivery). The fields are RestRepository's in the 9.4 OpenAPI; a fork
// names the repository it was forked from (RestRepository.origin). A
// personal project's repository is browsed under its owner
// (/users/<slug>/repos/…, as a real server's self link reads). s.mu held.
func (s *Sim) repoJSON(rp *bbRepo) map[string]any {
	clone := s.CloneURL(rp.Project, rp.Slug)
	out := map[string]any{
		"slug": rp.Slug, "id": rp.ID, "name": rp.Name, "scmId": "git",
		"state": "AVAILABLE", "statusMessage": "Available", "forkable": true,
		"project": projectJSON(rp.Project), "public": false,
		"links": map[string]any{
			"clone": []map[string]string{{"href": clone, "name": "http"}},
			"self":  []map[string]string{{"href": s.bbURL + projectPath(rp.Project) + "/repos/" + rp.Slug + "/browse"}},
		},
	}
	if o, ok := s.bb.repos[rp.Origin]; ok && o != rp {
		out["origin"] = s.repoJSON(o)
	}
	return out
}

// repoJSONOf is repoJSON of project/slug, taking s.mu. A repository
// deleted since (the fork of a PR still open) is represented by its key
// and slug alone (id 0): the simulator no longer knows more of it.
func (s *Sim) repoJSONOf(project, slug string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, ok := s.bb.repos[repoKey(project, slug)]
	if !ok {
		rp = &bbRepo{Project: project, Slug: slug, Name: slug}
	}
	return s.repoJSON(rp)
}

func noSuchRepo(w http.ResponseWriter, project, slug string) {
	writeJSON(w, http.StatusNotFound, bbError(nil, fmt.Sprintf("Repository %s/%s does not exist.", strings.ToUpper(project), slug), "com.atlassian.bitbucket.repository.NoSuchRepositoryException"))
}

// repoRead: GET repo and default-branch need REPO_READ (the 9.4 OpenAPI).
func (s *Sim) repoRead(w http.ResponseWriter, r *http.Request) bool {
	p, slug := r.PathValue("project"), r.PathValue("slug")
	return s.bbAllowed(w, r, func(t BitbucketToken) bool { return atLeast(t.repoPerm(p, slug), PermRead) })
}

func (s *Sim) bbGetRepo(w http.ResponseWriter, r *http.Request) {
	p, slug := r.PathValue("project"), r.PathValue("slug")
	if !s.repoRead(w, r) {
		return
	}
	s.mu.Lock()
	rp, ok := s.bb.repos[repoKey(p, slug)]
	var body map[string]any
	if ok {
		body = s.repoJSON(rp)
	}
	s.mu.Unlock()
	if !ok {
		noSuchRepo(w, p, slug)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// bbDefaultBranch answers Bitbucket's RestMinimalRef of the repository's
// default branch; every simulated repository's is main.
func (s *Sim) bbDefaultBranch(w http.ResponseWriter, r *http.Request) {
	p, slug := r.PathValue("project"), r.PathValue("slug")
	if !s.repoRead(w, r) {
		return
	}
	s.mu.Lock()
	_, ok := s.bb.repos[repoKey(p, slug)]
	s.mu.Unlock()
	if !ok {
		noSuchRepo(w, p, slug)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": "refs/heads/" + DefaultBranch, "displayId": DefaultBranch, "type": "BRANCH"})
}

// bbDeleteRepo schedules the deletion (202); a missing repo answers 204, as
// Bitbucket Data Center does. It needs REPO_ADMIN, the default of the
// repository delete policy (the 9.4 OpenAPI), else 401.
func (s *Sim) bbDeleteRepo(w http.ResponseWriter, r *http.Request) {
	key := repoKey(r.PathValue("project"), r.PathValue("slug"))
	if !s.bbAllowed(w, r, func(t BitbucketToken) bool {
		return atLeast(t.repoPerm(r.PathValue("project"), r.PathValue("slug")), PermAdmin)
	}) {
		return
	}
	s.mu.Lock()
	rp, ok := s.bb.repos[key]
	var err error
	if ok {
		rp.Deleting = true
		err = s.persistLocked()
	}
	s.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, bbError(nil, err.Error(), nil))
		return
	}
	s.after(s.opts.DeleteDelay, func() {
		// Under the lock, and only if the entry is still this repo, so a
		// repository re-created under the same name is never touched.
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.bb.repos[key] == rp {
			s.dropRepoLocked(key, rp)
			_ = s.persistLocked() // a snapshot still naming it completes the delete on load
		}
	})
	w.WriteHeader(http.StatusAccepted)
}

var slugUnsafe = regexp.MustCompile(`[^a-z0-9._-]+`)

// slugify derives a slug from a name the way Bitbucket does for plain names:
// lower case, runs of other characters become '-'.
func slugify(name string) string {
	return strings.Trim(slugUnsafe.ReplaceAllString(strings.ToLower(name), "-"), "-")
}

// bbCreateRepo creates a repository in an existing project. The 9.4
// OpenAPI: "Requires an existing project in which this repository will be
// created" — an unknown project is 404 NoSuchProjectException
// (REAL-BEHAVIOUR.md, Bitbucket table), never an implicit project. It needs
// REPO_CREATE on the project, which of a token's levels only project admin
// gives (Atlassian, HTTP access tokens, permission table), else 401.
func (s *Sim) bbCreateRepo(w http.ResponseWriter, r *http.Request) {
	project := strings.ToUpper(r.PathValue("project"))
	if !s.bbAllowed(w, r, func(t BitbucketToken) bool { return t.seesProject(project) }) || !s.projectExists(w, project) ||
		!s.bbAllowed(w, r, func(t BitbucketToken) bool { return atLeast(t.projectPerm(project), PermAdmin) }) {
		return
	}
	var in struct {
		Name  string `json:"name"`
		ScmID string `json:"scmId"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil || in.Name == "" {
		writeJSON(w, http.StatusBadRequest, bbError("name", "The repository name is required.", "com.atlassian.bitbucket.validation.ArgumentValidationException"))
		return
	}
	rp, err := s.AddRepo(project, in.Name)
	switch {
	case err == errRepoExists:
		// A taken slug, whoever took it: 409 "This repository URL is already
		// taken by …" (the 9.4 OpenAPI; REAL-BEHAVIOUR.md, Bitbucket table).
		writeJSON(w, http.StatusConflict, bbError("name", "This repository URL is already taken by '"+in.Name+"' in '"+project+"'", nil))
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, bbError(nil, err.Error(), nil))
		return
	}
	s.mu.Lock()
	body := s.repoJSON(s.bb.repos[repoKey(rp.Project, rp.Slug)])
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, body)
}

// bbListRepos pages like Bitbucket: ?start=&limit= (default 25, max 1000).
func (s *Sim) bbListRepos(w http.ResponseWriter, r *http.Request) {
	project := strings.ToUpper(r.PathValue("project"))
	start, _ := strconv.Atoi(r.URL.Query().Get("start"))
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 {
		limit = 25
	}
	limit = min(limit, 1000)
	// PROJECT_READ (the 9.4 OpenAPI); a repository token has no project
	// permission at all.
	if !s.bbAllowed(w, r, func(t BitbucketToken) bool { return t.seesProject(project) }) || !s.projectExists(w, project) ||
		!s.bbAllowed(w, r, func(t BitbucketToken) bool { return atLeast(t.projectPerm(project), PermRead) }) {
		return
	}
	s.mu.Lock()
	var all []*bbRepo
	for _, rp := range s.bb.repos {
		if rp.Project == project {
			all = append(all, rp)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Slug < all[j].Slug })
	start = max(0, min(start, len(all)))
	end := min(len(all), start+limit)
	vals := []map[string]any{}
	for _, rp := range all[start:end] {
		vals = append(vals, s.repoJSON(rp))
	}
	s.mu.Unlock()
	page := map[string]any{"size": len(vals), "limit": limit, "start": start, "isLastPage": end >= len(all), "values": vals}
	if end < len(all) {
		page["nextPageStart"] = end
	}
	writeJSON(w, http.StatusOK, page)
}

// serveGit hands the request to the real `git http-backend` (CGI), after
// mapping Bitbucket's lower-case project in clone URLs to the key directory.
func (s *Sim) serveGit(w http.ResponseWriter, r *http.Request) {
	project := strings.ToUpper(r.PathValue("project"))
	repo := r.PathValue("repo")
	slug := strings.TrimSuffix(repo, ".git")
	s.mu.Lock()
	_, ok := s.bb.repos[repoKey(project, slug)]
	s.mu.Unlock()
	if !ok || !strings.HasSuffix(repo, ".git") {
		http.Error(w, "Repository not found", http.StatusNotFound)
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, "/scm/"+r.PathValue("project")+"/"+repo)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/scm/" + project + "/" + repo + rest
	h := &cgi.Handler{
		Path: s.gitPath,
		Root: "/scm",
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.gitRoot,
			"GIT_HTTP_EXPORT_ALL=1",
			"REMOTE_USER=slotkeeper", // enables receive-pack
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + s.gitHome,
			// No auto gc after a push: a detached gc would hold the CGI
			// output open and stall the answer.
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=receive.autogc", "GIT_CONFIG_VALUE_0=false",
			"GIT_CONFIG_KEY_1=gc.auto", "GIT_CONFIG_VALUE_1=0",
		},
		Stderr: io.Discard,
	}
	h.ServeHTTP(w, r2)
}

// projectExists answers Bitbucket's 404 for an unknown project.
func (s *Sim) projectExists(w http.ResponseWriter, project string) bool {
	s.mu.Lock()
	ok := s.bb.projects[strings.ToUpper(project)]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, bbError(nil, "Project "+strings.ToUpper(project)+" does not exist.", "com.atlassian.bitbucket.project.NoSuchProjectException"))
	}
	return ok
}

// projectJSON is a project as Bitbucket DC represents it (RestProject in
// the 9.4 OpenAPI; the Event payload page's repository.project): key, id,
// name, public, type. A personal project — key "~" and its owner's user
// slug (Atlassian KB "Personal projects in Bitbucket Server") — has type
// PERSONAL, its owner's display name as its name (RestProject.name's
// pattern "^[^~].*": never the key) and no "public". The simulator's
// projects are a set of keys, so the id is derived from the key: stable
// across restarts, as a real project's is.
func projectJSON(key string) map[string]any {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	id := int(h.Sum32() & 0x7fffffff) // RestProject.id is an int32
	if owner, ok := strings.CutPrefix(key, "~"); ok {
		return map[string]any{"key": key, "id": id, "name": ownerName(owner), "type": "PERSONAL"}
	}
	return map[string]any{"key": key, "id": id, "name": key, "public": false, "type": "NORMAL"}
}

// ownerName is the display name of a personal project's owner: the
// simulator knows one user by name, the author of its pull requests
// (PRUser); any other owner is named by its user slug.
func ownerName(owner string) string {
	if strings.EqualFold(owner, PRUser["slug"].(string)) {
		return PRUser["displayName"].(string)
	}
	return strings.ToLower(owner)
}

// projectPath is where a project's pages are: /projects/KEY, or
// /users/<owner slug> for a personal project.
func projectPath(key string) string {
	if owner, ok := strings.CutPrefix(key, "~"); ok {
		return "/users/" + strings.ToLower(owner)
	}
	return "/projects/" + key
}

// bbGetProject: PROJECT_VIEW, which any permission in the project gives;
// 401 without it, 404 for an unknown project (the 9.4 OpenAPI).
func (s *Sim) bbGetProject(w http.ResponseWriter, r *http.Request) {
	project := strings.ToUpper(r.PathValue("project"))
	if !s.bbAllowed(w, r, func(t BitbucketToken) bool { return t.seesProject(project) }) || !s.projectExists(w, project) {
		return
	}
	writeJSON(w, http.StatusOK, projectJSON(project))
}

// projectFilter maps GET /projects?permission= to a token level; the 9.4
// OpenAPI answers 400 for "The permission level is unknown or not related
// to projects". REPO_CREATE is given only by project admin among a token's
// levels (Atlassian, HTTP access tokens).
var projectFilter = map[string]string{
	"": "view", "PROJECT_VIEW": "view", "PROJECT_READ": PermRead, "PROJECT_WRITE": PermWrite,
	"REPO_CREATE": PermAdmin, "PROJECT_ADMIN": PermAdmin,
}

// bbListProjects pages the projects the caller can view, filtered by
// ?permission= (the 9.4 OpenAPI, GET /api/latest/projects).
func (s *Sim) bbListProjects(w http.ResponseWriter, r *http.Request) {
	perm, ok := projectFilter[r.URL.Query().Get("permission")]
	if !ok {
		writeJSON(w, http.StatusBadRequest, bbError("permission", "The permission level is unknown or not related to projects.", "com.atlassian.bitbucket.validation.ArgumentValidationException"))
		return
	}
	t, _ := s.bbCaller(r)
	start, _ := strconv.Atoi(r.URL.Query().Get("start"))
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit <= 0 {
		limit = 25
	}
	limit = min(limit, 1000)
	s.mu.Lock()
	var keys []string
	for k := range s.bb.projects {
		if t.seesProject(k) && (perm == "view" || atLeast(t.projectPerm(k), perm)) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	sort.Strings(keys)
	start = max(0, min(start, len(keys)))
	end := min(len(keys), start+limit)
	vals := []map[string]any{}
	for _, k := range keys[start:end] {
		vals = append(vals, projectJSON(k))
	}
	page := map[string]any{"size": len(vals), "limit": limit, "start": start, "isLastPage": end >= len(keys), "values": vals}
	if end < len(keys) {
		page["nextPageStart"] = end
	}
	writeJSON(w, http.StatusOK, page)
}
