package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Pull requests, their comments and build statuses, and the webhook
// deliveries Bitbucket Data Center sends about them (issue 34).
//
// Deliveries follow Bitbucket DC's "Event payload" page
// (confluence.atlassian.com/bitbucketserver/event-payload, 8.9 and 8.15
// editions): headers X-Event-Key, X-Request-Id ("a unique UUID for each
// webhook request"), X-Hub-Signature (added by the receiver's test, which
// holds the secret); body {"eventKey", "date", "actor", "pullRequest"} with
// the page's Pull Request entity: id, version, title, state (OPEN, MERGED,
// DECLINED), open, closed, fromRef/toRef {id, displayId, latestCommit,
// repository {slug, name, project {key}}}, author {user, role}, links.self.
// pr:from_ref_updated adds previousFromHash; pr:deleted carries the PR as it
// was. A PR from a fork (OpenForkPR) has the fork as fromRef.repository, in
// another project or a personal project: key "~" and the owner's user slug
// (Atlassian KB "Personal projects in Bitbucket Server",
// confluence.atlassian.com/bitbucketserverkb/personal-projects-in-bitbucket-server-1072204133.html;
// project type PERSONAL in the 9.4 OpenAPI's RestProject), and the
// repository it was forked from as its origin
// (RestPullRequestRef.repository.origin in the same OpenAPI). Its
// comments and build statuses are the target repository's, its commits the
// fork's.
//
// The REST calls follow the Bitbucket DC 9.4 OpenAPI
// (/work/shared/specs/bitbucket-dc-9.4-openapi.json): POST
// …/pull-requests/{id}/comments → 201 with {id, version, text}; PUT
// …/comments/{commentId} {text, version} → 200 at version+1, 409 when the
// version is not the current one; POST …/commits/{commitId}/builds
// (RestBuildStatusSetRequest) → 204, the same key replacing the status.
// Each needs REPO_READ. They are kept in memory only (not in the state
// directory).
//
// GET …/pull-requests/{id}/activities (getActivities in the same OpenAPI:
// "a page of activity associated with a pull request", REPO_READ, paged
// with start and limit, 25 by default) is how a client finds the comments
// on a PR: the comments list (getComments_2) needs a file path. Atlassian's
// KB "How to retrieve pull request comments using REST API"
// (support.atlassian.com/bitbucket-data-center/kb/how-to-retrieve-pull-request-comments-using-rest-api)
// reads the activities and keeps those with action COMMENTED; each carries
// commentAction (ADDED, EDITED, …) and the comment itself
// (PullRequestCommentActivity.getComment/getCommentAction, Bitbucket's
// javadoc 10.2). The simulator answers, newest first, the PR's OPENED
// activity and one COMMENTED/ADDED activity per comment with the comment as
// it is now (id, version, text): an activity of another shape, as the
// OpenAPI warns clients to expect, is there too (OPENED).

// Endpoints of the pull-request calls.
const (
	EndpointAddComment     = "bitbucket.AddComment"
	EndpointEditComment    = "bitbucket.EditComment"
	EndpointGetComment     = "bitbucket.GetComment"
	EndpointSetBuildStatus = "bitbucket.SetBuildStatus"
	EndpointPRActivities   = "bitbucket.PRActivities"
	EndpointCreatePR       = "bitbucket.CreatePullRequest"
	EndpointGetBuildStatus = "bitbucket.GetBuildStatus"
	EndpointForkRepo       = "bitbucket.ForkRepo"
	EndpointGetPR          = "bitbucket.GetPullRequest"
)

// PRUser is the author of the simulator's pull requests.
var PRUser = map[string]any{"name": "dana", "emailAddress": "dana@example.com", "id": 7, "displayName": "Dana Developer", "active": true, "slug": "dana", "type": "NORMAL"}

type simPR struct {
	ID            int64
	Project, Slug string
	// FromProject and FromSlug are the repository the branch lives in:
	// the PR's own, or a fork's (OpenForkPR).
	FromProject, FromSlug string
	Branch, Head, Title   string
	State                 string
	Version               int
	comments              map[int64]*PRComment
}

// PRComment is a comment on a simulated PR.
type PRComment struct {
	ID      int64  `json:"id"`
	Version int    `json:"version"`
	Text    string `json:"text"`
}

