// Package kurrent is the events.Store adapter for KurrentDB (EventStoreDB) on
// github.com/EventStore/EventStore-Client-Go/v4.
//
// The client has sharp edges (DESIGN.md, "Known traps"); this adapter is where
// they are handled, so that nothing above it needs to know:
//
//   - every append carries an explicit expected revision, never the client's
//     default Any by accident;
//   - a wrong-revision answer becomes events.ErrWrongRevision (via errors.As,
//     not esdb.FromError, which hides wrapped errors);
//   - a client whose first connection failed is closed for good by the library,
//     so the adapter builds a new one, and it retries connection failures of a
//     call with bounded backoff (appends too: event ids make KurrentDB treat a
//     re-sent append as the same write);
//   - catch-up subscriptions start at an exclusive position, never the library
//     default End{}, and are resubscribed from the last delivered event after a
//     drop, because the library never resubscribes by itself;
//   - credentials with tls=false are refused (the library drops them);
//   - the library's console logging goes to slog.
package kurrent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotkeeper/slotkeeper/events"
)

// ErrUnavailable is wrapped by errors of calls that could not reach KurrentDB
// within Options.RetryTimeout.
//
// It wraps events.ErrUnavailable, so callers that see only the store
// interface (the HTTP error mapping, readiness) know it for an outage.
var ErrUnavailable = fmt.Errorf("kurrent: KurrentDB unavailable: %w", events.ErrUnavailable)

// Options tune the adapter. The zero value is ready to use.
type Options struct {
	// Logger receives the client library's log lines and the adapter's own
	// (reconnects, resubscriptions). Nil means slog.Default().
	Logger *slog.Logger
	// RetryTimeout bounds how long one call (append, read, head, the first
	// connection in Open) keeps retrying while KurrentDB is unreachable.
	// Default 10 s. Subscriptions retry for as long as their context lives.
	RetryTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between retries and
	// resubscriptions (doubling from min to max). Defaults 50 ms and 5 s.
	MinBackoff, MaxBackoff time.Duration
	// HeadPage is how many $all events Head reads per page while skipping
	// KurrentDB's own system events at the end of the log. Default 64.
	HeadPage int
	// MaxAppendSize and MaxAppendEventSize are the server's append limits
	// (KURRENTDB_MAX_APPEND_SIZE, KURRENTDB_MAX_APPEND_EVENT_SIZE), counted
	// as KurrentDB counts them: data + metadata + 2 × type length
	// (K: Data/Event.cs:46-47). An append over them is refused with
	// events.ErrEventTooLarge before it is sent. Defaults are those of
	// KurrentDB 25.1 and later: 256 MiB and 16 MiB (K:
	// Configuration/ClusterVNodeOptions.cs:156-159 at v26.1.0). KurrentDB
	// 25.0 caps a whole append at 1 MiB: set MaxAppendSize=1048576 (or the
	// connection string's maxAppendSize). The connection string's settings
	// win over these.
	MaxAppendSize, MaxAppendEventSize int
}

// Server append limits of KurrentDB 25.1 and later (see Options).
const (
	DefaultMaxAppendSize      = 256 << 20
	DefaultMaxAppendEventSize = 16 << 20
)

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryTimeout <= 0 {
		o.RetryTimeout = 10 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 50 * time.Millisecond
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Second, o.MinBackoff)
	}
	if o.HeadPage <= 0 {
		o.HeadPage = 64
	}
	if o.MaxAppendSize <= 0 {
		o.MaxAppendSize = DefaultMaxAppendSize
	}
	if o.MaxAppendEventSize <= 0 {
		o.MaxAppendEventSize = DefaultMaxAppendEventSize
	}
}

// Store is an events.Store on KurrentDB. It is safe for concurrent use.
type Store struct {
	cfg  esdb.Configuration
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	cur     *conn    // the client calls use now; nil while (re)connecting
	attempt *attempt // the connection attempt in flight, if any
	closed  bool     // set by Close
	done    chan struct{}

	shapeWarn sync.Once              // see fromRecorded
	refused   *events.PermanentError // the first permanent refusal (Refused)
}

var (
	_ events.Store   = (*Store)(nil)
	_ events.Refuser = (*Store)(nil)
)

// conn is one esdb.Client and the number of calls using it. A client that
// failed is retired: no new call gets it, and it is closed when its last
// caller lets go. Closing it earlier could make a late error path inside the
// library send on its closed channel and panic.
type conn struct {
	c       *esdb.Client
	refs    int
	retired bool
}

type attempt struct {
	done chan struct{}
	err  error
}

// Open parses connString (see ParseConnString), then connects, retrying with
// backoff until the first connection succeeds, ctx ends or
// opts.RetryTimeout passes. It returns an error wrapping ErrConfig for a bad
// connection string and ErrUnavailable when KurrentDB could not be reached.
func Open(ctx context.Context, connString string, opts Options) (*Store, error) {
	cfg, lim, err := parseConnString(connString)
	if err != nil {
		return nil, err
	}
	if lim.maxAppend > 0 {
		opts.MaxAppendSize = lim.maxAppend
	}
	if lim.maxEvent > 0 {
		opts.MaxAppendEventSize = lim.maxEvent
	}
	opts.defaults()
	s := &Store{opts: opts, log: opts.Logger.With("component", "kurrent"), done: make(chan struct{})}
	cfg.Logger = slogBridge(s.log)
	if !strings.Contains(strings.ToLower(connString), "maxdiscoverattempts") {
		// One discovery round per client: the adapter owns the retry loop, so
		// it stays ctx-aware instead of sleeping inside the library.
		cfg.MaxDiscoverAttempts = 1
	}
	s.cfg = *cfg
	c, err := s.acquire(ctx)
	if err != nil {
		_ = s.Close() // an attempt still in flight closes its client when it sees this
		return nil, err
	}
	s.release(c)
	return s, nil
}

