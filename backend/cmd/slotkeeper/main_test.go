package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sse "github.com/r3labs/sse/v2"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/postgres/pgtest"
)

// TestMain checks for leaked goroutines after all tests, once the shared
// PostgreSQL cluster (started only if a test needs it) is stopped.
func TestMain(m *testing.M) {
	code := m.Run()
	pgMu.Lock()
	if pgCluster != nil {
		pgCluster.Stop()
	}
	pgMu.Unlock()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	pgMu      sync.Mutex
	pgCluster *pgtest.Cluster
	pgSeq     int
)

// pgDatabase returns the URL of a fresh database on a throwaway PostgreSQL
// cluster (real binaries, loopback), started on first use.
func pgDatabase(t *testing.T) string {
	t.Helper()
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgCluster == nil {
		c, err := pgtest.StartCluster()
		if err != nil {
			t.Fatalf("start PostgreSQL: %v", err)
		}
		pgCluster = c
	}
	pgSeq++
	name := fmt.Sprintf("serve_%d_%d", os.Getpid(), pgSeq)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgCluster.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(pgCluster.URL)
	u.Path = "/" + name
	return u.String()
}

// syncBuffer is an io.Writer tests can read while the server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	put chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{put: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.put <- struct{}{}:
	default:
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer contains s.
func (b *syncBuffer) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for !strings.Contains(b.String(), s) {
		select {
		case <-b.put:
		case <-timeout:
			t.Fatalf("output never contained %q:\n%s", s, b.String())
		}
	}
}

// server is one `slotkeeper serve` run in-process.
type server struct {
	token  string // an admin API token on the server's store
	addr   string
	out    *syncBuffer
	err    *syncBuffer
	cancel context.CancelFunc
	exit   chan int
}

func startServe(t *testing.T, data, addr string, extra ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{out: newSyncBuffer(), err: newSyncBuffer(), cancel: cancel, exit: make(chan int, 1)}
	s.token = adminToken(t, data, extra...)
	ready := make(chan string, 1)
	// No deadline warnings: the demo's deadlines are minutes away, and the
	// warnings (tested in backend/waitlist) would land among the slot events
	// and webhook bodies these tests read. A test may turn them on again.
	args := append([]string{"serve", "--addr", addr, "--data", data, "--heartbeat", "200ms", "--log-level", "debug", "--drain-delay", "0s", "--warn-before", ""}, extra...)
	go func() { s.exit <- runWith(ctx, args, noEnv, s.out, s.err, ready) }()
	select {
	case s.addr = <-ready:
	case code := <-s.exit:
		t.Fatalf("serve exited with %d during start:\n%s", code, s.err.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve not ready:\n%s", s.err.String())
	}
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop is SIGTERM: cancel the context and wait for Run to return.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	s.cancel()
	select {
	case code, ok := <-s.exit:
		if ok {
			close(s.exit)
		}
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop:\n%s", s.err.String())
		return -1
	}
}

func noEnv(string) string { return "" }

func (s *server) url() string { return "http://" + s.addr }

// raw is one HTTP exchange with the server: status, headers, body.
func (s *server) raw(t *testing.T, method, path string, body any) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// call is one exchange whose JSON answer is decoded into out (when not nil).
func (s *server) call(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	code, _, data := s.raw(t, method, path, body)
	if out != nil {
		if err := json.Unmarshal([]byte(data), out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, code, data)
		}
	}
	return code
}

// adminTokens caches one admin token per store, so that a restart on the
// same store reuses it and appends nothing.
var adminTokens sync.Map

// adminToken creates (once per store) an admin API token with
// `slotkeeper admin create-token` on the store serve's flags name, as an
// operator would before the first start.
func adminToken(t *testing.T, data string, serveArgs ...string) string {
	t.Helper()
	args := []string{"admin", "create-token", "tester", "--role", "admin", "--data", data}
	key := data
	for i := 0; i+1 < len(serveArgs); i++ {
		if serveArgs[i] == "--events" {
			args = append(args, "--events", serveArgs[i+1])
			key = serveArgs[i+1] // the log is there, not in data
		}
	}
	if tok, ok := adminTokens.Load(key); ok {
		return tok.(string)
	}
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	if code := runWith(context.Background(), args, noEnv, out, errb, nil); code != 0 {
		t.Fatalf("admin create-token: exit %d: %s", code, errb)
	}
	_, tok, ok := strings.Cut(out.String(), "token: ")
	if !ok {
		t.Fatalf("admin create-token printed no token: %s", out)
	}
	tok, _, _ = strings.Cut(tok, "\n")
	adminTokens.Store(key, tok)
	return tok
}

