package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// ReconcileActions acts on reconciliation findings (issue 15;
// reconcile.Actions). Every refusal is an *apperr.Error, mapped to HTTP in one place: a retired slot, a
// stale finding (not an orphan in the latest run) or a resource a slot
// tracks now → 409 with the reason, nothing appended.
type ReconcileActions interface {
	// PlanAdopt is Adopt's dry run: the job's plan and the finding.
	PlanAdopt(ctx context.Context, slot string, c slots.AdoptCmd) (AdoptPlan, error)
	// Adopt queues a job that makes slot track the orphan c names.
	Adopt(ctx context.Context, a slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error)
	// PlanDeleteOrphan is DeleteOrphan's dry run.
	PlanDeleteOrphan(ctx context.Context, slot string, c slots.AdoptCmd) (AdoptPlan, error)
	// DeleteOrphan queues a job, charged to slot, that adopts the orphan
	// and deletes it (confirmed only by the provider's own 404).
	DeleteOrphan(ctx context.Context, a slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error)
}

// AdoptPlan is the answer of GET /api/reconcile/adopt/plan and
// GET /api/reconcile/delete/plan.
type AdoptPlan = reconcile.AdoptPlan

// adoptRequest is the body of POST /api/reconcile/adopt and
// POST /api/reconcile/delete.
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
	return s.planOrphan(c, ReconcileActions.PlanAdopt)
}

// planDeleteOrphan answers GET /api/reconcile/delete/plan?slot=&provider=&kind=&id=.
func (s *Server) planDeleteOrphan(c echo.Context) error {
	return s.planOrphan(c, ReconcileActions.PlanDeleteOrphan)
}

// adopt answers POST /api/reconcile/adopt: 202 with the accepted job.
func (s *Server) adopt(c echo.Context) error {
	return s.orphanJob(c, ReconcileActions.Adopt)
}

// deleteOrphan answers POST /api/reconcile/delete: 202 with the accepted job.
func (s *Server) deleteOrphan(c echo.Context) error {
	return s.orphanJob(c, ReconcileActions.DeleteOrphan)
}

func (s *Server) planOrphan(c echo.Context, plan func(ReconcileActions, context.Context, string, slots.AdoptCmd) (AdoptPlan, error)) error {
	ra, err := s.reconcileActions()
	if err != nil {
		return err
	}
	q := adoptRequest{Slot: c.QueryParam("slot"), Provider: c.QueryParam("provider"), Kind: c.QueryParam("kind"), ID: c.QueryParam("id")}
	p, err := plan(ra, c.Request().Context(), q.Slot, q.cmd())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Server) orphanJob(c echo.Context, run func(ReconcileActions, context.Context, slots.Actor, string, slots.AdoptCmd) (slots.JobAcceptedResult, error)) error {
	var ra ReconcileActions
	return do(s, c, command[adoptRequest, slots.JobAcceptedResult]{
		need: func() (err error) {
			ra, err = s.reconcileActions()
			return err
		},
		run: func(ctx context.Context, a slots.Actor, _ string, req adoptRequest) (slots.JobAcceptedResult, error) {
			return run(ra, ctx, a, req.Slot, req.cmd())
		},
		answer: answerAccepted[adoptRequest, slots.JobAcceptedResult](),
	})
}
