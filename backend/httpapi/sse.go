package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// The live stream (GET /api/stream) is served by Hub, not by r3labs/sse's
// Server: that server hands every event to every subscriber through a
// blocking channel send from one goroutine, so one stalled client stops the
// stream for everybody, and it keeps every event in memory (AutoReplay).
// docs/server.md has the measurements. The wire format is plain SSE, so
// r3labs' client (slotkeeper watch, the tests) and browsers read it.
//
// Design: every change is encoded once into a frame (and its HTTP/1.1
// chunk) and put into a ring of the most recent History frames. Each
// client is its own request goroutine holding a cursor into the ring;
// publishing never blocks on a client. A client whose connection the hub
// took from net/http (HTTP/1.1 over TCP: takeConn) and that is up to date
// gets the new chunk from Publish itself in one non-blocking write; any
// other client, or one whose socket does not take the whole chunk at
// once, is poked through a 1-slot notify channel and sends from the ring. A client that falls more than MaxLag
// frames behind, or whose write does not finish within WriteTimeout, is
// disconnected; it reconnects with Last-Event-ID and resumes from the ring
// (or gets a fresh snapshot if its id has left the ring).

// HubOptions tune the live stream. Zero values take the defaults.
type HubOptions struct {
	// Heartbeat is the interval of `heartbeat` frames (default 15 s).
	Heartbeat time.Duration
	// Retry is the reconnect delay advertised with `retry:` (default 2 s).
	Retry time.Duration
	// History is how many recent changes are kept for resuming (default 4096).
	History int
	// MaxLag is how many changes a client may be behind before it is
	// disconnected (default History/2, at most History).
	MaxLag int
	// WriteTimeout bounds each write to a client (default 2 s): a write
	// that has not finished after WriteTimeout (at most 1.5 x: the
	// deadline is moved only every WriteTimeout/2) evicts the client.
	WriteTimeout time.Duration
	// MaxClients caps concurrent streams (default 10,000); beyond it 429.
	MaxClients int
	// MaxClientsPerIP caps streams per remote address (default 0: no cap).
	MaxClientsPerIP int
	// SendBuffer sets SO_SNDBUF of a stream's TCP connection (default
	// 32 KiB; negative keeps the kernel's autotuning). A small buffer makes
	// a stalled client visible within seconds instead of after megabytes.
	SendBuffer int
	// LiveFrom is the store head when the process started: changes at or
	// below it are history being replayed and are not counted as job
	// outcomes in the metrics.
	LiveFrom events.Position
	// OnEvict, when set, is called (under the hub's lock: it must not
	// block) each time a client is disconnected by the server.
	OnEvict func(reason string)
	// ResumeWait bounds how long a client resuming from a Last-Event-ID
	// ahead of the hub's head waits for the hub to reach it (this process's
	// projection trails the process the client came from, e.g. behind a load
	// balancer). After it the answer is 503 with Retry-After, so the client
	// reconnects (here or elsewhere) instead of taking an older snapshot.
	// Default 5 s, at most Heartbeat: a browser's watchdog gives up after
	// two missed heartbeats, and it should see the 503, not time out first.
	ResumeWait time.Duration
	// LogHead, when set, reads the head of the shared log (events.Store's
	// Head). A Last-Event-ID beyond it names no event of this log (the
	// store was replaced or wiped): waiting could never help, so the client
	// gets at once a snapshot marked "log_reset". Without LogHead such an id
	// waits ResumeWait and gets 503 like any other id ahead of the hub.
	LogHead func(ctx context.Context) (events.Position, error)
	// ListedRetired is how many idle retired slots (projections.Idle) the
	// snapshot frame lists, the most recently changed ones, as the read
	// model's ListSlots does (0: projections.DefaultListedRetired; negative:
	// every slot). It must equal the read model's.
	ListedRetired int
}

func (o *HubOptions) defaults() {
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
	if o.History <= 0 {
		o.History = 4096
	}
	if o.MaxLag <= 0 {
		o.MaxLag = o.History / 2
	}
	if o.MaxLag > o.History {
		o.MaxLag = o.History
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 2 * time.Second
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 10_000
	}
	if o.SendBuffer == 0 {
		o.SendBuffer = 32 << 10
	}
	if o.ResumeWait <= 0 {
		o.ResumeWait = min(5*time.Second, o.Heartbeat)
	}
	if o.ListedRetired == 0 {
		o.ListedRetired = projections.DefaultListedRetired
	}
}

