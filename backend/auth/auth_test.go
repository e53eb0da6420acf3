package auth

import (
	"context"
	"errors"
	"fmt"
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
	d, err := Open(context.Background(), store, Options{Argon2: testArgon2, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// testArgon2 makes password hashes cheap in tests.
var testArgon2 = Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

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
	_, sid, csrf, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil || sid == "" || csrf == "" || sid == csrf {
		t.Fatalf("login: %v", err)
	}
	for i := 0; i < 2; i++ { // used within the idle time: stays
		clk.Add(59 * time.Minute)
		if _, _, ok := s.SessionSubject(ctx, sid); !ok {
			t.Fatalf("session ended early at step %d", i)
		}
	}
	clk.Add(61 * time.Minute) // idle
	if _, _, ok := s.SessionSubject(ctx, sid); ok {
		t.Fatal("idle session still valid")
	}
	_, sid, _, _ = s.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	for i := 0; i < 6; i++ {
		clk.Add(30 * time.Minute)
		s.SessionSubject(ctx, sid)
	}
	if _, _, ok := s.SessionSubject(ctx, sid); ok {
		t.Fatal("session outlived its absolute expiry")
	}

	// Failures per account at one address: 5, then 429-like until a token
	// refills — for that address only. The owner's right password from
	// another address still signs in (before, five wrong passwords from
	// anyone locked the account for everyone, renewable every 30 s).
	for i := 0; i < 5; i++ {
		if _, _, _, err := s.Login(ctx, "bob", "wrong password!", "10.0.0.2"); !errors.Is(err, ErrBadCredentials) {
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	var le *LimitedError
	if _, _, _, err := s.Login(ctx, "BOB", "correct horse battery", "10.0.0.2"); !errors.As(err, &le) || le.RetryAfter <= 0 {
		t.Fatalf("6th attempt from the guessing address, right password: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.3"); err != nil {
		t.Fatalf("the owner, from another address: %v", err)
	}
	clk.Add(31 * time.Second)
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.2"); err != nil {
		t.Fatalf("after the wait: %v", err)
	}
	// IPv6 addresses of one /64 are one source; another /64 is not.
	for i := 0; i < 5; i++ {
		s.Login(ctx, "bob", "wrong password!", fmt.Sprintf("2001:db8:1:2::%x", i+1))
	}
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "2001:db8:1:2::99"); !errors.As(err, &le) {
		t.Fatalf("another address of the guessing /64: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "2001:db8:1:3::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
	// Per address, whatever the account: 20 failures, then limited.
	for i := 0; i < 20; i++ {
		s.Login(ctx, fmt.Sprintf("nobody%d", i), "x", "10.0.0.9")
	}
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.9"); !errors.As(err, &le) {
		t.Fatalf("an address that failed 20 times: %v", err)
	}
}

// waitFor waits until cond holds, re-checking at every change the
// directory applies. Its bound only catches a change that never comes
// (30 s, as httpapi's waitUntil: 5 s was short for a loaded machine
// under -race).
func waitFor(t *testing.T, d *Directory, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		ch := d.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for: %s", what)
		}
	}
}

func countType(t *testing.T, store events.Store, stream, typ string) int {
	t.Helper()
	evs, err := store.ReadStream(context.Background(), stream, 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// TestSessionsSurviveRestartAndSpanProcesses: sessions are events (only
// the secret's hash), a restart keeps them, activity is recorded coarsely
// and keeps the session alive in another process, and a logout or a
// password change in one process ends the session in the other.
func TestSessionsSurviveRestartAndSpanProcesses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{Now: clk.Now, Sessions: SessionOptions{Idle: time.Hour, Absolute: 3 * time.Hour}} // records every 7.5 min
	dA := newDir(t, store, clk)
	if _, _, err := dA.CreateUser(ctx, admin, "bob", RoleOperator, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	a := NewService(dA, cfg)
	_, sid, csrf, err := a.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	evs, err := store.ReadStream(ctx, events.AuthSessionsStream, 0, 0, events.Forward)
	if err != nil || len(evs) != 1 || evs[0].Type != "SessionStarted" {
		t.Fatalf("sessions stream after a sign-in: %v %v", evs, err)
	}
	raw := string(evs[0].Data) + evs[0].Meta.Actor + evs[0].Meta.ActorID
	if strings.Contains(raw, sid) || strings.Contains(raw, csrf) || !strings.Contains(raw, HashToken(sid)) {
		t.Fatalf("SessionStarted must hold the secret's hash and no secret: %s", raw)
	}
	if evs[0].Meta.Actor != "bob" {
		t.Fatalf("SessionStarted actor %q", evs[0].Meta.Actor)
	}

	// A restart (a new directory on the same log) keeps the session, with
	// the same CSRF token.
	dB := newDir(t, store, clk)
	b := NewService(dB, cfg)
	sub, sess, ok := b.SessionSubject(ctx, sid)
	if !ok || sub.Name != "bob" || sess.CSRF != csrf {
		t.Fatalf("session after restart: %+v %+v %v", sub, sess, ok)
	}
	followed := make(chan error, 1)
	go func() { followed <- dB.Follow(ctx) }()

	// Used in A once a minute for 10 minutes: one SessionActive (at 8 min),
	// not one per request.
	for i := 0; i < 10; i++ {
		clk.Add(time.Minute)
		if _, _, ok := a.SessionSubject(ctx, sid); !ok {
			t.Fatalf("session refused at minute %d", i+1)
		}
	}
	if n := countType(t, store, events.AuthSessionsStream, "SessionActive"); n != 1 {
		t.Fatalf("%d SessionActive for 10 uses over 10 minutes, want 1", n)
	}
	// 57 min after A recorded the use, B (which never saw a request since
	// minute 0) still holds the session alive; without the recorded
	// activity it would be 65 min idle.
	waitFor(t, dB, "B applies the activity", func() bool {
		dB.mu.RLock()
		defer dB.mu.RUnlock()
		return dB.rev[events.AuthSessionsStream] >= 1
	})
	clk.Add(55 * time.Minute)
	if _, _, ok := b.SessionSubject(ctx, sid); !ok {
		t.Fatal("B refused a session A used 57 minutes ago")
	}

	// Logout in A: B refuses the cookie as soon as it applies the event.
	if err := a.Sessions.End(ctx, sid, "logout"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := a.SessionSubject(ctx, sid); ok {
		t.Fatal("A accepts a session it logged out")
	}
	waitFor(t, dB, "B refuses the logged-out session", func() bool { _, _, ok := b.SessionSubject(ctx, sid); return !ok })
	if n := countType(t, store, events.AuthSessionsStream, "SessionEnded"); n != 1 {
		t.Fatalf("%d SessionEnded after one logout", n)
	}

	// A password change in B ends bob's sessions in A too.
	_, s1, _, err := a.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := dA.UserByName("bob")
	waitFor(t, dB, "B sees the new session", func() bool { _, _, ok := b.SessionSubject(ctx, s1); return ok })
	if err := b.ChangePassword(ctx, u.ID, "correct horse battery", "another long password", "10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := b.SessionSubject(ctx, s1); ok {
		t.Fatal("B accepts a session after the password changed")
	}
	// dA does not follow: it reads the stream on its next append, so
	// reopen it as a restarted process would.
	dA2 := newDir(t, store, clk)
	if _, _, ok := NewService(dA2, cfg).SessionSubject(ctx, s1); ok {
		t.Fatal("a restarted process accepts a session ended by a password change")
	}

	// Expired sessions stay expired across a restart: idle, then absolute.
	_, s2, _, err := b.Login(ctx, "bob", "another long password", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(61 * time.Minute)
	if _, _, ok := NewService(newDir(t, store, clk), cfg).SessionSubject(ctx, s2); ok {
		t.Fatal("an idle-expired session was accepted after a restart")
	}
	_, s3, _, err := b.Login(ctx, "bob", "another long password", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ { // used every 30 min: never idle, recorded each time
		clk.Add(30 * time.Minute)
		if _, _, ok := b.SessionSubject(ctx, s3); !ok && i < 5 {
			t.Fatalf("session ended early at %d", i)
		}
	}
	if _, _, ok := NewService(newDir(t, store, clk), cfg).SessionSubject(ctx, s3); ok {
		t.Fatal("a session past its absolute expiry was accepted after a restart")
	}
	cancel()
	<-followed
}

// TestSessionSeenIdleHereIsRevivedByUseElsewhere: a process that has not
// seen a session used for the idle time refuses it, but keeps it: another
// process used it since its last recorded activity (within one recording
// interval), and the use it records makes the session good here again.
func TestSessionSeenIdleHereIsRevivedByUseElsewhere(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{Now: clk.Now, Sessions: SessionOptions{Idle: time.Hour, Absolute: 24 * time.Hour}} // records every 7.5 min
	dA, dB := newDir(t, store, clk), newDir(t, store, clk)
	a, b := NewService(dA, cfg), NewService(dB, cfg)
	followed := make(chan error, 2)
	for _, d := range []*Directory{dA, dB} {
		go func() { followed <- d.Follow(ctx) }()
	}
	if _, _, err := dA.CreateUser(ctx, admin, "bob", RoleOperator, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	_, sid, _, err := a.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, dB, "B sees the session", func() bool { return b.Sessions.Alive(sid) })
	clk.Add(50 * time.Minute)
	if _, _, ok := b.SessionSubject(ctx, sid); !ok { // recorded (minute 50)
		t.Fatal("B refused the session at minute 50")
	}
	waitFor(t, dA, "A applies B's recorded use", func() bool {
		return countType(t, store, events.AuthSessionsStream, "SessionActive") == 1 && func() bool {
			dA.mu.RLock()
			defer dA.mu.RUnlock()
			return dA.rev[events.AuthSessionsStream] >= 1
		}()
	})
	clk.Add(7 * time.Minute)
	if _, _, ok := b.SessionSubject(ctx, sid); !ok { // used at minute 57, not recorded (7 < 7.5)
		t.Fatal("B refused the session at minute 57")
	}
	clk.Add(53*time.Minute + 30*time.Second) // minute 110.5: 60.5 after the recorded use, 53.5 after the last
	if _, _, ok := a.SessionSubject(ctx, sid); ok {
		t.Fatal("A accepted a session idle for an hour as far as it knows")
	}
	if _, _, ok := b.SessionSubject(ctx, sid); !ok { // B saw it 53.5 min ago: alive, and records the use
		t.Fatal("B refused a session it saw used 53.5 minutes ago")
	}
	waitFor(t, dA, "A accepts the session again", func() bool { _, _, ok := a.SessionSubject(ctx, sid); return ok })
	cancel()
	<-followed
	<-followed
}

// TestPasswordHashes: new hashes are argon2id (PHC string with the
// parameters used); an account whose hash is bcrypt (made before argon2id)
// still signs in, and gets argon2id at its next password change; a
// malformed hash matches nothing.
func TestPasswordHashes(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, store, clk)
	if _, _, err := d.CreateUser(ctx, admin, "ana", RoleMember, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	evs, _ := store.ReadStream(ctx, events.AuthUsersStream, 0, 0, events.Forward)
	p, _ := events.Decode(evs[0])
	if h := p.(events.UserCreated).PasswordHash; !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("new hash %q is not argon2id with the configured parameters", h)
	}
	if _, err := d.CheckPassword("ana", "correct horse battery"); err != nil {
		t.Fatalf("argon2id password: %v", err)
	}
	if _, err := d.CheckPassword("ana", "correct horse batterz"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password: %v", err)
	}

	// An account from before argon2id: its UserCreated holds a bcrypt hash.
	old, err := bcrypt.GenerateFromPassword([]byte("an older password"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, events.AuthUsersStream, events.Any(), events.New(
		events.UserCreated{UserID: "u-old", Name: "bert", Role: "viewer", Source: "local", PasswordHash: string(old)},
		events.Metadata{Actor: "root", Time: clk.Now()})); err != nil {
		t.Fatal(err)
	}
	d = newDir(t, store, clk)
	if _, err := d.CheckPassword("bert", "an older password"); err != nil {
		t.Fatalf("bcrypt password: %v", err)
	}
	if _, err := d.CheckPassword("bert", "an older passworD"); !errors.Is(err, ErrBadCredentials) {
		t.Fatalf("wrong password against bcrypt: %v", err)
	}
	if err := d.SetPassword(ctx, admin, "u-old", "a newer password"); err != nil {
		t.Fatal(err)
	}
	evs, _ = store.ReadStream(ctx, events.AuthUsersStream, 0, 0, events.Forward)
	p, _ = events.Decode(evs[len(evs)-1])
	if h := p.(events.PasswordChanged).PasswordHash; !strings.HasPrefix(h, "$argon2id$") {
		t.Fatalf("changed hash %q is not argon2id", h)
	}
	if _, err := d.CheckPassword("bert", "a newer password"); err != nil {
		t.Fatalf("after the change: %v", err)
	}
	if _, err := d.CheckPassword("bert", "an older password"); err == nil {
		t.Fatal("the old password still works")
	}

	for _, h := range []string{"", "$argon2id$", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5", "$argon2id$v=18$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5",
		"$argon2id$v=19$m=64,t=0,p=1$c2FsdHNhbHQ$a2V5", "$argon2id$v=19$m=64,t=1,p=1$!!$a2V5", "plain text"} {
		if verifyPassword(h, "") || verifyPassword(h, "correct horse battery") {
			t.Fatalf("malformed hash %q matched", h)
		}
	}
}

// TestIdleSessionIsDroppedOnlyWhenGoneEverywhere: an idle session is
// refused at once but kept in memory while another process could still
// revive it, and swept once that is impossible.
func TestIdleSessionIsDroppedOnlyWhenGoneEverywhere(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, memstore.New(), clk)
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleViewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	s := NewService(d, Config{Now: clk.Now, Sessions: SessionOptions{Idle: time.Hour, Absolute: 24 * time.Hour}}) // records every 7.5 min
	_, sid, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(61 * time.Minute)
	if _, _, ok := s.SessionSubject(ctx, sid); ok {
		t.Fatal("an idle session was accepted")
	}
	if n := s.Sessions.Len(); n != 1 {
		t.Fatalf("%d sessions held; the idle one must stay while another process could revive it", n)
	}
	clk.Add(9 * time.Minute) // 70 min: past idle + 7.5 min + 1 min
	_, fresh, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.SessionSubject(ctx, fresh); !ok {
		t.Fatal("a fresh session was refused")
	}
	if n := s.Sessions.Len(); n != 1 {
		t.Fatalf("%d sessions held after the sweep, want only the fresh one", n)
	}
}
