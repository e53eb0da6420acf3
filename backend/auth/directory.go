package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/events"
)

// Errors of the directory. Test with errors.Is.
var (
	ErrBadCredentials = errors.New("auth: unknown user or wrong password")
	ErrExists         = errors.New("auth: name already taken")
	ErrNotFound       = errors.New("auth: no such user or token")
	ErrInvalid        = errors.New("auth: invalid input")
)

// User is an account as the directory knows it.
type User struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      Role      `json:"role"`
	Source    string    `json:"source"` // local | oidc
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`

	hash    string // argon2id (or bcrypt, before argon2id), local accounts only
	issuer  string
	subject string
	used    bool // signed in or changed its password (in what this directory read)
}

// Subject is the user as a request's subject.
func (u User) Subject() Subject { return Subject{ID: "user:" + u.ID, Name: u.Name, Role: u.Role} }

// Token is an API token as the directory knows it (never the token itself).
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      Role       `json:"role"`
	ExpiresAt time.Time  `json:"expires_at"`
	CreatedAt time.Time  `json:"created_at"`
	CreatedBy string     `json:"created_by,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`

	hash string
}

// Subject is the token as a request's subject.
func (t Token) Subject() Subject { return Subject{ID: "token:" + t.ID, Name: t.Name, Role: t.Role} }

// Options tune a Directory.
type Options struct {
	// Argon2 are the parameters of new password hashes (default
	// DefaultArgon2; tests use cheaper ones). Existing bcrypt hashes are
	// still verified.
	Argon2 Argon2Params
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SessionsCheckpointEvery is how many session events the directory
	// applies between two checkpoints of its session fold (default
	// DefaultSessionsCheckpointEvery; see checkpoint.go).
	SessionsCheckpointEvery int
	// Logger receives what a start ignored or a checkpoint failed
	// (default slog.Default()).
	Logger *slog.Logger
}

// Directory is the in-memory index of users, tokens and sessions, fed from
// the auth-users, auth-tokens and auth-sessions streams. A token, session
// or password check never reads the log: Open reads the streams once, Follow applies what other
// processes append, and the directory's own appends are applied at once.
type Directory struct {
	store events.Store
	opt   Options
	// dummy is a hash to compare against for unknown names (same cost as a
	// real one), made once (dummyOnce): by Follow as it starts, or by the
	// first password check. One argon2id hash takes a ~20 MiB buffer and a
	// noticeable part of a restart, and no sign-in needs it before the
	// server listens.
	dummy     string
	dummyOnce sync.Once

	mu       sync.RWMutex
	rev      map[string]int64 // stream → last applied revision (-1: none)
	users    map[string]*User // id → user
	byName   map[string]*User // lower-case name → user
	tokens   map[string]*Token
	byHash   map[string]*Token   // hex sha256 → token
	tokNames map[string]bool     // lower-case token names
	sessions map[string]*session // hex sha256 of the session secret → session (sessions.go)
	sessByID map[string]string   // session id → hash
	// sessPos is the log position of the last session event applied,
	// sessSince how many were applied since the last checkpoint;
	// saveSessions wakes the checkpoint writer (checkpoint.go).
	sessPos      events.Position
	sessSince    int
	saveSessions chan struct{}
	from         events.Position // Follow starts after it
	changed      chan struct{}   // closed and replaced on every apply (tests wait on it)
}

