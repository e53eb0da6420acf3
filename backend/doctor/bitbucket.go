package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// BitbucketReader is the read-only part of the Bitbucket client the checks
// use (*bitbucket.Client).
type BitbucketReader interface {
	Project(ctx context.Context, key string) (providers.Lookup, error)
	ProjectsWithPermission(ctx context.Context, perm string) ([]string, error)
}

// GitReader is the read-only part of the git pusher (*git.Pusher): the
// same process, environment and credentials as every push.
type GitReader interface {
	RemoteSHA(ctx context.Context, remoteURL, branch string) (string, error)
	AuthMode() string
}

// Template is one template repository slots are reset from.
type Template struct {
	Name   string // shown, e.g. "TPL/template"
	URL    string // clone URL, no credentials
	Branch string // the template ref slots are reset to
}

// Bitbucket permission names (the 9.4 OpenAPI's permission levels).
const (
	permRepoCreate  = "REPO_CREATE"
	permProjectRead = "PROJECT_READ"
)

// BitbucketProjects checks the token on each configured project
// (--bitbucket-projects), with read-only calls only: that it sees the
// project (GET /projects/{key}), and what it may do there (GET
// /projects?permission=REPO_CREATE, then PROJECT_READ). A project may hold
// slot repositories and receive promotes, which need REPO_CREATE (create)
// and REPO_ADMIN (teardown's delete): among an HTTP access token's levels
// only "Project admin" gives them (Atlassian, HTTP access tokens); a
// repository token has no project permission at all. Projects named in
// templatesOnly hold templates and nothing else: seeing them is enough
// here, and GitAuth checks each template's read access itself. Bitbucket
// answers 401 for a missing permission, never 403 (the 9.4 OpenAPI). With
// no configured project the check says so and passes: the scope is "any".
func BitbucketProjects(bb BitbucketReader, projects []string, templatesOnly ...string) Check {
	return func(ctx context.Context) []Result {
		if len(projects) == 0 {
			return []Result{{Check: "bitbucket: projects", OK: true,
				Detail: "no --bitbucket-projects: slots may use any project the token reaches; nothing to check"}}
		}
		var out []Result
		// One listing per level serves every project; an error is reported
		// on each project it leaves undecided.
		create, createErr := bb.ProjectsWithPermission(ctx, permRepoCreate)
		read, readErr := bb.ProjectsWithPermission(ctx, permProjectRead)
		for _, key := range projects {
			name := "bitbucket: project " + key
			l, err := bb.Project(ctx, key)
			if l != providers.Found {
				out = append(out, projectFailure(name, key, l, err))
				continue
			}
			out = append(out, Result{Check: name, OK: true, Detail: "the token sees the project"})
			perm := "bitbucket: permission on " + key
			switch {
			case slices.Contains(templatesOnly, key):
				out = append(out, Result{Check: perm, OK: true, Detail: "templates only: read access is checked per template by git ls-remote"})
			case createErr != nil:
				out = append(out, unreachable(perm, createErr))
			case slices.Contains(create, key):
				out = append(out, Result{Check: perm, OK: true, Detail: "the token may create and delete repositories (REPO_CREATE)"})
			case readErr != nil:
				out = append(out, unreachable(perm, readErr))
			case slices.Contains(read, key):
				out = append(out, Result{Check: perm, Definite: true,
					Detail: "the token may read (or write) the project's repositories but not create them (no REPO_CREATE)",
					Fix:    "give the token Project admin on " + key + " (a project HTTP access token with Project admin, or a personal token of a user with admin there): promotes create and teardowns delete repositories there"})
			default:
				out = append(out, Result{Check: perm, Definite: true,
					Detail: "the token sees the project but has no project permission (a repository HTTP access token?)",
					Fix:    "use a project HTTP access token of " + key + " with Project admin (repository tokens cannot create repositories), or a personal token of a user with admin on " + key})
			}
		}
		return out
	}
}

// projectFailure explains why a configured project is not visible.
func projectFailure(name, key string, l providers.Lookup, err error) Result {
	r := Result{Check: name, Detail: errDetail(err)}
	pe, _ := providers.AsError(err)
	switch {
	case l == providers.Absent:
		r.Detail, r.Definite = "Bitbucket says project "+key+" does not exist", true
		r.Fix = "create project " + key + " in Bitbucket, or remove it from --bitbucket-projects (Bitbucket creates repositories only in existing projects)"
	case pe != nil && pe.Code == providers.CodeUnauthorized:
		r.Definite = true
		r.Fix = unauthorizedFix(pe, key)
	case pe != nil && pe.Code == providers.CodeForeign:
		r.Definite = true
		r.Fix = "--bitbucket-url must be the server root (e.g. https://bitbucket.example, without /rest or a path a proxy does not serve): the 404 was not Bitbucket's"
	case pe != nil && pe.Code == providers.CodeInvalid:
		r.Definite = true
		r.Fix = "fix the project key in --bitbucket-projects"
	default:
		r.Fix = "check that Bitbucket answers at --bitbucket-url; the check is repeated"
	}
	return r
}

