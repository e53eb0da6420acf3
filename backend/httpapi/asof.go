package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Audit by replay (issue 28): GET /api/slots/{name}?at=, GET
// /api/jobs/{id}?at=, GET /api/slots/{name}/changes and GET
// /api/freshness. The historic answers are folded from the slot's and its
// jobs' streams (projections.History's SlotAsOf and SlotChanges, resumed
// from the nearest checkpoint of the slot's fold so the cost follows the
// range asked; projections.JobAsOf), never from the whole log.

// slotAt is a slot's view at a moment: the view's fields, plus as_of.
type slotAt struct {
	projections.SlotView
	AsOf projections.AsOf `json:"as_of"`
}

// jobAt is a job's view at a moment.
type jobAt struct {
	projections.JobView
	AsOf projections.AsOf `json:"as_of"`
}

// queryAt parses the query parameter name as a moment (a log position or
// an RFC 3339 time); absent is the zero At ("now"); present and bad → 400.
func queryAt(c echo.Context, name string) (projections.At, bool, error) {
	vs, ok := c.QueryParams()[name]
	if !ok {
		return projections.At{}, false, nil
	}
	if len(vs) != 1 {
		return projections.At{}, false, invalidField(name, "query "+name+" must be given once")
	}
	at, err := projections.ParseAt(vs[0])
	if err != nil {
		return projections.At{}, false, invalidField(name, "query "+name+" must be a log position (a decimal number from 1) or an RFC 3339 time such as 2026-01-02T15:00:00Z")
	}
	return at, true, nil
}

// history is the log the historic answers are folded from, and a place
// among the replays running now (issue 33: each replays the slot's or the
// job's history, so a viewer sending many at once could take the
// process's CPU and memory). Beyond MaxReplaysPerSubject for the caller:
// 429; beyond MaxReplays in all: 503; both with Retry-After, and the log
// is not read. The caller defers leave.
func (s *Server) history(c echo.Context) (log projections.StreamReader, leave func(), err error) {
	if s.d.History == nil {
		return nil, nil, errf(CodeUnavailable, "this server has no event log to answer about the past")
	}
	sub, _ := subjectOf(c)
	leave, full := s.replays.enter(sub.ID)
	switch full {
	case capSubject:
		return nil, nil, &Error{Code: CodeTooMany, Message: "too many answers about the past running for this user or token; wait for one to finish", RetryAfter: 1,
			Details: map[string]any{"limit": s.d.MaxReplaysPerSubject}}
	case capTotal:
		return nil, nil, &Error{Code: CodeUnavailable, Message: "too many answers about the past running; try again in a moment", RetryAfter: 1,
			Details: map[string]any{"limit": s.d.MaxReplays}}
	}
	return s.d.History, leave, nil
}

// slotHistory is the checkpointed slot fold over the log (one per server,
// made on first use), and a place among the replays (history).
func (s *Server) slotHistory(c echo.Context) (*projections.History, func(), error) {
	log, leave, err := s.history(c)
	if err != nil {
		return nil, nil, err
	}
	s.histOnce.Do(func() { s.hist = projections.NewHistory(log, projections.HistoryOptions{}) })
	return s.hist, leave, nil
}

func (s *Server) slotAsOf(c echo.Context, name string, at projections.At) error {
	h, leave, err := s.slotHistory(c)
	if err != nil {
		return err
	}
	defer leave()
	v, as, err := h.SlotAsOf(c.Request().Context(), s.d.Reads, name, at)
	if err != nil {
		return notFound(err, "slot %q did not exist at position %d", name, as.Position)
	}
	return c.JSON(http.StatusOK, slotAt{SlotView: v, AsOf: as})
}

func (s *Server) jobAsOf(c echo.Context, id string, at projections.At) error {
	log, leave, err := s.history(c)
	if err != nil {
		return err
	}
	defer leave()
	v, as, err := projections.JobAsOf(c.Request().Context(), log, s.d.Reads, id, at)
	if err != nil {
		return notFound(err, "job %q did not exist at position %d", id, as.Position)
	}
	return c.JSON(http.StatusOK, jobAt{JobView: v, AsOf: as})
}

