package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Health is what one process's consumers report when they cannot do their
// work (docs/events.md, "A consumer that cannot apply an event"):
//
//   - An event a consumer cannot apply (a known type whose payload does not
//     decode, a payload its fold refuses) is parked: logged at ERROR,
//     recorded here, and skipped, and the consumer keeps going. Only that
//     event's effect is missing; commands re-read the stream they act on,
//     so nothing acts on the gap blindly. Parked events do not fail
//     readiness (every process would park the same event, and a pool with
//     no ready process helps nobody); they are listed on /readyz and the
//     admin API until the process restarts.
//   - A consumer that stops (its subscription fails, or it returns an
//     error) is recorded as stopped: readiness fails, naming it, until the
//     process is restarted.
//
// The zero value is not usable; a nil *Health only logs (tests, tools).
type Health struct {
	log *slog.Logger

	mu      sync.Mutex
	parked  []Parked // the newest maxParked
	total   int      // parked since start
	stopped map[string]string
}

// Parked is one event a consumer skipped.
type Parked struct {
	Consumer string          `json:"consumer"`
	Position events.Position `json:"position"`
	Stream   string          `json:"stream"`
	Revision events.Revision `json:"revision"`
	Type     string          `json:"type"`
	EventID  string          `json:"event_id"`
	Error    string          `json:"error"`
	At       time.Time       `json:"at"`
}

// maxParked bounds the list kept (a log full of bad events must not grow
// the process); the count goes on.
const maxParked = 100

// NewHealth returns an empty report; log receives the ERROR lines.
func NewHealth(log *slog.Logger) *Health {
	if log == nil {
		log = slog.Default()
	}
	return &Health{log: log, stopped: map[string]string{}}
}

// Park is how a consumer applies an event: err is what applying ev gave.
// nil passes through; otherwise the event is parked and Park returns nil,
// so the consumer goes on with the next event.
func (h *Health) Park(consumer string, ev events.RecordedEvent, err error) error {
	if err == nil {
		return nil
	}
	p := Parked{Consumer: consumer, Position: ev.Position, Stream: ev.Stream, Revision: ev.Revision,
		Type: ev.Type, EventID: ev.ID, Error: err.Error(), At: time.Now().UTC()}
	log := slog.Default()
	if h != nil {
		log = h.log
		h.mu.Lock()
		h.total++
		h.parked = append(h.parked, p)
		if len(h.parked) > maxParked {
			h.parked = append([]Parked(nil), h.parked[len(h.parked)-maxParked:]...)
		}
		h.mu.Unlock()
	}
	log.Error(consumer+": event parked (cannot be applied; skipped)", "position", ev.Position,
		"stream", ev.Stream, "revision", ev.Revision, "type", ev.Type, "event_id", ev.ID, "err", err)
	return nil
}

// Stop records that consumer stopped with err (nil: it ended normally, as
// at shutdown, and nothing is recorded).
func (h *Health) Stop(consumer string, err error) {
	if h == nil || err == nil {
		return
	}
	h.mu.Lock()
	h.stopped[consumer] = err.Error()
	h.mu.Unlock()
}

// Report is a snapshot for /readyz and the admin API.
type Report struct {
	// Parked are the newest parked events (at most 100), oldest first;
	// ParkedTotal counts all since the process started.
	Parked      []Parked `json:"parked"`
	ParkedTotal int      `json:"parked_total"`
	// Stopped maps a consumer that stopped to its error.
	Stopped map[string]string `json:"stopped"`
}

// Report returns what was recorded so far.
func (h *Health) Report() Report {
	r := Report{Parked: []Parked{}, Stopped: map[string]string{}}
	if h == nil {
		return r
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Parked = append(r.Parked, h.parked...)
	r.ParkedTotal = h.total
	for k, v := range h.stopped {
		r.Stopped[k] = v
	}
	return r
}

// Err is non-nil while a consumer is stopped (readiness fails with it).
func (h *Health) Err() error {
	st := h.Report().Stopped
	if len(st) == 0 {
		return nil
	}
	names := make([]string, 0, len(st))
	for n := range st {
		names = append(names, n)
	}
	sort.Strings(names)
	msgs := make([]string, len(names))
	for i, n := range names {
		msgs[i] = fmt.Sprintf("%s stopped: %s", n, st[n])
	}
	return errors.New(strings.Join(msgs, "; "))
}