// Hub fans the read model's changes out to SSE clients.
type Hub struct {
	opt HubOptions
	log *slog.Logger
	met *Metrics

	mu        sync.RWMutex // clients read the ring under RLock
	ring      []entry
	seq       uint64          // changes ever put in the ring; ring[i%len]
	floor     events.Position // the ring holds every change after floor
	head      events.Position // the newest change
	slots     map[string]projections.SlotView
	idle      map[string]struct{} // the idle retired slots in slots (see putSlotLocked)
	slotsJSON []byte              // cached encoding of slots, nil when stale
	running   map[string]string   // job id → kind, for non-terminal jobs (metrics)
	clients   map[*client]struct{}
	perIP     map[string]int
	closed    bool
	// advance is closed (and cleared) when the head moves or the hub
	// closes; made only when a resuming client waits for the head.
	advance chan struct{}
	waiters int // clients in awaitHead; they count against the caps

	headPos   atomic.Uint64 // mirror of head for heartbeats
	listeners atomic.Int64  // mirror of len(clients)

	// wake is Publish's list of clients to poke, reused (under pubMu).
	wake  []*client
	pubMu sync.Mutex

	// waitHook, when set (tests), is called when a resuming client starts
	// waiting for the head to reach its id.
	waitHook func(id events.Position)

	// notices are the latest notice of each kind (Notice), nseq counts
	// them; under nmu.
	nmu     sync.Mutex
	notices map[string]notice
	nseq    uint64
}

// NoticeDeliveries is the notice that this process recorded a webhook
// delivery: data {"received": deliveries recorded since it started}.
const NoticeDeliveries = "deliveries"

// notice is one Notice frame and its number.
type notice struct {
	seq   uint64
	frame []byte
}

// Notice tells every connected client that something which is not an
// event of the log happened in this process — today a webhook delivery
// recorded (kind "deliveries", docs/pull-requests.md) — so pages showing
// it load it again. The frame is `event: <kind>` with data, without an id:
// it is not in the ring and not replayed; a client that was not connected
// loads afresh anyway. Only the latest notice of a kind is kept, so a
// burst reaches a slow client as one frame (data must say the whole state,
// e.g. a count). Never waits for a client.
func (h *Hub) Notice(kind string, data []byte) {
	h.nmu.Lock()
	h.nseq++
	if h.notices == nil {
		h.notices = map[string]notice{}
	}
	h.notices[kind] = notice{seq: h.nseq, frame: fmt.Appendf(nil, "event: %s\ndata: %s\n\n", kind, data)}
	h.nmu.Unlock()
	h.mu.RLock()
	for c := range h.clients {
		c.poke()
	}
	h.mu.RUnlock()
}

// noticesFor returns the notices c was not sent yet and marks them sent
// (under c.wmu). A new client starts with those there are (seen: true):
// what it loads is newer.
func (h *Hub) noticesFor(c *client, seen bool) [][]byte {
	h.nmu.Lock()
	defer h.nmu.Unlock()
	var out [][]byte
	for kind, n := range h.notices {
		if c.noticed[kind] >= n.seq {
			continue
		}
		if c.noticed == nil {
			c.noticed = map[string]uint64{}
		}
		c.noticed[kind] = n.seq
		if !seen {
			out = append(out, n.frame)
		}
	}
	return out
}

// entry is one change of the history. Its frame is encoded when first
// needed: while nobody listens (a read model replaying a long log at
// start) changes are kept but not encoded.
type entry struct {
	pos    events.Position
	change projections.Change
	// chunk is the frame as an HTTP/1.1 chunk (size line, frame, CRLF):
	// raw connections write it as is; frame is its middle.
	chunk []byte
	frame []byte
}

func (e *entry) encoded(log *slog.Logger) []byte {
	if e.frame == nil {
		e.chunk, e.frame = asChunk(encodeChange(e.change, log))
		e.change = projections.Change{} // the frame is all that is needed now
	}
	return e.frame
}

// asChunk returns frame as one HTTP/1.1 chunk and the frame inside it.
func asChunk(frame []byte) (chunk, inner []byte) {
	chunk = make([]byte, 0, len(frame)+12)
	chunk = strconv.AppendInt(chunk, int64(len(frame)), 16)
	chunk = append(chunk, '\r', '\n')
	h := len(chunk)
	chunk = append(chunk, frame...)
	chunk = append(chunk, '\r', '\n')
	return chunk, chunk[h : h+len(frame)]
}

func encodeChange(ch projections.Change, log *slog.Logger) []byte {
	data, err := json.Marshal(ch)
	if err != nil {
		// Views are plain structs; this is a programming error. Send the
		// position anyway so that the client's sequence has no hole.
		log.Error("sse: encode change", slog.Any("position", ch.Position), slog.String("error", err.Error()))
		data = fmt.Appendf(nil, `{"position":%d}`, ch.Position)
	}
	frame := make([]byte, 0, len(data)+40)
	frame = fmt.Appendf(frame, "id: %d\nevent: change\ndata: ", ch.Position)
	frame = append(frame, data...)
	return append(frame, '\n', '\n')
}

