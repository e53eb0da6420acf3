package bitbucket

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// The pull-request flow's calls (issue 34), as the Bitbucket DC 9.4 OpenAPI
// (/work/shared/specs/bitbucket-dc-9.4-openapi.json) gives them:
//
//   - POST /rest/api/latest/projects/{p}/repos/{r}/pull-requests/{id}/comments
//     {"text"} → 201 with the comment ({"id", "version", …}); needs
//     REPO_READ.
//   - PUT …/pull-requests/{id}/comments/{commentId} {"text", "version"} →
//     200 with the comment at its new version; a stale version is 409
//     (the comment was edited meanwhile).
//   - GET …/comments/{commentId} → 200 with the comment (its version).
//   - POST /rest/api/latest/projects/{p}/repos/{r}/commits/{commitId}/builds
//     (RestBuildStatusSetRequest: key, state INPROGRESS | SUCCESSFUL |
//     FAILED | …, url, name, description) → 204; needs REPO_READ.
//   - GET …/pull-requests/{id}/activities?start=&limit= → 200, a page of
//     the PR's activities (getActivities, REPO_READ); a COMMENTED activity
//     carries commentAction and the comment (Atlassian's KB "How to
//     retrieve pull request comments using REST API" reads comments so;
//     PullRequestCommentActivity in Bitbucket's javadoc). The comments
//     list itself (getComments_2) needs a file path, so it cannot list a
//     PR's general comments.
//
// "latest" and "1.0" are the same API version; the client's base is 1.0.

// The pull-request calls' op names (a providers.Error's Op, and the
// simulator's endpoint names).
const (
	OpAddComment     = "bitbucket.AddComment"
	OpEditComment    = "bitbucket.EditComment"
	OpGetComment     = "bitbucket.GetComment"
	OpSetBuildStatus = "bitbucket.SetBuildStatus"
	OpPRActivities   = "bitbucket.PRActivities"
)

// Comment is a PR comment as Bitbucket answers it.
type Comment struct {
	ID      int64  `json:"id"`
	Version int    `json:"version"`
	Text    string `json:"text,omitempty"`
}

func prPath(project, slug string, pr int64) string {
	return repoPath(project, slug) + "/pull-requests/" + strconv.FormatInt(pr, 10)
}

// AddComment posts a new comment on a pull request.
func (c *Client) AddComment(ctx context.Context, project, slug string, pr int64, text string) (Comment, error) {
	const op = OpAddComment
	if perr := validRepo(op, project, slug); perr != nil {
		return Comment{}, perr
	}
	res := project + "/" + slug + "#" + strconv.FormatInt(pr, 10)
	resp, perr := c.c.Do(ctx, op, res, http.MethodPost, prPath(project, slug, pr)+"/comments", nil, map[string]any{"text": text}, true)
	if perr != nil {
		return Comment{}, perr
	}
	return c.comment(op, res, resp.Status, resp.Body, http.StatusCreated, func() *providers.Error { return c.fail(op, res, resp, true) })
}

// EditComment replaces a comment's text; version is the one last answered.
func (c *Client) EditComment(ctx context.Context, project, slug string, pr, id int64, version int, text string) (Comment, error) {
	const op = OpEditComment
	if perr := validRepo(op, project, slug); perr != nil {
		return Comment{}, perr
	}
	res := project + "/" + slug + "#" + strconv.FormatInt(pr, 10) + "/comment " + strconv.FormatInt(id, 10)
	resp, perr := c.c.Do(ctx, op, res, http.MethodPut, prPath(project, slug, pr)+"/comments/"+strconv.FormatInt(id, 10), nil,
		map[string]any{"text": text, "version": version}, true)
	if perr != nil {
		return Comment{}, perr
	}
	return c.comment(op, res, resp.Status, resp.Body, http.StatusOK, func() *providers.Error { return c.fail(op, res, resp, true) })
}

func (c *Client) comment(op, res string, status int, body []byte, want int, fail func() *providers.Error) (Comment, error) {
	if status != want {
		return Comment{}, fail()
	}
	var cm Comment
	if err := json.Unmarshal(body, &cm); err != nil || cm.ID <= 0 {
		return Comment{}, &providers.Error{Op: op, Resource: res, Status: status, Code: providers.CodeServer, Uncertain: true, Message: "answer without a comment id", Err: err}
	}
	return cm, nil
}

