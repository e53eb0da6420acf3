package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// caughtUp waits until the read model has applied everything the log holds
// now, so that the answer to a command shows its effect (read-your-writes).
// The command already succeeded, so a slow read model is logged, not
// reported as a failure.
func (s *Server) caughtUp(c echo.Context) {
	if s.d.Log == nil || s.d.Waiter == nil {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.d.WaitTimeout)
	defer cancel()
	head, err := s.d.Log.Head(ctx)
	if err == nil {
		err = s.d.Waiter.WaitFor(ctx, head)
	}
	if err != nil {
		s.log.WarnContext(ctx, "read model did not catch up before answering",
			slog.String("correlation_id", requestID(c)), slog.String("error", err.Error()))
	}
}

// ---- slots ----

func (s *Server) listSlots(c echo.Context) error {
	ctx := c.Request().Context()
	pos, err := s.d.Reads.Position(ctx)
	if err != nil {
		return err
	}
	list, err := s.d.Reads.ListSlots(ctx)
	if err != nil {
		return err
	}
	if list == nil {
		list = []projections.SlotView{}
	}
	return c.JSON(http.StatusOK, map[string]any{"slots": list, "position": pos})
}

func (s *Server) getSlot(c echo.Context) error {
	name, err := pathName(c, "name")
	if err != nil {
		return err
	}
	if at, ok, err := queryAt(c, "at"); err != nil || ok {
		if err != nil {
			return err
		}
		return s.slotAsOf(c, name, at)
	}
	return s.slotView(c, name, http.StatusOK)
}

func (s *Server) slotView(c echo.Context, name string, status int) error {
	v, err := s.d.Reads.Slot(c.Request().Context(), name)
	if err != nil {
		return notFound(err, "slot %q does not exist", name)
	}
	return c.JSON(status, v)
}

// commandAnswer answers a slot command that succeeded: its events are in
// the log, so the answer is never a failure. Normally it is the slot's
// view; when the read model cannot show it (its database is down), it is
// 202 with what could not be confirmed, and the effect shows once the read
// model is back (a retry of the command would only be refused as a
// conflict).
func (s *Server) commandAnswer(c echo.Context, name string, status int) error {
	v, err := s.d.Reads.Slot(c.Request().Context(), name)
	if err != nil {
		s.log.WarnContext(c.Request().Context(), "command recorded, but its effect could not be read back",
			slog.String("correlation_id", requestID(c)), slog.String("slot", name), slog.String("error", err.Error()))
		return c.JSON(http.StatusAccepted, map[string]any{
			"slot": name, "recorded": true,
			"unconfirmed": "the command is recorded in the event log; the read model could not show its effect yet",
		})
	}
	return c.JSON(status, v)
}

func (s *Server) register(c echo.Context) error {
	return do(s, c, command[slots.RegisterCmd, struct{}]{
		allow: func(c echo.Context, _ string, cmd *slots.RegisterCmd, _ *slots.Actor) error {
			if err := checkName(cmd.Name); err != nil {
				return invalidField("name", "name "+strconv.Quote(cmd.Name)+": "+err.Error())
			}
			return branchAllowed(c, *cmd)
		},
		run: noResult(func(ctx context.Context, a slots.Actor, _ string, cmd slots.RegisterCmd) error {
			return s.d.Commands.Register(ctx, a, cmd)
		}),
		answer: func(c echo.Context, _ string, cmd slots.RegisterCmd, _ struct{}) error {
			return s.commandAnswer(c, cmd.Name, http.StatusCreated)
		},
	})
}

// branchAllowed: a slot's branch defaults to its repository's default
// branch (the slots service reads it at the provider); naming another one
// needs PermSetBranch. Register is the only command that sets a branch, and
// no command changes it later.
func branchAllowed(c echo.Context, cmd slots.RegisterCmd) error {
	if cmd.Branch == "" {
		return nil
	}
	if sub, _ := subjectOf(c); !sub.Role.Has(auth.PermSetBranch) {
		return forbidden(sub, auth.PermSetBranch)
	}
	return nil
}

