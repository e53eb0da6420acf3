package sim

import (
	"context"
	"sync"
	"time"
)

// Request is one HTTP request as the simulator saw it. Tests assert on these:
// "no request arrived after T", "the in-flight request was aborted".
type Request struct {
	// Seq numbers requests in arrival order, from 1.
	Seq int `json:"seq"`
	// Server is "coolify" or "bitbucket" (git smart HTTP is served by the
	// Bitbucket server).
	Server string `json:"server"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
	// Endpoint is the route name (see the Endpoint constants), "" when no
	// route matched.
	Endpoint string `json:"endpoint,omitempty"`
	// Resource is the id the request was about: a Coolify uuid, or
	// "PROJECT/slug" for Bitbucket and git.
	Resource string    `json:"resource,omitempty"`
	Arrived  time.Time `json:"arrived"`
	// Completed is set when the handler finished with the client still there.
	Completed time.Time `json:"completed,omitzero"`
	// Aborted is set when the client went away (its context was cancelled or
	// the connection dropped) before the handler finished.
	Aborted time.Time `json:"aborted,omitzero"`
	// Status is the status code written, 0 when none was (hang, reset).
	Status int `json:"status"`
	// Fault is the id of the injected fault that shaped the answer, if any.
	Fault int `json:"fault,omitempty"`
	// Job, RequestID and UserAgent are the request's X-Slotkeeper-Job
	// ("<job id>/<attempt>"), X-Request-Id and User-Agent headers: what
	// ties a call to the job attempt that made it in a provider's own logs.
	// No other header is kept (never Authorization).
	Job       string `json:"job,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	UserAgent string `json:"user_agent,omitempty"`
}

// Done reports whether the request has finished one way or the other.
func (r Request) Done() bool { return !r.Completed.IsZero() || !r.Aborted.IsZero() }

// WasAborted reports whether the client went away before the answer.
func (r Request) WasAborted() bool { return !r.Aborted.IsZero() }

// recorder keeps every request and wakes waiters on each change.
type recorder struct {
	mu      sync.Mutex
	reqs    []*Request
	seq     int
	limit   int           // keep at most this many (the newest)
	changed chan struct{} // closed and replaced on every change
}

func newRecorder(limit int) *recorder { return &recorder{limit: limit, changed: make(chan struct{})} }

// notifyLocked wakes every waiter; callers hold mu.
func (rc *recorder) notifyLocked() {
	close(rc.changed)
	rc.changed = make(chan struct{})
}

func (rc *recorder) start(r *Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.seq++
	r.Seq = rc.seq
	if len(rc.reqs) >= rc.limit {
		// A long-running demo must not grow without bound: drop the oldest.
		n := copy(rc.reqs, rc.reqs[len(rc.reqs)-rc.limit+1:])
		clear(rc.reqs[n:])
		rc.reqs = rc.reqs[:n]
	}
	rc.reqs = append(rc.reqs, r)
	rc.notifyLocked()
}

// update applies f to a recorded request under the lock and wakes waiters.
func (rc *recorder) update(f func()) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	f()
	rc.notifyLocked()
}

func (rc *recorder) snapshot() ([]Request, <-chan struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]Request, len(rc.reqs))
	for i, r := range rc.reqs {
		out[i] = *r
	}
	return out, rc.changed
}

func (rc *recorder) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = nil
	rc.notifyLocked()
}

// Requests returns a copy of the recorded requests in arrival order (the
// newest Options.MaxRecorded).
func (s *Sim) Requests() []Request {
	out, _ := s.rec.snapshot()
	return out
}

// RequestsAfter returns the requests that arrived strictly after t.
func (s *Sim) RequestsAfter(t time.Time) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Arrived.After(t) {
			out = append(out, r)
		}
	}
	return out
}

// ResetRequests forgets every recorded request (faults and state stay).
func (s *Sim) ResetRequests() { s.rec.reset() }

// WaitFor blocks until some recorded request satisfies match and returns
// it, or returns ctx's error. It wakes on every new record and on every
// completion or abortion, so a test never polls with sleeps. Give ctx a
// deadline.
func (s *Sim) WaitFor(ctx context.Context, match func(Request) bool) (Request, error) {
	for {
		reqs, changed := s.rec.snapshot()
		for _, r := range reqs {
			if match(r) {
				return r, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Request{}, ctx.Err()
		}
	}
}

// Wait blocks until cond returns true, or returns ctx's error. cond is
// re-checked on every recorded request change and every state change (an
// asynchronous delete finishing), so tests wait on the simulator without
// sleeping. cond may call the Sim's state methods.
func (s *Sim) Wait(ctx context.Context, cond func() bool) error {
	for {
		s.rec.mu.Lock()
		changed := s.rec.changed
		s.rec.mu.Unlock()
		if cond() {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stateChanged wakes Wait and WaitFor callers.
func (s *Sim) stateChanged() { s.rec.update(func() {}) }