// Open reads the auth streams of store into a new Directory.
func Open(ctx context.Context, store events.Store, opt Options) (*Directory, error) {
	if opt.Argon2 == (Argon2Params{}) {
		opt.Argon2 = DefaultArgon2
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.SessionsCheckpointEvery <= 0 {
		opt.SessionsCheckpointEvery = DefaultSessionsCheckpointEvery
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	d := &Directory{
		store: store, opt: opt,
		rev:   map[string]int64{events.AuthUsersStream: -1, events.AuthTokensStream: -1, events.AuthSessionsStream: -1},
		users: map[string]*User{}, byName: map[string]*User{},
		tokens: map[string]*Token{}, byHash: map[string]*Token{}, tokNames: map[string]bool{},
		sessions: map[string]*session{}, sessByID: map[string]string{},
		changed: make(chan struct{}), saveSessions: make(chan struct{}, 1),
	}
	var err error
	if d.from, err = store.Head(ctx); err != nil {
		return nil, err
	}
	if err := d.loadSessionsCheckpoint(ctx); err != nil {
		return nil, err
	}
	for _, s := range []string{events.AuthUsersStream, events.AuthTokensStream, events.AuthSessionsStream} {
		if err := d.sync(ctx, s); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// makeDummy makes the hash CheckPassword compares unknown names against.
func (d *Directory) makeDummy() {
	d.dummyOnce.Do(func() { d.dummy = d.opt.Argon2.hashPassword("not a password of anyone") })
}

// Follow applies auth events appended after Open (by this or another
// process) until ctx ends. Applying is idempotent per stream revision.
func (d *Directory) Follow(ctx context.Context) error {
	d.makeDummy()
	defer d.runSaver(ctx)()
	return d.store.SubscribeAll(ctx, d.from, events.Filter{StreamPrefixes: []string{events.AuthStreamPrefix}},
		func(ctx context.Context, ev events.RecordedEvent) error {
			d.mu.Lock()
			defer d.mu.Unlock()
			if int64(ev.Revision) != d.rev[ev.Stream]+1 {
				return nil // already applied (our own append) or not ours
			}
			return d.apply(ev)
		})
}

// sync applies the events of stream after the last applied one.
func (d *Directory) sync(ctx context.Context, stream string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	evs, err := d.store.ReadStream(ctx, stream, uint64(d.rev[stream]+1), 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("auth: read %s: %w", stream, err)
	}
	for _, ev := range evs {
		if int64(ev.Revision) <= d.rev[ev.Stream] {
			continue
		}
		if err := d.apply(ev); err != nil {
			return err
		}
	}
	return nil
}

// apply folds one event into the index. d.mu is held.
func (d *Directory) apply(ev events.RecordedEvent) error {
	d.rev[ev.Stream] = int64(ev.Revision)
	defer func() { close(d.changed); d.changed = make(chan struct{}) }()
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case events.UserCreated:
		role, _ := ParseRole(e.Role)
		u := &User{ID: e.UserID, Name: e.Name, Role: role, Source: e.Source, CreatedAt: ev.Meta.Time, CreatedBy: ev.Meta.Actor,
			hash: e.PasswordHash, issuer: e.Issuer, subject: e.Subject}
		d.users[u.ID] = u
		d.byName[strings.ToLower(u.Name)] = u
	case events.UserRoleGranted:
		if u := d.users[e.UserID]; u != nil {
			u.Role, _ = ParseRole(e.Role)
		}
	case events.PasswordChanged:
		if u := d.users[e.UserID]; u != nil {
			u.hash, u.used = e.PasswordHash, true
		}
	case events.TokenIssued:
		role, _ := ParseRole(e.Role)
		t := &Token{ID: e.TokenID, Name: e.Name, Role: role, ExpiresAt: e.ExpiresAt, CreatedAt: ev.Meta.Time, CreatedBy: ev.Meta.Actor, hash: e.Hash}
		d.tokens[t.ID] = t
		d.byHash[t.hash] = t
		d.tokNames[strings.ToLower(t.Name)] = true
	case events.TokenRevoked:
		if t := d.tokens[e.TokenID]; t != nil && t.RevokedAt == nil {
			at := ev.Meta.Time
			t.RevokedAt = &at
		}
	case events.SessionStarted, events.SessionActive, events.SessionEnded:
		d.applySession(ev, p)
		d.noteSessionEvent(ev.Position)
	}
	return nil
}

// Changed returns a channel closed at the next applied event.
func (d *Directory) Changed() <-chan struct{} {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.changed
}

// appendTo decides and appends to stream with its expected revision
// (events.Decide): after a lost race the directory reads the stream up to
// the winner's write and decides again; after its own write it reads that
// too, so the caller sees what it wrote.
func (d *Directory) appendTo(ctx context.Context, stream string, decide func() (events.Payload, error), meta events.Metadata) error {
	lost := false
	_, err := events.Decide(ctx, d.store, stream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		if lost {
			if err := d.sync(ctx, stream); err != nil {
				return events.ExpectedRevision{}, nil, err
			}
		}
		lost = true
		d.mu.RLock()
		p, err := decide()
		rev := d.rev[stream]
		d.mu.RUnlock()
		if err != nil {
			return events.ExpectedRevision{}, nil, err
		}
		if meta.Time.IsZero() {
			meta.Time = d.opt.Now().UTC()
		}
		return events.Expect(rev >= 0, uint64(max(rev, 0))), []events.EventData{events.New(p, meta)}, nil
	})
	var ae *events.AppendError
	var ce *events.ContendedError
	switch {
	case err == nil:
		return d.sync(ctx, stream)
	case errors.As(err, &ae):
		return fmt.Errorf("auth: %w", err)
	case errors.As(err, &ce):
		if serr := d.sync(ctx, stream); serr != nil {
			return serr
		}
		return fmt.Errorf("auth: append to %s: %w", stream, err)
	}
	return err
}

// CheckName is the rule for user and token names: 1..64 ASCII letters,
// digits, '.', '-', '_' or '@', starting with a letter or digit. Names are
// shown as actors and occupants, so look-alikes and spaces are refused.
func CheckName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%w: name must be 1..64 characters", ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune(".-_@", rune(b))) {
			return fmt.Errorf("%w: name %q: use ASCII letters, digits and .-_@, starting with a letter or digit", ErrInvalid, s)
		}
	}
	return nil
}

