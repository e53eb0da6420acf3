// Package bitbucket is the Bitbucket Data Center REST 1.0 client
// (providers.GitHost), authenticated with an HTTP access token as Bearer
// (every kind — personal, project, repository — works as Bearer; project
// and repository tokens work only so: Atlassian, HTTP access tokens, DC
// 8.5/8.16/9.1).
//
// Bitbucket answers 401, not 403, for a missing permission (the 9.4
// OpenAPI, every operation used here); the error's message says which of
// the two 401s it is (AuthorisationException: the token lacks the
// permission; IncorrectPasswordAuthenticationException: the token itself
// is refused).
//
// GetRepo is tri-state (only a 404 naming a NoSuch…Exception is Absent).
// CreateRepo reads the slug from the 201 body and reports 409 as Existed
// with a CodeConflict error.
// DeleteRepo accepts 202 (Bitbucket schedules the deletion) and returns only
// once a GET answers Bitbucket's own 404; 204 means the repository did not
// exist.
package bitbucket

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/internal/httpc"
)

var _ providers.GitHost = (*Client)(nil)

// Options configure a Client. Zero fields take the defaults shown.
type Options struct {
	// BaseURL is the server root, e.g. "https://bitbucket.example" (the
	// client adds /rest/api/1.0).
	BaseURL string
	Token   string
	// HTTP is the client used; default: no overall timeout (ctx bounds
	// every call) and redirects not followed.
	HTTP *http.Client
	// Confirm bounds the polling after a 202 delete: default 250ms doubling
	// to 5s, giving up after 2 minutes.
	Confirm providers.Backoff
	// RateRetries (default 3) and MaxRetryAfter (default 30s) bound 429s.
	RateRetries   int
	MaxRetryAfter time.Duration
	// PageLimit is the page size asked of list calls (default 100).
	PageLimit int
	// Clock times Retry-After waits and delete confirmations (tests pass
	// a clock.Fake); nil is the wall clock.
	Clock clock.Clock
}

// Client talks to one Bitbucket Data Center instance.
type Client struct {
	c         httpc.Client
	confirm   providers.Backoff
	pageLimit int
}

// New returns a client; it does no I/O.
func New(o Options) *Client {
	if o.PageLimit <= 0 {
		o.PageLimit = 100
	}
	c := &Client{
		c:         httpc.New(strings.TrimRight(o.BaseURL, "/")+"/rest/api/1.0", o.Token, o.HTTP, o.RateRetries, o.MaxRetryAfter, message, notFound),
		confirm:   httpc.ConfirmDefaults(o.Confirm),
		pageLimit: o.PageLimit,
	}
	c.c.Clock = o.Clock
	return c
}