type client struct {
	notify chan struct{} // 1 slot: "the ring has more for you"
	kick   chan struct{} // closed when the hub disconnects the client
	rc     *http.ResponseController
	w      http.ResponseWriter
	ctx    context.Context // the request's; done when the client went away
	ip     string

	// next is the next ring seq to send. Only the client's goroutine moves
	// it (under the hub's read lock); Publish reads it to measure the lag.
	next     atomic.Uint64
	batch    [][]byte  // under wmu
	deadline time.Time // the write deadline set last; under wmu

	// A raw client's connection was taken from net/http (HTTP/1.1 over
	// TCP): frames go out as ready-made chunks, and Publish writes a new
	// frame itself, without waking the client's goroutine, when the
	// socket takes it at once (fast). wmu is held by whoever writes.
	raw *net.TCPConn
	// fd is raw's descriptor once Publish may write to it, else -1;
	// under wmu. Publish writes to it directly: RawConn.Write's locking
	// and poller checks were a tenth of the fan-out's CPU (issue 37). It
	// is safe because the connection is closed only after fd is set to -1
	// under wmu (takeConn's end), and fast holds wmu while it writes.
	fd   int
	wmu  sync.Mutex
	rest []byte        // the unsent end of a chunk fast wrote in part; under wmu
	gone chan struct{} // closed when a raw client's connection ends (its reader saw EOF)

	reason string // why it was kicked; guarded by Hub.mu

	noticed map[string]uint64 // the notices sent, by kind (Hub.Notice); under wmu
}

// NewHub returns a hub at position 0 with no slots; Seed it with the read
// model's state before publishing.
func NewHub(opt HubOptions, met *Metrics, log *slog.Logger) *Hub {
	opt.defaults()
	if met == nil {
		met = NewMetrics()
	}
	if log == nil {
		log = slog.Default()
	}
	return &Hub{
		opt: opt, log: log, met: met,
		ring:    make([]entry, opt.History),
		slots:   map[string]projections.SlotView{},
		idle:    map[string]struct{}{},
		running: map[string]string{},
		clients: map[*client]struct{}{},
		perIP:   map[string]int{},
	}
}

// Seed sets the hub's state to the given slots at pos and forgets older
// history. Connected clients are disconnected so that they take a fresh
// snapshot. Call it once the read model is loaded (pos 0 with no slots when
// the read model replays from the start: the replayed changes then fill the
// history, which is what lets clients resume across a restart).
func (h *Hub) Seed(pos events.Position, slots []projections.SlotView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq, h.floor, h.head = 0, pos, pos
	clear(h.ring)
	h.slots = make(map[string]projections.SlotView, len(slots))
	h.idle = map[string]struct{}{}
	for _, s := range slots {
		h.putSlotLocked(s)
	}
	h.slotsJSON = nil
	h.headPos.Store(uint64(pos))
	h.wakeLocked()
	for c := range h.clients {
		h.kickLocked(c, "reseed")
	}
}

// Head returns the position of the newest change the hub has.
func (h *Hub) Head() events.Position { return events.Position(h.headPos.Load()) }

// WaitPublished waits (bounded by ctx) until the hub has published pos.
func (h *Hub) WaitPublished(ctx context.Context, pos events.Position) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for h.Head() < pos {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WaitDelivered waits until every connected client has been written all
// the hub published, at most WriteTimeout (a stalled client is not waited
// for longer than a write to it would be) and while ctx lasts. A graceful
// stop calls it before Close: a stream ended with a change still queued
// for it resumes, after the restart, from before the new start's snapshot
// and gets a snapshot instead of the changes it missed.
func (h *Hub) WaitDelivered(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, h.opt.WriteTimeout)
	defer cancel()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !h.delivered() {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// delivered reports whether every client was sent the whole ring: its
// next is the head and no chunk is left half written. A client's next
// moves before its write, so its write lock is taken once to let a write
// in progress end.
func (h *Hub) delivered() bool {
	h.mu.RLock()
	seq := h.seq
	cs := make([]*client, 0, len(h.clients))
	for c := range h.clients {
		if c.next.Load() < seq {
			h.mu.RUnlock()
			return false
		}
		cs = append(cs, c)
	}
	h.mu.RUnlock()
	for _, c := range cs {
		c.wmu.Lock()
		half := c.rest != nil
		c.wmu.Unlock()
		if half {
			return false
		}
	}
	return true
}

// Publish adds a change. Changes must come in position order; one at or
// below the hub's head is ignored (a redelivery). Publish never waits for a
// client.
func (h *Hub) Publish(ch projections.Change) {
	var frame []byte
	if h.listeners.Load() > 0 {
		frame = encodeChange(ch, h.log) // outside the lock
	}
	// pubMu makes Publish's wake list its own while it pokes the clients
	// outside mu (Publish is called from one goroutine; this is a guard).
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	h.mu.Lock()
	if h.closed || ch.Position <= h.head {
		h.mu.Unlock()
		return
	}
	i := h.seq % uint64(len(h.ring))
	if h.seq >= uint64(len(h.ring)) {
		h.floor = h.ring[i].pos
	}
	var chunk []byte
	if frame != nil {
		chunk, frame = asChunk(frame)
	}
	h.ring[i] = entry{pos: ch.Position, chunk: chunk, frame: frame}
	if frame == nil {
		h.ring[i].change = ch
	}
	h.seq++
	h.head = ch.Position
	h.headPos.Store(uint64(ch.Position))
	h.wakeLocked()
	if ch.Slot != nil {
		h.putSlotLocked(*ch.Slot)
		h.slotsJSON = nil
	}
	if ch.Job != nil {
		h.trackJobLocked(ch.Position, ch.Job)
	}
	h.met.sseFrames.Inc()
	wake := h.wake[:0]
	for c := range h.clients {
		if h.seq-c.next.Load() > uint64(h.opt.MaxLag) {
			h.kickLocked(c, "lag")
			continue
		}
		wake = append(wake, c)
	}
	seq, chunk := h.seq, h.ring[i].chunk
	h.mu.Unlock()
	// The clients are poked after the lock is released: a client woken
	// under it would find the ring locked, park on the lock and be woken
	// a second time when Publish unlocks (issue 37 item 1). A client that
	// left meanwhile has nobody reading its channel; the send never blocks.
	// A raw client that is up to date gets the frame here, without a
	// wake-up, if its socket takes it at once: one non-blocking write per
	// client, spread over the cores (a write on loopback also runs the
	// receiver's side, so one goroutine would serialise the fan-out).
	// The goroutines take fanOutPer clients at a time, so one whose thread
	// the OS sets aside (a shared machine) does not hold back a fixed half.
	workers := min(runtime.GOMAXPROCS(0), len(wake)/fanOutPer)
	if workers > 1 {
		var taken atomic.Int64
		work := func() {
			for {
				i := int(taken.Add(fanOutPer)) - fanOutPer
				if i >= len(wake) {
					return
				}
				deliver(wake[i:min(len(wake), i+fanOutPer)], seq, chunk)
			}
		}
		var wg sync.WaitGroup
		for range workers - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				work()
			}()
		}
		work()
		wg.Wait()
	} else {
		deliver(wake, seq, chunk)
	}
	clear(wake) // keep no departed client reachable
	h.wake = wake[:0]
}