// slogBridge routes the client's printf-style log lines to slog. Its info
// lines ("discovery attempt 1/1") are debug noise for us; its "error" lines
// are mostly transient, so they become warnings and the adapter logs real
// failures itself. A cancelled call is not a failure at all (the library logs
// "unexpected exception" for each one), so those go to debug.
func slogBridge(l *slog.Logger) esdb.LoggingFunc {
	return func(level esdb.LogLevel, format string, args ...any) {
		lv := slog.LevelDebug
		switch level {
		case esdb.LogWarn, esdb.LogError:
			lv = slog.LevelWarn
		}
		for _, a := range args {
			if err, ok := a.(error); ok && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled) {
				lv = slog.LevelDebug
			}
		}
		if !l.Enabled(context.Background(), lv) {
			return
		}
		msg := format
		if strings.Contains(format, "%") {
			msg = fmt.Sprintf(format, args...)
		}
		l.Log(context.Background(), lv, msg, "lib", "esdb-client")
	}
}

// acquire returns a healthy client, connecting (or reconnecting) if needed,
// retrying until ctx ends or RetryTimeout passes. Call release when done.
func (s *Store) acquire(ctx context.Context) (*conn, error) {
	deadline := time.Now().Add(s.opts.RetryTimeout)
	backoff := s.opts.MinBackoff
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, events.ErrClosed
		}
		if c := s.cur; c != nil {
			c.refs++
			s.mu.Unlock()
			return c, nil
		}
		a := s.attempt
		if a == nil {
			a = &attempt{done: make(chan struct{})}
			s.attempt = a
			go s.connect(a)
		}
		s.mu.Unlock()

		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, events.ErrClosed
		case <-a.done:
		}
		if a.err == nil {
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, a.err)
		}
		if err := s.sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// connect builds a client and waits for its first connection. The library
// closes a client for good when that fails, so a failed client is closed here
// and the next attempt starts from a new one.
func (s *Store) connect(a *attempt) {
	cfg := s.cfg
	c, err := esdb.NewClient(&cfg)
	if err == nil {
		// GetServerVersion does nothing but obtain a connection handle, i.e.
		// node discovery plus the ServerFeatures call.
		_, err = c.GetServerVersion()
		if err != nil {
			_ = c.Close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		s.log.Warn("cannot connect to KurrentDB", "err", err)
	case s.closed:
		_ = c.Close()
		err = events.ErrClosed
	default:
		s.cur = &conn{c: c}
		s.log.Debug("connected to KurrentDB")
	}
	a.err = err
	s.attempt = nil
	close(a.done)
}

// release gives back a client from acquire.
func (s *Store) release(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.refs--
	if c.retired && c.refs == 0 {
		_ = c.c.Close()
	}
}

// invalidate retires c after a connection failure, so that the next call
// builds a fresh client instead of trusting the library's own rediscovery
// (which closes the client for good if the node is still down).
func (s *Store) invalidate(c *conn, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == c {
		s.cur = nil
		s.log.Warn("KurrentDB connection lost, reconnecting", "err", cause)
	}
	c.retired = true
}

// sleep waits d, or less if ctx ends or the store closes.
func (s *Store) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return events.ErrClosed
	case <-t.C:
		return nil
	}
}

// isConnErr reports whether err means "KurrentDB was not reachable" (worth a
// new client and a retry), as opposed to an answer from it.
func isConnErr(err error) bool {
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeConnectionClosed, esdb.ErrorUnavailable, esdb.ErrorCodeNotLeader:
			return true
		}
	}
	// io.EOF is not one: a Send sees it whenever the server ended the
	// call, also with an answer (an append over the size limit); Append
	// looks at it itself (appendStage).
	return status.Code(err) == codes.Unavailable
}

// do runs op with a healthy client, retrying connection failures with backoff
// until ctx ends or RetryTimeout passes. op must be safe to repeat.
func (s *Store) do(ctx context.Context, op func(ctx context.Context, c *esdb.Client) error) error {
	deadline := time.Now().Add(s.opts.RetryTimeout)
	backoff := s.opts.MinBackoff
	for {
		c, err := s.acquire(ctx)
		if err != nil {
			return err
		}
		err = op(ctx, c.c)
		if err == nil || !isConnErr(err) || ctx.Err() != nil {
			s.release(c)
			if ctx.Err() != nil && err != nil {
				return ctx.Err()
			}
			return err
		}
		s.invalidate(c, err)
		s.release(c)
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		if err := s.sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// Close releases the store. Running subscriptions end with events.ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	close(s.done)
	if c := s.cur; c != nil {
		s.cur = nil
		c.retired = true
		if c.refs == 0 {
			_ = c.c.Close()
		}
	}
	return nil
}
