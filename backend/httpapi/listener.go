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
}

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
	return &Listener{o: o, ln: ln, started: make(chan struct{}), stopped: make(chan struct{}), srv: &http.Server{
		Handler:           o.Handler,
		ConnContext:       ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(o.Logger.Handler(), slog.LevelDebug),
	}}
}

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