// trackJobLocked counts a job reaching a terminal state (metrics only).
func (h *Hub) trackJobLocked(pos events.Position, j *projections.JobView) {
	if !events.Ended(j.State) {
		h.running[j.ID] = j.Kind
		return
	}
	if kind, ok := h.running[j.ID]; ok {
		delete(h.running, j.ID)
		if pos > h.opt.LiveFrom {
			h.met.jobOutcomes.WithLabelValues(kind, j.State).Inc()
		}
	}
}

// Close disconnects every client and refuses new ones (503).
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.wakeLocked()
	for c := range h.clients {
		h.kickLocked(c, "shutdown")
	}
}

// wakeLocked wakes the clients waiting for the head (see awaitHead).
func (h *Hub) wakeLocked() {
	if h.advance != nil {
		close(h.advance)
		h.advance = nil
	}
}

// awaitHead is called when a client resumes from id > the hub's head: the
// id comes from a process (or an earlier life of this one) whose projection
// is ahead of ours. Answering with our snapshot would move the client's
// board backwards, so it waits, at most ResumeWait and while the request
// lasts, for the head to reach id; the client then resumes exactly from
// history. It returns beyondLog when id is past the log's own head (an id
// of another log: there is nothing to wait for), and a 503 *Error when the
// bound passed or the hub closed.
func (h *Hub) awaitHead(ctx context.Context, ip string, id events.Position) (beyondLog bool, err error) {
	// One bound for reading the log's head and waiting together.
	deadline := time.Now().Add(h.opt.ResumeWait)
	if h.opt.LogHead != nil {
		lctx, cancel := context.WithDeadline(ctx, deadline)
		head, err := h.opt.LogHead(lctx)
		cancel()
		if err == nil && id > head {
			return true, nil
		}
		// An error reading the log's head: fall through; waiting still
		// decides between resuming and 503, neither of which regresses.
	}
	// A waiting client holds a stream's place under the caps, so waits
	// cannot pile up beyond what streams could.
	h.mu.Lock()
	if err := h.capLocked(ip); err != nil {
		h.mu.Unlock()
		return false, err
	}
	h.waiters++
	h.perIP[ip]++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.waiters--
		if h.perIP[ip]--; h.perIP[ip] <= 0 {
			delete(h.perIP, ip)
		}
		h.mu.Unlock()
	}()
	if h.waitHook != nil {
		h.waitHook(id)
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			h.met.sseRejected.WithLabelValues("closed").Inc()
			return false, errf(CodeUnavailable, "server is shutting down")
		}
		head := h.head
		if head >= id {
			h.mu.Unlock()
			return false, nil
		}
		if h.advance == nil {
			h.advance = make(chan struct{})
		}
		advance := h.advance
		h.mu.Unlock()
		select {
		case <-advance:
		case <-timer.C:
			return false, h.behind(head, id)
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Closed reports whether Close was called (the server is shutting down).
func (h *Hub) Closed() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.closed
}

// Clients returns the number of connected clients.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

func (h *Hub) kickLocked(c *client, reason string) {
	if c.reason != "" {
		return
	}
	c.reason = reason
	close(c.kick)
	if reason == "lag" {
		// Unblock a write in progress now rather than at its deadline. Other
		// reasons end the response cleanly (shutdown, reseed).
		if c.raw != nil {
			_ = c.raw.SetWriteDeadline(time.Now())
		} else if c.rc != nil {
			_ = c.rc.SetWriteDeadline(time.Now())
		}
	}
	h.met.sseEvicted.WithLabelValues(reason).Inc()
	if h.opt.OnEvict != nil {
		h.opt.OnEvict(reason)
	}
}