// follow subscribes to the server's stream with r3labs' client.
func follow(ctx context.Context, t *testing.T, s *server) chan *sse.Event {
	t.Helper()
	frames := make(chan *sse.Event, 4096)
	c := httpapi.NewStreamClient(ctx, s.url()+"/api/stream", &http.Client{}, 20*time.Millisecond)
	c.Headers["Authorization"] = "Bearer " + s.token
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.SubscribeWithContext(ctx, "", func(ev *sse.Event) {
			if len(ev.Event) == 0 || string(ev.Event) == "heartbeat" {
				return
			}
			select {
			case frames <- ev:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() { <-done })
	return frames
}

func next(t *testing.T, frames chan *sse.Event) *sse.Event {
	t.Helper()
	select {
	case ev := <-frames:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no frame within 20 s")
		return nil
	}
}

// TestServeDemoJobAndShutdown runs serve with no configuration but a data
// dir and a port: the demo pool is there, a release runs a real reset
// against the simulators to success, and SIGTERM ends Run with exit 0.
func TestServeDemoJobAndShutdown(t *testing.T) {
	hooks := make(chan string, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		hooks <- string(body)
	}))
	defer hook.Close()
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--grace", "0s", "--webhook-url", hook.URL)
	var list struct {
		Slots []projections.SlotView `json:"slots"`
	}
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 || len(list.Slots) != 8 {
		t.Fatalf("slots: %d %d", code, len(list.Slots))
	}
	occupied := 0
	for _, v := range list.Slots {
		if v.Lifecycle == projections.LifecycleOccupied {
			occupied++
			if v.Deadline == nil || time.Until(*v.Deadline) < time.Minute {
				t.Errorf("%s: deadline %v, want minutes away", v.Name, v.Deadline)
			}
		}
	}
	if occupied != 5 {
		t.Fatalf("%d occupied demo slots, want 5: %+v", occupied, list.Slots)
	}
	if code := s.call(t, "GET", "/readyz", nil, nil); code != 200 {
		t.Fatalf("readyz %d", code)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}
	var res slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/slots/aurora/release", map[string]string{"reason": "test"}, &res); code != 202 {
		t.Fatalf("release: %d", code)
	}
	for {
		var ch projections.Change
		if err := json.Unmarshal(next(t, frames).Data, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Job != nil && ch.Job.ID == res.JobID && ch.Job.State == projections.JobSucceeded {
			break
		}
		if ch.Job != nil && ch.Job.ID == res.JobID && (ch.Job.State == projections.JobFailed || ch.Job.State == projections.JobTimedOut) {
			t.Fatalf("reset ended %s: %+v", ch.Job.State, ch.Job)
		}
	}
	// The lock is released after the terminal event; then the slot is vacant.
	for {
		var ch projections.Change
		_ = json.Unmarshal(next(t, frames).Data, &ch)
		if ch.Slot != nil && ch.Slot.Name == "aurora" && ch.Slot.ActiveJob == nil {
			if ch.Slot.Lifecycle != projections.LifecycleVacant {
				t.Fatalf("aurora after reset: %s", ch.Slot.Lifecycle)
			}
			break
		}
	}
	select {
	case body := <-hooks:
		if !strings.Contains(body, res.JobID) {
			t.Fatalf("webhook body does not name the job: %s", body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no webhook for the finished reset")
	}
	resp, err := http.Get(s.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `slotkeeper_job_outcomes_total{kind="reset",state="succeeded"} 1`) {
		t.Fatalf("metrics lack the reset outcome:\n%s", grepLines(string(metrics), "slotkeeper_"))
	}
	cancel()
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.err.String())
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestShutdownFencesRunningAttempt: a job hangs in a provider call; SIGTERM
// cancels it and the log ends the attempt with an honest terminal event and
// frees the slot, so the job can be resumed later.
func TestShutdownFencesRunningAttempt(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--grace", "0s")
	var fault struct{ ID int }
	if code := s.call(t, "POST", "/api/sim/faults", map[string]any{"endpoint": "coolify.ListStorages", "hang": true}, &fault); code != 201 {
		t.Fatalf("fault: %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	var res slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/slots/birch/release", map[string]string{"reason": "test"}, &res); code != 202 {
		t.Fatalf("release: %d", code)
	}
	for {
		var ch projections.Change
		_ = json.Unmarshal(next(t, frames).Data, &ch)
		if ch.Job != nil && ch.Job.ID == res.JobID && ch.Audit != nil && ch.Audit.Type == "StepStarted" && strings.Contains(ch.Audit.Summary, "volumes") {
			break
		}
	}
	cancel()
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.err.String())
	}
	st, err := boltstore.Open(data, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ReadStream(context.Background(), events.JobStream(res.JobID), 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	p, _ := events.Decode(last)
	to, ok := p.(events.JobTimedOut)
	if !ok || to.Deadline != "shutdown" || to.UncertainStep == "" {
		t.Fatalf("last job event %s %s, want JobTimedOut{deadline: shutdown} naming the uncertain step", last.Type, last.Data)
	}
	sevs, _ := st.ReadStream(context.Background(), events.SlotStream("birch"), 0, 0, events.Forward)
	if sevs[len(sevs)-1].Type != "JobReleased" {
		t.Fatalf("slot's last event %s, want JobReleased", sevs[len(sevs)-1].Type)
	}
}

// TestStreamResumesAcrossProcessRestart: the server restarts on the same
// data dir and address; the client resumes with Last-Event-ID and receives
// exactly the positions the log holds after its snapshot.
func TestStreamResumesAcrossProcessRestart(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	addr := s.addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	snap := next(t, frames)
	if string(snap.Event) != "snapshot" {
		t.Fatalf("first frame %s", snap.Event)
	}
	from, _ := strconv.ParseUint(string(snap.ID), 10, 64)
	extend := func(s *server, i int) {
		until := time.Now().Add(time.Hour + time.Duration(i)*time.Minute)
		if code := s.call(t, "POST", "/api/slots/dune/extend", map[string]any{"until": until}, nil); code != 200 {
			t.Fatalf("extend: %d", code)
		}
	}
	for i := 0; i < 5; i++ {
		extend(s, i)
	}
	s.stop(t)
	s = startServe(t, data, addr, "--workers", "0")
	for i := 5; i < 10; i++ {
		extend(s, i)
	}
	var audit struct {
		Entries []projections.AuditEntry `json:"entries"`
	}
	s.call(t, "GET", fmt.Sprintf("/api/audit?after=%d&limit=1000&plumbing=true", from), nil, &audit)
	if len(audit.Entries) < 10 {
		t.Fatalf("audit after %d: %d entries", from, len(audit.Entries))
	}
	for _, e := range audit.Entries {
		ev := next(t, frames)
		if string(ev.Event) != "change" || string(ev.ID) != strconv.FormatUint(uint64(e.Position), 10) {
			t.Fatalf("got %s %s, want change %d (gap, duplicate or snapshot)", ev.Event, ev.ID, e.Position)
		}
	}
	cancel()
}

func TestConfigErrorsNameTheSetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--workers", "-1"}, nil, "--workers (SLOTKEEPER_WORKERS)"},
		{nil, map[string]string{"SLOTKEEPER_GRACE": "soon"}, "SLOTKEEPER_GRACE"},
		{[]string{"--events", "mysql://x"}, nil, "--events (SLOTKEEPER_EVENTS)"},
		{[]string{"--read-model", "mysql://u:secret@h/db"}, nil, "--read-model (SLOTKEEPER_READ_MODEL)"},
		{[]string{"--coolify-url", "https://c.example/api/v1"}, nil, "--coolify-token (SLOTKEEPER_COOLIFY_TOKEN)"},
		{[]string{"--sim", "maybe"}, nil, "--sim (SLOTKEEPER_SIM)"},
		{[]string{"--addr", "nonsense"}, nil, "--addr (SLOTKEEPER_ADDR)"},
		{[]string{"--step-timeout", "1h", "--job-timeout", "1m"}, nil, "--step-timeout"},
		{[]string{"--webhook-url", "ftp://x"}, nil, "--webhook-url (SLOTKEEPER_WEBHOOK_URL)"},
		{[]string{"--heartbeat", "0s"}, nil, "--heartbeat (SLOTKEEPER_HEARTBEAT)"},
		{[]string{"--sse-resume-wait", "-1s"}, nil, "--sse-resume-wait (SLOTKEEPER_SSE_RESUME_WAIT)"},
		{[]string{"--log-level", "loud"}, nil, "--log-level"},
	} {
		t.Run(strings.Join(tc.args, " ")+fmt.Sprint(tc.env), func(t *testing.T) {
			out, errb := newSyncBuffer(), newSyncBuffer()
			env := func(k string) string { return tc.env[k] }
			args := append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, tc.args...)
			code := runWith(context.Background(), args, env, out, errb, nil)
			if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %q", code, errb.String(), tc.want)
			}
			if strings.Contains(errb.String(), "secret") {
				t.Fatalf("stderr shows a password: %s", errb.String())
			}
		})
	}
}