// MinPasswordLen is the shortest password accepted.
const MinPasswordLen = 10

func checkPassword(p string) error {
	if len(p) < MinPasswordLen {
		return fmt.Errorf("%w: password must be at least %d characters", ErrInvalid, MinPasswordLen)
	}
	if len(p) > 72 {
		return fmt.Errorf("%w: password must be at most 72 bytes", ErrInvalid)
	}
	return nil
}

// NewSecret returns n random bytes as unpadded base64url.
func NewSecret(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("auth: crypto/rand failed: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// GeneratePassword makes a random password for an account created without one.
func GeneratePassword() string { return NewSecret(18) }

// TokenPrefix starts every API token, so that leaked tokens are easy to
// recognise (and to grep for).
const TokenPrefix = "skt_"

// HashToken is the lookup key of a token or session id: hex SHA-256. High
// entropy secrets need no slow hash, and a hash lookup needs no log read.
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// CreateUser adds a local account. An empty password generates one, which
// is returned (the only time it is ever shown). Returns ErrInvalid for a bad
// name, role or password and ErrExists for a taken name.
func (d *Directory) CreateUser(ctx context.Context, by Subject, name string, role Role, password string) (User, string, error) {
	if err := CheckName(name); err != nil {
		return User{}, "", err
	}
	if role == RoleNone {
		return User{}, "", fmt.Errorf("%w: role is required", ErrInvalid)
	}
	generated := ""
	if password == "" {
		password = GeneratePassword()
		generated = password
	}
	if err := checkPassword(password); err != nil {
		return User{}, "", err
	}
	hash := d.opt.Argon2.hashPassword(password)
	id := uuid.NewString()
	err := d.appendTo(ctx, events.AuthUsersStream, func() (events.Payload, error) {
		if err := d.nameTaken(name); err != nil {
			return nil, err
		}
		return events.UserCreated{UserID: id, Name: name, Role: role.String(), Source: "local", PasswordHash: hash}, nil
	}, meta(by))
	if err != nil {
		return User{}, "", err
	}
	u, _ := d.User(id)
	return u, generated, nil
}

// nameTaken: a name belongs to one subject, account or token (revoked
// ones included: their name stays theirs in the audit), compared
// case-insensitively. Ownership compares subject ids, but people read
// names, so two subjects must never look alike (issue 25). d.mu is held.
func (d *Directory) nameTaken(name string) error {
	k := strings.ToLower(name)
	if d.byName[k] != nil || d.tokNames[k] {
		return fmt.Errorf("%w: %q is already the name of an account or token", ErrExists, name)
	}
	return nil
}

// EnsureOIDCUser returns the account of an identity provider's subject,
// creating it (source "oidc") at the first sign-in and granting role when
// the provider's claims map to a different one.
func (d *Directory) EnsureOIDCUser(ctx context.Context, issuer, subject, name string, role Role) (User, error) {
	d.mu.RLock()
	var found *User
	for _, u := range d.users {
		if u.Source == "oidc" && u.issuer == issuer && u.subject == subject {
			found = u
			break
		}
	}
	var cur User
	if found != nil {
		cur = *found
	}
	d.mu.RUnlock()
	sys := Subject{ID: "system:oidc", Name: "system:oidc"}
	if found != nil {
		if cur.Role != role {
			if err := d.SetRole(ctx, sys, cur.ID, role); err != nil {
				return User{}, err
			}
			cur.Role = role
		}
		return cur, nil
	}
	if CheckName(name) != nil {
		name = "oidc-" + HashToken(issuer + " " + subject)[:12]
	}
	id := uuid.NewString()
	err := d.appendTo(ctx, events.AuthUsersStream, func() (events.Payload, error) {
		n := name
		for i := 2; d.nameTaken(n) != nil; i++ {
			n = fmt.Sprintf("%s-%d", name, i)
		}
		return events.UserCreated{UserID: id, Name: n, Role: role.String(), Source: "oidc", Issuer: issuer, Subject: subject}, nil
	}, meta(sys))
	if err != nil {
		return User{}, err
	}
	u, _ := d.User(id)
	return u, nil
}

// SetRole grants role to user id. Returns ErrNotFound for an unknown id.
func (d *Directory) SetRole(ctx context.Context, by Subject, id string, role Role) error {
	if role == RoleNone {
		return fmt.Errorf("%w: role is required", ErrInvalid)
	}
	return d.appendTo(ctx, events.AuthUsersStream, func() (events.Payload, error) {
		if d.users[id] == nil {
			return nil, ErrNotFound
		}
		return events.UserRoleGranted{UserID: id, Role: role.String()}, nil
	}, meta(by))
}

// SetPassword replaces a local account's password.
func (d *Directory) SetPassword(ctx context.Context, by Subject, id, password string) error {
	if err := checkPassword(password); err != nil {
		return err
	}
	hash := d.opt.Argon2.hashPassword(password)
	return d.appendTo(ctx, events.AuthUsersStream, func() (events.Payload, error) {
		if u := d.users[id]; u == nil || u.Source != "local" {
			return nil, ErrNotFound
		}
		return events.PasswordChanged{UserID: id, PasswordHash: hash}, nil
	}, meta(by))
}

// hashing, when set (tests only), runs before every password check's hash.
var hashing func()

// CheckPassword returns the user whose name and password match. It takes
// the same time for an unknown name as for a wrong password, and returns
// ErrBadCredentials for both.
func (d *Directory) CheckPassword(name, password string) (User, error) {
	d.makeDummy()
	d.mu.RLock()
	u := d.byName[strings.ToLower(name)]
	var cp User
	hash := d.dummy
	if u != nil && u.Source == "local" && u.hash != "" {
		cp = *u
		hash = u.hash
	}
	d.mu.RUnlock()
	if hashing != nil {
		hashing()
	}
	if !verifyPassword(hash, password) || cp.ID == "" {
		return User{}, ErrBadCredentials
	}
	return cp, nil
}

// User returns the account with id.
func (d *Directory) User(id string) (User, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if u := d.users[id]; u != nil {
		return *u, true
	}
	return User{}, false
}

// UserByName returns the account named name (case-insensitive).
func (d *Directory) UserByName(name string) (User, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if u := d.byName[strings.ToLower(name)]; u != nil {
		return *u, true
	}
	return User{}, false
}

// Users lists the accounts by name.
func (d *Directory) Users() []User {
	d.mu.RLock()
	out := make([]User, 0, len(d.users))
	for _, u := range d.users {
		out = append(out, *u)
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// IssueToken creates an API token with role, valid for ttl, and returns it
// with the token itself (shown once; only its hash is stored).
func (d *Directory) IssueToken(ctx context.Context, by Subject, name string, role Role, ttl time.Duration) (Token, string, error) {
	if err := CheckName(name); err != nil {
		return Token{}, "", err
	}
	if role == RoleNone {
		return Token{}, "", fmt.Errorf("%w: role is required", ErrInvalid)
	}
	if ttl <= 0 || ttl > 10*365*24*time.Hour {
		return Token{}, "", fmt.Errorf("%w: expiry must be between 1s and 10 years", ErrInvalid)
	}
	secret := TokenPrefix + NewSecret(32)
	id := uuid.NewString()
	exp := d.opt.Now().Add(ttl).UTC().Truncate(time.Second)
	err := d.appendTo(ctx, events.AuthTokensStream, func() (events.Payload, error) {
		if err := d.nameTaken(name); err != nil {
			return nil, err
		}
		return events.TokenIssued{TokenID: id, Name: name, Role: role.String(), Hash: HashToken(secret), ExpiresAt: exp}, nil
	}, meta(by))
	if err != nil {
		return Token{}, "", err
	}
	t, _ := d.Token(id)
	return t, secret, nil
}

// RevokeToken ends token id. Revoking a revoked token changes nothing.
func (d *Directory) RevokeToken(ctx context.Context, by Subject, id string) error {
	d.mu.RLock()
	t := d.tokens[id]
	done := t != nil && t.RevokedAt != nil
	d.mu.RUnlock()
	if t == nil {
		return ErrNotFound
	}
	if done {
		return nil
	}
	return d.appendTo(ctx, events.AuthTokensStream, func() (events.Payload, error) {
		return events.TokenRevoked{TokenID: id}, nil
	}, meta(by))
}

// Token returns the token with id.
func (d *Directory) Token(id string) (Token, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if t := d.tokens[id]; t != nil {
		return *t, true
	}
	return Token{}, false
}

// Tokens lists every token, newest first (never the tokens themselves).
func (d *Directory) Tokens() []Token {
	d.mu.RLock()
	out := make([]Token, 0, len(d.tokens))
	for _, t := range d.tokens {
		out = append(out, *t)
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out
}

// LookupToken returns the subject of a bearer token that exists, is not
// revoked and has not expired. One map lookup; never a log read.
func (d *Directory) LookupToken(secret string) (Subject, bool) {
	if !strings.HasPrefix(secret, TokenPrefix) {
		return Subject{}, false
	}
	h := HashToken(secret)
	d.mu.RLock()
	t := d.byHash[h]
	var cp Token
	if t != nil {
		cp = *t
	}
	d.mu.RUnlock()
	if t == nil || subtle.ConstantTimeCompare([]byte(cp.hash), []byte(h)) != 1 {
		return Subject{}, false
	}
	if cp.RevokedAt != nil || !d.opt.Now().Before(cp.ExpiresAt) {
		return Subject{}, false
	}
	return cp.Subject(), true
}

// SubjectOf returns the account ("user:<id>") or token ("token:<id>")
// with subject id id, revoked and expired tokens included (they still
// name what they did).
func (d *Directory) SubjectOf(id string) (Subject, bool) {
	kind, rest, _ := strings.Cut(id, ":")
	d.mu.RLock()
	defer d.mu.RUnlock()
	switch kind {
	case "user":
		if u := d.users[rest]; u != nil {
			return u.Subject(), true
		}
	case "token":
		if t := d.tokens[rest]; t != nil {
			return t.Subject(), true
		}
	}
	return Subject{}, false
}

// SubjectNamed returns the subject whose name is name (case-insensitive):
// the account, else the token. Names are unique across both since issue 25;
// older logs may hold several tokens of one name, and then a name alone
// names nobody (false).
func (d *Directory) SubjectNamed(name string) (Subject, bool) {
	k := strings.ToLower(name)
	d.mu.RLock()
	defer d.mu.RUnlock()
	if u := d.byName[k]; u != nil {
		return u.Subject(), true
	}
	var found *Token
	for _, t := range d.tokens {
		if strings.ToLower(t.Name) == k {
			if found != nil {
				return Subject{}, false
			}
			found = t
		}
	}
	if found == nil {
		return Subject{}, false
	}
	return found.Subject(), true
}

// Occupants lists the subjects a slot can be occupied for: every account
// and every token that is neither revoked nor expired, by name.
func (d *Directory) Occupants() []Subject {
	now := d.opt.Now()
	d.mu.RLock()
	out := make([]Subject, 0, len(d.users)+len(d.tokens))
	for _, u := range d.users {
		out = append(out, u.Subject())
	}
	for _, t := range d.tokens {
		if t.RevokedAt == nil && now.Before(t.ExpiresAt) {
			out = append(out, t.Subject())
		}
	}
	d.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Used reports whether account id has signed in or changed its password:
// a SessionStarted or PasswordChanged of it was read, or it holds a live
// session (from a sessions checkpoint). Serve removes the initial admin
// password file once it is true.
func (d *Directory) Used(id string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if u := d.users[id]; u != nil && u.used {
		return true
	}
	for _, s := range d.sessions {
		if s.userID == id {
			return true
		}
	}
	return false
}

// HasUsers reports whether any account exists.
func (d *Directory) HasUsers() bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.users) > 0
}

// meta is the metadata of an auth event caused by subject by.
func meta(by Subject) events.Metadata {
	return events.Metadata{Actor: by.Name, ActorID: by.ID}
}

// SystemSubject is the actor of changes made from the command line
// (slotkeeper admin …) or by the server itself at start.
func SystemSubject(what string) Subject { return Subject{ID: "system:" + what, Name: "system:" + what} }