// behind is the answer to a client resuming from an id this hub has not
// reached: 503 (with Retry-After, set by the error handler), so the client
// reconnects — a browser's EventSource gives up on it and the dashboard
// reopens with backoff — and keeps what it has meanwhile.
func (h *Hub) behind(head, id events.Position) *Error {
	h.met.sseRejected.WithLabelValues("behind").Inc()
	return &Error{
		Code:    CodeUnavailable,
		Message: fmt.Sprintf("this server's live stream is at position %d, behind Last-Event-ID %d; retry shortly", head, id),
		Details: map[string]any{"position": head, "last_event_id": id},
	}
}

// capLocked enforces MaxClients and MaxClientsPerIP; clients waiting in
// awaitHead count as connected.
func (h *Hub) capLocked(ip string) *Error {
	if len(h.clients)+h.waiters >= h.opt.MaxClients {
		h.met.sseRejected.WithLabelValues("cap").Inc()
		return &Error{Code: CodeTooMany, Message: fmt.Sprintf("too many live streams (limit %d)", h.opt.MaxClients), Details: map[string]any{"limit": h.opt.MaxClients}}
	}
	if h.opt.MaxClientsPerIP > 0 && h.perIP[ip] >= h.opt.MaxClientsPerIP {
		h.met.sseRejected.WithLabelValues("per_ip_cap").Inc()
		return &Error{Code: CodeTooMany, Message: fmt.Sprintf("too many live streams from %s (limit %d)", ip, h.opt.MaxClientsPerIP), Details: map[string]any{"limit": h.opt.MaxClientsPerIP}}
	}
	return nil
}

// attach registers a client. It returns the first bytes to send: the retry
// advice, and a snapshot unless the client resumes from lastID. logReset
// marks the snapshot as replacing what the client has (its id is beyond the
// log's head).
func (h *Hub) attach(c *client, lastID *events.Position, logReset bool) ([]byte, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.met.sseRejected.WithLabelValues("closed").Inc()
		return nil, false, errf(CodeUnavailable, "server is shutting down")
	}
	if err := h.capLocked(c.ip); err != nil {
		return nil, false, err
	}
	if lastID != nil && *lastID > h.head && !logReset {
		// The head moved back (a re-seed) after awaitHead saw it reach
		// lastID; still, never answer with an older snapshot.
		return nil, false, h.behind(h.head, *lastID)
	}
	h.clients[c] = struct{}{}
	h.listeners.Add(1)
	h.perIP[c.ip]++
	h.met.sseClients.Inc()

	buf := fmt.Appendf(nil, "retry: %d\n\n", h.opt.Retry.Milliseconds())
	resumed := !logReset && lastID != nil && *lastID >= h.floor && *lastID <= h.head
	if resumed {
		// First ring entry after lastID; entries are in position order.
		oldest := uint64(0)
		if h.seq > uint64(len(h.ring)) {
			oldest = h.seq - uint64(len(h.ring))
		}
		n := int(h.seq - oldest)
		k := sort.Search(n, func(k int) bool {
			return h.ring[(oldest+uint64(k))%uint64(len(h.ring))].pos > *lastID
		})
		c.next.Store(oldest + uint64(k))
		if c.next.Load() < h.seq {
			c.poke()
		}
	} else {
		c.next.Store(h.seq)
		buf = append(buf, h.snapshotLocked(logReset)...)
	}
	buf = append(buf, h.heartbeatFrame()...)
	return buf, resumed, nil
}

func (h *Hub) detach(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.listeners.Add(-1)
	if h.perIP[c.ip]--; h.perIP[c.ip] <= 0 {
		delete(h.perIP, c.ip)
	}
	h.met.sseClients.Dec()
}

// putSlotLocked keeps a slot's view for the snapshot frame. Like the read
// model's ListSlots, the frame lists only the ListedRetired most recently
// changed idle retired slots: an older one leaves (a browser that already
// shows it keeps it until its next snapshot; GET /api/slots/{name} still
// answers for it).
func (h *Hub) putSlotLocked(v projections.SlotView) {
	h.slots[v.Name] = v
	if h.opt.ListedRetired < 0 || !projections.Idle(v) {
		delete(h.idle, v.Name)
		return
	}
	h.idle[v.Name] = struct{}{}
	if len(h.idle) <= h.opt.ListedRetired {
		return
	}
	oldest := ""
	for n := range h.idle {
		if oldest == "" || h.slots[n].Position < h.slots[oldest].Position {
			oldest = n
		}
	}
	delete(h.slots, oldest)
	delete(h.idle, oldest)
}

