package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// TestQueryParametersAreValidated: every query parameter's bad values get
// a 400 naming the field — before, ?cursor=garbage (and -1, 0, > 2^64)
// reached the read model and came back as a 500 logged at ERROR.
func TestQueryParametersAreValidated(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "alpha")
	before := b.head(t)
	for _, tc := range []struct{ path, field string }{
		{"/api/slots/alpha/jobs?cursor=garbage", "cursor"},
		{"/api/slots/alpha/jobs?cursor=-1", "cursor"},
		{"/api/slots/alpha/jobs?cursor=0", "cursor"},
		{"/api/slots/alpha/jobs?cursor=18446744073709551616", "cursor"},
		{"/api/slots/alpha/jobs?cursor=%2B1", "cursor"},
		{"/api/slots/alpha/jobs?cursor=1e3", "cursor"},
		{"/api/slots/alpha/jobs?limit=0", "limit"},
		{"/api/slots/alpha/jobs?limit=-1", "limit"},
		{"/api/slots/alpha/jobs?limit=99999999999999999999", "limit"},
		{"/api/slots/alpha/jobs?kind=explode", "kind"},
		{"/api/slots/alpha/jobs/latest?kind=", "kind"},
		{"/api/slots/alpha/plan?kind=nope", "kind"},
		{"/api/audit?after=garbage", "after"},
		{"/api/audit?after=0", "after"},
		{"/api/audit?after=18446744073709551616", "after"},
		{"/api/audit?limit=1001", "limit"},
		{"/api/audit?since=yesterday", "since"},
		{"/api/audit?slot=../x", "slot"},
		{"/api/audit?job=%00", "job"},
		{"/api/audit?kind=no%20such", "kind"},
		{"/api/audit?actor=%E2%80%AEevil", "actor"},
		{"/api/stream?last_event_id=-1", "last_event_id"},
	} {
		a := b.do(t, http.MethodGet, tc.path, nil)
		if a.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.path, a.status, a.body)
			continue
		}
		if e := a.apiError(t); e.Code != CodeInvalid || e.Details["field"] != tc.field {
			t.Errorf("%s: %+v, want invalid naming %s", tc.path, e, tc.field)
		}
	}
	if a := b.do(t, http.MethodGet, "/api/slots/alpha/jobs?cursor=18446744073709551615&limit=1", nil); a.status != http.StatusOK {
		t.Errorf("the largest cursor: %d %s", a.status, a.body)
	}
	if after := b.head(t); after != before {
		t.Fatalf("reads appended events: %d → %d", before, after)
	}
}

