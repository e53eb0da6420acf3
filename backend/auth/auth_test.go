package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newDir(t *testing.T, store events.Store, clk *clock) *Directory {
	t.Helper()
	d, err := Open(context.Background(), store, Options{BcryptCost: bcrypt.MinCost, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var admin = Subject{ID: "user:root", Name: "root", Role: RoleAdmin}

func TestUsersAndTokensAreEventsWithoutSecrets(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, store, clk)

	u, pw, err := d.CreateUser(ctx, admin, "alice", RoleMember, "")
	if err != nil || len(pw) < MinPasswordLen {
		t.Fatalf("create: %v, generated %d chars", err, len(pw))
	}
	if _, _, err := d.CreateUser(ctx, admin, "ALICE", RoleViewer, "long enough pw"); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate name (case-insensitive): %v", err)
	}
	if _, _, err := d.CreateUser(ctx, admin, "аlice", RoleViewer, "long enough pw"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Cyrillic look-alike: %v", err)
	}
	tok, secret, err := d.IssueToken(ctx, admin, "ci", RoleOperator, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetRole(ctx, admin, u.ID, RoleOperator); err != nil {
		t.Fatal(err)
	}

	// No secret in any event or metadata.
	for _, s := range []string{events.AuthUsersStream, events.AuthTokensStream} {
		evs, err := store.ReadStream(ctx, s, 0, 0, events.Forward)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			raw := string(ev.Data) + ev.Meta.Actor + ev.Meta.ActorID
			if strings.Contains(raw, pw) || strings.Contains(raw, secret) || strings.Contains(raw, secret[len(TokenPrefix):]) {
				t.Fatalf("%s carries a secret: %s", ev.Type, ev.Data)
			}
			if ev.Meta.ActorID != admin.ID {
				t.Fatalf("%s actor id %q", ev.Type, ev.Meta.ActorID)
			}
		}
	}

	// A second directory on the same log (a restart, or another process)
	// sees the same users and tokens.
	d2 := newDir(t, store, clk)
	if got, err := d2.CheckPassword("Alice", pw); err != nil || got.Role != RoleOperator {
		t.Fatalf("password after reopen: %+v %v", got, err)
	}
	if _, err := d2.CheckPassword("alice", pw+"x"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := d2.CheckPassword("nobody", pw); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("unknown user: %v", err)
	}
	if s, ok := d2.LookupToken(secret); !ok || s.ID != "token:"+tok.ID || s.Role != RoleOperator {
		t.Fatalf("token lookup: %+v %v", s, ok)
	}
	if _, ok := d2.LookupToken(secret + "x"); ok {
		t.Fatal("a wrong token was accepted")
	}

	// d2 follows what d appends.
	ctx2, cancel := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- d2.Follow(ctx2) }()
	changed := d2.Changed()
	if err := d.RevokeToken(ctx, admin, tok.ID); err != nil {
		t.Fatal(err)
	}
	<-changed
	if _, ok := d2.LookupToken(secret); ok {
		t.Fatal("revoked token still accepted by the following directory")
	}
	cancel()
	<-followed

	// Expiry.
	_, s2, err := d.IssueToken(ctx, admin, "short", RoleViewer, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := d.LookupToken(s2); !ok {
		t.Fatal("fresh token refused")
	}
	clk.Add(time.Minute)
	if _, ok := d.LookupToken(s2); ok {
		t.Fatal("expired token accepted")
	}
	if _, _, err := d.IssueToken(ctx, admin, "alice", RoleViewer, time.Hour); !errors.Is(err, ErrExists) {
		t.Fatalf("token named like a user: %v", err)
	}
}

func TestSessionsExpireAndLoginIsLimited(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, memstore.New(), clk)
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleViewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	s := NewService(d, Config{Now: clk.Now, Sessions: SessionOptions{Idle: time.Hour, Absolute: 3 * time.Hour}})
	_, sid, csrf, err := s.Login("bob", "correct horse battery", "10.0.0.1")
	if err != nil || sid == "" || csrf == "" || sid == csrf {
		t.Fatalf("login: %v", err)
	}
	for i := 0; i < 2; i++ { // used within the idle time: stays
		clk.Add(59 * time.Minute)
		if _, _, ok := s.SessionSubject(sid); !ok {
			t.Fatalf("session ended early at step %d", i)
		}
	}
	clk.Add(61 * time.Minute) // idle
	if _, _, ok := s.SessionSubject(sid); ok {
		t.Fatal("idle session still valid")
	}
	_, sid, _, _ = s.Login("bob", "correct horse battery", "10.0.0.1")
	for i := 0; i < 6; i++ {
		clk.Add(30 * time.Minute)
		s.SessionSubject(sid)
	}
	if _, _, ok := s.SessionSubject(sid); ok {
		t.Fatal("session outlived its absolute expiry")
	}

	// Failures per account: 5, then 429-like until a token refills.
	for i := 0; i < 5; i++ {
		if _, _, _, err := s.Login("bob", "wrong password!", "10.0.0.2"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	var le *LimitedError
	if _, _, _, err := s.Login("bob", "correct horse battery", "10.0.0.3"); !errors.As(err, &le) || le.RetryAfter <= 0 {
		t.Fatalf("6th attempt, right password, other address: %v", err)
	}
	clk.Add(31 * time.Second)
	if _, _, _, err := s.Login("bob", "correct horse battery", "10.0.0.3"); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
}
