package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/reconcile"
)

// Reconciler is what the API needs of backend/reconcile: the latest run
// with its findings and a way to ask for a run.
type Reconciler interface {
	// LatestReport returns the latest run and its findings.
	LatestReport(ctx context.Context) (ReconcileReport, error)
	// Trigger asks for a run now; returns ErrReconcileBusy while one runs.
	Trigger(ctx context.Context) error
}

// ReconcileReport is GET /api/reconcile's answer: the latest run and its
// findings, and the providers' web roots the dashboard links findings to.
// A named type, so that the contract test holds the document to it.
type ReconcileReport struct {
	reconcile.Report
	Links ProviderLinks `json:"links"`
}

// ErrReconcileBusy is what a Reconciler returns when a run is in progress.
var ErrReconcileBusy = errors.New("a reconciliation run is already in progress")

// backupRoute streams a whole store: it is exempt from the request timeout
// (like the live stream); the caller's context ends it. It is also exempt
// from the Listener's whole-response write deadline: each of its writes
// must finish within Deps.WriteTimeout instead (progressWriter).
const backupRoute = "/api/admin/backup"

// progressWriter moves the connection's write deadline before each write,
// to limit ahead: a client that reads, however slowly, gets the whole
// archive; one that stops reading is cut within limit (and the archive's
// missing manifest tells it the copy is incomplete).
type progressWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	limit time.Duration
}

func (p *progressWriter) Write(b []byte) (int, error) {
	// An error means the writer cannot set deadlines (a test recorder).
	_ = p.rc.SetWriteDeadline(time.Now().Add(p.limit))
	return p.w.Write(b)
}

// BackupFunc streams a consistent backup archive of the store to w.
type BackupFunc func(ctx context.Context, w io.Writer) error

// getReconcile answers GET /api/reconcile: the latest run, problems first.
func (s *Server) getReconcile(c echo.Context) error {
	if s.d.Reconcile == nil {
		return errf(CodeNotFound, "reconciliation is not configured on this server")
	}
	rep, err := s.d.Reconcile.LatestReport(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

// runReconcile answers POST /api/reconcile/run: 202, or 409 while a run is
// in progress.
func (s *Server) runReconcile(c echo.Context) error {
	if s.d.Reconcile == nil {
		return errf(CodeNotFound, "reconciliation is not configured on this server")
	}
	if err := s.d.Reconcile.Trigger(c.Request().Context()); err != nil {
		if errors.Is(err, ErrReconcileBusy) {
			return errf(CodeConflict, "%v", err)
		}
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "requested"})
}

// backup answers GET /api/admin/backup with a backup archive streamed as it
// is written (docs/backup.md). Once the first byte is out an error can only
// cut the stream short; the archive's trailing manifest is then missing, so
// the client (slotkeeper backup --server) refuses the copy.
func (s *Server) backup(c echo.Context) error {
	if s.d.Backup == nil {
		return errf(CodeNotFound, "online backup is available with the embedded store only")
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-tar")
	h.Set("Content-Disposition", `attachment; filename="slotkeeper-`+time.Now().UTC().Format("20060102T150405Z")+`.skbak"`)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	w := &progressWriter{w: c.Response(), rc: http.NewResponseController(c.Response().Writer), limit: s.d.WriteTimeout}
	if err := s.d.Backup(c.Request().Context(), w); err != nil {
		s.log.Error("online backup failed", "error", err.Error())
		// Abort the connection so the client sees a cut stream, not a
		// clean end.
		panic(http.ErrAbortHandler)
	}
	return nil
}
