package sim

import (
	"errors"
	"net/http"
	"strings"
)

// Bitbucket Data Center's HTTP access tokens, as the simulator models them
// on REST and on git (Atlassian, "HTTP access tokens", Bitbucket DC 8.5,
// 8.16 and 9.1 docs):
//
//   - A personal token acts as its owner: "Authorization: Bearer <token>",
//     or Basic with the owner's username and the token as password.
//   - A project or repository token works "only with Bearer
//     authentication. Don't use this token with a username in Basic
//     authentication": Basic with any user name is refused (401).
//   - Permissions: project read/write/admin and repository read/write/admin;
//     "A token's repository permission must be as high as its project
//     permission", and "For repository tokens, you cannot give it any
//     project-level permissions". Pull and clone need repository read,
//     push repository write, settings (delete) repository admin.
//
// Missing permission answers 401, not 403 (the 9.4 OpenAPI: "401 The
// currently authenticated user has insufficient permissions to …" on every
// operation used here).

// Token kinds.
const (
	TokenPersonal   = "personal"
	TokenProject    = "project"
	TokenRepository = "repository"
)

// Permission levels of a token, lowest first.
const (
	PermNone  = ""
	PermRead  = "read"
	PermWrite = "write"
	PermAdmin = "admin"
)

// DefaultBitbucketUser owns the simulator's default token (a personal
// token with admin on every project), so the demo works with Bearer and
// with Basic as this user.
const DefaultBitbucketUser = "slotkeeper"

// BitbucketToken is one HTTP access token the simulated Bitbucket accepts.
type BitbucketToken struct {
	Token string
	Kind  string // TokenPersonal, TokenProject or TokenRepository
	// User is a personal token's owner (the Basic user name it goes with).
	User string
	// Project is the project of a project or repository token; for a
	// personal token "" means every project.
	Project string
	// Repo is a repository token's slug.
	Repo string
	// ProjectPerm (not for repository tokens) and RepoPerm are the token's
	// levels; RepoPerm below ProjectPerm is raised to it.
	ProjectPerm, RepoPerm string
}

var permRank = map[string]int{PermNone: 0, PermRead: 1, PermWrite: 2, PermAdmin: 3}

// AddBitbucketToken makes the simulated Bitbucket accept one more token.
// Not saved with StateDir (tokens never are).
func (s *Sim) AddBitbucketToken(t BitbucketToken) error {
	_, okP := permRank[t.ProjectPerm]
	_, okR := permRank[t.RepoPerm]
	switch {
	case t.Token == "" || !okP || !okR:
		return errors.New("sim: token: want a value and read/write/admin permissions")
	case t.Kind == TokenPersonal && t.User == "":
		return errors.New("sim: a personal token needs its owner")
	case t.Kind == TokenProject && (t.Project == "" || t.User != "" || t.Repo != ""):
		return errors.New("sim: a project token names its project only")
	case t.Kind == TokenRepository && (t.Project == "" || t.Repo == "" || t.User != "" || t.ProjectPerm != PermNone):
		return errors.New("sim: a repository token names its project and repository and has no project permission")
	case t.Kind != TokenPersonal && t.Kind != TokenProject && t.Kind != TokenRepository:
		return errors.New("sim: token kind: personal, project or repository")
	}
	if permRank[t.RepoPerm] < permRank[t.ProjectPerm] {
		t.RepoPerm = t.ProjectPerm
	}
	t.Project = strings.ToUpper(t.Project)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bb.tokens == nil {
		s.bb.tokens = map[string]BitbucketToken{}
	}
	s.bb.tokens[t.Token] = t
	return nil
}

// BitbucketUser is the owner of the default token (Basic auth's user name).
func (s *Sim) BitbucketUser() string { return DefaultBitbucketUser }

func (s *Sim) lookupToken(tok string) (BitbucketToken, bool) {
	if tok == "" {
		return BitbucketToken{}, false
	}
	if tok == s.opts.BitbucketToken {
		return BitbucketToken{Token: tok, Kind: TokenPersonal, User: DefaultBitbucketUser, ProjectPerm: PermAdmin, RepoPerm: PermAdmin}, true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.bb.tokens[tok]
	return t, ok
}

// bbCaller resolves the request's credentials to a token: Bearer for every
// kind, Basic only for a personal token with its owner's user name.
func (s *Sim) bbCaller(r *http.Request) (BitbucketToken, bool) {
	if tok, ok := bearer(r); ok {
		return s.lookupToken(tok)
	}
	user, pw, ok := r.BasicAuth()
	if !ok {
		return BitbucketToken{}, false
	}
	t, ok := s.lookupToken(pw)
	if !ok || t.Kind != TokenPersonal || user != t.User {
		return BitbucketToken{}, false
	}
	return t, true
}

// projectPerm is the token's level on a project.
func (t BitbucketToken) projectPerm(project string) string {
	project = strings.ToUpper(project)
	if t.Project != "" && t.Project != project {
		return PermNone
	}
	return t.ProjectPerm
}

// repoPerm is the token's level on a repository.
func (t BitbucketToken) repoPerm(project, slug string) string {
	project = strings.ToUpper(project)
	switch {
	case t.Project != "" && t.Project != project:
		return PermNone
	case t.Kind == TokenRepository && t.Repo != slug:
		return PermNone
	}
	return t.RepoPerm
}

// seesProject: PROJECT_VIEW, which any permission in the project gives.
func (t BitbucketToken) seesProject(project string) bool {
	return t.Project == "" || t.Project == strings.ToUpper(project)
}

func atLeast(have, want string) bool { return permRank[have] >= permRank[want] }

// noPermission is the 401 of an authenticated caller without the
// permission. The body is Bitbucket's AuthorisationException (its message
// as real servers answer it, e.g. pull-request-notifier-for-bitbucket
// issue 135's trace: "com.atlassian.bitbucket.AuthorisationException: You
// are not permitted to access this resource").
func noPermission(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, bbError(nil, "You are not permitted to access this resource", "com.atlassian.bitbucket.AuthorisationException"))
}

// bbAllowed answers noPermission unless the caller has ok; handlers call it
// after bbAuth has let the request in.
func (s *Sim) bbAllowed(w http.ResponseWriter, r *http.Request, ok func(BitbucketToken) bool) bool {
	t, known := s.bbCaller(r)
	if !known || !ok(t) {
		noPermission(w)
		return false
	}
	return true
}

// Endpoints of the Bitbucket project reads (doctor's checks use them).
const (
	EndpointBBGetProject   = "bitbucket.GetProject"   // GET …/projects/{key}
	EndpointBBListProjects = "bitbucket.ListProjects" // GET …/projects?permission=
)