// snapshotLocked renders the snapshot frame at the hub's head; logReset adds
// "log_reset":true (see HubOptions.LogHead).
func (h *Hub) snapshotLocked(logReset bool) []byte {
	if h.slotsJSON == nil {
		list := make([]projections.SlotView, 0, len(h.slots))
		for _, s := range h.slots {
			list = append(list, s)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		h.slotsJSON, _ = json.Marshal(list)
	}
	b := fmt.Appendf(nil, "id: %d\nevent: snapshot\ndata: {\"position\":%d,\"server_time\":%q,", h.head, h.head, time.Now().UTC().Format(time.RFC3339Nano))
	if logReset {
		b = append(b, `"log_reset":true,`...)
	}
	b = append(b, `"slots":`...)
	b = append(b, h.slotsJSON...)
	return append(b, "}\n\n"...)
}

func (h *Hub) heartbeatFrame() []byte {
	// The comment line is for proxies and tools that watch for SSE
	// comments; EventSource sees only the named event.
	return fmt.Appendf(nil, ": heartbeat\nevent: heartbeat\ndata: {\"server_time\":%q,\"position\":%d,\"interval_ms\":%d}\n\n",
		time.Now().UTC().Format(time.RFC3339Nano), h.headPos.Load(), h.opt.Heartbeat.Milliseconds())
}

// pending returns the frames a client has not been sent yet, or the reason
// it must go. Clients read the ring in parallel under the read lock; the
// write lock is taken only to encode frames kept unencoded during a replay,
// or to evict a client the ring has lapped.
func (h *Hub) pending(c *client) ([][]byte, string) {
	select {
	case <-c.kick:
		return nil, h.reasonOf(c)
	default:
	}
	for {
		h.mu.RLock()
		next, seq := c.next.Load(), h.seq
		if seq-next > uint64(len(h.ring)) {
			h.mu.RUnlock()
			h.mu.Lock()
			h.kickLocked(c, "lag")
			reason := c.reason
			h.mu.Unlock()
			return nil, reason
		}
		c.batch = c.batch[:0]
		complete := true
		for i := next; i < seq; i++ {
			e := &h.ring[i%uint64(len(h.ring))]
			f := e.frame
			if c.raw != nil {
				f = e.chunk
			}
			if f == nil {
				complete = false
				break
			}
			c.batch = append(c.batch, f)
		}
		h.mu.RUnlock()
		if complete {
			c.next.Store(seq)
			return c.batch, ""
		}
		h.mu.Lock()
		for i := next; i < h.seq; i++ {
			h.ring[i%uint64(len(h.ring))].encoded(h.log)
		}
		h.mu.Unlock()
	}
}

// parseLastEventID reads the resume position: the Last-Event-ID header
// (sent by EventSource on reconnect) wins over ?last_event_id=.
func parseLastEventID(r *http.Request) (*events.Position, error) {
	s := r.Header.Get("Last-Event-ID")
	src := "Last-Event-ID header"
	if s == "" {
		s = r.URL.Query().Get("last_event_id")
		src = "last_event_id"
	}
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return nil, invalidField("last_event_id", fmt.Sprintf("%s must be a decimal store position, got %q", src, s))
	}
	p := events.Position(n)
	return &p, nil
}

type connKey struct{}

// ConnContext is meant for http.Server.ConnContext: it keeps the connection
// in the request context so the stream handler can shrink its send buffer.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if w, ok := c.(*jsonErrConn); ok {
		c = w.Conn
	}
	return context.WithValue(ctx, connKey{}, c)
}

// ServeStream is the handler of GET /api/stream.
func (h *Hub) ServeStream(c echo.Context) error {
	req := c.Request()
	lastID, err := parseLastEventID(req)
	if err != nil {
		return err
	}
	ip, _, _ := net.SplitHostPort(req.RemoteAddr)
	cl := &client{
		notify: make(chan struct{}, 1),
		kick:   make(chan struct{}),
		// The net/http writer itself: echo's Response has Flush() without
		// an error, which would hide a write that hit its deadline.
		rc:  http.NewResponseController(c.Response().Writer),
		w:   c.Response().Writer,
		ctx: req.Context(),
		ip:  ip,
		fd:  -1,
	}
	// An id ahead of this hub: wait for the head (bounded) rather than
	// answer with an older snapshot, which would move the client back.
	logReset := false
	if lastID != nil && *lastID > h.Head() {
		if logReset, err = h.awaitHead(req.Context(), cl.ip, *lastID); err != nil {
			return err
		}
	}
	first, resumed, err := h.attach(cl, lastID, logReset)
	if err != nil {
		return err
	}
	h.noticesFor(cl, true)
	defer h.detach(cl)

	tc, _ := req.Context().Value(connKey{}).(*net.TCPConn)
	if h.opt.SendBuffer > 0 && tc != nil {
		_ = tc.SetWriteBuffer(h.opt.SendBuffer)
	}
	hdr := c.Response().Header()
	hdr.Set(echo.HeaderContentType, "text/event-stream")
	hdr.Set(echo.HeaderCacheControl, "no-cache, no-transform")
	hdr.Set("X-Accel-Buffering", "no")
	hdr.Set(echo.HeaderConnection, "keep-alive")
	log := h.log.With(slog.String("correlation_id", requestID(c)), slog.String("remote", req.RemoteAddr))
	log.Debug("sse: client connected", slog.Bool("resumed", resumed))
	if tc != nil && req.ProtoMajor == 1 && req.ProtoMinor == 1 {
		if end, ok := h.takeConn(c, cl, tc); ok {
			defer end()
		}
	}
	if cl.raw == nil {
		c.Response().WriteHeader(http.StatusOK)
	}

	if reason := h.locked(cl, func() string { return h.write(cl, first) }); reason != "" {
		return nil
	}
	if cl.raw != nil {
		// From here Publish may write to the connection itself.
		if sc, err := cl.raw.SyscallConn(); err == nil {
			cl.wmu.Lock()
			_ = sc.Control(func(fd uintptr) { cl.fd = int(fd) })
			cl.wmu.Unlock()
		}
	}
	tick := time.NewTicker(h.opt.Heartbeat)
	defer tick.Stop()
	ctx := req.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cl.gone: // nil unless raw: the client closed the connection
			return nil
		case <-cl.kick:
			log.Debug("sse: client disconnected by server", slog.String("reason", h.reasonOf(cl)))
			return nil
		case <-tick.C:
			if reason := h.locked(cl, func() string { return h.write(cl, h.heartbeatFrame()) }); reason != "" {
				return nil
			}
		case <-cl.notify:
			reason := h.locked(cl, func() string {
				frames, reason := h.pending(cl)
				if reason != "" {
					return reason
				}
				if reason := h.writeFrames(cl, true, frames); reason != "" {
					return reason
				}
				if ns := h.noticesFor(cl, false); len(ns) > 0 {
					return h.write(cl, ns...)
				}
				return ""
			})
			if reason != "" {
				return nil
			}
		}
	}
}

