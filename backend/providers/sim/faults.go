package sim

import (
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Fault shapes the answer to matching requests. Empty match fields match
// anything. A fault first waits Latency (cut short if the client goes away),
// then, in order: hangs (Hang), drops the connection (Reset), answers a
// foreign 404 (Foreign404), answers Status with Body, or — with none of
// those — lets the request through normally (pure latency).
type Fault struct {
	// ID is assigned by AddFault.
	ID int `json:"id"`
	// Server limits the fault to "coolify" or "bitbucket" ("" = both).
	Server string `json:"server,omitempty"`
	// Method matches the HTTP method exactly (e.g. "DELETE").
	Method string `json:"method,omitempty"`
	// Endpoint matches the route name, e.g. EndpointDeleteDatabase.
	Endpoint string `json:"endpoint,omitempty"`
	// PathPattern matches the request path with path.Match syntax ('*' does
	// not cross '/'), or as a prefix when it ends in "/**".
	PathPattern string `json:"path_pattern,omitempty"`
	// Resource matches the request's resource id exactly (Coolify uuid, or
	// "PROJECT/slug" for Bitbucket and git).
	Resource string `json:"resource,omitempty"`
	// Resources matches a request whose resource id, or any segment of its
	// path, is one of these: a fault aimed at one slot names its
	// application, database, project and repository, and so also hits the
	// calls on their parts (an app's storages and env vars, whose own ids
	// are not known in advance). Issue 35 item 4: a fault hit whichever job
	// called first.
	Resources []string `json:"resources,omitempty"`
	// Job matches only the calls a job makes: the job id of the request's
	// X-Slotkeeper-Job header ("<job id>/<attempt>"), any attempt.
	Job string `json:"job,omitempty"`

	// Status, when non-zero, is answered instead of the real handler.
	Status int `json:"status,omitempty"`
	// Body is sent with Status; when empty the server's own error body for
	// that status is sent (Coolify {"message"}, Bitbucket {"errors":[…]}).
	Body string `json:"body,omitempty"`
	// Header is added to the fault response (e.g. Retry-After).
	Header map[string]string `json:"header,omitempty"`
	// Latency delays the request before anything else.
	Latency time.Duration `json:"latency,omitempty"`
	// Hang holds the request open until the client goes away (or Close).
	Hang bool `json:"hang,omitempty"`
	// Reset hijacks the connection and closes it with a TCP RST, no answer.
	Reset bool `json:"reset,omitempty"`
	// Foreign404 answers 404 with an HTML page, as a misrouting ingress or
	// proxy in front of the service does: a 404 that is not the service's
	// own "does not exist" and says nothing about the resource.
	Foreign404 bool `json:"foreign_404,omitempty"`
	// AfterHandler lets the request take effect first, then answers with
	// the fault instead of the real answer (Status, Reset, …): a create
	// whose answer is lost on the way back. Not with Hang or Latency.
	AfterHandler bool `json:"after_handler,omitempty"`
	// Times is how many more matching requests the fault applies to; 0 means
	// until cleared.
	Times int `json:"times,omitempty"`
	// Skip lets this many matching requests through untouched first (a
	// list that fails on its second page: Skip 1).
	Skip int `json:"skip,omitempty"`
}

func (f *Fault) matches(server, method, p, endpoint, resource, job string) bool {
	if f.Server != "" && f.Server != server {
		return false
	}
	if f.Method != "" && !strings.EqualFold(f.Method, method) {
		return false
	}
	if f.Endpoint != "" && f.Endpoint != endpoint {
		return false
	}
	if f.Resource != "" && f.Resource != resource {
		return false
	}
	if len(f.Resources) > 0 && !slices.Contains(f.Resources, resource) && !slices.ContainsFunc(strings.Split(p, "/"), func(seg string) bool { return seg != "" && slices.Contains(f.Resources, seg) }) {
		return false
	}
	if f.Job != "" && f.Job != job {
		return false
	}
	if f.PathPattern != "" {
		if prefix, ok := strings.CutSuffix(f.PathPattern, "/**"); ok {
			if p != prefix && !strings.HasPrefix(p, prefix+"/") {
				return false
			}
		} else if ok, _ := path.Match(f.PathPattern, p); !ok {
			return false
		}
	}
	return true
}

type faults struct {
	mu     sync.Mutex
	nextID int
	list   []*Fault
}

func (fs *faults) add(f Fault) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.nextID++
	f.ID = fs.nextID
	fs.list = append(fs.list, &f)
	return f.ID
}

// take returns the first matching fault, consuming one of its Times.
func (fs *faults) take(server, method, p, endpoint, resource, job string) (Fault, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.list {
		if !f.matches(server, method, p, endpoint, resource, job) {
			continue
		}
		if f.Skip > 0 {
			f.Skip--
			continue
		}
		out := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				fs.list = append(fs.list[:i:i], fs.list[i+1:]...)
			}
		}
		return out, true
	}
	return Fault{}, false
}

func (fs *faults) remove(id int) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.list {
		if f.ID == id {
			fs.list = append(fs.list[:i:i], fs.list[i+1:]...)
			return true
		}
	}
	return false
}

func (fs *faults) clear() {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.list = nil
}

func (fs *faults) snapshot() []Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]Fault, len(fs.list))
	for i, f := range fs.list {
		out[i] = *f
	}
	return out
}

// AddFault installs f and returns its id. Faults are tried in the order they
// were added; the first match wins.
func (s *Sim) AddFault(f Fault) int { return s.faults.add(f) }

// RemoveFault removes one fault; it reports whether it existed.
func (s *Sim) RemoveFault(id int) bool { return s.faults.remove(id) }

// ClearFaults removes every fault.
func (s *Sim) ClearFaults() { s.faults.clear() }

// Faults returns the installed faults (with the Times left).
func (s *Sim) Faults() []Fault { return s.faults.snapshot() }