// message reads {"errors":[{"context","message","exceptionName"}]}.
func message(body []byte) string {
	var e struct {
		Errors []struct {
			Context   string `json:"context"`
			Message   string `json:"message"`
			Exception string `json:"exceptionName"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	var parts []string
	for _, x := range e.Errors {
		m := x.Message
		if strings.HasSuffix(x.Exception, ".AuthorisationException") {
			// Bitbucket's 401 for an authenticated caller without the
			// permission (the 9.4 OpenAPI: "insufficient permissions").
			m = "the token lacks the permission: " + m
		}
		if x.Context != "" {
			m = x.Context + ": " + m
		}
		if x.Exception != "" {
			m += " (" + x.Exception[strings.LastIndexByte(x.Exception, '.')+1:] + ")"
		}
		parts = append(parts, m)
	}
	return strings.Join(parts, "; ")
}

// notFound recognises Bitbucket's own 404 body: errors[] naming a
// com.atlassian.bitbucket NoSuch…Exception (NoSuchRepositoryException,
// NoSuchProjectException). Its generic 404, a proxy's page or other JSON
// say nothing about the repository.
func notFound(body []byte) bool {
	var e struct {
		Errors []struct {
			Exception string `json:"exceptionName"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) != nil {
		return false
	}
	for _, x := range e.Errors {
		pkg, short, ok := cutLast(x.Exception, '.')
		if ok && strings.HasPrefix(pkg, "com.atlassian.bitbucket") && strings.HasPrefix(short, "NoSuch") && strings.HasSuffix(short, "Exception") {
			return true
		}
	}
	return false
}

func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

func (c *Client) fail(op, res string, resp *httpc.Response, mutating bool) *providers.Error {
	return c.c.Unexpected(op, res, resp, mutating)
}

func validRepo(op, project, slug string) *providers.Error {
	if err := providers.ValidateProjectKey(project); err != nil {
		return providers.Invalid(op, project+"/"+slug, err)
	}
	if err := providers.ValidateSlug(slug); err != nil {
		return providers.Invalid(op, project+"/"+slug, err)
	}
	return nil
}

func repoPath(project, slug string) string { return "/projects/" + project + "/repos/" + slug }

// repoJSON is the part of Bitbucket's RestRepository we use.
type repoJSON struct {
	Slug    string `json:"slug"`
	Name    string `json:"name"`
	Project struct {
		Key string `json:"key"`
	} `json:"project"`
	Links struct {
		Clone []struct {
			Href string `json:"href"`
			Name string `json:"name"`
		} `json:"clone"`
	} `json:"links"`
}

func (r repoJSON) repo() providers.Repo {
	out := providers.Repo{Project: r.Project.Key, Slug: r.Slug, Name: r.Name}
	for _, l := range r.Links.Clone {
		if l.Name == "http" || l.Name == "https" {
			out.CloneURL = l.Href
		}
	}
	return out
}

// GetRepo returns the repository. Lookup is Absent (with a CodeNotFound
// error) only on Bitbucket's own 404; a foreign 404 (CodeForeign), 401,
// 403, 5xx, 429, timeouts and resets are Unknown.
func (c *Client) GetRepo(ctx context.Context, project, slug string) (providers.Repo, providers.Lookup, error) {
	const op = "bitbucket.GetRepo"
	if err := validRepo(op, project, slug); err != nil {
		return providers.Repo{}, providers.Unknown, err
	}
	return c.getRepo(ctx, op, project, slug)
}

func (c *Client) getRepo(ctx context.Context, op, project, slug string) (providers.Repo, providers.Lookup, error) {
	res := project + "/" + slug
	resp, perr := c.c.Do(ctx, op, res, http.MethodGet, repoPath(project, slug), nil, nil, false)
	if perr != nil {
		return providers.Repo{}, providers.Unknown, perr
	}
	if l, perr := c.c.Lookup(op, res, resp); perr != nil {
		return providers.Repo{}, l, perr
	}
	var r repoJSON
	if err := json.Unmarshal(resp.Body, &r); err != nil || r.Slug == "" {
		return providers.Repo{}, providers.Unknown, &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable answer", Err: err}
	}
	return r.repo(), providers.Found, nil
}

// DefaultBranch returns the name of the repository's default branch
// (GET …/default-branch, a RestMinimalRef), with a Lookup as for GetRepo.
func (c *Client) DefaultBranch(ctx context.Context, project, slug string) (string, providers.Lookup, error) {
	const op = "bitbucket.DefaultBranch"
	if err := validRepo(op, project, slug); err != nil {
		return "", providers.Unknown, err
	}
	res := project + "/" + slug
	resp, perr := c.c.Do(ctx, op, res, http.MethodGet, repoPath(project, slug)+"/default-branch", nil, nil, false)
	if perr != nil {
		return "", providers.Unknown, perr
	}
	if l, perr := c.c.Lookup(op, res, resp); perr != nil {
		return "", l, perr
	}
	var ref struct {
		ID        string `json:"id"`
		DisplayID string `json:"displayId"`
	}
	err := json.Unmarshal(resp.Body, &ref)
	name := strings.TrimPrefix(ref.ID, "refs/heads/")
	if err == nil && name == ref.ID {
		name = ref.DisplayID
	}
	if err != nil || providers.ValidateBranch(name) != nil {
		return "", providers.Unknown, &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable default branch", Err: err}
	}
	return name, providers.Found, nil
}

// CreateRepo creates a git repository named name in project. On 201 the
// slug (and clone URL) are read from the answer, never computed. On 409 it
// returns Existed with a CodeConflict error: existing is not success for a
// caller that asked to create. Any other failure returns outcome 0; a 5xx
// or a lost answer is Uncertain (the repository may exist now).
func (c *Client) CreateRepo(ctx context.Context, project, name string) (providers.Repo, providers.CreateOutcome, error) {
	const op = "bitbucket.CreateRepo"
	res := project + "/" + name
	if err := providers.ValidateProjectKey(project); err != nil {
		return providers.Repo{}, 0, providers.Invalid(op, res, err)
	}
	if err := providers.ValidateRepoName(name); err != nil {
		return providers.Repo{}, 0, providers.Invalid(op, res, err)
	}
	body := map[string]any{"name": name, "scmId": "git", "forkable": false}
	resp, perr := c.c.Do(ctx, op, res, http.MethodPost, "/projects/"+project+"/repos", nil, body, true)
	if perr != nil {
		return providers.Repo{}, 0, perr
	}
	switch resp.Status {
	case http.StatusCreated:
		var r repoJSON
		if err := json.Unmarshal(resp.Body, &r); err != nil || providers.ValidateSlug(r.Slug) != nil {
			// Created, but we cannot tell which slug: the caller must look.
			return providers.Repo{}, 0, &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Uncertain: true, Message: "201 without a usable slug", Err: err}
		}
		return r.repo(), providers.Created, nil
	case http.StatusConflict:
		return providers.Repo{}, providers.Existed, c.fail(op, res, resp, true)
	}
	if c.c.Absent(resp) {
		// Bitbucket's own 404 on create: the project does not exist ("Requires
		// an existing project", the 9.4 OpenAPI). Nothing was created. The
		// error names the project, not the repository, so that nobody reads
		// it as "the repository is absent".
		pe := c.c.Fail(op, project, resp, providers.CodeNotFound, false)
		pe.Message = "project " + project + " does not exist; create it in Bitbucket or choose another: " + pe.Message
		return providers.Repo{}, 0, pe
	}
	return providers.Repo{}, 0, c.fail(op, res, resp, true)
}