// locked runs fn holding the client's write lock.
func (h *Hub) locked(c *client, fn func() string) string {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return fn()
}

// takeConn takes a stream's connection from net/http (issue 37 item 1):
// the hub then writes the response head and the chunks itself, and
// Publish can hand a new frame to an up-to-date client's socket without
// waking its goroutine. The connection's own reader notices when the
// client goes (net/http's does not run on a taken connection). end, run
// when the handler returns, ends the response (a clean end after a
// shutdown or re-seed) and closes the connection. ok is false when
// net/http cannot give the connection up; the stream then goes through
// its response writer.
func (h *Hub) takeConn(c echo.Context, cl *client, tc *net.TCPConn) (end func(), ok bool) {
	conn, _, err := http.NewResponseController(c.Response().Writer).Hijack()
	if err != nil {
		return nil, false
	}
	// net/http's read and write timeouts stay on a taken connection.
	_ = tc.SetDeadline(time.Time{})
	head := []byte("HTTP/1.1 200 OK\r\n")
	hdr := c.Response().Header().Clone()
	hdr.Set("Date", time.Now().UTC().Format(http.TimeFormat))
	hdr.Set("Transfer-Encoding", "chunked")
	var b strings.Builder
	_ = hdr.Write(&b)
	head = append(head, b.String()...)
	head = append(head, '\r', '\n')
	c.Response().Status, c.Response().Committed = http.StatusOK, true // for the access log
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		var buf [64]byte
		for {
			if _, err := tc.Read(buf[:]); err != nil {
				return
			}
		}
	}()
	h.mu.Lock()
	cl.raw, cl.gone = tc, gone
	h.mu.Unlock()
	cl.wmu.Lock()
	cl.rest = head // goes out before the first frame
	cl.wmu.Unlock()
	return func() {
		cl.wmu.Lock()
		cl.fd = -1 // Publish no longer writes to the descriptor
		switch h.reasonOf(cl) {
		case "shutdown", "reseed":
			_ = tc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = tc.Write([]byte("0\r\n\r\n"))
		}
		cl.wmu.Unlock()
		_ = conn.Close()
		<-gone
	}, true
}

func (h *Hub) reasonOf(c *client) string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return c.reason
}

// fanOutPer is how many clients a fan-out goroutine takes at a time (and
// Publish starts one more goroutine per fanOutPer clients, up to
// GOMAXPROCS).
const fanOutPer = 128

// deliver hands ring entry seq-1 (chunk, nil while nobody listened) to
// each client: written at once when it can be (fast), else the client's
// goroutine is poked and sends it from the ring.
func deliver(cs []*client, seq uint64, chunk []byte) {
	for _, c := range cs {
		if chunk != nil && c.fast(seq, chunk) {
			continue
		}
		c.poke()
	}
}

// poke tells the client's goroutine there is more to send; it never
// waits (one pending poke is enough: the goroutine sends all there is).
func (c *client) poke() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// fast writes the chunk of ring entry seq-1 to a raw client that has
// everything before it, without blocking: it reports true when the socket
// took all of it. Anything else (a write in progress, a backlog, a full
// socket, an error) is left to the client's goroutine: a chunk taken in
// part leaves its end in rest.
func (c *client) fast(seq uint64, chunk []byte) bool {
	if !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	if c.fd < 0 || c.rest != nil || c.next.Load() != seq-1 {
		return false
	}
	// Non-blocking (net's descriptors are): a full socket answers EAGAIN
	// at once and the client's goroutine takes over.
	n, err := syscall.Write(c.fd, chunk)
	if err != nil || n <= 0 {
		return false
	}
	c.next.Store(seq)
	if n < len(chunk) {
		c.rest = chunk[n:]
		return false
	}
	return true
}