// TestSlowBodyGets408: a body trickled slower than the body read deadline
// gets a 408 in the error shape and the connection is closed — before, a
// body sent at a byte a second held the connection for hours.
func TestSlowBodyGets408(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := &bundle{store: memstore.New(), bodyTimeout: 200 * time.Millisecond}
	b.start(t, HubOptions{})
	before := b.head(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers promise 100 bytes; one arrives, then nothing.
	host := strings.TrimPrefix(b.srv.URL, "http://")
	io.WriteString(conn, "POST /api/slots HTTP/1.1\r\nHost: "+host+"\r\nAuthorization: Bearer "+b.token+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"code":"request_timeout"`) || !resp.Close {
		t.Fatalf("%d close=%v %s, want 408 request_timeout and Connection: close", resp.StatusCode, resp.Close, body)
	}
	if after := b.head(t); after != before {
		t.Fatalf("appended: %d → %d", before, after)
	}
	// A body that arrives in time is unaffected.
	if a := b.do(t, http.MethodPost, "/api/slots", registerCmd("alpha")); a.status != http.StatusCreated {
		t.Fatalf("register: %d %s", a.status, a.body)
	}
}

// TestPreHandlerErrorsAreJSON: what net/http answers before any handler
// runs (a malformed request, headers over the limit, an unknown transfer
// encoding) comes in the API's error shape, with the same status.
func TestPreHandlerErrorsAreJSON(t *testing.T) {
	b := setup(t, HubOptions{})
	b.srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: b.srv.Config.Handler, ConnContext: ConnContext, MaxHeaderBytes: 4096}
	go srv.Serve(JSONErrors(ln))
	defer func() {
		// Shutdown waits for the connections net/http is still closing
		// (after a 431 it lingers to let the client read the answer).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	for _, tc := range []struct {
		raw    string
		status int
		code   Code
	}{
		{"GET /api/slots HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n", 400, CodeInvalid},
		{"GET /api/slots HTTP/1.1\r\n\r\n", 400, CodeInvalid}, // no Host
		{"GET /api/slots HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 8192) + "\r\n\r\n", 431, CodeTooLarge},
		{"POST /api/slots HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, CodeInvalid},
		{"GET /api/slots HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, CodeInvalid},
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, tc.raw)
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.raw[:30], err)
		}
		var e errorBody
		data, _ := io.ReadAll(resp.Body)
		conn.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(data, &e) != nil || e.Error.Code != tc.code || e.Error.Message == "" {
			t.Errorf("%q: %d %s %s, want %d JSON %s", tc.raw[:30], resp.StatusCode, resp.Header.Get("Content-Type"), data, tc.status, tc.code)
		}
	}
	// Handler answers pass unchanged.
	conn, _ := net.Dial("tcp", ln.Addr().String())
	defer conn.Close()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: "+ln.Addr().String()+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
}

// TestRefusedSlowBodyIsCutOff: a body trickled at a byte a tick to a request
// that is refused before its body is read — no token (401), a foreign Host
// (421), an unknown path (signed in or not) — has its connection closed
// within the body deadline. Before, the deadline was cleared when the
// handler returned, and net/http's drain of the unread body then waited on
// the trickle forever.
func TestRefusedSlowBodyIsCutOff(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b := &bundle{store: memstore.New(), bodyTimeout: 300 * time.Millisecond}
	b.start(t, HubOptions{})
	addr := strings.TrimPrefix(b.srv.URL, "http://")
	for _, tc := range []struct {
		name, path, host, auth string
		status                 int
	}{
		{"no token", "/api/slots", addr, "", http.StatusUnauthorized},
		{"foreign host", "/api/slots", "evil.example", "Bearer " + b.token, http.StatusMisdirectedRequest},
		// No POST route there (the dashboard's GET /* matches the path): 405.
		{"unknown path", "/api/no-such-thing", addr, "", http.StatusMethodNotAllowed},
		{"unknown path, signed in", "/api/no-such-thing", addr, "Bearer " + b.token, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			hdr := "POST " + tc.path + " HTTP/1.1\r\nHost: " + tc.host + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
			if tc.auth != "" {
				hdr += "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := io.WriteString(conn, hdr+"\r\n{"); err != nil {
				t.Fatal(err)
			}
			// The trickle: a byte every 50 ms (1000 bytes would take 50 s),
			// until the server closes the connection or the test ends.
			stop := make(chan struct{})
			trickled := make(chan struct{})
			go func() {
				defer close(trickled)
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-stop:
						return
					case <-tick.C:
						if _, err := conn.Write([]byte(" ")); err != nil {
							return
						}
					}
				}
			}()
			defer func() { close(stop); <-trickled }()
			// The server must close at the deadline, long before the
			// trickle ends (50 s); the slack is for a loaded machine (5 s
			// was not always: issue 36 item 7). ReadAll returns at its
			// close (EOF).
			start := time.Now()
			conn.SetReadDeadline(start.Add(25 * time.Second))
			raw, err := io.ReadAll(conn)
			// A close while the trickle still writes may arrive as a reset
			// (the kernel answers the unread bytes with RST): closed too.
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("connection still open after %v (%v); read so far %q", time.Since(start).Round(time.Millisecond), err, raw)
			}
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(raw))), nil)
			if err != nil {
				t.Fatalf("closed without an answer: %q", raw)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("%d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
}

// TestParkedEventsAreVisible: what the consumers parked is on the admin
// API in detail and on /readyz as a count (readiness itself holds).
func TestParkedEventsAreVisible(t *testing.T) {
	h := consumer.NewHealth(slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.Park("deadlines", events.RecordedEvent{Stream: "slot-a", Type: "OccupancyExtended", Position: 7, Revision: 2, ID: "e1"}, errors.New("does not decode"))
	b := &bundle{store: memstore.New(), deps: func(d *Deps) { d.Consumers = h.Report }}
	b.start(t, HubOptions{})
	var rep consumer.Report
	a := b.do(t, http.MethodGet, "/api/admin/consumers", nil)
	a.decode(t, &rep)
	if a.status != http.StatusOK || rep.ParkedTotal != 1 || len(rep.Parked) != 1 || rep.Parked[0].Position != 7 || rep.Parked[0].Consumer != "deadlines" {
		t.Fatalf("admin report: %d %s", a.status, a.body)
	}
	var rz struct {
		Status string `json:"status"`
		Parked int    `json:"parked_events"`
	}
	a = b.do(t, http.MethodGet, "/readyz", nil, "Authorization", "")
	a.decode(t, &rz)
	if a.status != http.StatusOK || rz.Status != "ready" || rz.Parked != 1 || strings.Contains(string(a.body), "slot-a") {
		t.Fatalf("/readyz: %d %s, want ready with the count only", a.status, a.body)
	}
}