// BuildStatus is a build status posted on a commit.
type BuildStatus struct {
	Key         string `json:"key"`
	State       string `json:"state"`
	URL         string `json:"url"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

type prState struct {
	mu      sync.Mutex
	prs     map[string]*simPR // "PROJECT/slug#id"
	nextID  map[string]int64  // per repository
	nextCmt int64
	builds  map[string][]BuildStatus // sha -> statuses, by key
}

// pr is the simulator's pull-request state (its maps made on first use).
func (s *Sim) pr() *prState {
	p := &s.pulls
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.prs == nil {
		p.prs, p.nextID, p.builds = map[string]*simPR{}, map[string]int64{}, map[string][]BuildStatus{}
	}
	return p
}

func prKey(project, slug string, id int64) string {
	return repoKey(project, slug) + "#" + strconv.FormatInt(id, 10)
}

// Delivery is the webhook delivery Bitbucket would send: its X-Event-Key,
// X-Request-Id and body (sign it with the receiver's secret).
type Delivery struct {
	ID        int64           `json:"id"`
	Head      string          `json:"head"`
	EventKey  string          `json:"event_key"`
	RequestID string          `json:"request_id"`
	Payload   json.RawMessage `json:"payload"`
}

// OpenPR creates the repository project/slug if missing (with a main
// branch), pushes a new commit on branch and opens a pull request from it
// to main.
func (s *Sim) OpenPR(project, slug, branch string) (Delivery, error) {
	return s.OpenForkPR(project, slug, "", branch)
}

// OpenForkPR is OpenPR from a fork: the repository's fork in forkProject
// (another project's key, or a personal project "~user"; the same slug) is
// made if missing (ForkRepo), the new commit is pushed on the fork's branch,
// and the PR opened from it to project/slug's main. forkProject "" is
// OpenPR.
func (s *Sim) OpenForkPR(project, slug, forkProject, branch string) (Delivery, error) {
	project, forkProject = strings.ToUpper(project), strings.ToUpper(forkProject)
	if !s.HasRepo(project, slug) {
		if _, err := s.AddRepo(project, slug); err != nil && !errors.Is(err, errRepoExists) {
			return Delivery{}, err
		}
		if _, err := s.CommitFile(project, slug, DefaultBranch, "README", "application "+slug); err != nil {
			return Delivery{}, err
		}
	}
	from := project
	if forkProject != "" && forkProject != project {
		from = forkProject
		if !s.HasRepo(from, slug) {
			if _, err := s.ForkRepo(project, slug, from); err != nil {
				return Delivery{}, err
			}
		}
	}
	p := s.pr()
	p.mu.Lock()
	p.nextID[repoKey(project, slug)]++
	id := p.nextID[repoKey(project, slug)]
	p.mu.Unlock()
	head, err := s.CommitFile(from, slug, branch, "change-"+strconv.FormatInt(id, 10)+".txt", fmt.Sprintf("pull request %d on %s", id, branch))
	if err != nil {
		return Delivery{}, err
	}
	pr := &simPR{ID: id, Project: project, Slug: slug, FromProject: from, FromSlug: slug, Branch: branch, Head: head, Title: "Change " + branch, State: "OPEN", comments: map[int64]*PRComment{}}
	p.mu.Lock()
	p.prs[prKey(project, slug, id)] = pr
	d := s.deliveryLocked(pr, "pr:opened", "")
	p.mu.Unlock()
	return d, nil
}

// ForkRepo forks project/slug into forkProject (another project's key, or
// a personal project "~user", where Bitbucket puts a fork by default): a
// new repository of the same slug holding every branch of the origin.
// Bitbucket's own fork is the same: a repository of its own, with its own
// permissions, whose clone URL names its project (/scm/~user/slug.git).
func (s *Sim) ForkRepo(project, slug, forkProject string) (RepoFixture, error) {
	return s.forkRepo(project, slug, forkProject, slug)
}

// forkRepo forks under name (its slug derived as AddRepo does).
func (s *Sim) forkRepo(project, slug, forkProject, name string) (RepoFixture, error) {
	project, forkProject = strings.ToUpper(project), strings.ToUpper(forkProject)
	if !s.HasRepo(project, slug) {
		return RepoFixture{}, fmt.Errorf("repository %s/%s: %w", project, slug, ErrNotFound)
	}
	fx, err := s.AddRepo(forkProject, name)
	if err != nil {
		return RepoFixture{}, err
	}
	s.mu.Lock()
	if rp := s.bb.repos[repoKey(fx.Project, fx.Slug)]; rp != nil {
		rp.Origin = repoKey(project, slug)
		err = s.persistLocked() // a fork names its origin after a restart too
	}
	s.mu.Unlock()
	if err != nil {
		return RepoFixture{}, err
	}
	s.gitMu.Lock()
	defer s.gitMu.Unlock()
	if _, err := s.git(s.repoDir(fx.Project, fx.Slug), "fetch", "--quiet", s.repoDir(project, slug), "+refs/heads/*:refs/heads/*"); err != nil {
		return RepoFixture{}, err
	}
	return fx, nil
}

// bbForkRepo forks a repository: forkRepository in the 9.4 OpenAPI, POST
// …/projects/{projectKey}/repos/{repositorySlug} with an optional body
// ({"name"}, {"project":{"key"}}: the target project "Defaults to the
// current user's personal project if not specified"); it needs REPO_READ
// on the origin and PROJECT_ADMIN on the target project — "users always
// have PROJECT_ADMIN permission on their personal projects" — and answers
// 201 with the fork, or 400 when its name collides in the target project.
// Only a personal token has a user, so only it has a personal project here
// (made on first use, as the KB on personal projects says REST calls do);
// a project or repository token names a project it administers, or gets
// the 401 of a missing permission.
func (s *Sim) bbForkRepo(w http.ResponseWriter, r *http.Request) {
	project, slug := strings.ToUpper(r.PathValue("project")), r.PathValue("slug")
	if !s.repoRead(w, r) {
		return
	}
	if !s.HasRepo(project, slug) {
		noSuchRepo(w, project, slug)
		return
	}
	var in struct {
		Name    string `json:"name"`
		Project *struct {
			Key string `json:"key"`
		} `json:"project"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, bbError(nil, "The request body is not a repository.", nil))
		return
	}
	t, _ := s.bbCaller(r)
	own := ""
	if t.Kind == TokenPersonal {
		own = "~" + strings.ToUpper(t.User)
	}
	target := own
	if in.Project != nil {
		if in.Project.Key == "" {
			writeJSON(w, http.StatusBadRequest, bbError("project", "A project was specified without a key.", nil))
			return
		}
		target = strings.ToUpper(in.Project.Key)
	}
	if target == "" || target != own && !atLeast(t.projectPerm(target), PermAdmin) {
		noPermission(w)
		return
	}
	if target != own && !s.projectExists(w, target) {
		return
	}
	name := in.Name
	if name == "" {
		name = slug
	}
	fx, err := s.forkRepo(project, slug, target, name)
	switch {
	case errors.Is(err, errRepoExists):
		writeJSON(w, http.StatusBadRequest, bbError("name", "This repository URL is already taken.", nil))
		return
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, bbError(nil, err.Error(), nil))
		return
	}
	s.mu.Lock()
	body := s.repoJSON(s.bb.repos[repoKey(fx.Project, fx.Slug)])
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, body)
}

