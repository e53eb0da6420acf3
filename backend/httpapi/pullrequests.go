package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"

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
// pullrequests.MaxBody, 413 beyond, within the hook's budget, 503 beyond:
// readHookBody) since the signature covers its exact bytes, then Receive
// decides. It answers at once; the work is the
// driver's and the jobs'.
func (s *Server) bitbucketHook(c echo.Context) error {
	if err := s.needPRs(); err != nil {
		return err
	}
	req := c.Request()
	body, release, err := s.readHookBody(c)
	defer release() // the body is held until the delivery is decided
	if err != nil {
		return err
	}
	out, err := s.d.PullRequests.Receive(req.Context(), req.Header, body)
	if err != nil {
		return err
	}
	if out.Status == http.StatusUnauthorized {
		return hookRefusal(CodeUnauthenticated, out)
	}
	if out.Status == http.StatusBadRequest {
		return hookRefusal(CodeInvalid, out)
	}
	return c.JSON(out.Status, out)
}

// hookRefusal is a refused delivery as an API error: the delivery's own
// code and its parts (pullrequests.Why*: stale_delivery, bad_signature,
// malformed, …, as the deliveries list names them) go in details as
// reason_code and reason_args, so that the webhook's last response in
// Bitbucket says which refusal it was; a malformed field is also the
// error's field (reason invalid_field).
func hookRefusal(code Code, out pullrequests.Outcome) *Error {
	e := errf(code, "%s", out.Reason)
	e.Details = map[string]any{"reason_code": out.Code, "reason_args": out.Args}
	if f := out.Args["field"]; f != "" && code == CodeInvalid {
		e.Details["field"] = f
	}
	if out.Args == nil {
		e.Details["reason_args"] = map[string]string{}
	}
	return e
}

const hookRoute = "/api/hooks/bitbucket"

// The hook's bodies are read before anything about them can be checked
// (the signature covers the whole body), by anyone: so all the bodies
// being read at once share one budget of bytes (Deps.HookBodyBudget,
// DefaultHookBodyBudget; fifth attack pass: 200 connections each holding
// all but the last byte of a chunked 1 MiB body took a fresh process from
// 60 to 423 MB). A body takes what its buffer holds, as the buffer grows
// (hookBodyFirst, then doubling): a sender pays for memory with bytes it
// actually sent, so trickling senders hold next to nothing and cannot
// spend the budget for Bitbucket's deliveries (a few KiB each: a 16 MiB
// budget reads thousands of them at once, or 16 bodies of the full 1 MiB,
// where the buffer stops growing). Beyond it: 503 with Retry-After, never
// memory growth.
const (
	hookBodyFirst         = 512
	DefaultHookBodyBudget = 16 << 20
)

// byteBudget is a count of bytes that may be held, taken and given back.
type byteBudget struct {
	mu        sync.Mutex
	used, max int64
}

// testHookBudget, when set, sees the hook budget's use after each change.
var testHookBudget func(used int64)

func (b *byteBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	if testHookBudget != nil {
		testHookBudget(b.used)
	}
	return true
}

func (b *byteBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if testHookBudget != nil {
		testHookBudget(b.used)
	}
}

// readHookBody reads the hook's body whole, at most pullrequests.MaxBody
// (413), taking from the budget what its buffer grows by before it grows
// (503 when it is spent, and the connection is closed rather than
// drained). release gives it back: the caller defers it, error or not, so
// a body counts until its delivery is decided.
func (s *Server) readHookBody(c echo.Context) (body []byte, release func(), err error) {
	r := http.MaxBytesReader(c.Response(), c.Request().Body, pullrequests.MaxBody)
	var buf []byte
	var held int64
	release = func() { s.hookBodies.give(held) }
	for {
		if len(buf) == cap(buf) {
			// The buffer's next size: doubled, to at most one byte past
			// the limit (so that MaxBytesReader can say 413).
			grow := min(max(cap(buf), hookBodyFirst), pullrequests.MaxBody+1-cap(buf))
			if !s.hookBodies.take(int64(grow)) {
				c.Response().Header().Set(echo.HeaderConnection, "close")
				return nil, release, &Error{Code: CodeUnavailable, RetryAfter: 1,
					Message: "too many webhook bodies are being read at once; try again",
					Details: map[string]any{"limit": s.hookBodies.max}}
			}
			held += int64(grow)
			buf = append(make([]byte, 0, cap(buf)+grow), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, release, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			// The sender stopped before the body's length: its fault
			// (400), not an internal error to log and alert on.
			return nil, release, errf(CodeInvalid, "the body ended before its length (connection closed)")
		case err != nil:
			return nil, release, toAPIError(err)
		}
	}
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
		return hookRefusal(CodeInvalid, out)
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