func (s *Server) occupy(c echo.Context) error {
	return do(s, c, command[slots.OccupyCmd, struct{}]{
		target: pathParam("name"),
		allow: func(c echo.Context, _ string, cmd *slots.OccupyCmd, _ *slots.Actor) error {
			sub, _ := subjectOf(c)
			if err := s.resolveOccupant(sub, cmd); err != nil {
				return err
			}
			// A member occupies only for themself.
			if cmd.ByID != sub.ID && !sub.Role.Has(auth.PermOccupyForOthers) {
				return forbidden(sub, auth.PermOccupyForOthers)
			}
			return nil
		},
		run:    noResult(s.d.Commands.Occupy),
		answer: answerSlot[slots.OccupyCmd, struct{}](s, http.StatusOK),
	})
}

func (s *Server) extend(c echo.Context) error {
	return do(s, c, command[slots.ExtendCmd, struct{}]{
		target: pathParam("name"),
		allow:  ownSlotOr[slots.ExtendCmd](s, auth.PermExtendAny),
		run:    noResult(s.d.Commands.Extend),
		answer: answerSlot[slots.ExtendCmd, struct{}](s, http.StatusOK),
	})
}

// setDeadline moves an occupied slot's deadline earlier: the explicit action
// beside extend, with the same ownership rule (the occupant, or
// PermExtendAny for someone else's slot).
func (s *Server) setDeadline(c echo.Context) error {
	return do(s, c, command[slots.DeadlineCmd, struct{}]{
		target: pathParam("name"),
		allow:  ownSlotOr[slots.DeadlineCmd](s, auth.PermExtendAny),
		run:    noResult(s.d.Commands.SetEarlierDeadline),
		answer: answerSlot[slots.DeadlineCmd, struct{}](s, http.StatusOK),
	})
}

// noBody accepts an empty body or {} for commands that take no parameters.
type noBody struct{}

// releaseBody: a reason is required when an operator releases a slot
// somebody else occupies; it is recorded in the reset's JobQueued.
type releaseBody struct {
	Reason string `json:"reason,omitempty"`
}

// MaxReasonLen bounds a release reason.
const MaxReasonLen = 500

func (s *Server) release(c echo.Context) error {
	return do(s, c, command[releaseBody, slots.JobAcceptedResult]{
		target:   pathParam("name"),
		optional: true,
		allow: func(c echo.Context, name string, b *releaseBody, a *slots.Actor) error {
			b.Reason = strings.TrimSpace(b.Reason)
			if len(b.Reason) > MaxReasonLen || !utf8.ValidString(b.Reason) || strings.IndexFunc(b.Reason, unicode.IsControl) >= 0 {
				return invalidField("reason", "reason must be at most 500 bytes of text without control characters")
			}
			occ, occID, err := s.occupantOf(c, name)
			if err != nil {
				return err
			}
			a.Reason = b.Reason
			if sub, _ := subjectOf(c); !slots.IsOccupant(occ, occID, sub.ID, sub.Name) {
				if !sub.Role.Has(auth.PermReleaseAny) {
					return forbidden(sub, auth.PermReleaseAny)
				}
				if occ != "" && b.Reason == "" {
					return invalidField("reason", "releasing a slot somebody else occupies needs a reason")
				}
			} else if !sub.Role.Has(auth.PermReleaseAny) {
				a.OwnOnly = true
			}
			return nil
		},
		run: func(ctx context.Context, a slots.Actor, name string, _ releaseBody) (slots.JobAcceptedResult, error) {
			return s.d.Commands.Release(ctx, a, name)
		},
		answer: answerAccepted[releaseBody, slots.JobAcceptedResult](),
	})
}

// occupantOf is the slot's occupant, name and subject id ("" when vacant),
// for the ownership checks. It comes from the log (the slots service's
// fold), like every decision of a command: never from a read model that may
// lag or be down (issue 24). A member's command is then OwnOnly, and the
// slots service decides ownership again on the slot it appends to.
func (s *Server) occupantOf(c echo.Context, name string) (occupant, occupantID string, err error) {
	return s.d.Commands.Occupant(c.Request().Context(), name)
}

// ownSlotOr lets the occupant through (slots.IsOccupant: by subject id;
// an occupant recorded by name only is the account of that name, never a
// token), and others only with perm. The occupant commands OwnOnly.
func ownSlotOr[In any](s *Server, perm auth.Permission) func(echo.Context, string, *In, *slots.Actor) error {
	return func(c echo.Context, name string, _ *In, a *slots.Actor) error {
		occ, occID, err := s.occupantOf(c, name)
		if err != nil {
			return err
		}
		sub, _ := subjectOf(c)
		if sub.Role.Has(perm) {
			return nil
		}
		if !slots.IsOccupant(occ, occID, sub.ID, sub.Name) {
			return forbidden(sub, perm)
		}
		a.OwnOnly = true
		return nil
	}
}