// bbGetPR answers the pull request (get_3 in the 9.4 OpenAPI: GET
// …/pull-requests/{pullRequestId}, REPO_READ).
func (s *Sim) bbGetPR(w http.ResponseWriter, r *http.Request) {
	p, pr, ok := s.findPR(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	body := s.prJSON(pr, time.Now())
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

// DropRepo deletes a repository at once, as a person deleting it (a fork,
// say) in Bitbucket's UI: its git URLs answer 404 from then on. It reports
// whether it existed.
func (s *Sim) DropRepo(project, slug string) bool {
	key := repoKey(project, slug)
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, ok := s.bb.repos[key]
	if ok {
		s.dropRepoLocked(key, rp)
		_ = s.persistLocked()
	}
	return ok
}

// PushPR pushes a new commit on a PR's branch (in the fork, for a PR from
// a fork): pr:from_ref_updated.
func (s *Sim) PushPR(project, slug string, id int64) (Delivery, error) {
	return s.pushPR(project, slug, id, false)
}

// ForcePushPR rewrites the PR's branch: its head is replaced by a new
// commit on the head's parent (an amend, then git push --force), so the old
// head is no longer on the branch: pr:from_ref_updated, whose
// previousFromHash is not an ancestor of the new head.
func (s *Sim) ForcePushPR(project, slug string, id int64) (Delivery, error) {
	return s.pushPR(project, slug, id, true)
}

func (s *Sim) pushPR(project, slug string, id int64, rewrite bool) (Delivery, error) {
	p := s.pr()
	p.mu.Lock()
	pr, ok := p.prs[prKey(project, slug, id)]
	p.mu.Unlock()
	if !ok || pr.State != "OPEN" {
		return Delivery{}, fmt.Errorf("pull request %s/%s#%d: %w (or not open)", project, slug, id, ErrNotFound)
	}
	from, fromSlug := pr.from()
	s.gitMu.Lock()
	if rewrite {
		// The branch goes back to the head's parent (or away, for a
		// head without one), and the new commit goes on there.
		dir := s.repoDir(from, fromSlug)
		ref := "refs/heads/" + pr.Branch
		parent, _ := s.git(dir, "rev-parse", "--verify", "--quiet", ref+"^")
		var err error
		if parent != "" {
			_, err = s.git(dir, "update-ref", ref, parent)
		} else {
			_, err = s.git(dir, "update-ref", "-d", ref)
		}
		if err != nil {
			s.gitMu.Unlock()
			return Delivery{}, err
		}
	}
	head, err := s.commitLocked(from, fromSlug, pr.Branch, "push-"+strconv.FormatInt(time.Now().UnixNano(), 10)+".txt", "a newer push")
	s.gitMu.Unlock()
	if err != nil {
		return Delivery{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := pr.Head
	pr.Head = head
	pr.Version++
	return s.deliveryLocked(pr, "pr:from_ref_updated", prev), nil
}

// ClosePR merges or declines a PR (state MERGED or DECLINED).
func (s *Sim) ClosePR(project, slug string, id int64, state string) (Delivery, error) {
	p := s.pr()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.prs[prKey(project, slug, id)]
	if !ok {
		return Delivery{}, fmt.Errorf("pull request %s/%s#%d: %w", project, slug, id, ErrNotFound)
	}
	if pr.State != "OPEN" {
		return Delivery{}, fmt.Errorf("pull request %s/%s#%d is %s already", project, slug, id, pr.State)
	}
	pr.State = state
	pr.Version++
	key := "pr:merged"
	if state == "DECLINED" {
		key = "pr:declined"
	}
	return s.deliveryLocked(pr, key, ""), nil
}

// PRComments are the comments on a PR, by id.
func (s *Sim) PRComments(project, slug string, id int64) []PRComment {
	p := s.pr()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.prs[prKey(strings.ToUpper(project), slug, id)]
	if !ok {
		return nil
	}
	var out []PRComment
	for i := int64(1); i <= p.nextCmt; i++ {
		if c, ok := pr.comments[i]; ok {
			out = append(out, *c)
		}
	}
	return out
}

// DeletePRComment deletes a comment as a person would in Bitbucket's UI
// (its edit is then Bitbucket's 404 NoSuchCommentException); it reports
// whether the comment existed.
func (s *Sim) DeletePRComment(project, slug string, id, commentID int64) bool {
	p := s.pr()
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.prs[prKey(strings.ToUpper(project), slug, id)]
	if !ok || pr.comments[commentID] == nil {
		return false
	}
	delete(pr.comments, commentID)
	return true
}

// BuildStatuses are the statuses posted on a commit, one per key.
func (s *Sim) BuildStatuses(sha string) []BuildStatus {
	p := s.pr()
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]BuildStatus(nil), p.builds[sha]...)
}

// from is the repository the PR's branch lives in.
func (pr *simPR) from() (string, string) {
	if pr.FromProject == "" {
		return pr.Project, pr.Slug
	}
	return pr.FromProject, pr.FromSlug
}

func (s *Sim) deliveryLocked(pr *simPR, key, previous string) Delivery {
	now := time.Now()
	payload := map[string]any{"eventKey": key, "date": now.Format("2006-01-02T15:04:05-0700"), "actor": PRUser, "pullRequest": s.prJSON(pr, now)}
	if previous != "" {
		payload["previousFromHash"] = previous
	}
	b, _ := json.Marshal(payload)
	return Delivery{ID: pr.ID, Head: pr.Head, EventKey: key, RequestID: uuid.NewString(), Payload: b}
}

// prJSON is the Pull Request entity, as deliveries carry it and GET
// …/pull-requests/{id} answers it ("consistent representations in all the
// payloads where they appear", the Event payload page).
func (s *Sim) prJSON(pr *simPR, now time.Time) map[string]any {
	repo := s.repoJSONOf(pr.Project, pr.Slug) // s.mu after p.mu: nothing takes them the other way
	from := repo
	if fp, fs := pr.from(); fp != pr.Project || fs != pr.Slug {
		// A PR from a fork: fromRef.repository is the fork, which names
		// the repository it was forked from as its origin (the 9.4
		// OpenAPI's RestPullRequestRef.repository.origin).
		from = s.repoJSONOf(fp, fs)
	}
	body := map[string]any{
		"id": pr.ID, "version": pr.Version, "title": pr.Title, "state": pr.State, "open": pr.State == "OPEN", "closed": pr.State != "OPEN",
		"createdDate": now.UnixMilli(), "updatedDate": now.UnixMilli(), "locked": false,
		"fromRef":   map[string]any{"id": "refs/heads/" + pr.Branch, "displayId": pr.Branch, "latestCommit": pr.Head, "repository": from},
		"toRef":     map[string]any{"id": "refs/heads/" + DefaultBranch, "displayId": DefaultBranch, "latestCommit": "", "repository": repo},
		"author":    map[string]any{"user": PRUser, "role": "AUTHOR", "approved": false, "status": "UNAPPROVED"},
		"reviewers": []any{}, "participants": []any{},
		"links": map[string]any{"self": []map[string]string{{"href": s.bbURL + "/projects/" + pr.Project + "/repos/" + pr.Slug + "/pull-requests/" + strconv.FormatInt(pr.ID, 10)}}},
	}
	if pr.State != "OPEN" {
		body["closedDate"] = now.UnixMilli()
	}
	return body
}

// ---- REST ----

func (s *Sim) prRoutes(mux *http.ServeMux, base string) {
	res := func(r *http.Request) string { return repoKey(r.PathValue("project"), r.PathValue("slug")) }
	h := func(pattern, endpoint string, f http.HandlerFunc) {
		mux.Handle(pattern, s.route("bitbucket", endpoint, res, s.bbAuth, bbErrBody, f))
	}
	h("POST "+base+"/projects/{project}/repos/{slug}/pull-requests/{id}/comments", EndpointAddComment, s.bbAddComment)
	h("PUT "+base+"/projects/{project}/repos/{slug}/pull-requests/{id}/comments/{cid}", EndpointEditComment, s.bbEditComment)
	h("GET "+base+"/projects/{project}/repos/{slug}/pull-requests/{id}/comments/{cid}", EndpointGetComment, s.bbGetComment)
	h("POST "+base+"/projects/{project}/repos/{slug}/commits/{sha}/builds", EndpointSetBuildStatus, s.bbSetBuildStatus)
	h("GET "+base+"/projects/{project}/repos/{slug}/pull-requests/{id}/activities", EndpointPRActivities, s.bbPRActivities)
	h("POST "+base+"/projects/{project}/repos/{slug}/pull-requests", EndpointCreatePR, s.bbCreatePR)
	h("GET "+base+"/projects/{project}/repos/{slug}/commits/{sha}/builds", EndpointGetBuildStatus, s.bbGetBuildStatus)
	h("GET "+base+"/projects/{project}/repos/{slug}/pull-requests/{id}", EndpointGetPR, s.bbGetPR)
}

func (s *Sim) findPR(w http.ResponseWriter, r *http.Request) (*prState, *simPR, bool) {
	if !s.repoRead(w, r) {
		return nil, nil, false
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	p := s.pr()
	p.mu.Lock()
	pr, ok := p.prs[prKey(r.PathValue("project"), r.PathValue("slug"), id)]
	p.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, bbError(nil, "No pull request exists with ID "+r.PathValue("id")+" for this repository.", "com.atlassian.bitbucket.pull.NoSuchPullRequestException"))
		return nil, nil, false
	}
	return p, pr, true
}

func (s *Sim) bbAddComment(w http.ResponseWriter, r *http.Request) {
	p, pr, ok := s.findPR(w, r)
	if !ok {
		return
	}
	var in struct {
		Text string `json:"text"`
	}
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in) != nil || in.Text == "" {
		writeJSON(w, http.StatusBadRequest, bbError("text", "A comment's text is required.", nil))
		return
	}
	p.mu.Lock()
	p.nextCmt++
	c := &PRComment{ID: p.nextCmt, Version: 0, Text: in.Text}
	pr.comments[c.ID] = c
	out := *c
	p.mu.Unlock()
	writeJSON(w, http.StatusCreated, out)
}

