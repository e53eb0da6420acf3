package httpapi

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// Write deadlines (DefaultWriteTimeout): an answer whose client stops
// reading is cut at the Listener's write timeout; the live stream and the
// backup download, which manage their own deadlines, outlive it while
// their client reads.

// smallSendBuffers hands out connections with a 4 KiB send buffer, so an
// unread answer fills the sockets after a few KB (with the kernel's
// autotuning on loopback they could take megabytes first).
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// serveListener serves b's API through the production Listener (its
// http.Server) with the write timeout limit. handled receives a request's
// path when its handler goroutine returns.
func serveListener(t *testing.T, b *bundle, limit time.Duration) (addr string, handled <-chan string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := b.srv.Config.Handler
	done := make(chan string, 16)
	l := NewListener(smallSendBuffers{ln}, ListenerOptions{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() { done <- r.URL.Path }() // also when the handler panics
			api.ServeHTTP(w, r)
		}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Hub: b.hub, Feed: b.runner, Head: b.store.Head,
		WriteTimeout: limit,
	})
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.Stop(ctx)
	})
	return ln.Addr().String(), done
}

// rawGet sends GET path (with token, "": none) on a new connection with a
// 2 KiB receive buffer, so that a client not reading stalls the server's
// writes quickly, and returns the connection unread.
func rawGet(t *testing.T, addr, path, token string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 2048)
		})
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	auth := ""
	if token != "" {
		auth = "Authorization: Bearer " + token + "\r\n"
	}
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: "+addr+"\r\n"+auth+"\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnreadAnswerIsCutAtTheWriteDeadline: a client asks for a large
// answer and never reads it. Before the write timeout the handler stayed
// blocked in its write for as long as the client kept the connection (for
// ever); now its goroutine returns at the deadline and the server closes
// the connection. It fails on a server without WriteTimeout (the guard
// below fires).
func TestUnreadAnswerIsCutAtTheWriteDeadline(t *testing.T) {
	const limit = 300 * time.Millisecond
	asset := make([]byte, 1<<20)
	rnd := rand.New(rand.NewPCG(1, 2)) // incompressible, whatever the encoding
	for i := range asset {
		asset[i] = byte(rnd.Uint32())
	}
	for _, tc := range []struct{ name, path string }{
		{"openapi document", "/api/openapi.json"}, // 236 KB
		{"dashboard asset", "/assets/app.js"},
		{"backup download", backupRoute}, // its own deadline: no write progresses
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &bundle{store: memstore.New(), spa: fstest.MapFS{"assets/app.js": {Data: asset}}}
			b.deps = func(d *Deps) {
				d.WriteTimeout = limit
				d.Backup = func(ctx context.Context, w io.Writer) error {
					for range 1024 { // 64 MiB at most
						if _, err := w.Write(asset[:64<<10]); err != nil {
							return err
						}
					}
					return nil
				}
			}
			t.Cleanup(func() { goleak.VerifyNone(t) })
			b.start(t, HubOptions{})
			addr, handled := serveListener(t, b, limit)

			start := time.Now()
			c := rawGet(t, addr, tc.path, b.token)
			select {
			case p := <-handled:
				if p != tc.path {
					t.Fatalf("handler of %s returned, want %s", p, tc.path)
				}
			case <-time.After(limit + 30*time.Second): // a generous guard: the deadline passes after limit
				t.Fatalf("the handler is still writing to a client that does not read, %s after the request", time.Since(start))
			}
			if took := time.Since(start); took < limit {
				t.Fatalf("the answer was cut after %s, before the write timeout %s", took, limit)
			}
			// The server closed the connection: what the sockets held
			// arrives, then the end (or a reset), not the read deadline.
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(c)
			status, _ := r.ReadString('\n')
			if !strings.HasPrefix(status, "HTTP/1.1 200") {
				t.Fatalf("status line %q", status)
			}
			n, err := io.Copy(io.Discard, r)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the connection is still open after %s", time.Since(start))
			}
			if n >= int64(len(asset)) {
				t.Fatalf("read %d bytes: the answer was not cut", n)
			}
		})
	}
}

// TestStreamAndBackupOutliveTheWriteDeadline: the live stream and a
// backup download whose client reads go on well past the write timeout.
func TestStreamAndBackupOutliveTheWriteDeadline(t *testing.T) {
	const limit = 200 * time.Millisecond
	more, pieces := make(chan bool), 0
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.WriteTimeout = limit
		// A piece, then one more each time the test asks; false ends
		// the archive.
		d.Backup = func(ctx context.Context, w io.Writer) error {
			for {
				if _, err := w.Write([]byte(strings.Repeat("x", 8<<10))); err != nil {
					return err
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case m := <-more:
					if !m {
						return nil
					}
				}
			}
		}
	}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.start(t, HubOptions{Heartbeat: 20 * time.Millisecond})
	addr, _ := serveListener(t, b, limit)

	t.Run("stream", func(t *testing.T) {
		resp := readingGet(t, "http://"+addr+"/api/stream", b.token)
		// Heartbeats until three write timeouts have passed, then a change.
		readPast(t, resp.Body, 3*limit, func() { b.register(t, "late") })
	})

	t.Run("backup", func(t *testing.T) {
		resp := readingGet(t, "http://"+addr+backupRoute, b.token)
		start := time.Now()
		buf := make([]byte, 8<<10)
		for {
			if _, err := io.ReadFull(resp.Body, buf); err != nil {
				t.Fatalf("piece %d, %s after the start: %v", pieces, time.Since(start), err)
			}
			pieces++
			if time.Since(start) > 3*limit {
				break
			}
			more <- true
		}
		more <- false
		if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != 0 {
			t.Fatalf("end of the archive: %d more bytes, %v", n, err)
		}
	})
}

// TestStreamThroughTheResponseWriterOutlivesTheWriteDeadline: a stream the
// hub cannot take from net/http (no TCP connection in the request's
// context: HTTP/2 would be such) moves its deadline through the response
// writer before its writes, so the server's write timeout does not end it.
func TestStreamThroughTheResponseWriterOutlivesTheWriteDeadline(t *testing.T) {
	const limit = 200 * time.Millisecond
	t.Cleanup(func() { goleak.VerifyNone(t) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := NewHub(HubOptions{Heartbeat: 20 * time.Millisecond, WriteTimeout: limit}, NewMetrics(), log)
	hub.Seed(0, nil)
	e := echo.New()
	e.GET(streamRoute, hub.ServeStream)
	srv := httptest.NewUnstartedServer(e)
	srv.Config.WriteTimeout = limit // and no ConnContext: the hub keeps the response writer
	srv.Start()
	t.Cleanup(func() { hub.Close(); srv.Close() })

	resp := readingGet(t, srv.URL+streamRoute, "")
	readPast(t, resp.Body, 3*limit, func() { hub.Publish(slotChange(1, "a", 10)) })
}

// readingGet sends GET url (with token, "": none) from a client that
// reads; the request ends with the test, or after a generous 30 s guard.
func readingGet(t *testing.T, url, token string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// readPast reads a live stream's lines until a change arrives, calling
// change once the stream has lived longer than d (the change it makes is
// the one awaited). It fails if the stream ends first.
func readPast(t *testing.T, stream io.Reader, d time.Duration, change func()) {
	t.Helper()
	start := time.Now()
	r := bufio.NewReader(stream)
	changed := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended after %s: %v", time.Since(start), err)
		}
		if line == "event: change\n" {
			return
		}
		if !changed && time.Since(start) > d {
			change()
			changed = true
		}
	}
}
