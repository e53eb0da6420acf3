package bitbucket

import (
	"context"
	"encoding/json"
	"net/http"
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
//
// "latest" and "1.0" are the same API version; the client's base is 1.0.

// Comment is a PR comment as Bitbucket answers it.
type Comment struct {
	ID      int64 `json:"id"`
	Version int   `json:"version"`
}

func prPath(project, slug string, pr int64) string {
	return repoPath(project, slug) + "/pull-requests/" + strconv.FormatInt(pr, 10)
}

// AddComment posts a new comment on a pull request.
func (c *Client) AddComment(ctx context.Context, project, slug string, pr int64, text string) (Comment, error) {
	const op = "bitbucket.AddComment"
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
	const op = "bitbucket.EditComment"
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
	const op = "bitbucket.SetBuildStatus"
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
	const op = "bitbucket.GetComment"
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