func (s *Sim) bbEditComment(w http.ResponseWriter, r *http.Request) {
	p, pr, ok := s.findPR(w, r)
	if !ok {
		return
	}
	var in struct {
		Text    string `json:"text"`
		Version *int   `json:"version"`
	}
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in) != nil || in.Text == "" || in.Version == nil {
		writeJSON(w, http.StatusBadRequest, bbError("text", "A comment's text and version are required.", nil))
		return
	}
	cid, _ := strconv.ParseInt(r.PathValue("cid"), 10, 64)
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := pr.comments[cid]
	switch {
	case !ok:
		writeJSON(w, http.StatusNotFound, bbError(nil, "No comment exists with ID "+r.PathValue("cid")+".", "com.atlassian.bitbucket.comment.NoSuchCommentException"))
	case *in.Version != c.Version:
		writeJSON(w, http.StatusConflict, bbError(nil, fmt.Sprintf("You are attempting to modify a comment based on out-of-date information (version %d; current %d).", *in.Version, c.Version), "com.atlassian.bitbucket.comment.CommentOutOfDateException"))
	default:
		c.Text, c.Version = in.Text, c.Version+1
		writeJSON(w, http.StatusOK, *c)
	}
}

func (s *Sim) bbSetBuildStatus(w http.ResponseWriter, r *http.Request) {
	if !s.repoRead(w, r) {
		return
	}
	var in BuildStatus
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in) != nil || in.Key == "" || in.URL == "" ||
		!strings.Contains(" SUCCESSFUL FAILED INPROGRESS CANCELLED UNKNOWN ", " "+in.State+" ") {
		writeJSON(w, http.StatusBadRequest, bbError("state", "key, state (SUCCESSFUL, FAILED, INPROGRESS, CANCELLED, UNKNOWN) and url are required.", nil))
		return
	}
	p := s.pr()
	p.mu.Lock()
	sha := r.PathValue("sha")
	l := p.builds[sha]
	replaced := false
	for i := range l {
		if l[i].Key == in.Key {
			l[i], replaced = in, true
		}
	}
	if !replaced {
		l = append(l, in)
	}
	p.builds[sha] = l
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// ---- control ----