// resolveOccupant fills cmd.By and cmd.ByID with an existing subject:
// by_id (from GET /api/occupants), else by, a name that names exactly one
// account or token; neither: the caller. A free name that names nobody is
// refused, so a slot can no longer be held by a name some token or account
// takes later. Without authentication (benchmarks) the name is kept as is.
func (s *Server) resolveOccupant(sub auth.Subject, cmd *slots.OccupyCmd) error {
	if cmd.ByID == "" && cmd.By == "" {
		cmd.By, cmd.ByID = sub.Name, sub.ID
		return nil
	}
	if s.d.NoAuth {
		if err := checkActor(cmd.By); err != nil {
			return invalidField("by", "by: "+err.Error())
		}
		if cmd.By == sub.Name {
			cmd.ByID = sub.ID
		}
		return nil
	}
	var who auth.Subject
	var ok bool
	switch {
	case cmd.ByID != "":
		if err := checkSubjectID(cmd.ByID); err != nil {
			return invalidField("by_id", "by_id: "+err.Error())
		}
		if who, ok = s.d.Auth.Dir.SubjectOf(cmd.ByID); !ok {
			return invalidField("by_id", "by_id "+strconv.Quote(cmd.ByID)+" is no account or token (GET /api/occupants lists them)")
		}
		if cmd.By != "" && cmd.By != who.Name {
			return invalidField("by", "by "+strconv.Quote(cmd.By)+" is not the name of by_id "+strconv.Quote(cmd.ByID))
		}
	default:
		if err := checkActor(cmd.By); err != nil {
			return invalidField("by", "by: "+err.Error())
		}
		if who, ok = s.d.Auth.Dir.SubjectNamed(cmd.By); !ok {
			return invalidField("by", "by "+strconv.Quote(cmd.By)+" names no account or token (choose one from GET /api/occupants and send its by_id)")
		}
	}
	cmd.By, cmd.ByID = who.Name, who.ID
	return nil
}

// occupants lists whom a slot can be occupied for (accounts and live
// tokens, by name), for "occupy for someone else".
func (s *Server) occupants(c echo.Context) error {
	type person struct {
		ID   string `json:"id"`
		Name string `json:"name"`
		Kind string `json:"kind"` // user | token
	}
	out := []person{}
	if !s.d.NoAuth {
		for _, sub := range s.d.Auth.Dir.Occupants() {
			out = append(out, person{ID: sub.ID, Name: sub.Name, Kind: sub.Kind()})
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"occupants": out})
}

func (s *Server) teardown(c echo.Context) error { return s.jobCommand(c, s.d.Commands.Teardown) }

// jobCommand runs a command on the slot in the path that takes no body and
// queues a job.
func (s *Server) jobCommand(c echo.Context, run func(context.Context, slots.Actor, string) (slots.JobAcceptedResult, error)) error {
	return do(s, c, command[noBody, slots.JobAcceptedResult]{
		target:   pathParam("name"),
		optional: true,
		run: func(ctx context.Context, a slots.Actor, name string, _ noBody) (slots.JobAcceptedResult, error) {
			return run(ctx, a, name)
		},
		answer: answerAccepted[noBody, slots.JobAcceptedResult](),
	})
}

func (s *Server) promote(c echo.Context) error {
	return do(s, c, command[slots.PromoteCmd, slots.JobAcceptedResult]{
		target: pathParam("name"),
		run:    s.d.Commands.Promote,
		answer: answerAccepted[slots.PromoteCmd, slots.JobAcceptedResult](),
	})
}

// queryKind is the `kind` query, one of kinds: the slot's plan takes the
// kinds it plans (events.SlotPlanKinds), a list of jobs any kind
// (events.JobKinds).
func queryKind(c echo.Context, kinds []string, required bool) (string, error) {
	k := c.QueryParam("kind")
	if k == "" && !required {
		return "", nil
	}
	if !slices.Contains(kinds, k) {
		return "", invalidField("kind", "query kind must be one of "+strings.Join(kinds, ", ")+", got "+strconv.Quote(k))
	}
	return k, nil
}

