package httpapi

import (
	"context"
	"net/http"
	"regexp"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
)

// Waitlist is what the API needs of backend/waitlist.
type Waitlist interface {
	Join(ctx context.Context, a slots.Actor, c waitlist.JoinCmd) (string, events.Position, error)
	Leave(ctx context.Context, a slots.Actor, entryID string, anyone bool) (events.Position, error)
	Reorder(ctx context.Context, a slots.Actor, entryID string, position int, reason string) (events.Position, error)
	Accept(ctx context.Context, a slots.Actor, entryID string) (string, events.Position, error)
	Decline(ctx context.Context, a slots.Actor, entryID string) (events.Position, error)
	View(ctx context.Context) waitlist.View
	Warnings() []events.DeadlineWarning
	WaitFor(ctx context.Context, pos events.Position) error
}

// WaitlistAnswer is GET /api/waitlist's body: the queue, and the deadline
// warnings in force (the dashboard's banner).
type WaitlistAnswer struct {
	waitlist.View
	Warnings []WarningView `json:"warnings"`
}

// WarningView is one deadline warning in force.
type WarningView struct {
	Slot        string `json:"slot"`
	Occupant    string `json:"occupant"`
	Deadline    string `json:"deadline"`
	LeadSeconds int64  `json:"lead_s"`
}

var entryIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func (s *Server) needWaitlist() error {
	if s.d.Waitlist == nil {
		return apperr.Refuse(CodeNotFound, apperr.ReasonWaitlistOff)
	}
	return nil
}

func entryParam(c echo.Context) (string, error) {
	id := c.Param("id")
	if !entryIDRE.MatchString(id) {
		return "", invalidField("id", "id: a waitlist entry id (UUID)")
	}
	return id, nil
}

// answerWaitlist waits (bounded) until the waitlist has applied pos, then
// answers with the queue.
func (s *Server) answerWaitlist(c echo.Context, pos events.Position, status int) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.d.WaitTimeout)
	defer cancel()
	if err := s.d.Waitlist.WaitFor(ctx, pos); err != nil {
		s.log.WarnContext(ctx, "waitlist did not catch up before answering", "error", err.Error())
	}
	ws := s.d.Waitlist.Warnings()
	out := WaitlistAnswer{View: s.d.Waitlist.View(c.Request().Context()), Warnings: make([]WarningView, 0, len(ws))}
	for _, w := range ws {
		out.Warnings = append(out.Warnings, WarningView{Slot: w.Slot, Occupant: w.Occupant, Deadline: w.Deadline.Format("2006-01-02T15:04:05Z07:00"), LeadSeconds: w.LeadSeconds})
	}
	return c.JSON(status, out)
}

// getWaitlist answers GET /api/waitlist[?after=<position>]: with after, once
// the waitlist has applied that position (bounded wait), so a client that
// saw a change on the stream reads a queue at least that new.
func (s *Server) getWaitlist(c echo.Context) error {
	if err := s.needWaitlist(); err != nil {
		return err
	}
	var after events.Position
	if a := c.QueryParam("after"); a != "" {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return invalidField("after", "after: a log position (decimal)")
		}
		after = events.Position(n)
	}
	return s.answerWaitlist(c, after, http.StatusOK)
}

func (s *Server) joinWaitlist(c echo.Context) error {
	if err := s.needWaitlist(); err != nil {
		return err
	}
	var cmd waitlist.JoinCmd
	if err := decodeBody(c, &cmd, false); err != nil {
		return err
	}
	_, pos, err := s.d.Waitlist.Join(c.Request().Context(), actorOf(c), cmd)
	if err != nil {
		return err
	}
	return s.answerWaitlist(c, pos, http.StatusCreated)
}

// leaveWaitlist: one's own entry; anyone's with waitlist.manage (an admin,
// who may say why in {"reason"}).
func (s *Server) leaveWaitlist(c echo.Context) error {
	if err := s.needWaitlist(); err != nil {
		return err
	}
	id, err := entryParam(c)
	if err != nil {
		return err
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if err := decodeBody(c, &body, true); err != nil {
		return err
	}
	sub, _ := subjectOf(c)
	a := actorOf(c)
	a.Reason = body.Reason
	pos, err := s.d.Waitlist.Leave(c.Request().Context(), a, id, sub.Role.Has(auth.PermWaitlistManage))
	if err != nil {
		return err
	}
	return s.answerWaitlist(c, pos, http.StatusOK)
}

func (s *Server) acceptOffer(c echo.Context) error {
	return s.offerAnswer(c, func(ctx context.Context, a slots.Actor, id string) (events.Position, error) {
		_, pos, err := s.d.Waitlist.Accept(ctx, a, id)
		if err == nil {
			s.caughtUp(c) // the slot is occupied now: the answer shows it
		}
		return pos, err
	})
}

func (s *Server) declineOffer(c echo.Context) error {
	return s.offerAnswer(c, func(ctx context.Context, a slots.Actor, id string) (events.Position, error) {
		return s.d.Waitlist.Decline(ctx, a, id) // a method value of a nil Waitlist would panic here
	})
}

// offerAnswer runs an offer's accept or decline (no body) for the entry in
// the path and answers with the waitlist as of its position.
func (s *Server) offerAnswer(c echo.Context, run func(ctx context.Context, a slots.Actor, id string) (events.Position, error)) error {
	if err := s.needWaitlist(); err != nil {
		return err
	}
	id, err := entryParam(c)
	if err != nil {
		return err
	}
	if err := decodeBody(c, &struct{}{}, true); err != nil {
		return err
	}
	pos, err := run(c.Request().Context(), actorOf(c), id)
	if err != nil {
		return err
	}
	return s.answerWaitlist(c, pos, http.StatusOK)
}

// reorderWaitlist: {"position": 1-based, "reason": "…"} (admins).
func (s *Server) reorderWaitlist(c echo.Context) error {
	if err := s.needWaitlist(); err != nil {
		return err
	}
	id, err := entryParam(c)
	if err != nil {
		return err
	}
	var body struct {
		Position int    `json:"position"`
		Reason   string `json:"reason"`
	}
	if err := decodeBody(c, &body, false); err != nil {
		return err
	}
	pos, err := s.d.Waitlist.Reorder(c.Request().Context(), actorOf(c), id, body.Position-1, body.Reason)
	if err != nil {
		return err
	}
	return s.answerWaitlist(c, pos, http.StatusOK)
}

// Insights is what the API needs of backend/insights.
type Insights interface {
	Series(rng string) (insights.Series, bool)
}

// getInsights answers GET /api/insights?range=1d|7d|30d (default 7d).
func (s *Server) getInsights(c echo.Context) error {
	if s.d.Insights == nil {
		return errf(CodeNotFound, "insights are not enabled on this server")
	}
	rng := c.QueryParam("range")
	if rng == "" {
		rng = "7d"
	}
	out, ok := s.d.Insights.Series(rng)
	if !ok {
		return invalidField("range", "range: 1d, 7d or 30d")
	}
	return c.JSON(http.StatusOK, out)
}