func (s *Sim) prControl(mux controlMux) {
	mux.HandleFunc("POST /pull-requests", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Project, Repo, Branch, Fork string }
		if !decodeCtl(w, r, &in) {
			return
		}
		if !validSeedName(strings.ToLower(in.Project)) || !validSeedName(in.Repo) || !validSeedName(strings.ReplaceAll(in.Branch, "/", "-")) {
			ctlError(w, http.StatusBadRequest, "project, repo and branch: letters, digits and '-' (branch may have '/')")
			return
		}
		if in.Fork != "" && !validSeedName(strings.ToLower(strings.TrimPrefix(in.Fork, "~"))) {
			ctlError(w, http.StatusBadRequest, "fork: a project key, or ~ and a user slug (letters, digits and '-')")
			return
		}
		d, err := s.OpenForkPR(in.Project, in.Repo, in.Fork, in.Branch)
		s.ctlDelivery(w, d, err)
	})
	closer := func(state string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
			if err != nil {
				ctlError(w, http.StatusBadRequest, "id: a number")
				return
			}
			var d Delivery
			switch state {
			case "":
				d, err = s.PushPR(strings.ToUpper(r.PathValue("project")), r.PathValue("repo"), id)
			case "force":
				d, err = s.ForcePushPR(strings.ToUpper(r.PathValue("project")), r.PathValue("repo"), id)
			default:
				d, err = s.ClosePR(strings.ToUpper(r.PathValue("project")), r.PathValue("repo"), id, state)
			}
			s.ctlDelivery(w, d, err)
		}
	}
	mux.HandleFunc("POST /pull-requests/{project}/{repo}/{id}/merge", closer("MERGED"))
	mux.HandleFunc("POST /pull-requests/{project}/{repo}/{id}/decline", closer("DECLINED"))
	mux.HandleFunc("POST /pull-requests/{project}/{repo}/{id}/push", closer(""))
	mux.HandleFunc("POST /pull-requests/{project}/{repo}/{id}/force-push", closer("force"))
	mux.HandleFunc("GET /pull-requests/{project}/{repo}/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		writeJSON(w, http.StatusOK, map[string]any{"comments": s.PRComments(r.PathValue("project"), r.PathValue("repo"), id)})
	})
	mux.HandleFunc("GET /builds/{sha}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"statuses": s.BuildStatuses(r.PathValue("sha"))})
	})
}

