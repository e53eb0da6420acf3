package httpapi

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// The waitlist routes: join, the answer's shape, and bad input refused
// with its status and nothing appended.
func TestWaitlistAPI(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithCancel(context.Background())
	var wl *waitlist.Service
	done := make(chan struct{})
	b.deps = func(d *Deps) {
		wl = waitlist.New(b.store, d.Commands.(*slots.Service), waitlist.Config{})
		go func() { defer close(done); _ = wl.Run(ctx) }()
		d.Waitlist = wl
	}
	b.start(t, HubOptions{})
	t.Cleanup(func() { cancel(); <-done })

	bob := bearerAs(b.tokenFor(t, "bob", auth.RoleMember, time.Hour))
	carol := bearerAs(b.tokenFor(t, "carol", auth.RoleMember, time.Hour))
	viewer := bearerAs(b.tokenFor(t, "vic", auth.RoleViewer, time.Hour))

	a := b.do(t, "POST", "/api/waitlist", `{"duration":"2h","note":"demo at 3"}`, bob...)
	if a.status != http.StatusCreated {
		t.Fatalf("join: %d %s", a.status, a.body)
	}
	var v WaitlistAnswer
	a.decode(t, &v)
	if len(v.Entries) != 1 || v.Entries[0].Who != "bob" || v.Entries[0].Position != 1 || v.Entries[0].EstimatedWait.Seconds != nil ||
		v.Entries[0].EstimatedWait.Basis == "" || v.OfferTTL != "15m0s" {
		t.Fatalf("join answer = %s", a.body)
	}
	bobEntry := v.Entries[0].ID

	a = b.do(t, "GET", "/api/waitlist", nil, viewer...)
	if a.status != http.StatusOK {
		t.Fatalf("viewer GET: %d %s", a.status, a.body)
	}

	cases := []struct {
		what   string
		method string
		path   string
		body   any
		hdr    []string
		status int
	}{
		{"joining twice", "POST", "/api/waitlist", `{"duration":"1h"}`, bob, http.StatusConflict},
		{"beyond the maximum occupancy", "POST", "/api/waitlist", `{"duration":"800h"}`, carol, http.StatusUnprocessableEntity},
		{"bad duration", "POST", "/api/waitlist", `{"duration":"later"}`, carol, http.StatusBadRequest},
		{"unknown field", "POST", "/api/waitlist", `{"duration":"1h","slot":"x"}`, carol, http.StatusBadRequest},
		{"viewer joins", "POST", "/api/waitlist", `{"duration":"1h"}`, viewer, http.StatusForbidden},
		{"someone else's entry", "DELETE", "/api/waitlist/" + bobEntry, nil, carol, http.StatusForbidden},
		{"someone else's offer", "POST", "/api/waitlist/" + bobEntry + "/accept", nil, carol, http.StatusForbidden},
		{"declining nothing", "POST", "/api/waitlist/" + bobEntry + "/decline", nil, bob, http.StatusConflict},
		{"accepting nothing", "POST", "/api/waitlist/" + bobEntry + "/accept", nil, bob, http.StatusConflict},
		{"bad id", "POST", "/api/waitlist/..%2f/accept", nil, bob, http.StatusBadRequest},
		{"member reorders", "POST", "/api/waitlist/" + bobEntry + "/reorder", `{"position":1,"reason":"x"}`, bob, http.StatusForbidden},
		{"reorder without reason", "POST", "/api/waitlist/" + bobEntry + "/reorder", `{"position":1}`, nil, http.StatusUnprocessableEntity},
	}
	for _, c := range cases {
		before := b.head(t)
		a := b.do(t, c.method, c.path, c.body, c.hdr...)
		if a.status != c.status {
			t.Errorf("%s: %d, want %d: %s", c.what, a.status, c.status, a.body)
		}
		if h := b.head(t); h != before {
			t.Errorf("%s: appended (head %d → %d)", c.what, before, h)
		}
	}

	a = b.do(t, "DELETE", "/api/waitlist/"+bobEntry, nil, bob...)
	if a.status != http.StatusOK {
		t.Fatalf("leave: %d %s", a.status, a.body)
	}
	a.decode(t, &v)
	if len(v.Entries) != 0 {
		t.Fatalf("after leaving: %s", a.body)
	}
}