func TestSecondServerOnSameDataIsRefused(t *testing.T) {
	data := t.TempDir()
	startServe(t, data, "127.0.0.1:0", "--workers", "0")
	errb := newSyncBuffer()
	code := runWith(context.Background(), []string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, noEnv, io.Discard, errb, nil)
	if code != exitUsage || !strings.Contains(errb.String(), "in use by another slotkeeper process") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}

func TestReplayVerifyAndWatch(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wout := newSyncBuffer()
	watched := make(chan int, 1)
	go func() {
		// The token comes from SLOTKEEPER_TOKEN (watch --token is the flag).
		env := func(k string) string {
			if k == "SLOTKEEPER_TOKEN" {
				return s.token
			}
			return ""
		}
		watched <- runWith(ctx, []string{"watch", "--server", s.url(), "--retry", "20ms", "dune"}, env, wout, io.Discard, nil)
	}()
	wout.waitFor(t, "snapshot at position")
	wout.waitFor(t, "dune ")
	if strings.Contains(wout.String(), "aurora") {
		t.Fatalf("watch dune printed another slot:\n%s", wout.String())
	}
	until := time.Now().Add(3 * time.Hour)
	s.call(t, "POST", "/api/slots/dune/extend", map[string]any{"until": until}, nil)
	wout.waitFor(t, "OccupancyExtended")
	// The server restarts; watch resumes and prints the next step once.
	addr := s.addr
	s.stop(t)
	s = startServe(t, data, addr, "--workers", "0")
	var v projections.SlotView
	s.call(t, "POST", "/api/slots/dune/extend", map[string]any{"until": until.Add(time.Hour)}, &v)
	wout.waitFor(t, fmt.Sprintf("#%d ", v.Position))
	// Every event line names its position; none may be printed twice.
	seen := map[string]bool{}
	for _, l := range strings.Split(wout.String(), "\n") {
		if i := strings.Index(l, " #"); i >= 0 {
			p := strings.Fields(l[i+1:])[0]
			if seen[p] {
				t.Fatalf("position %s printed twice:\n%s", p, wout.String())
			}
			seen[p] = true
		}
	}
	if n := strings.Count(wout.String(), "OccupancyExtended"); n != 2 {
		t.Fatalf("%d extend lines, want 2:\n%s", n, wout.String())
	}
	cancel()
	if code := <-watched; code != 0 {
		t.Fatalf("watch exit %d", code)
	}
	s.stop(t)

	out, errb := newSyncBuffer(), newSyncBuffer()
	if code := runWith(context.Background(), []string{"replay", "--data", data}, noEnv, out, errb, nil); code != 0 {
		t.Fatalf("replay exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "8 slots") {
		t.Fatalf("replay printed %q", out.String())
	}
	out = newSyncBuffer()
	if code := runWith(context.Background(), []string{"verify", "--data", data}, noEnv, out, errb, nil); code != 0 {
		t.Fatalf("verify exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "equals a rebuild") {
		t.Fatalf("verify printed %q", out.String())
	}
}

// TestServeOnKurrent runs serve against a (fake, gRPC) KurrentDB node: the
// demo pool lands in it, and a stream client resumes across a restart of
// the server with KurrentDB's non-contiguous positions as event ids.
func TestServeOnKurrent(t *testing.T) {
	node, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close) // after the servers (cleanups run last-in first-out)
	conn := "kurrentdb://" + node.Addr() + "?tls=false"
	// No reconcile run at start: its events would land between the
	// snapshot and the change this test follows across the restart.
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--events", conn, "--workers", "0", "--reconcile-every", "0")
	if !strings.Contains(s.out.String(), "events: kurrentdb") {
		t.Fatalf("serve did not report KurrentDB: %s", s.out.String())
	}
	var list struct {
		Slots    []projections.SlotView `json:"slots"`
		Position events.Position        `json:"position"`
	}
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 || len(list.Slots) != 8 {
		t.Fatalf("slots on kurrent: %d %d", code, len(list.Slots))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	snap := next(t, frames)
	from, _ := strconv.ParseUint(string(snap.ID), 10, 64)
	addr := s.addr
	s.stop(t)
	// Another data dir: with KurrentDB nothing of the log is local.
	s = startServe(t, t.TempDir(), addr, "--events", conn, "--workers", "0", "--reconcile-every", "0")
	until := time.Now().Add(2 * time.Hour)
	if code := s.call(t, "POST", "/api/slots/fjord/extend", map[string]any{"until": until}, nil); code != 200 {
		t.Fatalf("extend: %d", code)
	}
	var audit struct {
		Entries []projections.AuditEntry `json:"entries"`
	}
	s.call(t, "GET", fmt.Sprintf("/api/audit?after=%d&limit=1000&plumbing=true", from), nil, &audit)
	// After the snapshot: the consumers' checkpoints written as the first
	// server stopped (issue 13), then the extend.
	var extend events.Position
	logged := map[string]bool{}
	for _, e := range audit.Entries {
		logged[strconv.FormatUint(uint64(e.Position), 10)] = true
		switch {
		case e.Type == "OccupancyExtended" && e.Slot == "fjord":
			extend = e.Position
		case !strings.HasPrefix(e.Stream, events.CheckpointStreamPrefix):
			t.Fatalf("audit after %d holds %+v", from, e)
		}
	}
	if extend == 0 {
		t.Fatalf("audit after %d: %+v, no extend", from, audit.Entries)
	}
	// The stream resumed after the restart carries them in order, up to
	// the extend: nothing missed, nothing from elsewhere.
	for last := uint64(from); ; {
		ev := next(t, frames)
		id, _ := strconv.ParseUint(string(ev.ID), 10, 64)
		if string(ev.Event) != "change" || !logged[string(ev.ID)] || id <= last {
			t.Fatalf("after the restart got %s %s, want the changes of %+v in order", ev.Event, ev.ID, audit.Entries)
		}
		if last = id; events.Position(id) == extend {
			break
		}
	}
	cancel()
}

// TestTwoServersOnKurrentAndPostgres runs two servers sharing one event
// store (a fake KurrentDB node) and one PostgreSQL read model, as the
// production setup does. Only one of them projects into PostgreSQL; a
// command sent to either is answered with its effect (read-your-writes via
// the shared checkpoint), both live streams carry it, and replay/verify
// work on the shared read model.
func TestTwoServersOnKurrentAndPostgres(t *testing.T) {
	node, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Close)
	evURL := "kurrentdb://" + node.Addr() + "?tls=false"
	rm := pgDatabase(t)
	a := startServe(t, t.TempDir(), "127.0.0.1:0", "--events", evURL, "--read-model", rm, "--workers", "0")
	b := startServe(t, t.TempDir(), "127.0.0.1:0", "--events", evURL, "--read-model", rm, "--workers", "0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fa, fb := follow(ctx, t, a), follow(ctx, t, b)
	for _, f := range []chan *sse.Event{fa, fb} {
		if ev := next(t, f); string(ev.Event) != "snapshot" {
			t.Fatalf("first frame %s", ev.Event)
		}
	}
	for i, s := range []*server{a, b, a, b} {
		until := time.Now().Add(time.Hour + time.Duration(i)*time.Minute).UTC().Truncate(time.Second)
		var v projections.SlotView
		if code := s.call(t, "POST", "/api/slots/harbor/extend", map[string]any{"until": until}, &v); code != 200 {
			t.Fatalf("extend via server %d: %d", i%2, code)
		}
		if v.Deadline == nil || !v.Deadline.Equal(until) {
			t.Fatalf("extend via server %d answered deadline %v, want %v (read-your-writes)", i%2, v.Deadline, until)
		}
		for _, f := range []chan *sse.Event{fa, fb} {
			for {
				var ch projections.Change
				_ = json.Unmarshal(next(t, f).Data, &ch)
				if ch.Slot != nil && ch.Slot.Name == "harbor" && ch.Slot.Deadline != nil && ch.Slot.Deadline.Equal(until) {
					break
				}
			}
		}
	}
	cancel()
	a.stop(t)
	b.stop(t)
	out, errb := newSyncBuffer(), newSyncBuffer()
	if code := runWith(context.Background(), []string{"verify", "--events", evURL, "--read-model", rm}, noEnv, out, errb, nil); code != 0 {
		t.Fatalf("verify exit %d: %s%s", code, out.String(), errb.String())
	}
	// A read model that no longer matches the log: verify names the
	// difference and exits 1; replay rebuilds it and verify passes again.
	conn, err := pgx.Connect(context.Background(), rm)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(context.Background(), `UPDATE slots SET view = jsonb_set(view, '{occupant}', '"mallory"') WHERE name = 'harbor'`)
	conn.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out, errb = newSyncBuffer(), newSyncBuffer()
	if code := runWith(context.Background(), []string{"verify", "--events", evURL, "--read-model", rm}, noEnv, out, errb, nil); code != exitFailed || !strings.Contains(errb.String(), "harbor") {
		t.Fatalf("verify of a tampered read model: exit %d: %s%s", code, out.String(), errb.String())
	}
	out, errb = newSyncBuffer(), newSyncBuffer()
	if code := runWith(context.Background(), []string{"replay", "--events", evURL, "--read-model", rm}, noEnv, out, errb, nil); code != 0 || !strings.Contains(out.String(), "8 slots") {
		t.Fatalf("replay exit %d: %s%s", code, out.String(), errb.String())
	}
	if code := runWith(context.Background(), []string{"verify", "--events", evURL, "--read-model", rm}, noEnv, out, errb, nil); code != 0 {
		t.Fatalf("verify after replay: exit %d: %s%s", code, out.String(), errb.String())
	}
}

// releaseAndWait releases a slot (grace 0) and follows the stream until the
// reset job ends; it returns the job's last view.
func releaseAndWait(t *testing.T, s *server, slot string) *projections.JobView {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}
	var res slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/slots/"+slot+"/release", map[string]string{"reason": "test"}, &res); code != 202 {
		t.Fatalf("release %s: %d", slot, code)
	}
	for {
		var ch projections.Change
		if err := json.Unmarshal(next(t, frames).Data, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Job == nil || ch.Job.ID != res.JobID {
			continue
		}
		switch ch.Job.State {
		case projections.JobSucceeded, projections.JobFailed, projections.JobTimedOut, projections.JobCancelled, projections.JobAbandoned:
			return ch.Job
		}
	}
}

// simWorld is what /api/sim/state shows of one demo slot: its env var keys
// and its repository's main.
func simWorld(t *testing.T, s *server, slot string) (envs []string, repoMain, templateMain string) {
	t.Helper()
	var st struct {
		Coolify struct {
			Applications []struct{ UUID, Name string }
			Envs         []struct {
				App, Key  string
				IsPreview bool `json:"is_preview"`
			}
		}
		Bitbucket struct {
			Repos []struct{ Project, Slug, Main string }
		}
	}
	if code := s.call(t, "GET", "/api/sim/state", nil, &st); code != 200 {
		t.Fatalf("sim state: %d", code)
	}
	app := ""
	for _, a := range st.Coolify.Applications {
		if a.Name == "app-"+slot {
			app = a.UUID
		}
	}
	if app == "" {
		t.Fatalf("the simulator has no application for slot %s: %+v", slot, st.Coolify.Applications)
	}
	for _, e := range st.Coolify.Envs {
		if e.App == app && !e.IsPreview { // Coolify's preview copies (issue 32) aside
			envs = append(envs, e.Key)
		}
	}
	for _, r := range st.Bitbucket.Repos {
		switch {
		case r.Project == "SLOT" && r.Slug == "slot-"+slot:
			repoMain = r.Main
		case r.Project == "TPL":
			templateMain = r.Main
		}
	}
	return envs, repoMain, templateMain
}

// readyEnvs: the env vars are exactly the demo template's plus the new
// database's URL.
func readyEnvs(envs []string) bool {
	s := slices.Clone(envs)
	slices.Sort(s)
	return strings.Join(s, ",") == "APP_ENV,DATABASE_URL,LOG_LEVEL"
}

// TestDemoSurvivesRestart: `make run`, stop, `make run` again. The
// simulators keep their state under <data>/sim, so after a graceful stop
// and a start on the same data dir (new random simulator ports) what the
// first run's reset did is still there and a demo slot released after the
// restart resets to success — before, the restarted simulators had
// forgotten the demo world and every reset failed.
func TestDemoSurvivesRestart(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--grace", "0s")
	if job := releaseAndWait(t, s, "aurora"); job.State != projections.JobSucceeded {
		t.Fatalf("first run: reset ended %s: %+v", job.State, job)
	}
	envs, repoMain, tmplMain := simWorld(t, s, "aurora")
	// The demo's slots have a template (issue 23): a reset restores its env
	// vars (and a fresh DATABASE_URL), it does not leave none.
	if !readyEnvs(envs) || repoMain == "" || repoMain != tmplMain {
		t.Fatalf("first run: aurora after reset: envs %v main %s template %s", envs, repoMain, tmplMain)
	}
	if envs, _, _ := simWorld(t, s, "birch"); len(envs) != 3 {
		t.Fatalf("first run: birch envs %v", envs)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.err.String())
	}
	if _, err := os.Stat(data + "/sim/state.json"); err != nil {
		t.Fatalf("no simulator state under the data dir: %v", err)
	}

	s = startServe(t, data, "127.0.0.1:0", "--grace", "0s")
	if strings.Contains(s.err.String(), "demo pool seeded") {
		t.Fatal("the demo pool was seeded again into a non-empty log")
	}
	if envs, main, tmpl := simWorld(t, s, "aurora"); !readyEnvs(envs) || main != repoMain || tmpl != tmplMain {
		t.Fatalf("after restart: aurora envs %v main %s (want %s) template %s", envs, main, repoMain, tmpl)
	}
	envs, birchMain, _ := simWorld(t, s, "birch")
	if len(envs) != 3 || birchMain == "" || birchMain == tmplMain {
		t.Fatalf("after restart: birch envs %v main %s", envs, birchMain)
	}
	if job := releaseAndWait(t, s, "birch"); job.State != projections.JobSucceeded {
		t.Fatalf("after restart: reset ended %s: %+v\n%s", job.State, job, s.err.String())
	}
	if envs, main, _ := simWorld(t, s, "birch"); !readyEnvs(envs) || main != tmplMain {
		t.Fatalf("after restart: birch after reset: envs %v main %s, want template %s", envs, main, tmplMain)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.err.String())
	}
}