// write sends frames with a deadline and flushes. On failure it records
// the eviction and returns its reason. A raw client's frames are chunks
// already when they come from the ring (ring true), else they are chunked
// here.
func (h *Hub) write(c *client, frames ...[]byte) string {
	return h.writeFrames(c, false, frames)
}

func (h *Hub) writeFrames(c *client, ring bool, frames [][]byte) string {
	select {
	case <-c.kick:
		return "kicked"
	default:
	}
	// Setting a deadline costs a timer update in the runtime poller (a
	// tenth of the hub's CPU at 1,000 clients when done per write, issue
	// 37): it is moved only when less than WriteTimeout is left, to 1.5 x
	// WriteTimeout ahead, so every write still has at least WriteTimeout.
	if now := time.Now(); c.deadline.Sub(now) < h.opt.WriteTimeout {
		c.deadline = now.Add(h.opt.WriteTimeout * 3 / 2)
		var err error
		if c.raw != nil {
			err = c.raw.SetWriteDeadline(c.deadline)
		} else {
			err = c.rc.SetWriteDeadline(c.deadline)
		}
		if err != nil && !errors.Is(err, http.ErrNotSupported) {
			return h.fail(c, err)
		}
	}
	if c.raw != nil {
		if len(frames) == 0 && c.rest == nil {
			return ""
		}
		bufs := make(net.Buffers, 0, len(frames)+1)
		if c.rest != nil {
			bufs = append(bufs, c.rest)
		}
		for _, f := range frames {
			if !ring {
				f, _ = asChunk(f)
			}
			bufs = append(bufs, f)
		}
		// One writev for all of them; rest is cleared only once written.
		if _, err := bufs.WriteTo(c.raw); err != nil {
			return h.fail(c, err)
		}
		c.rest = nil
		return ""
	}
	for _, f := range frames {
		if _, err := c.w.Write(f); err != nil {
			return h.fail(c, err)
		}
	}
	if err := c.rc.Flush(); err != nil {
		return h.fail(c, err)
	}
	return ""
}

func (h *Hub) fail(c *client, err error) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.reason != "" {
		return c.reason
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		h.kickLocked(c, "write_timeout")
		return c.reason
	}
	// Any other write error means the client went away (reset, closed);
	// that is not an eviction. (net/http cancels the request context on a
	// write error, so the context cannot tell the two apart.)
	c.reason = "gone"
	close(c.kick)
	return c.reason
}

// ChangeFeed is the read model's change feed (projections.Runner).
type ChangeFeed interface {
	Subscribe(buf int) *projections.Subscription
}

// feedBuffer is the hub's buffer in the runner's feed. Publish never waits,
// so the hub only falls behind if it is starved of CPU for a long time.
const feedBuffer = 1 << 16

// Follow feeds the hub from the runner's change feed until ctx ends. It
// subscribes first, then seeds the hub from reads at a position that is
// consistent with the listed slots, then publishes every later change.
// started (if not nil) is closed after the first seed: start the runner
// after it, so that a read model that replays the log from the beginning
// refills the resume history too. If the runner drops the hub (it fell
// behind), Follow seeds again and clients take fresh snapshots.
func (h *Hub) Follow(ctx context.Context, feed ChangeFeed, reads projections.ReadModel, started chan<- struct{}) error {
	for {
		sub := feed.Subscribe(feedBuffer)
		pos, slots, err := consistentSlots(ctx, reads)
		if err != nil {
			sub.Cancel()
			return err
		}
		h.Seed(pos, slots)
		if started != nil {
			close(started)
			started = nil
		}
	loop:
		for {
			select {
			case <-ctx.Done():
				sub.Cancel()
				return nil
			case ch, ok := <-sub.C:
				if !ok {
					break loop
				}
				if ch.Position > pos {
					h.Publish(ch)
				}
			}
		}
		h.log.Warn("sse: the change feed dropped the hub; clients will take fresh snapshots")
	}
}

// consistentSlots lists the slots together with the position they reflect:
// it retries while the read model moves between the two reads.
func consistentSlots(ctx context.Context, reads projections.ReadModel) (events.Position, []projections.SlotView, error) {
	for try := 0; ; try++ {
		before, err := reads.Position(ctx)
		if err != nil {
			return 0, nil, err
		}
		slots, err := reads.ListSlots(ctx)
		if err != nil {
			return 0, nil, err
		}
		after, err := reads.Position(ctx)
		if err != nil {
			return 0, nil, err
		}
		if before == after || try >= 100 {
			// After many tries the list may be newer than before; replaying
			// a change over a view that already has it is harmless (clients
			// keep the view with the highest position).
			return before, slots, nil
		}
	}
}