func (s *Server) plan(c echo.Context) error {
	name, err := pathName(c, "name")
	if err != nil {
		return err
	}
	kind, err := queryKind(c, events.SlotPlanKinds(), true)
	if err != nil {
		return err
	}
	params := map[string]string{}
	for _, k := range []string{"project", "name"} {
		if v := c.QueryParam(k); v != "" {
			params[k] = v
		}
	}
	p, err := s.d.Commands.PlanJob(c.Request().Context(), name, kind, params)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Server) slotJobs(c echo.Context) error {
	name, err := pathName(c, "name")
	if err != nil {
		return err
	}
	kind, err := queryKind(c, events.JobKinds(), false)
	if err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 20, 1, 100)
	if err != nil {
		return err
	}
	if _, _, err := queryPosition(c, "cursor"); err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	ctx := c.Request().Context()
	if _, err := s.d.Reads.Slot(ctx, name); err != nil {
		return notFound(err, "slot %q does not exist", name)
	}
	page, err := s.d.Reads.JobsBySlot(ctx, name, kind, limit, cursor)
	if err != nil {
		return err
	}
	if page.Jobs == nil {
		page.Jobs = []projections.JobView{}
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) latestJob(c echo.Context) error {
	name, err := pathName(c, "name")
	if err != nil {
		return err
	}
	kind, err := queryKind(c, events.JobKinds(), true)
	if err != nil {
		return err
	}
	j, err := s.d.Reads.LatestJob(c.Request().Context(), name, kind)
	if err != nil {
		return notFound(err, "slot %q has no %s job", name, kind)
	}
	return c.JSON(http.StatusOK, j)
}

// ---- jobs ----

func (s *Server) getJob(c echo.Context) error {
	id, err := pathName(c, "id")
	if err != nil {
		return err
	}
	if at, ok, err := queryAt(c, "at"); err != nil || ok {
		if err != nil {
			return err
		}
		return s.jobAsOf(c, id, at)
	}
	j, err := s.d.Reads.Job(c.Request().Context(), id)
	if err != nil {
		return notFound(err, "job %q does not exist", id)
	}
	return c.JSON(http.StatusOK, j)
}

// eventDTO is a recorded event on the wire.
type eventDTO struct {
	Position events.Position `json:"position"`
	Stream   string          `json:"stream"`
	Revision events.Revision `json:"revision"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data"`
	Meta     events.Metadata `json:"meta"`
}

func (s *Server) jobEvents(c echo.Context) error {
	id, err := pathName(c, "id")
	if err != nil {
		return err
	}
	// ?after=<revision>: only the later events, so a page that has the
	// history applies changes without fetching it again (issue 14).
	after, hasAfter := uint64(0), false
	if v := c.QueryParam("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || len(v) > 20 || v[0] == '+' {
			return invalidField("after", "query after must be a job event revision (a decimal number from 0)")
		}
		after, hasAfter = n, true
	}
	evs, err := s.d.Reads.JobEvents(c.Request().Context(), id)
	if err != nil {
		return notFound(err, "job %q does not exist", id)
	}
	if len(evs) == 0 {
		return errf(CodeNotFound, "job %q does not exist", id)
	}
	out := make([]eventDTO, 0, len(evs))
	for _, ev := range evs {
		if hasAfter && uint64(ev.Revision) <= after {
			continue
		}
		data := ev.Data
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out = append(out, eventDTO{Position: ev.Position, Stream: ev.Stream, Revision: ev.Revision, Type: ev.Type, Data: data, Meta: ev.Meta})
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out})
}

func (s *Server) cancel(c echo.Context) error {
	return do(s, c, command[noBody, struct{}]{
		target:   pathParam("id"),
		optional: true,
		run: func(ctx context.Context, a slots.Actor, id string, _ noBody) (struct{}, error) {
			return struct{}{}, s.d.Commands.Cancel(ctx, a, id)
		},
		answer: func(c echo.Context, id string, _ noBody, _ struct{}) error {
			return c.JSON(http.StatusAccepted, map[string]string{"job_id": id})
		},
	})
}

func (s *Server) resume(c echo.Context) error {
	return do(s, c, command[noBody, slots.JobAcceptedResult]{
		target:   pathParam("id"),
		optional: true,
		run: func(ctx context.Context, a slots.Actor, id string, _ noBody) (slots.JobAcceptedResult, error) {
			return s.d.Commands.Resume(ctx, a, id)
		},
		answer: answerAccepted[noBody, slots.JobAcceptedResult](),
	})
}

// ---- audit and resources ----

