package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// The pull-request flow's routes (issue 34, docs/pull-requests.md).

func (s *Server) needPRs() error {
	if s.d.PullRequests == nil {
		return errf(CodeNotFound, "the pull-request flow is not enabled on this server")
	}
	return nil
}

func (s *Server) listPRRepos(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	l, err := s.d.PullRequests.Links(c.Request().Context())
	if err != nil {
		return err
	}
	if l == nil {
		l = []events.RepoRef{}
	}
	return c.JSON(http.StatusOK, map[string]any{"repos": l})
}

// linkBody is POST /api/pr-repos's body.
type linkBody struct {
	Repo string `json:"repo"`
}

func (s *Server) linkPRRepo(c echo.Context) error {
	return do(s, c, command[linkBody, events.RepoRef]{
		need: s.needPRs,
		run: func(ctx context.Context, a slots.Actor, _ string, in linkBody) (events.RepoRef, error) {
			return s.d.PullRequests.Link(ctx, a, in.Repo)
		},
		noWait: true, // the links are the driver's, not the read model's
		answer: func(c echo.Context, _ string, _ linkBody, r events.RepoRef) error {
			return c.JSON(http.StatusCreated, map[string]any{"repo": r})
		},
	})
}

func (s *Server) unlinkPRRepo(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	if _, err := s.d.PullRequests.Unlink(c.Request().Context(), actorOf(c), c.Param("project")+"/"+c.Param("slug")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// bitbucketHook takes one Bitbucket delivery: the body read whole (at most
// pullrequests.MaxBody, 413 beyond) since the signature covers its exact
// bytes, then Receive decides. It answers at once; the work is the
// driver's and the jobs'.
func (s *Server) bitbucketHook(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	req := c.Request()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, pullrequests.MaxBody))
	if err != nil {
		return toAPIError(err)
	}
	out, err := s.d.PullRequests.Receive(req.Context(), req.Header, body)
	if err != nil {
		return err
	}
	if out.Status == http.StatusUnauthorized {
		return errf(CodeUnauthenticated, "%s", out.Reason)
	}
	if out.Status == http.StatusBadRequest {
		return errf(CodeInvalid, "%s", out.Reason)
	}
	return c.JSON(out.Status, out)
}

// simulatedBitbucketHook takes a delivery the simulated Bitbucket answered
// ({"event_key", "request_id", "payload"}, the shape of POST
// /api/sim/pull-requests) and receives it signed under the server's secret,
// as the real Bitbucket would send it. Only while the simulators run. The
// answer is the Outcome (accepted, ignored, duplicate, refused and why).
func (s *Server) simulatedBitbucketHook(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	var in struct {
		ID        int64           `json:"id"`
		Head      string          `json:"head"`
		EventKey  string          `json:"event_key"`
		RequestID string          `json:"request_id"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := decodeBody(c, &in, false); err != nil {
		return err
	}
	if len(in.Payload) == 0 {
		return errf(CodeInvalid, "payload: the delivery's body, as POST /api/sim/pull-requests answers it")
	}
	out, err := s.d.PullRequests.DeliverSimulated(c.Request().Context(), in.EventKey, in.RequestID, in.Payload)
	if err != nil {
		return err
	}
	if out.Status == http.StatusBadRequest {
		return errf(CodeInvalid, "%s", out.Reason)
	}
	// What the flow made of the delivery is the answer, a refusal (no
	// secret configured) included: this caller's request was good, and a
	// 401 here would read as the caller's own session refused.
	status := http.StatusOK
	if out.Result == "accepted" {
		status = http.StatusAccepted
	}
	return c.JSON(status, out)
}

// bitbucketDeliveries lists the last deliveries this process received and
// what was made of each (accepted, duplicate, ignored, refused and why).
func (s *Server) bitbucketDeliveries(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"deliveries": s.d.PullRequests.Recent()})
}

// prStates are the values GET /api/pull-requests' ?state= takes: waiting
// (open, without a slot), open (waiting ones too), closed (merged,
// declined, deleted).
var prStates = []string{"waiting", "open", "closed"}

// listPullRequests answers GET /api/pull-requests: the pull requests of
// the read model (projections.PRLister's order: the waiting ones first, in
// the order they will be served; then the other open ones; then the most
// recently closed), with the position the list is exact at, narrowed by
// ?state=.
func (s *Server) listPullRequests(c echo.Context) error {
	state := c.QueryParam("state")
	if state != "" && !slices.Contains(prStates, state) {
		return invalidField("state", "state must be one of waiting, open, closed; got "+strconv.Quote(state))
	}
	l, ok := s.d.Reads.(projections.PRLister)
	if !ok {
		return errf(CodeNotFound, "this read model lists no pull requests")
	}
	prs, pos, err := l.ListPullRequests(c.Request().Context())
	if err != nil {
		return err
	}
	out := make([]projections.PRView, 0, len(prs))
	for _, v := range prs {
		open := v.State == events.PRStateOpen
		if state == "" || (state == "waiting" && open && v.Waiting()) || (state == "open" && open) || (state == "closed" && !open) {
			out = append(out, v)
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"pull_requests": out, "position": pos})
}
