package auth

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// Config tunes a Service.
type Config struct {
	Sessions SessionOptions
	// Failed sign-ins allowed per account name at one client address, and
	// per client address, before 429: a burst, then one per interval.
	// Defaults: 5 then one per 30 s per account and address; 20 then one
	// per 3 s per address. An account is never limited as a whole: that
	// would let anyone lock its owner out with five wrong passwords.
	AccountBurst, IPBurst int
	AccountEvery, IPEvery time.Duration
	Now                   func() time.Time
	// HashConcurrency is how many password checks (argon2id, 19 MiB each)
	// may run at once in this process; one more is refused with BusyError
	// at once, before hashing (default 4: 76 MiB at most, issue 33).
	HashConcurrency int
}

// Service is sign-in and subject resolution: the directory, the session
// table and the sign-in limits.
type Service struct {
	Dir      *Directory
	Sessions *Sessions
	account  *Limiter // per account name and source (accountAt)
	ip       *Limiter // per source (Source)
	starts   *Limiter // session starts per address: correct sign-ins and the demo's
	hashes   chan struct{}
}

// NewService wires a directory to a new session table.
func NewService(dir *Directory, cfg Config) *Service {
	if cfg.AccountBurst <= 0 {
		cfg.AccountBurst = 5
	}
	if cfg.AccountEvery <= 0 {
		cfg.AccountEvery = 30 * time.Second
	}
	if cfg.IPBurst <= 0 {
		cfg.IPBurst = 20
	}
	if cfg.IPEvery <= 0 {
		cfg.IPEvery = 3 * time.Second
	}
	if cfg.HashConcurrency <= 0 {
		cfg.HashConcurrency = 4
	}
	if cfg.Sessions.Now == nil {
		cfg.Sessions.Now = cfg.Now
	}
	return &Service{
		Dir:      dir,
		Sessions: NewSessions(dir, cfg.Sessions),
		account:  NewLimiter(cfg.AccountEvery, cfg.AccountBurst, cfg.Now),
		ip:       NewLimiter(cfg.IPEvery, cfg.IPBurst, cfg.Now),
		starts:   NewLimiter(cfg.IPEvery, cfg.IPBurst, cfg.Now),
		hashes:   make(chan struct{}, cfg.HashConcurrency),
	}
}

// LimitedError is a sign-in refused because of too many failures.
type LimitedError struct{ RetryAfter time.Duration }

func (e *LimitedError) Error() string {
	return fmt.Sprintf("too many sign-in attempts; try again in %d s", RetryAfter(e.RetryAfter))
}

// BusyError is a sign-in refused because HashConcurrency password checks
// are running already (the HTTP layer answers 503 with Retry-After).
type BusyError struct{ RetryAfter time.Duration }

func (e *BusyError) Error() string {
	return fmt.Sprintf("too many sign-ins at once; try again in %d s", RetryAfter(e.RetryAfter))
}

