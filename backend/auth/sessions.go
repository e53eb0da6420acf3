package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/events"
)

// Session is a signed-in browser as a request sees it. The session secret
// (the cookie) and the CSRF token derived from it are never logged or
// written to the log.
type Session struct {
	ID       string // public id, as in the events
	UserID   string
	CSRF     string
	Created  time.Time
	LastSeen time.Time
}

// SessionOptions tune the session table.
type SessionOptions struct {
	Idle     time.Duration // default 12h
	Absolute time.Duration // default 7 days
	// Record is how often a used session's activity is appended
	// (SessionActive), at most once per session per interval. Default
	// min(Idle/8, 15m): coarse enough not to append per request, fine
	// enough that another process or a restart sees the session alive.
	Record time.Duration
	// OIDCRecheck bounds a single sign-on session (method oidc): past it
	// the browser signs in at the identity provider again, whose groups
	// set the role anew (default 1h; never longer than Absolute).
	OIDCRecheck time.Duration
	Now         func() time.Time
}

// session is one entry of the directory's session index, folded from the
// auth-sessions stream. The times are atomics so that a request can mark
// a session used under the directory's read lock.
type session struct {
	id, userID string
	created    time.Time
	expires    time.Time
	lastSeen   atomic.Int64           // unix nanos: local use or folded SessionActive, whichever is later
	recorded   atomic.Int64           // unix nanos of the last SessionActive appended or folded
	csrf       atomic.Pointer[string] // CSRFOf(secret), computed at the first lookup here
}

