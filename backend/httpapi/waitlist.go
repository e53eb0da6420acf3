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

// waitlistAnswer answers a waitlist command with the queue once the
// waitlist applied the command's position.
func waitlistAnswer[In any](s *Server, status int) func(echo.Context, string, In, events.Position) error {
	return func(c echo.Context, _ string, _ In, pos events.Position) error {
		return s.answerWaitlist(c, pos, status)
	}
}

func (s *Server) joinWaitlist(c echo.Context) error {
	return do(s, c, command[waitlist.JoinCmd, events.Position]{
		need: s.needWaitlist,
		run: func(ctx context.Context, a slots.Actor, _ string, cmd waitlist.JoinCmd) (events.Position, error) {
			_, pos, err := s.d.Waitlist.Join(ctx, a, cmd)
			return pos, err
		},
		noWait: true,
		answer: waitlistAnswer[waitlist.JoinCmd](s, http.StatusCreated),
	})
}

// leaveBody is DELETE /api/waitlist/:id's optional body.
type leaveBody struct {
	Reason string `json:"reason"`
}

// leaveWaitlist: one's own entry; anyone's with waitlist.manage (an admin,
// who may say why in {"reason"}).
func (s *Server) leaveWaitlist(c echo.Context) error {
	var anyone bool
	return do(s, c, command[leaveBody, events.Position]{
		need:     s.needWaitlist,
		target:   entryParam,
		optional: true,
		allow: func(c echo.Context, _ string, body *leaveBody, a *slots.Actor) error {
			sub, _ := subjectOf(c)
			anyone = sub.Role.Has(auth.PermWaitlistManage)
			a.Reason = body.Reason
			return nil
		},
		run: func(ctx context.Context, a slots.Actor, id string, _ leaveBody) (events.Position, error) {
			return s.d.Waitlist.Leave(ctx, a, id, anyone)
		},
		noWait: true,
		answer: waitlistAnswer[leaveBody](s, http.StatusOK),
	})
}

func (s *Server) acceptOffer(c echo.Context) error {
	return do(s, c, command[noBody, events.Position]{
		need:     s.needWaitlist,
		target:   entryParam,
		optional: true,
		run: func(ctx context.Context, a slots.Actor, id string, _ noBody) (events.Position, error) {
			_, pos, err := s.d.Waitlist.Accept(ctx, a, id)
			return pos, err
		},
		// The slot is occupied now: the wait for the read model lets the
		// answer (and the next read) show it.
		answer: waitlistAnswer[noBody](s, http.StatusOK),
	})
}

func (s *Server) declineOffer(c echo.Context) error {
	return do(s, c, command[noBody, events.Position]{
		need:     s.needWaitlist,
		target:   entryParam,
		optional: true,
		run: func(ctx context.Context, a slots.Actor, id string, _ noBody) (events.Position, error) {
			return s.d.Waitlist.Decline(ctx, a, id) // a method value of a nil Waitlist would panic here
		},
		noWait: true,
		answer: waitlistAnswer[noBody](s, http.StatusOK),
	})
}

// reorderBody: {"position": 1-based, "reason": "…"} (admins).
type reorderBody struct {
	Position int    `json:"position"`
	Reason   string `json:"reason"`
}

func (s *Server) reorderWaitlist(c echo.Context) error {
	return do(s, c, command[reorderBody, events.Position]{
		need:   s.needWaitlist,
		target: entryParam,
		run: func(ctx context.Context, a slots.Actor, id string, body reorderBody) (events.Position, error) {
			return s.d.Waitlist.Reorder(ctx, a, id, body.Position-1, body.Reason)
		},
		noWait: true,
		answer: waitlistAnswer[reorderBody](s, http.StatusOK),
	})
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