// DeleteRepo deletes a repository. 202 (scheduled) is confirmed by polling
// GET until Bitbucket's own 404 within the Confirm bound, else
// CodeNotConfirmed (Uncertain); 204 — and a 404 naming
// NoSuchProjectException or NoSuchRepositoryException — mean AlreadyAbsent.
// Any other 404 (a proxy's page, a wrong base URL) is CodeForeign,
// Uncertain.
func (c *Client) DeleteRepo(ctx context.Context, project, slug string) (providers.DeleteOutcome, error) {
	const op = "bitbucket.DeleteRepo"
	if err := validRepo(op, project, slug); err != nil {
		return 0, err
	}
	res := project + "/" + slug
	resp, perr := c.c.Do(ctx, op, res, http.MethodDelete, repoPath(project, slug), nil, nil, true)
	if perr != nil {
		return 0, perr
	}
	switch {
	case resp.Status == http.StatusNoContent, c.c.Absent(resp):
		return providers.AlreadyAbsent, nil
	case resp.Status == http.StatusAccepted, resp.Status == http.StatusOK:
	default:
		return 0, c.fail(op, res, resp, true)
	}
	if pe := providers.DeleteAccepted(ctx, op, res, resp.Status); pe != nil {
		return 0, pe
	}
	var last error
	gone, err := c.c.Poll(ctx, c.confirm, func() (bool, error) {
		_, l, err := c.getRepo(ctx, op, project, slug)
		switch {
		case l == providers.Absent:
			return true, nil
		case l == providers.Found:
			last = nil
			return false, nil
		}
		pe, _ := providers.AsError(err)
		if pe != nil && (pe.Code == providers.CodeCanceled || pe.Code == providers.CodeUnauthorized || pe.Code == providers.CodeForbidden) {
			return false, pe // no point polling on
		}
		last = err
		return false, nil
	})
	if gone {
		return providers.Deleted, nil
	}
	if pe, ok := providers.AsError(err); ok {
		pe.Uncertain = true // the delete was scheduled; it may still happen
		return 0, pe
	}
	if err != nil {
		// Poll returns the bare ctx error when cancelled between checks: the
		// caller gave up, which is not the same as "still there".
		return 0, &providers.Error{Op: op, Resource: res, Code: providers.CodeCanceled, Uncertain: true, Message: "canceled while confirming the delete", Err: err}
	}
	ne := &providers.Error{Op: op, Resource: res, Code: providers.CodeNotConfirmed, Uncertain: true, Message: "delete scheduled but the repository is still there"}
	if pe, ok := providers.AsError(last); ok {
		ne.Status, ne.Message, ne.Err = pe.Status, ne.Message+"; last check: "+pe.Error(), pe
	}
	return 0, ne
}

