package auth

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// Issue 33 item 7: a group removed at the identity provider left the
// account's sessions at their old role for up to 12 h idle / 7 days. A
// single sign-on session now lasts at most SessionOptions.OIDCRecheck
// (default 1 h): then the browser goes through the provider again, whose
// answer sets the role (EnsureOIDCUser), so a removed group takes effect
// within that bound. Password sessions keep their lifetimes, and every
// process agrees (the bound is the SessionStarted's expires_at).
func TestOIDCSessionsEndWithinTheRecheckBound(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	store := memstore.New()
	d := newDir(t, store, clk)
	s := NewService(d, Config{Now: clk.Now})
	if got := s.Sessions.Options().OIDCRecheck; got != time.Hour {
		t.Fatalf("default OIDCRecheck %v, want 1h", got)
	}
	sam, err := d.EnsureOIDCUser(ctx, "https://idp.test", "sub-sam", "sam", RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleOperator, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	sso, _, err := s.StartSession(ctx, sam.ID, "oidc")
	if err != nil {
		t.Fatal(err)
	}
	_, pw, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(59 * time.Minute)
	if sub, _, ok := s.SessionSubject(ctx, sso); !ok || sub.Role != RoleOperator {
		t.Fatalf("within the bound: %+v %v", sub, ok)
	}
	clk.Add(2 * time.Minute)
	if _, _, ok := s.SessionSubject(ctx, sso); ok {
		t.Fatal("a single sign-on session outlived the re-check bound: a group removed at the provider would keep its role")
	}
	if _, _, ok := s.SessionSubject(ctx, pw); !ok {
		t.Fatal("a password session ended with the single sign-on bound")
	}
	// Another process reading the same log agrees.
	other := NewService(newDir(t, store, clk), Config{Now: clk.Now})
	if _, _, ok := other.SessionSubject(ctx, sso); ok {
		t.Fatal("another process still accepts the expired single sign-on session")
	}
	// The browser signs in again: the provider's groups now map lower.
	if _, err := d.EnsureOIDCUser(ctx, "https://idp.test", "sub-sam", "sam", RoleMember); err != nil {
		t.Fatal(err)
	}
	again, _, err := s.StartSession(ctx, sam.ID, "oidc")
	if err != nil {
		t.Fatal(err)
	}
	if sub, _, ok := s.SessionSubject(ctx, again); !ok || sub.Role != RoleMember {
		t.Fatalf("after the re-check: %+v %v", sub, ok)
	}
}
