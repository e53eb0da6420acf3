package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// registeredBranch is the branch the slot's SlotRegistered recorded.
func (b *bundle) registeredBranch(t *testing.T, slot string) string {
	t.Helper()
	evs, err := b.store.ReadStream(context.Background(), events.SlotStream(slot), 0, 1, events.Forward)
	if err != nil || len(evs) == 0 {
		t.Fatalf("read slot %s: %v (%d events)", slot, err, len(evs))
	}
	p, err := events.Decode(evs[0])
	if err != nil {
		t.Fatal(err)
	}
	reg, ok := p.(events.SlotRegistered)
	if !ok {
		t.Fatalf("slot %s starts with %s", slot, evs[0].Type)
	}
	return reg.Branch
}

// TestBranchOnlyByAdmin: a register that names a branch needs
// slot.branch (admin); without one the slot gets the default branch.
// Every role is walked, so lowering slot.register below admin keeps the
// branch an admin's decision (the 403 then names slot.branch).
func TestBranchOnlyByAdmin(t *testing.T) {
	b := setup(t, HubOptions{})
	for _, role := range auth.Roles() {
		tok := b.tokenFor(t, "as-"+role.String(), role, time.Hour)
		name := "br-" + role.String()
		cmd := registerCmd(name)
		cmd.Branch = "feature-x"
		before := b.head(t)
		a := b.do(t, http.MethodPost, "/api/slots", cmd, bearerAs(tok)...)
		switch {
		case !role.Has(auth.PermRegister):
			b.refused(t, role.String()+" registers", a, before, http.StatusForbidden, auth.PermRegister)
		case !role.Has(auth.PermSetBranch):
			b.refused(t, role.String()+" names a branch", a, before, http.StatusForbidden, auth.PermSetBranch)
		default:
			if a.status != http.StatusCreated {
				t.Fatalf("%s registers with a branch: %d %s", role, a.status, a.body)
			}
			if got := b.registeredBranch(t, name); got != "feature-x" {
				t.Fatalf("%s: recorded branch %q, want feature-x", role, got)
			}
		}
	}
	// Without a branch: the default (main without a provider to ask).
	b.register(t, "br-default")
	if got := b.registeredBranch(t, "br-default"); got != "main" {
		t.Fatalf("default branch %q, want main", got)
	}
}

// TestBranchAllowedRefusesBelowAdmin checks the handler's rule itself for
// every role, independent of the route's own permission (which today is
// already admin-only).
func TestBranchAllowedRefusesBelowAdmin(t *testing.T) {
	e := echo.New()
	for _, role := range auth.Roles() {
		c := e.NewContext(httptest.NewRequest(http.MethodPost, "/api/slots", nil), httptest.NewRecorder())
		c.Set(ctxSubject, auth.Subject{ID: "token:x", Name: "x", Role: role})
		if err := branchAllowed(c, slots.RegisterCmd{Name: "s"}); err != nil {
			t.Fatalf("%s without a branch: %v", role, err)
		}
		err := branchAllowed(c, slots.RegisterCmd{Name: "s", Branch: "dev"})
		if role == auth.RoleAdmin {
			if err != nil {
				t.Fatalf("admin with a branch: %v", err)
			}
			continue
		}
		ae := toAPIError(err)
		if ae.Code != CodeForbidden || ae.Details["permission"] != string(auth.PermSetBranch) || !strings.Contains(ae.Message, "slot.branch") {
			t.Fatalf("%s with a branch: %v", role, err)
		}
	}
}
