package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

type orphansAnswer struct{ err error }

func (o orphansAnswer) CurrentOrphan(context.Context, string, string, string) (events.ReconcileFinding, error) {
	return events.ReconcileFinding{}, o.err
}

// An adopt or delete acts only on an orphan of the latest run that no slot
// tracks: a stale finding and a tracked resource are 409s with their
// reason, a failed read is internal.
func TestOrphanRefusals(t *testing.T) {
	c := slots.AdoptCmd{Provider: "coolify", Kind: "application", ID: "app-1"}
	for _, tc := range []struct {
		err     error
		code    apperr.Code
		reason  apperr.Reason
		details map[string]any
	}{
		{reconcile.ErrStale, apperr.Conflict, apperr.ReasonFindingStale, map[string]any{"reason": "stale_finding"}},
		{&reconcile.TrackedError{Slot: "alpha"}, apperr.Conflict, apperr.ReasonResourceTracked, map[string]any{"reason": "tracked", "slot": "alpha"}},
		{errors.New("store down"), apperr.Internal, "", nil},
	} {
		_, err := reconcile.Actions{Orphans: orphansAnswer{tc.err}}.Orphan(bg(), c)
		var e *apperr.Error
		if !errors.As(err, &e) || e.Code != tc.code || e.Reason != tc.reason || !errors.Is(err, tc.err) {
			t.Fatalf("%v: got %v (%+v)", tc.err, err, e)
		}
		for k, v := range tc.details {
			if e.Details[k] != v {
				t.Fatalf("%v: details %v, want %v", tc.err, e.Details, tc.details)
			}
		}
	}
	if _, err := (reconcile.Actions{Orphans: orphansAnswer{}}).Orphan(bg(), c); err != nil {
		t.Fatalf("a current orphan: %v", err)
	}
}

func bg() context.Context { return context.Background() }

type failingLister struct{}

func (failingLister) ListSlots(context.Context) ([]projections.SlotView, error) {
	return nil, errors.New("read model down")
}

// Reconciliation covers the configured scope; the demo without one covers
// its own slots' projects; a real deployment without one covers nothing.
func TestDefaultScope(t *testing.T) {
	list := views2lister{
		{Name: "a", ProjectUUID: "p2", Repo: events.RepoRef{Project: "SLOT", Slug: "a"}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "t"}},
		{Name: "b", ProjectUUID: "p1", Repo: events.RepoRef{Project: "SLOT", Slug: "b"}},
	}
	c, b := reconcile.DefaultScope(bg(), []string{"cp"}, nil, true, list)
	if !slices.Equal(c, []string{"cp"}) || b != nil {
		t.Fatalf("configured: %v %v", c, b)
	}
	c, b = reconcile.DefaultScope(bg(), nil, nil, true, list)
	if !slices.Equal(c, []string{"p1", "p2"}) || !slices.Equal(b, []string{"SLOT", "TPL"}) {
		t.Fatalf("demo: %v %v", c, b)
	}
	if c, b = reconcile.DefaultScope(bg(), nil, nil, false, list); c != nil || b != nil {
		t.Fatalf("no scope outside the demo: %v %v", c, b)
	}
	if c, b = reconcile.DefaultScope(bg(), nil, nil, true, failingLister{}); c != nil || b != nil {
		t.Fatalf("unreadable slots: %v %v", c, b)
	}
}
