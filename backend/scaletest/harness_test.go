// Package scaletest runs several real `slotkeeper serve` processes against one
// shared event store (the fake KurrentDB node, in this test process), one real
// throwaway PostgreSQL and one set of simulated providers (real HTTP servers in
// this process), and checks that the job rules hold across processes.
package scaletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
)

// binary is the slotkeeper executable, built by setup when a test needs it.
var binary string

// token is an admin API token on the current world's log, made with
// `slotkeeper admin create-token` before the servers start.
var token string

// adminToken creates an admin API token on the KurrentDB log conn.
func adminToken(t testing.TB, conn string) string {
	t.Helper()
	out, err := exec.Command(binary, "admin", "create-token", "scaletest", "--role", "admin", "--events", conn).Output()
	if err != nil {
		t.Fatalf("slotkeeper admin create-token: %v", err)
	}
	_, tok, ok := strings.Cut(string(out), "token: ")
	if !ok {
		t.Fatalf("admin create-token printed no token: %s", out)
	}
	tok, _, _ = strings.Cut(tok, "\n")
	return tok
}

func buildBinary() (string, func(), error) {
	dir, err := os.MkdirTemp("", "slotkeeper-scaletest-")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "slotkeeper")
	cmd := exec.Command("go", "build", "-o", bin, "./backend/cmd/slotkeeper")
	cmd.Dir = "../.."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build slotkeeper: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// proc is one running `slotkeeper serve`.
type proc struct {
	name string
	cmd  *exec.Cmd
	url  string // http://127.0.0.1:port
	logs *bytes.Buffer
	mu   *sync.Mutex
	done chan struct{}
}

// startProc starts `slotkeeper serve` with args and waits (bounded) for the
// line it prints once it serves.
func startProc(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), "SLOTKEEPER_LOG_LEVEL=info")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, logs: &bytes.Buffer{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	cmd.Stderr = lockedWriter{p.mu, p.logs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			fmt.Fprintln(p.logs, line)
			p.mu.Unlock()
			if rest, ok := strings.CutPrefix(line, "slotkeeper: serving on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				select {
				case ready <- u:
				default:
				}
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("---- %s (pid %d) output ----\n%s", name, cmd.Process.Pid, p.output())
		}
	})
	select {
	case p.url = <-ready:
		return p
	case <-p.done:
		t.Fatalf("%s exited before serving:\n%s", name, p.output())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not start serving within 60s:\n%s", name, p.output())
	}
	return nil
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// call does a JSON request and decodes a 2xx answer into out.
func call(ctx context.Context, method, url string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// logWatch follows the shared log through its own adapter and lets the test
// wait for events instead of polling the processes.
type logWatch struct {
	mu       sync.Mutex
	all      []events.RecordedEvent
	byJob    map[string][]events.RecordedEvent
	byStream map[string][]events.RecordedEvent
	notify   chan struct{} // closed and replaced on every event
}

func watchLog(t testing.TB, connString string) (*logWatch, *kurrent.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := kurrent.Open(ctx, connString, kurrent.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	w := &logWatch{byJob: map[string][]events.RecordedEvent{}, byStream: map[string][]events.RecordedEvent{}, notify: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = st.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, e events.RecordedEvent) error {
			w.mu.Lock()
			w.all = append(w.all, e)
			w.byStream[e.Stream] = append(w.byStream[e.Stream], e)
			if id, ok := strings.CutPrefix(e.Stream, events.JobStreamPrefix); ok {
				w.byJob[id] = append(w.byJob[id], e)
			}
			close(w.notify)
			w.notify = make(chan struct{})
			w.mu.Unlock()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-done; _ = st.Close() })
	return w, st
}

// waitFor blocks until cond (called under the lock) holds, or fails the test.
func (w *logWatch) waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		ok, ch := cond(), w.notify
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
	}
}

// jobEvents returns a copy of a job stream's events (call without the lock).
func (w *logWatch) jobEvents(id string) []events.RecordedEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]events.RecordedEvent(nil), w.byJob[id]...)
}

// streamEvents returns a copy of a stream's events (call without the lock).
func (w *logWatch) streamEvents(name string) []events.RecordedEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]events.RecordedEvent(nil), w.byStream[name]...)
}

// sseClient reads one process's live stream and keeps the ids of its
// change frames.
type sseClient struct {
	mu      sync.Mutex
	changes map[events.Position]bool
	max     events.Position
	notify  chan struct{}
	err     error
}

func followSSE(t testing.TB, ctx context.Context, base string) *sseClient {
	t.Helper()
	c := &sseClient{changes: map[events.Position]bool{}, notify: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/api/stream: %d", base, resp.StatusCode)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var id, typ string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case line == "":
				if typ == "change" || typ == "snapshot" {
					if n, err := strconv.ParseUint(id, 10, 64); err == nil {
						c.mu.Lock()
						if typ == "change" {
							c.changes[events.Position(n)] = true
						}
						c.max = max(c.max, events.Position(n))
						close(c.notify)
						c.notify = make(chan struct{})
						c.mu.Unlock()
					}
				}
				id, typ = "", ""
			}
		}
		c.mu.Lock()
		c.err = sc.Err()
		c.mu.Unlock()
	}()
	return c
}

// waitPosition waits until the client has seen a frame at or after pos.
func (c *sseClient) waitPosition(t testing.TB, pos events.Position, timeout time.Duration) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ok, ch := c.max >= pos, c.notify
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("SSE client did not reach position %d within %s", pos, timeout)
		}
	}
}