// slotChanges answers GET /api/slots/{name}/changes?from=&to=&limit=&order=:
// from absent is the slot's beginning, to absent is now. A page holds at
// most limit changes (and projections.ChangesScan events); oldest first
// (the default) next_from, when set, is the from of the next page (with
// to = to.position); newest first (order=newest: the latest changes of the
// range) next_to is the to of the older page (with the same from).
func (s *Server) slotChanges(c echo.Context) error {
	name, err := pathName(c, "name")
	if err != nil {
		return err
	}
	from, _, err := queryAt(c, "from")
	if err != nil {
		return err
	}
	to, _, err := queryAt(c, "to")
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", projections.DefaultChangesLimit, 1, projections.MaxChangesLimit)
	if err != nil {
		return err
	}
	order := c.QueryParam("order")
	if order != "" && order != "oldest" && order != "newest" {
		return invalidField("order", "order must be oldest (the default) or newest")
	}
	h, leave, err := s.slotHistory(c)
	if err != nil {
		return err
	}
	defer leave()
	changes := h.SlotChanges
	if order == "newest" {
		changes = h.SlotChangesNewest
	}
	page, err := changes(c.Request().Context(), s.d.Reads, name, from, to, limit)
	if errors.Is(err, projections.ErrInvalid) {
		return invalidField("from", "from must not be after to: "+err.Error())
	}
	if err != nil {
		return notFound(err, "slot %q does not exist", name)
	}
	out := map[string]any{"slot": name, "from": page.From, "to": page.To, "changes": page.Changes}
	if page.NextFrom != 0 {
		out["next_from"] = page.NextFrom
	}
	if page.NextTo != 0 {
		out["next_to"] = page.NextTo
	}
	return c.JSON(http.StatusOK, out)
}

// freshness is GET /api/freshness: where the log ends, where this server's
// read model is, and, for ?position= (what a page shows), how far behind
// that is in events and in seconds (the age of the oldest event it has
// not seen).
type freshness struct {
	Head          events.Position `json:"head"`
	ReadModel     events.Position `json:"read_model"`
	Rebuilding    bool            `json:"rebuilding"`
	Position      events.Position `json:"position"`
	BehindEvents  uint64          `json:"behind_events"`
	BehindSeconds float64         `json:"behind_seconds"`
	ServerTime    time.Time       `json:"server_time"`
}

func (s *Server) freshness(c echo.Context) error {
	ctx := c.Request().Context()
	pos, has, err := queryPosition(c, "position")
	if err != nil {
		return err
	}
	rm, err := s.d.Reads.Position(ctx)
	if err != nil {
		return err
	}
	head := rm
	if s.d.Log != nil {
		if head, err = s.d.Log.Head(ctx); err != nil {
			return err
		}
	}
	f := freshness{Head: head, ReadModel: rm, ServerTime: time.Now().UTC(),
		// At start the read model replays the log up to the head the
		// process started with: until then it is rebuilding.
		Rebuilding: rm < s.d.Hub.opt.LiveFrom}
	f.Position = events.Position(pos)
	if !has {
		f.Position = rm
	}
	if f.Position < head {
		f.BehindEvents = uint64(head - f.Position)
		if t, ok := s.timeAfter(ctx, f.Position); ok {
			f.BehindSeconds = max(0, f.ServerTime.Sub(t).Seconds())
		}
	}
	return c.JSON(http.StatusOK, f)
}

// errFirst ends timeAfter's subscription after one event.
var errFirst = errors.New("first event read")

// timeAfter is the time of the first event after pos (one event read).
func (s *Server) timeAfter(ctx context.Context, pos events.Position) (time.Time, bool) {
	sub, ok := s.d.Log.(interface {
		SubscribeAll(ctx context.Context, after events.Position, filter events.Filter, h events.Handler) error
	})
	if !ok {
		return time.Time{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var t time.Time
	err := sub.SubscribeAll(ctx, pos, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		t = ev.Meta.Time
		return errFirst
	})
	return t, errors.Is(err, errFirst)
}