// TestSimStateBesideTheLog: simulator state left beside an empty log
// belongs to nothing (a seeding interrupted before its first event) and is
// cleared, so the demo pool seeds; a torn snapshot beside a non-empty log
// stops the start with an error naming the file, and changes nothing.
func TestSimStateBesideTheLog(t *testing.T) {
	data := t.TempDir()
	state := filepath.Join(data, "sim", "state.json")
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, []byte(`{"format":"slotkeeper-sim-state","version":1,"bitbucket_repos":[{"project":"SLOT","slug":"slot-aurora"`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	s.out.waitFor(t, "serving on")
	if !strings.Contains(s.err.String(), "demo pool seeded") {
		t.Fatalf("demo pool not seeded over stale simulator state:\n%s", s.err.String())
	}
	if envs, _, _ := simWorld(t, s, "aurora"); len(envs) != 3 {
		t.Fatalf("aurora envs %v", envs)
	}
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, s.err.String())
	}
	good, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	torn := good[:len(good)/2]
	if err := os.WriteFile(state, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	errb := newSyncBuffer()
	code := runWith(context.Background(), []string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, noEnv, io.Discard, errb, nil)
	if code == exitOK || !strings.Contains(errb.String(), state) || !strings.Contains(errb.String(), "unusable state snapshot") {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got, _ := os.ReadFile(state); !bytes.Equal(got, torn) {
		t.Fatal("the refused snapshot was changed")
	}
}

// damageRecord flips 4 bytes inside the record at position pos of the
// stopped store file path (every copy bbolt's copy-on-write left in the
// file, so the live one too) and returns pos; pos 0 means the newest record.
func damageRecord(t *testing.T, path string, pos uint64) uint64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	err = db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("log")).Cursor()
		var k, v []byte
		if pos == 0 {
			k, v = c.Last()
		} else {
			k, v = c.Seek(binary.BigEndian.AppendUint64(nil, pos))
		}
		if k == nil {
			return fmt.Errorf("no record at %d", pos)
		}
		pos, rec = binary.BigEndian.Uint64(k), bytes.Clone(v)
		return nil
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for at := bytes.Index(b, rec); at >= 0; at = bytes.Index(b, rec) {
		for i := range 4 {
			b[at+len(rec)/2+i] ^= 0xff
		}
		n++
	}
	if n == 0 {
		t.Fatalf("record %d not found in %s", pos, path)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return pos
}