// listJobs answers GET /api/jobs: every job across slots, newest first,
// filtered by state (a job state, or "uncertain"), kind, slot and the
// person who asked for it (actor), cursor-paged like a slot's jobs. An
// unknown slot or person is no error: nothing matches.
func (s *Server) listJobs(c echo.Context) error {
	f := projections.JobFilter{State: c.QueryParam("state"), Slot: c.QueryParam("slot"), Actor: c.QueryParam("actor")}
	if f.State != "" && !slices.Contains(projections.JobFilterStates, f.State) {
		return invalidField("state", fmt.Sprintf("query state must be one of %s, got %q", strings.Join(projections.JobFilterStates, ", "), f.State))
	}
	kind, err := queryKind(c, events.JobKinds(), false)
	if err != nil {
		return err
	}
	f.Kind = kind
	if f.Slot != "" {
		if err := checkName(f.Slot); err != nil {
			return invalidField("slot", "query slot: "+err.Error())
		}
	}
	if f.Actor != "" {
		if err := checkActor(f.Actor); err != nil {
			return invalidField("actor", "query actor: "+err.Error())
		}
	}
	if f.Limit, err = queryInt(c, "limit", 20, 1, 100); err != nil {
		return err
	}
	if _, _, err := queryPosition(c, "cursor"); err != nil {
		return err
	}
	f.Cursor = c.QueryParam("cursor")
	page, err := s.d.Reads.Jobs(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if page.Jobs == nil {
		page.Jobs = []projections.JobView{}
	}
	return c.JSON(http.StatusOK, page)
}

func (s *Server) audit(c echo.Context) error {
	f := projections.AuditFilter{Slot: c.QueryParam("slot"), JobID: c.QueryParam("job"), Actor: c.QueryParam("actor")}
	f.Type = c.QueryParam("kind")
	if t := c.QueryParam("type"); t != "" {
		f.Type = t
	}
	for field, v := range map[string]string{"slot": f.Slot, "job": f.JobID} {
		if v != "" {
			if err := checkName(v); err != nil {
				return invalidField(field, "query "+field+": "+err.Error())
			}
		}
	}
	if f.Actor != "" {
		if err := checkActor(f.Actor); err != nil {
			return invalidField("actor", "query actor: "+err.Error())
		}
	}
	if f.Type != "" {
		if err := events.ValidateEventType(f.Type); err != nil {
			return invalidField("kind", "query kind: "+err.Error())
		}
	}
	if v := c.QueryParam("actor_id"); v != "" {
		if err := checkSubjectID(v); err != nil {
			return invalidField("actor_id", "query actor_id: "+err.Error())
		}
		f.ActorID = v
	}
	// The machinery's records (checkpoints, demo sign-ins, session
	// activity) are in the log but not audit rows unless asked for.
	switch v := c.QueryParam("plumbing"); v {
	case "", "false":
	case "true":
		f.Plumbing = true
	default:
		return invalidField("plumbing", "query plumbing must be true or false, got "+strconv.Quote(v))
	}
	if v := c.QueryParam("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return invalidField("since", "query since must be an RFC 3339 time, got "+strconv.Quote(v))
		}
		f.Since = t
	}
	if n, ok, err := queryPosition(c, "after"); err != nil {
		return err
	} else if ok {
		f.After = events.Position(n)
	}
	if n, ok, err := queryPosition(c, "before"); err != nil {
		return err
	} else if ok {
		f.Before = events.Position(n)
	}
	switch o := c.QueryParam("order"); o {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return invalidField("order", "query order must be oldest or newest, got "+strconv.Quote(o))
	}
	limit, err := queryInt(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	f.Limit = limit
	entries, err := s.d.Reads.Audit(c.Request().Context(), f)
	if err != nil {
		return err
	}
	if entries == nil {
		entries = []projections.AuditEntry{}
	}
	return c.JSON(http.StatusOK, map[string]any{"entries": entries})
}

func (s *Server) remaining(c echo.Context) error {
	rs, err := s.d.Reads.RemainingResources(c.Request().Context())
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []projections.RemainingResource{}
	}
	return c.JSON(http.StatusOK, map[string]any{"resources": rs})
}

// notFound words a read model's ErrNotFound for the caller.
func notFound(err error, format string, args ...any) error {
	if ae := toAPIError(err); ae.Code == CodeNotFound {
		return errf(CodeNotFound, format, args...)
	}
	return err
}