// Source is the limits' key for a client address: the address itself for
// IPv4, its /64 for IPv6 (one host usually holds a whole /64, and would
// otherwise get a fresh allowance per address). clientIP is what the HTTP
// layer derived (the peer, or X-Forwarded-For only from a trusted proxy);
// anything unparsable is its own key.
func Source(clientIP string) string {
	ip := net.ParseIP(clientIP)
	if ip == nil {
		return clientIP
	}
	if ip.To4() != nil {
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// accountAt is the per-account key: the account name at one source, so a
// guesser slows down only themselves and the owner, elsewhere, still
// signs in.
func accountAt(name, source string) string { return strings.ToLower(name) + "\x00" + source }

// checkPassword checks name's password from clientIP within the limits.
// Everything is taken before the hash, never charged after it alone
// (issue 33): the attempt holds one event of the account-at-source and
// source limits (a failure takes them), one session start of the source
// when starting a session (a success takes it), and a place among the
// HashConcurrency running hashes. Returns *LimitedError or *BusyError
// without hashing, else CheckPassword's answer.
func (s *Service) checkPassword(name, password, clientIP string, starting bool) (User, error) {
	src := Source(clientIP)
	type hold struct {
		l   *Limiter
		key string
	}
	want := []hold{{s.account, accountAt(name, src)}, {s.ip, src}}
	if starting {
		want = append(want, hold{s.starts, src})
	}
	held := make([]func(bool), 0, len(want))
	giveBack := func() {
		for _, done := range held {
			done(false)
		}
	}
	for _, h := range want {
		done, wait := h.l.Hold(h.key)
		if done == nil {
			giveBack()
			return User{}, &LimitedError{RetryAfter: wait}
		}
		held = append(held, done)
	}
	select {
	case s.hashes <- struct{}{}:
	default:
		giveBack()
		return User{}, &BusyError{RetryAfter: time.Second}
	}
	u, err := s.Dir.CheckPassword(name, password)
	<-s.hashes
	failed := err != nil
	held[0](failed)
	held[1](failed)
	if starting {
		held[2](!failed)
	}
	return u, err
}

// Login checks a name and password and starts a session. Failures count
// against the limits per account name at a client address and per client
// address; successes against the session starts per client address (like
// the demo's). Returns *LimitedError while limited and *BusyError while
// too many checks run (both without checking the password), and
// ErrBadCredentials for an unknown name or a wrong password alike.
func (s *Service) Login(ctx context.Context, name, password, clientIP string) (u User, sessionID, csrf string, err error) {
	u, err = s.checkPassword(name, password, clientIP, true)
	if err != nil {
		return User{}, "", "", err
	}
	sessionID, csrf, err = s.Sessions.Create(ctx, u.ID, "password")
	if err != nil {
		return User{}, "", "", err
	}
	return u, sessionID, csrf, nil
}

// StartSession signs a known user in without a password (method: oidc
// after the provider's answer, demo for the loopback demo's automatic
// sign-in).
func (s *Service) StartSession(ctx context.Context, userID, method string) (sessionID, csrf string, err error) {
	return s.Sessions.Create(ctx, userID, method)
}

// SessionSubject resolves a session id to its live session and subject.
// The role is read from the directory now, so a role change applies to
// existing sessions at once.
func (s *Service) SessionSubject(ctx context.Context, sessionID string) (Subject, Session, bool) {
	sess, ok := s.Sessions.Get(ctx, sessionID)
	if !ok {
		return Subject{}, Session{}, false
	}
	u, ok := s.Dir.User(sess.UserID)
	if !ok {
		return Subject{}, Session{}, false
	}
	return u.Subject(), sess, true
}

// TokenSubject resolves a bearer token.
func (s *Service) TokenSubject(token string) (Subject, bool) { return s.Dir.LookupToken(token) }

// Follow keeps the directory up to date until ctx ends.
func (s *Service) Follow(ctx context.Context) error { return s.Dir.Follow(ctx) }

// ChangePassword replaces a local account's password after checking the
// current one (failures count against the sign-in limits like a failed
// sign-in) and ends every session of the account. Returns *LimitedError,
// ErrBadCredentials, or ErrInvalid for a new password that is too short or
// too long.
func (s *Service) ChangePassword(ctx context.Context, userID, current, next, clientIP string) error {
	u, ok := s.Dir.User(userID)
	if !ok || u.Source != "local" {
		return ErrNotFound
	}
	if _, err := s.checkPassword(u.Name, current, clientIP, true); err != nil {
		return err
	}
	if err := s.Dir.SetPassword(ctx, u.Subject(), userID, next); err != nil {
		return err
	}
	return s.Sessions.EndUser(ctx, u.Subject(), userID, "password_changed")
}

// AllowSessionStart takes one password-less session start (the loopback
// demo's) for clientIP, or returns how long to wait: the budget per
// address that correct sign-ins use too, since each start appends
// SessionStarted.
func (s *Service) AllowSessionStart(clientIP string) time.Duration {
	if ok, wait := s.starts.Allow(Source(clientIP)); !ok {
		return max(wait, time.Second)
	}
	return 0
}