func (s *Sim) ctlDelivery(w http.ResponseWriter, d Delivery, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		ctlError(w, http.StatusNotFound, err.Error())
	case err != nil:
		ctlError(w, http.StatusConflict, err.Error())
	default:
		writeJSON(w, http.StatusCreated, d)
	}
}

func (s *Sim) bbGetComment(w http.ResponseWriter, r *http.Request) {
	p, pr, ok := s.findPR(w, r)
	if !ok {
		return
	}
	cid, _ := strconv.ParseInt(r.PathValue("cid"), 10, 64)
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := pr.comments[cid]
	if !ok {
		writeJSON(w, http.StatusNotFound, bbError(nil, "No comment exists with ID "+r.PathValue("cid")+".", "com.atlassian.bitbucket.comment.NoSuchCommentException"))
		return
	}
	writeJSON(w, http.StatusOK, *c)
}

// bbPRActivities answers a page of the PR's activities, newest first (see
// the comment at the top: getActivities).
func (s *Sim) bbPRActivities(w http.ResponseWriter, r *http.Request) {
	p, pr, ok := s.findPR(w, r)
	if !ok {
		return
	}
	start, limit := 0, 25
	if v, err := strconv.Atoi(r.URL.Query().Get("start")); err == nil && v >= 0 {
		start = v
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && v > 0 {
		limit = min(v, 1000)
	}
	user := map[string]any{"name": "slotkeeper", "slug": "slotkeeper", "displayName": "Slotkeeper", "id": 9, "active": true, "type": "SERVICE"}
	p.mu.Lock()
	all := []map[string]any{}
	for i := p.nextCmt; i >= 1; i-- {
		if c, ok := pr.comments[i]; ok {
			all = append(all, map[string]any{"id": 100 + c.ID, "createdDate": 0, "user": user, "action": "COMMENTED", "commentAction": "ADDED",
				"comment": map[string]any{"id": c.ID, "version": c.Version, "text": c.Text, "author": user, "comments": []any{}}})
		}
	}
	p.mu.Unlock()
	all = append(all, map[string]any{"id": 1, "createdDate": 0, "user": PRUser, "action": "OPENED"})
	end := min(start+limit, len(all))
	page := map[string]any{"start": start, "limit": limit, "size": 0, "isLastPage": end >= len(all), "values": []any{}}
	if start < len(all) {
		page["values"], page["size"] = all[start:end], end-start
	}
	if end < len(all) {
		page["nextPageStart"] = end
	}
	writeJSON(w, http.StatusOK, page)
}

// bbCreatePR opens a pull request (createPullRequest in the 9.4 OpenAPI:
// POST …/pull-requests {title, fromRef {id, repository {slug, project
// {key}}}, toRef {…}} → 201 with the pull request; REPO_READ on both; 409
// when one is already open between the two refs). fromRef.repository may
// name a fork of the repository (a PR from a fork); toRef is always the
// repository of the path. The conformance suite opens both on a real
// server this way.
func (s *Sim) bbCreatePR(w http.ResponseWriter, r *http.Request) {
	if !s.repoRead(w, r) {
		return
	}
	project, slug := strings.ToUpper(r.PathValue("project")), r.PathValue("slug")
	if !s.HasRepo(project, slug) {
		noSuchRepo(w, project, slug)
		return
	}
	type refRepo struct {
		Slug    string `json:"slug"`
		Project struct {
			Key string `json:"key"`
		} `json:"project"`
	}
	var in struct {
		Title   string `json:"title"`
		FromRef struct {
			ID         string   `json:"id"`
			Repository *refRepo `json:"repository"`
		} `json:"fromRef"`
		ToRef struct {
			ID string `json:"id"`
		} `json:"toRef"`
	}
	if json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in) != nil || in.Title == "" {
		writeJSON(w, http.StatusBadRequest, bbError("title", "A pull request's title, fromRef and toRef are required.", nil))
		return
	}
	// fromRef may name a fork of this repository (a PR from a fork): it
	// must exist, be readable too, and have this repository as its origin.
	fromProject, fromSlug := project, slug
	if fr := in.FromRef.Repository; fr != nil && (strings.ToUpper(fr.Project.Key) != project || fr.Slug != slug) {
		fromProject, fromSlug = strings.ToUpper(fr.Project.Key), fr.Slug
		s.mu.Lock()
		rp, ok := s.bb.repos[repoKey(fromProject, fromSlug)]
		forked := ok && rp.Origin == repoKey(project, slug)
		s.mu.Unlock()
		if !ok {
			noSuchRepo(w, fromProject, fromSlug)
			return
		}
		if !s.bbAllowed(w, r, func(t BitbucketToken) bool { return atLeast(t.repoPerm(fromProject, fromSlug), PermRead) }) {
			return
		}
		if !forked {
			writeJSON(w, http.StatusBadRequest, bbError("fromRef", "Repository "+fromProject+"/"+fromSlug+" is not a fork of "+project+"/"+slug+".", nil))
			return
		}
	}
	from, to := strings.TrimPrefix(in.FromRef.ID, "refs/heads/"), strings.TrimPrefix(in.ToRef.ID, "refs/heads/")
	head, _ := s.RepoHeadSHA(fromProject, fromSlug, from)
	target, _ := s.RepoHeadSHA(project, slug, to)
	if head == "" || target == "" {
		writeJSON(w, http.StatusBadRequest, bbError("fromRef", "Repositories "+fromProject+"/"+fromSlug+" and "+project+"/"+slug+" do not contain both refs.", nil))
		return
	}
	p := s.pr()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range p.prs {
		if ofp, ofs := o.from(); o.Project == project && o.Slug == slug && ofp == fromProject && ofs == fromSlug && o.Branch == from && o.State == "OPEN" {
			writeJSON(w, http.StatusConflict, bbError(nil, "Only one pull request may be open for a given source and target branch.", "com.atlassian.bitbucket.pull.DuplicatePullRequestException"))
			return
		}
	}
	p.nextID[repoKey(project, slug)]++
	pr := &simPR{ID: p.nextID[repoKey(project, slug)], Project: project, Slug: slug, FromProject: fromProject, FromSlug: fromSlug,
		Branch: from, Head: head, Title: in.Title, State: "OPEN", comments: map[int64]*PRComment{}}
	p.prs[prKey(project, slug, pr.ID)] = pr
	writeJSON(w, http.StatusCreated, s.prJSON(pr, time.Now()))
}

// bbGetBuildStatus answers the build status of one key on a commit (get in
// the 9.4 OpenAPI, "Since 7.14": GET …/commits/{commitId}/builds?key= →
// 200 RestBuildStatus, 404 when there is none).
func (s *Sim) bbGetBuildStatus(w http.ResponseWriter, r *http.Request) {
	if !s.repoRead(w, r) {
		return
	}
	key := r.URL.Query().Get("key")
	for _, b := range s.BuildStatuses(r.PathValue("sha")) {
		if b.Key == key {
			writeJSON(w, http.StatusOK, b)
			return
		}
	}
	writeJSON(w, http.StatusNotFound, bbError(nil, "No build status with key "+key+" exists on this commit.", nil))
}
