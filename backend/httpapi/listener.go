package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// ListenerOptions are what a Listener serves and what its stop waits for.
type ListenerOptions struct {
	Handler http.Handler
	Logger  *slog.Logger
	// Hub is the live stream; Feed is the runner that feeds it and Head
	// where the log ends: at stop the streams carry the log's last events
	// before they end.
	Hub  *Hub
	Feed Waiter
	Head func(ctx context.Context) (events.Position, error)
	// WriteTimeout bounds writing one response (default
	// DefaultWriteTimeout; see there).
	WriteTimeout time.Duration
}

// DefaultWriteTimeout is how long one response may take, from the end of
// its request's headers to its last byte (http.Server.WriteTimeout): a
// client that stops reading an answer larger than the socket buffers (a
// job list, an audit page, a range of changes, the OpenAPI document, the
// dashboard's script) held its handler goroutine, the answer's buffers
// and, for the as-of and changes answers, one of the few replay places
// until it went away, which it never has to. The write then fails, the
// handler returns and net/http closes the connection.
//
// Why 5 minutes: the largest ordinary answers are a page of 1,000 jobs
// (each with its steps and attempts, about 4 KB: ~4 MB) and the 518 KB
// dashboard script (~150 KB gzipped). On a 400 kbit/s phone link (Chrome
// DevTools' "Slow 3G") 5 MB take 100 s; before the first byte a request
// may spend up to 10 s sending its body (DefaultBodyReadTimeout) and 30 s
// in its handler (Deps.RequestTimeout). 5 minutes is twice that.
//
// Two routes manage their own deadline, because no whole-response bound
// fits them: the live stream (its hub clears net/http's deadlines when it
// takes the connection, and otherwise moves the deadline before each
// write: every write gets HubOptions.WriteTimeout, sse.go), and the
// backup download, whose size is the store's (each write must finish
// within Deps.WriteTimeout, ops.go).
const DefaultWriteTimeout = 5 * time.Minute

// Listener serves the API on a listener until it is stopped: a service of
// backend/lifecycle's shape (Start, Stop, Started, Stopped).
type Listener struct {
	o   ListenerOptions
	ln  net.Listener
	srv *http.Server

	once             sync.Once
	started, stopped chan struct{}
	err              error // what Serve returned
}

// NewListener serves o.Handler on ln once started.
func NewListener(ln net.Listener, o ListenerOptions) *Listener {
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	return &Listener{o: o, ln: ln, started: make(chan struct{}), stopped: make(chan struct{}), srv: &http.Server{
		Handler:           o.Handler,
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		// net/http arms it again for each request of a connection, and it
		// also bounds what net/http writes itself (the end of a response
		// after its handler returned, an answer to a malformed request):
		// a deadline set by a middleware instead would carry over to the
		// connection's next request, or be cleared before that end.
		WriteTimeout: o.WriteTimeout,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}}
}

// WriteTimeout is the server's bound on writing one response.
func (l *Listener) WriteTimeout() time.Duration { return l.srv.WriteTimeout }

// Start serves in the background.
func (l *Listener) Start(context.Context) error {
	l.once.Do(func() {
		go func() {
			err := l.srv.Serve(JSONErrors(l.ln))
			l.err = err
			close(l.stopped)
		}()
		close(l.started)
	})
	return nil
}

// Stop lets the live streams carry the log's last events (the job
// engine's, which stopped before), ends them, then shuts the server down:
// gracefully while ctx lasts, then by closing the connections.
func (l *Listener) Stop(ctx context.Context) error {
	started := false
	l.once.Do(func() { close(l.started); close(l.stopped) }) // never started
	select {
	case <-l.stopped:
	default:
		started = true
	}
	if head, err := l.o.Head(ctx); err == nil {
		_ = l.o.Feed.WaitFor(ctx, head) // let the streams carry the last events
		l.o.Hub.WaitPublished(ctx, head)
		l.o.Hub.WaitDelivered(ctx)
	}
	l.o.Hub.Close()
	if !started {
		return nil
	}
	if err := l.srv.Shutdown(ctx); err != nil {
		l.o.Logger.Warn("http shutdown", slog.String("error", err.Error()))
		l.srv.Close()
	}
	<-l.stopped
	return nil
}

// Started is closed once the server serves.
func (l *Listener) Started() <-chan struct{} { return l.started }

// Stopped is closed once the server stopped serving.
func (l *Listener) Stopped() <-chan struct{} { return l.stopped }

// ServeErr is why the server stopped serving by itself (nil while it
// serves and after Stop).
func (l *Listener) ServeErr() error {
	select {
	case <-l.stopped:
		if errors.Is(l.err, http.ErrServerClosed) {
			return nil
		}
		return l.err
	default:
		return nil
	}
}