// unauthorizedFix tells Bitbucket's two 401s apart: the token refused, or
// the token without the permission (the client's message names the latter).
func unauthorizedFix(pe *providers.Error, key string) string {
	if strings.Contains(pe.Message, "lacks the permission") {
		return "the token has no access to " + key + ": give it Project admin there (a project HTTP access token of " + key + ", or a personal token of a user with admin)"
	}
	return "Bitbucket refused the token: check --bitbucket-token (expired, revoked, or not a Data Center HTTP access token)"
}

func unreachable(name string, err error) Result {
	r := Result{Check: name, Detail: errDetail(err), Fix: "check that Bitbucket answers at --bitbucket-url; the check is repeated"}
	if pe, ok := providers.AsError(err); ok && pe.Code == providers.CodeUnauthorized {
		r.Definite, r.Fix = true, unauthorizedFix(pe, "the project")
	}
	return r
}

// errDetail is an error's text; the provider errors never carry a token.
func errDetail(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}

// GitAuth checks git's authentication with `git ls-remote` on every
// template (read-only), through the pusher itself: the same environment
// and credentials every push uses. The first result says which mode is in
// use. A 401 means the token is refused in this mode: a project or
// repository HTTP access token works only as Bearer, a personal one as
// Bearer or as Basic with its owner's username (Atlassian, HTTP access
// tokens).
func GitAuth(g GitReader, templates []Template) Check {
	return func(ctx context.Context) []Result {
		mode := g.AuthMode()
		out := []Result{{Check: "git: auth", OK: true, Detail: "token sent as " + mode + gitModeNote(mode)}}
		if len(templates) == 0 {
			out = append(out, Result{Check: "git: templates", OK: true, Detail: "no template repositories registered yet; nothing to check"})
		}
		for _, t := range templates {
			out = append(out, gitTemplate(ctx, g, mode, t))
		}
		return out
	}
}

func gitModeNote(mode string) string {
	if mode == "bearer" {
		return " (Authorization: Bearer, which every HTTP access token kind accepts)"
	}
	if strings.HasPrefix(mode, "basic") {
		return " (works only with a personal HTTP access token of that user)"
	}
	return ""
}

func gitTemplate(ctx context.Context, g GitReader, mode string, t Template) Result {
	name := "git: template " + t.Name
	sha, err := g.RemoteSHA(ctx, t.URL, t.Branch)
	if err == nil && sha != "" {
		return Result{Check: name, OK: true, Detail: fmt.Sprintf("ls-remote: %s at %.12s", t.Branch, sha)}
	}
	if err == nil {
		return Result{Check: name, Definite: true, Detail: "ls-remote: the repository has no branch " + t.Branch,
			Fix: "push branch " + t.Branch + " to " + t.Name + ", or register the template with its existing ref"}
	}
	r := Result{Check: name, Detail: "ls-remote: " + err.Error()}
	pe, _ := providers.AsError(err)
	switch {
	case pe != nil && pe.Code == providers.CodeUnauthorized && strings.HasPrefix(mode, "basic"):
		r.Definite = true
		r.Fix = "git refused the token as Basic: a project or repository HTTP access token works only as Bearer (set --git-auth bearer and remove --git-user); a personal token needs --git-user set to its owner's username"
	case pe != nil && pe.Code == providers.CodeUnauthorized:
		r.Definite = true
		r.Fix = "git refused the token as Bearer, or it lacks Repository read on " + t.Name + ": check --bitbucket-token and give the token access to the template's project"
	case pe != nil && (pe.Code == providers.CodeNotFound || pe.Code == providers.CodeInvalid):
		r.Definite = true
		r.Fix = "the template repository " + t.Name + " does not exist at this URL: fix the template or create the repository"
	case pe != nil && pe.Code == providers.CodeForbidden:
		r.Definite = true
		r.Fix = "the server refused git over HTTP(S) (403): enable HTTP(S) access to git on Bitbucket, or check a proxy in front of it"
	default:
		r.Fix = "check that Bitbucket answers git at " + t.URL + "; the check is repeated"
	}
	return r
}
