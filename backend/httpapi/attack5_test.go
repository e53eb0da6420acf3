package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// Fifth attack pass: the Bitbucket hook from outside.

// TestHookBodiesShareOneBudget: the hook is public (its signature is
// checked only once the whole body is read), and a body sent chunked
// escaped the 64 KiB Content-Length check, so anyone could make the process
// buffer 1 MiB per connection: 200 connections holding all but the last
// byte of a chunked 1 MiB body took a fresh serve from 60 to 423 MB. Now
// the bodies being read share one budget (Deps.HookBodyBudget, 16 MiB),
// taken as their buffers grow: a body that needs more than is left is
// refused at once with 503 and Retry-After, nothing buffered
// beyond it, and the budget is whole again when the readers end. And a
// signed delivery larger than 64 KiB is taken with its Content-Length as it
// is when chunked (one limit, pullrequests.MaxBody).
func TestHookBodiesShareOneBudget(t *testing.T) {
	// Two bodies of 100 KiB each hold a buffer of 128 KiB: the budget.
	const budget = 256 << 10
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
		d.HookBodyBudget = budget
	}
	held := make(chan int64, 256) // the budget's use after each take and give
	testHookBudget = func(used int64) { held <- used }
	t.Cleanup(func() { testHookBudget = nil })
	b.start(t, HubOptions{})
	until := func(what string, ok func(int64) bool) {
		t.Helper()
		for {
			select {
			case used := <-held:
				if ok(used) {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	addr := strings.TrimPrefix(b.srv.URL, "http://")

	// open sends the headers of a chunked delivery and n bytes of its body.
	open := func(n int) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /api/hooks/bitbucket HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nX-Event-Key: pr:opened\r\nX-Request-Id: r-1\r\n\r\n")
		fmt.Fprintf(c, "%x\r\n%s\r\n", n, strings.Repeat(" ", n))
		return c, bufio.NewReader(c)
	}
	var conns []net.Conn
	for range 2 {
		c, _ := open(100 << 10)
		conns = append(conns, c)
	}
	until("the two bodies to hold the whole budget", func(u int64) bool { return u == budget })
	c, r := open(10)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a body beyond the budget: %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, c := range conns {
		c.Close()
	}
	until("the budget to be given back", func(u int64) bool { return u == 0 })

	// The budget is given back: a signed delivery of 100 KiB sent with its
	// Content-Length is read whole and answered (ignored: nothing linked).
	body := `{"eventKey":"repo:refs_changed"}` + strings.Repeat(" ", 100<<10)
	a := b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "repo:refs_changed", "X-Request-Id", "r-2", "X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	if a.status != http.StatusAccepted {
		t.Fatalf("a signed 100 KiB delivery: %d %s", a.status, a.body)
	}
}

// TestHookTruncatedBodyIsTheCallersFault: a delivery whose sender stops
// before the body's length (its connection half-closed) was answered 500
// and logged as an ERROR, so anyone could fill the error log and the 5xx
// rate an alert watches by cutting posts short. It is 400, like a
// truncated JSON body on every other route.
func TestHookTruncatedBodyIsTheCallersFault(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})
	c, err := net.Dial("tcp", strings.TrimPrefix(b.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/hooks/bitbucket HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\nX-Event-Key: pr:opened\r\nX-Request-Id: r-1\r\n\r\n{\"eventKey\"")
	c.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a body cut short: %d, want 400", resp.StatusCode)
	}
}

// TestAsOfTheEarliestTimeIsNotNow: ?at=0001-01-01T00:00:00Z is Go's zero
// time, which the as-of answers took for "now": asked how a slot was before
// anything happened, they answered with its live view (and ?to= of the
// changes likewise with the range up to now). The earliest time is a moment
// before every event: the slot and the job did not exist (404).
func TestAsOfTheEarliestTimeIsNotNow(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	g := projtest.NewGen(store, 5)
	projtest.Must(t, g.Random(ctx, 1, 40))
	b := &bundle{store: store}
	b.start(t, HubOptions{})
	var name string
	for n := range g.Slots {
		name = n
	}
	const earliest = "0001-01-01T00:00:00Z"
	if a := b.do(t, "GET", "/api/slots/"+name+"?at="+earliest, nil); a.status != http.StatusNotFound {
		t.Errorf("slot %s at %s: %d %s, want 404 (before it existed)", name, earliest, a.status, a.body)
	}
	var ch struct {
		Changes []json.RawMessage `json:"changes"`
	}
	a := b.do(t, "GET", "/api/slots/"+name+"/changes?to="+earliest, nil)
	if a.status == http.StatusOK {
		a.decode(t, &ch)
	}
	if a.status != http.StatusOK || len(ch.Changes) != 0 {
		t.Errorf("changes of %s up to %s: %d, %d changes, want none", name, earliest, a.status, len(ch.Changes))
	}
}

// TestHookTricklingSendersDoNotHoldTheBudget: a body takes the budget
// for what its buffer holds, starting small, so 200 connections that sent
// a few bytes and stalled (until the body deadline) hold 100 KiB of a
// 256 KiB budget and a real delivery of 100 KiB still gets through. Taken
// a large step ahead of the bytes, they would spend it with no data sent.
func TestHookTricklingSendersDoNotHoldTheBudget(t *testing.T) {
	const budget, senders = 256 << 10, 200
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
		d.HookBodyBudget = budget
	}
	takes := make(chan int64, 2*senders+64)
	testHookBudget = func(used int64) { takes <- used }
	t.Cleanup(func() { testHookBudget = nil })
	b.start(t, HubOptions{})
	addr := strings.TrimPrefix(b.srv.URL, "http://")
	for range senders {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /api/hooks/bitbucket HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\nX-Event-Key: pr:opened\r\nX-Request-Id: r-1\r\n\r\n{\"eventKey\"")
	}
	for n := 0; n < senders; n++ { // each reader's first take
		select {
		case <-takes:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d trickling senders are being read", n, senders)
		}
	}
	body := `{"eventKey":"repo:refs_changed"}` + strings.Repeat(" ", 100<<10)
	a := b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "repo:refs_changed", "X-Request-Id", "r-2", "X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	if a.status != http.StatusAccepted {
		t.Fatalf("a signed 100 KiB delivery beside %d trickling senders: %d %s", senders, a.status, a.body)
	}
}