// BuildStatus is one build status on a commit.
type BuildStatus struct {
	Key         string `json:"key"`
	State       string `json:"state"` // INPROGRESS | SUCCESSFUL | FAILED
	URL         string `json:"url"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
}

// SetBuildStatus stores a build status on commit sha of the repository
// (the same key replaces the previous status).
func (c *Client) SetBuildStatus(ctx context.Context, project, slug, sha string, b BuildStatus) error {
	const op = OpSetBuildStatus
	if perr := validRepo(op, project, slug); perr != nil {
		return perr
	}
	if err := providers.ValidateSHA(sha); err != nil {
		return providers.Invalid(op, sha, err)
	}
	res := project + "/" + slug + "@" + sha
	resp, perr := c.c.Do(ctx, op, res, http.MethodPost, repoPath(project, slug)+"/commits/"+sha+"/builds", nil, b, true)
	if perr != nil {
		return perr
	}
	if resp.Status != http.StatusNoContent && resp.Status != http.StatusOK {
		return c.fail(op, res, resp, true)
	}
	return nil
}

// GetComment reads a comment (its current version).
func (c *Client) GetComment(ctx context.Context, project, slug string, pr, id int64) (Comment, error) {
	const op = OpGetComment
	if perr := validRepo(op, project, slug); perr != nil {
		return Comment{}, perr
	}
	res := project + "/" + slug + "#" + strconv.FormatInt(pr, 10) + "/comment " + strconv.FormatInt(id, 10)
	resp, perr := c.c.Do(ctx, op, res, http.MethodGet, prPath(project, slug, pr)+"/comments/"+strconv.FormatInt(id, 10), nil, nil, false)
	if perr != nil {
		return Comment{}, perr
	}
	return c.comment(op, res, resp.Status, resp.Body, http.StatusOK, func() *providers.Error { return c.fail(op, res, resp, false) })
}

// FindComment looks through the PR's activities for the oldest general
// comment whose text match accepts, and returns it as it is now (its
// version). found is false only when every page was read and none
// matched; any failure — Bitbucket's own 404 (the PR is gone: CodeNotFound)
// as much as a proxy's (CodeForeign) — is an error, never "none": a caller
// that would post a new comment on "none" must not do so on a failed look.
func (c *Client) FindComment(ctx context.Context, project, slug string, pr int64, match func(text string) bool) (Comment, bool, error) {
	const op = OpPRActivities
	if perr := validRepo(op, project, slug); perr != nil {
		return Comment{}, false, perr
	}
	res := project + "/" + slug + "#" + strconv.FormatInt(pr, 10)
	var best Comment
	start := 0
	for range maxPages {
		q := url.Values{"start": {strconv.Itoa(start)}, "limit": {strconv.Itoa(c.pageLimit)}}
		resp, perr := c.c.Do(ctx, op, res, http.MethodGet, prPath(project, slug, pr)+"/activities", q, nil, false)
		if perr != nil {
			return Comment{}, false, perr
		}
		if resp.Status != http.StatusOK {
			return Comment{}, false, c.fail(op, res, resp, false)
		}
		var page struct {
			Values []struct {
				Action  string   `json:"action"`
				Comment *Comment `json:"comment"`
			} `json:"values"`
			IsLastPage    bool `json:"isLastPage"`
			NextPageStart *int `json:"nextPageStart"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return Comment{}, false, &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Message: "unreadable page", Err: err}
		}
		for _, a := range page.Values {
			// Other actions (OPENED, APPROVED, RESCOPED, a plugin's) have
			// no comment; an EDITED activity names the same comment again.
			if a.Action != "COMMENTED" || a.Comment == nil || a.Comment.ID <= 0 || !match(a.Comment.Text) {
				continue
			}
			if best.ID == 0 || a.Comment.ID < best.ID || (a.Comment.ID == best.ID && a.Comment.Version > best.Version) {
				best = *a.Comment
			}
		}
		if page.IsLastPage {
			return best, best.ID != 0, nil
		}
		if page.NextPageStart == nil || *page.NextPageStart <= start {
			return Comment{}, false, &providers.Error{Op: op, Resource: res, Status: resp.Status, Code: providers.CodeServer, Message: "paging does not advance"}
		}
		start = *page.NextPageStart
	}
	return Comment{}, false, &providers.Error{Op: op, Resource: res, Code: providers.CodeServer, Message: "too many pages"}
}
