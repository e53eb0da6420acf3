package auth

import (
	"sync"
	"time"
)

// Session is a signed-in browser. The session id (the cookie) and the CSRF
// token are secrets: only the id's hash is a key here, and neither is ever
// logged or written to the log.
type Session struct {
	UserID   string
	CSRF     string
	Created  time.Time
	LastSeen time.Time
}

// SessionOptions tune the session table.
type SessionOptions struct {
	Idle     time.Duration // default 12h
	Absolute time.Duration // default 7 days
	Now      func() time.Time
}

// Sessions is the server-side session table. It lives in memory: a restart
// signs everybody out, and several processes behind one address need
// sticky routing (docs/auth.md says why this is acceptable for now).
type Sessions struct {
	opt SessionOptions

	mu        sync.Mutex
	m         map[string]*Session // HashToken(session id) → session
	lastSweep time.Time
}

// NewSessions returns an empty table.
func NewSessions(opt SessionOptions) *Sessions {
	if opt.Idle <= 0 {
		opt.Idle = 12 * time.Hour
	}
	if opt.Absolute <= 0 {
		opt.Absolute = 7 * 24 * time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Sessions{opt: opt, m: map[string]*Session{}}
}

// Options returns the effective options (for the cookie's Max-Age).
func (s *Sessions) Options() SessionOptions { return s.opt }

// Create starts a session for user and returns its id and CSRF token.
func (s *Sessions) Create(userID string) (id, csrf string) {
	id, csrf = NewSecret(32), NewSecret(32)
	now := s.opt.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[HashToken(id)] = &Session{UserID: userID, CSRF: csrf, Created: now, LastSeen: now}
	if now.Sub(s.lastSweep) > time.Minute {
		s.lastSweep = now
		for k, v := range s.m {
			if s.expired(v, now) {
				delete(s.m, k)
			}
		}
	}
	return id, csrf
}

func (s *Sessions) expired(v *Session, now time.Time) bool {
	return now.Sub(v.LastSeen) >= s.opt.Idle || now.Sub(v.Created) >= s.opt.Absolute
}

// Get returns the live session with id and marks it used. An expired
// session is removed and not returned.
func (s *Sessions) Get(id string) (Session, bool) {
	if id == "" {
		return Session{}, false
	}
	k := HashToken(id)
	now := s.opt.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.m[k]
	if v == nil {
		return Session{}, false
	}
	if s.expired(v, now) {
		delete(s.m, k)
		return Session{}, false
	}
	v.LastSeen = now
	return *v, true
}

// Delete ends the session with id (logout, or rotation at sign-in).
func (s *Sessions) Delete(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	delete(s.m, HashToken(id))
	s.mu.Unlock()
}

// DeleteUser ends every session of a user (password changed).
func (s *Sessions) DeleteUser(userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.m {
		if v.UserID == userID {
			delete(s.m, k)
		}
	}
}

// Len is the number of sessions held (expired ones included until swept).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