// TestDamagedStoreStopsServeAndVerify: 4 flipped bytes in a record of a
// stopped store. serve must not retry "record checksum mismatch" forever
// without ever listening; it exits non-zero within seconds saying which
// file, which position and what to do. verify prints the same and exits
// non-zero instead of hanging. Both for the newest record (found when the
// store opens) and for an older one (found by the read model's catch-up).
func TestDamagedStoreStopsServeAndVerify(t *testing.T) {
	seed := t.TempDir()
	startServe(t, seed, "127.0.0.1:0", "--workers", "0").stop(t)
	src, err := os.ReadFile(filepath.Join(seed, boltstore.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		pos  uint64 // 0: the newest
	}{{"newest record", 0}, {"older record", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			file := filepath.Join(data, boltstore.FileName)
			if err := os.WriteFile(file, src, 0o600); err != nil {
				t.Fatal(err)
			}
			pos := damageRecord(t, file, tc.pos)
			wants := []string{file, fmt.Sprintf("position %d", pos), "checksum mismatch", "restore it from the newest backup"}
			const bound = 60 * time.Second // only a process that never stops reaches it
			for _, args := range [][]string{
				{"serve", "--data", data, "--addr", "127.0.0.1:0", "--workers", "0"},
				{"verify", "--data", data},
			} {
				ctx, cancel := context.WithCancel(context.Background())
				out, errb := newSyncBuffer(), newSyncBuffer()
				exit := make(chan int, 1)
				ready := make(chan string, 1)
				t0 := time.Now()
				go func() { exit <- runWith(ctx, args, noEnv, out, errb, ready) }()
				timeout := time.NewTimer(bound)
				select {
				case code := <-exit:
					if code != exitFailed {
						t.Errorf("%s exited %d, want %d:\n%s", args[0], code, exitFailed, errb.String())
					}
				case addr := <-ready:
					t.Errorf("%s listens on %s with a damaged store:\n%s", args[0], addr, errb.String())
					cancel()
					<-exit
				case <-timeout.C:
					t.Errorf("%s still running after %s with a damaged store:\n%s", args[0], bound, errb.String())
					cancel()
					<-exit
				}
				timeout.Stop()
				cancel()
				t.Logf("%s stopped after %s: %s", args[0], time.Since(t0).Round(time.Millisecond), grepLines(errb.String(), "slotkeeper "+args[0]+":"))
				for _, w := range wants {
					if !strings.Contains(errb.String(), w) {
						t.Errorf("%s (after %s) does not say %q:\n%s", args[0], time.Since(t0).Round(time.Millisecond), w, errb.String())
					}
				}
			}
		})
	}
}