// maxPages bounds ListRepos against a server whose paging never ends.
const maxPages = 1000

// ListRepos lists every repository of a project, following the pages.
func (c *Client) ListRepos(ctx context.Context, project string) ([]providers.Repo, error) {
	const op = "bitbucket.ListRepos"
	if err := providers.ValidateProjectKey(project); err != nil {
		return nil, providers.Invalid(op, project, err)
	}
	var out []providers.Repo
	start := 0
	for range maxPages {
		q := url.Values{"start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(c.pageLimit)}}
		resp, perr := c.c.Do(ctx, op, project, http.MethodGet, "/projects/"+project+"/repos", q, nil, false)
		if perr != nil {
			return nil, perr
		}
		if resp.Status != http.StatusOK {
			return nil, c.fail(op, project, resp, false)
		}
		var page struct {
			Values        []repoJSON `json:"values"`
			IsLastPage    bool       `json:"isLastPage"`
			NextPageStart *int       `json:"nextPageStart"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return nil, &providers.Error{Op: op, Resource: project, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable page", Err: err}
		}
		for _, r := range page.Values {
			out = append(out, r.repo())
		}
		if page.IsLastPage {
			return out, nil
		}
		if page.NextPageStart == nil || *page.NextPageStart <= start {
			return nil, &providers.Error{Op: op, Resource: project, Status: resp.Status, Code: providers.CodeServer, Message: "paging does not advance"}
		}
		start = *page.NextPageStart
	}
	return nil, &providers.Error{Op: op, Resource: project, Code: providers.CodeServer, Message: "too many pages"}
}

// Project looks up a project (GET /projects/{key}, PROJECT_VIEW): Found,
// Absent only on Bitbucket's own 404 (NoSuchProjectException), else Unknown
// with the error — a 401 is an invalid token or one without any permission
// in the project. Read-only; the doctor's checks use it.
func (c *Client) Project(ctx context.Context, key string) (providers.Lookup, error) {
	const op = "bitbucket.Project"
	if err := providers.ValidateProjectKey(key); err != nil {
		return providers.Unknown, providers.Invalid(op, key, err)
	}
	resp, perr := c.c.Do(ctx, op, key, http.MethodGet, "/projects/"+key, nil, nil, false)
	if perr != nil {
		return providers.Unknown, perr
	}
	if l, perr := c.c.Lookup(op, key, resp); perr != nil {
		return l, perr
	}
	return providers.Found, nil
}

// ProjectsWithPermission lists the keys of the projects on which the token
// has perm (GET /projects?permission=, e.g. REPO_CREATE or PROJECT_ADMIN;
// the 9.4 OpenAPI), following the pages. Read-only: it is how a token's
// permission is learnt without trying a write.
func (c *Client) ProjectsWithPermission(ctx context.Context, perm string) ([]string, error) {
	const op = "bitbucket.ProjectsWithPermission"
	var out []string
	start := 0
	for range maxPages {
		q := url.Values{"permission": {perm}, "start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(c.pageLimit)}}
		resp, perr := c.c.Do(ctx, op, perm, http.MethodGet, "/projects", q, nil, false)
		if perr != nil {
			return nil, perr
		}
		if resp.Status != http.StatusOK {
			return nil, c.fail(op, perm, resp, false)
		}
		var page struct {
			Values []struct {
				Key string `json:"key"`
			} `json:"values"`
			IsLastPage    bool `json:"isLastPage"`
			NextPageStart *int `json:"nextPageStart"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return nil, &providers.Error{Op: op, Resource: perm, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable page", Err: err}
		}
		for _, p := range page.Values {
			out = append(out, p.Key)
		}
		if page.IsLastPage {
			return out, nil
		}
		if page.NextPageStart == nil || *page.NextPageStart <= start {
			return nil, &providers.Error{Op: op, Resource: perm, Status: resp.Status, Code: providers.CodeServer, Message: "paging does not advance"}
		}
		start = *page.NextPageStart
	}
	return nil, &providers.Error{Op: op, Resource: perm, Code: providers.CodeServer, Message: "too many pages"}
}