func maxStore(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// applySession folds a session event. d.mu is held.
func (d *Directory) applySession(ev events.RecordedEvent, p events.Payload) {
	switch e := p.(type) {
	case events.SessionStarted:
		s := &session{id: e.SessionID, userID: e.UserID, created: ev.Meta.Time, expires: e.ExpiresAt}
		s.lastSeen.Store(ev.Meta.Time.UnixNano())
		s.recorded.Store(ev.Meta.Time.UnixNano())
		d.sessions[e.Hash] = s
		d.sessByID[e.SessionID] = e.Hash
		if u := d.users[e.UserID]; u != nil {
			u.used = true
		}
	case events.SessionActive:
		if h, ok := d.sessByID[e.SessionID]; ok {
			s := d.sessions[h]
			maxStore(&s.lastSeen, ev.Meta.Time.UnixNano())
			maxStore(&s.recorded, ev.Meta.Time.UnixNano())
		}
	case events.SessionEnded:
		if h, ok := d.sessByID[e.SessionID]; ok {
			delete(d.sessions, h)
			delete(d.sessByID, e.SessionID)
		}
	}
}

// appendSessions appends to the sessions stream (any revision: sessions
// have no uniqueness to protect, and several processes append at once)
// and applies what the stream holds now, so this process sees its own
// change before it answers.
func (d *Directory) appendSessions(ctx context.Context, by Subject, ps ...events.Payload) error {
	m := meta(by)
	m.Time = d.opt.Now().UTC()
	evs := make([]events.EventData, len(ps))
	for i, p := range ps {
		evs[i] = events.New(p, m)
	}
	if _, err := d.store.Append(ctx, events.AuthSessionsStream, events.Any(), evs...); err != nil {
		return fmt.Errorf("auth: append to %s: %w", events.AuthSessionsStream, err)
	}
	return d.sync(ctx, events.AuthSessionsStream)
}

// Sessions is the session table: an index in memory (the directory's),
// kept from the auth-sessions stream. A restart keeps every session, and
// every process sees every session, its activity (coarsely) and its end.
// A lookup is one map access; it never reads the log.
type Sessions struct {
	opt       SessionOptions
	dir       *Directory
	lastSweep atomic.Int64
	sweepMu   sync.Mutex
}

// NewSessions returns the session table of dir.
func NewSessions(dir *Directory, opt SessionOptions) *Sessions {
	if opt.Idle <= 0 {
		opt.Idle = 12 * time.Hour
	}
	if opt.Absolute <= 0 {
		opt.Absolute = 7 * 24 * time.Hour
	}
	if opt.Record <= 0 {
		opt.Record = min(opt.Idle/8, 15*time.Minute)
	}
	if opt.OIDCRecheck <= 0 {
		opt.OIDCRecheck = time.Hour
	}
	opt.OIDCRecheck = min(opt.OIDCRecheck, opt.Absolute)
	if opt.Now == nil {
		opt.Now = dir.opt.Now
	}
	return &Sessions{opt: opt, dir: dir}
}

// Options returns the effective options (for the cookie's Max-Age).
func (s *Sessions) Options() SessionOptions { return s.opt }

// Lifetime is how long a session started by method lasts at most: the
// absolute lifetime, or for single sign-on the role re-check bound (issue
// 33: a group removed at the identity provider used to leave the sessions
// at their old role for up to 12 h idle / 7 days; the directory holds
// the role the provider's groups gave at the last sign-in, and a sign-in
// is when they are asked). The bound travels in SessionStarted.ExpiresAt,
// so every process and a restart end the session at the same time.
func (s *Sessions) Lifetime(method string) time.Duration {
	if method == "oidc" {
		return s.opt.OIDCRecheck
	}
	return s.opt.Absolute
}

// CSRFOf is the synchronizer token of a session: derived from the session
// secret, so every process can check it without storing it, and nobody
// who only sees the log (which holds a different hash of the secret) can
// compute it.
func CSRFOf(sessionID string) string {
	h := sha256.Sum256([]byte("slotkeeper csrf\x00" + sessionID))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Create starts a session for user (method: password, oidc or demo) and
// returns its secret (the cookie) and CSRF token.
func (s *Sessions) Create(ctx context.Context, userID, method string) (secret, csrf string, err error) {
	u, ok := s.dir.User(userID)
	if !ok {
		return "", "", ErrNotFound
	}
	secret = NewSecret(32)
	now := s.opt.Now().UTC()
	err = s.dir.appendSessions(ctx, u.Subject(), events.SessionStarted{
		SessionID: uuid.NewString(), UserID: userID, Hash: HashToken(secret), Method: method,
		ExpiresAt: now.Add(s.Lifetime(method)).Truncate(time.Second),
	})
	if err != nil {
		return "", "", err
	}
	s.sweep(now)
	return secret, CSRFOf(secret), nil
}

// sweep drops sessions expired everywhere from memory, at most once a
// minute. No event: expiry follows from the events and the clock, so
// every process (and a restart) comes to the same answer.
func (s *Sessions) sweep(now time.Time) {
	if now.UnixNano()-s.lastSweep.Load() < int64(time.Minute) || !s.sweepMu.TryLock() {
		return
	}
	defer s.sweepMu.Unlock()
	s.lastSweep.Store(now.UnixNano())
	d := s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	for h, v := range d.sessions {
		if s.gone(v, now) {
			delete(d.sessions, h)
			delete(d.sessByID, v.id)
		}
	}
}

func (s *Sessions) expired(v *session, now time.Time) bool {
	return now.UnixNano()-v.lastSeen.Load() >= int64(s.opt.Idle) ||
		now.Sub(v.created) >= s.opt.Absolute || !now.Before(v.expires)
}

// gone: expired in every process, so it may be dropped from memory. An
// idle expiry seen here may not be final: another process may have used
// the session since its last recorded activity (at most one recording
// interval ago) and will record the use, which revives it here. Past the
// idle time plus that interval plus a minute for the event to travel, no
// process can still hold it alive.
func (s *Sessions) gone(v *session, now time.Time) bool {
	return now.UnixNano()-v.lastSeen.Load() >= int64(s.opt.Idle+s.opt.Record+time.Minute) ||
		now.Sub(v.created) >= s.opt.Absolute || !now.Before(v.expires)
}

// Get returns the live session with secret and marks it used. An expired
// session is not returned (and dropped once no process can revive it).
// Once per recording interval the use is appended (SessionActive), so
// other processes and a restart keep the session alive; a failed append is
// not an error for the request (the session stays valid here, and is seen
// idle elsewhere at worst).
func (s *Sessions) Get(ctx context.Context, secret string) (Session, bool) {
	if secret == "" {
		return Session{}, false
	}
	h := HashToken(secret)
	now := s.opt.Now()
	s.sweep(now) // here too: a process may serve sessions it never started
	d := s.dir
	d.mu.RLock()
	v := d.sessions[h]
	d.mu.RUnlock()
	if v == nil {
		return Session{}, false
	}
	if s.expired(v, now) {
		if !s.gone(v, now) {
			return Session{}, false
		}
		d.mu.Lock()
		if d.sessions[h] == v {
			delete(d.sessions, h)
			delete(d.sessByID, v.id)
		}
		d.mu.Unlock()
		return Session{}, false
	}
	n := now.UnixNano()
	maxStore(&v.lastSeen, n)
	if rec := v.recorded.Load(); n-rec >= int64(s.opt.Record) && v.recorded.CompareAndSwap(rec, n) {
		if u, ok := d.User(v.userID); ok {
			_ = d.appendSessions(ctx, u.Subject(), events.SessionActive{SessionID: v.id})
		}
	}
	csrf := v.csrf.Load()
	if csrf == nil {
		c := CSRFOf(secret)
		csrf = &c
		v.csrf.Store(csrf)
	}
	return Session{ID: v.id, UserID: v.userID, CSRF: *csrf, Created: v.created, LastSeen: time.Unix(0, v.lastSeen.Load())}, true
}

// End ends the session with secret (reason: logout or rotated). Ending an
// unknown or already ended session changes nothing.
func (s *Sessions) End(ctx context.Context, secret, reason string) error {
	if secret == "" {
		return nil
	}
	d := s.dir
	d.mu.RLock()
	v := d.sessions[HashToken(secret)]
	d.mu.RUnlock()
	if v == nil {
		return nil
	}
	by := Subject{ID: "user:" + v.userID}
	if u, ok := d.User(v.userID); ok {
		by = u.Subject()
	}
	return d.appendSessions(ctx, by, events.SessionEnded{SessionID: v.id, Reason: reason})
}

// EndUser ends every session of a user (password changed), in one append.
func (s *Sessions) EndUser(ctx context.Context, by Subject, userID, reason string) error {
	d := s.dir
	var ps []events.Payload
	d.mu.RLock()
	for _, v := range d.sessions {
		if v.userID == userID {
			ps = append(ps, events.SessionEnded{SessionID: v.id, Reason: reason})
		}
	}
	d.mu.RUnlock()
	if len(ps) == 0 {
		return nil
	}
	return d.appendSessions(ctx, by, ps...)
}

// Len is the number of sessions held (expired ones included until swept).
func (s *Sessions) Len() int {
	s.dir.mu.RLock()
	defer s.dir.mu.RUnlock()
	return len(s.dir.sessions)
}

// Alive reports whether the session with secret is live, without marking
// it used (a live stream checks this: watching is not activity).
func (s *Sessions) Alive(secret string) bool {
	d := s.dir
	d.mu.RLock()
	v := d.sessions[HashToken(secret)]
	d.mu.RUnlock()
	return v != nil && !s.expired(v, s.opt.Now())
}
