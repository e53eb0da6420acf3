package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// ReconcileActions acts on reconciliation findings (issue 15). Every
// refusal is a *slots.Error, mapped to HTTP in one place: a retired slot, a
// stale finding (not an orphan in the latest run) or a resource a slot
// tracks now → 409 with the reason, nothing appended.
type ReconcileActions interface {
	// PlanAdopt is Adopt's dry run: the job's plan and the finding.
	PlanAdopt(ctx context.Context, slot string, c slots.AdoptCmd) (AdoptPlan, error)
	// Adopt queues a job that makes slot track the orphan c names.
	Adopt(ctx context.Context, a slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error)
}

// AdoptPlan is GET /api/reconcile/adopt/plan's answer.
type AdoptPlan struct {
	slots.Plan
	Finding events.ReconcileFinding `json:"finding"`
}

// adoptRequest is POST /api/reconcile/adopt's body.
type adoptRequest struct {
	Slot     string `json:"slot"`
	Provider string `json:"provider"`
	Kind     string `json:"kind"`
	ID       string `json:"id"`
}

func (r adoptRequest) cmd() slots.AdoptCmd {
	return slots.AdoptCmd{Provider: r.Provider, Kind: r.Kind, ID: r.ID}
}

func (s *Server) reconcileActions() (ReconcileActions, error) {
	if s.d.ReconcileActions == nil {
		return nil, errf(CodeNotFound, "reconciliation is not configured on this server")
	}
	return s.d.ReconcileActions, nil
}

// planAdopt answers GET /api/reconcile/adopt/plan?slot=&provider=&kind=&id=.
func (s *Server) planAdopt(c echo.Context) error {
	ra, err := s.reconcileActions()
	if err != nil {
		return err
	}
	q := adoptRequest{Slot: c.QueryParam("slot"), Provider: c.QueryParam("provider"), Kind: c.QueryParam("kind"), ID: c.QueryParam("id")}
	p, err := ra.PlanAdopt(c.Request().Context(), q.Slot, q.cmd())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// adopt answers POST /api/reconcile/adopt: 202 with the accepted job.
func (s *Server) adopt(c echo.Context) error {
	ra, err := s.reconcileActions()
	if err != nil {
		return err
	}
	var req adoptRequest
	if err := decodeBody(c, &req, false); err != nil {
		return err
	}
	res, err := ra.Adopt(c.Request().Context(), actorOf(c), req.Slot, req.cmd())
	if err != nil {
		return err
	}
	s.caughtUp(c)
	return c.JSON(http.StatusAccepted, res)
}
