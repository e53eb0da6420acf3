package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// gatedHistory is a history whose reads announce themselves on arrived and
// wait for release: a replay in flight, held there by the test.
type gatedHistory struct {
	log     projections.StreamReader
	arrived chan struct{}
	gate    chan struct{}
	// open lets reads through unannounced: the warm-up that builds the
	// server's checkpoints of the slot (projections.History shares that
	// build among concurrent questions), so that each question after it
	// is one read.
	open atomic.Bool
}

func (g *gatedHistory) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	if g.open.Load() {
		return g.log.ReadStream(ctx, stream, from, max, dir)
	}
	g.arrived <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.log.ReadStream(ctx, stream, from, max, dir)
}

// Issue 33 item 2: as-of and changes replay the slot's history; any viewer
// could run as many at once as they liked (20 concurrent tiny ranges: 3.8
// s and +400 MB). At most MaxReplaysPerSubject run per subject (one more:
// 429) and MaxReplays in all (one more: 503), both with Retry-After and
// without reading the log.
func TestReplaysAreBoundedPerSubjectAndInAll(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	at := fmt.Sprintf("?at=%d", b.head(t))
	b.stop()
	g := &gatedHistory{log: b.store, arrived: make(chan struct{}, 100), gate: make(chan struct{})}
	b.deps = func(d *Deps) {
		d.History = g
		d.MaxReplaysPerSubject, d.MaxReplays = 2, 3
	}
	b.start(t, HubOptions{})
	defer close(g.gate)
	va, vb := b.tokenFor(t, "va", auth.RoleViewer, time.Hour), b.tokenFor(t, "vb", auth.RoleViewer, time.Hour)
	// After the tokens: their events move the log's head, and a question
	// up to a new head extends the checkpoints first.
	g.open.Store(true)
	for _, path := range []string{"/api/slots/s1" + at, "/api/slots/s1/changes?from=1", "/api/slots/s1/changes"} {
		if a := b.do(t, "GET", path, nil); a.status != http.StatusOK {
			t.Fatalf("warm-up %s: %d %s", path, a.status, a.body)
		}
	}
	g.open.Store(false)
	send := func(tok, path string) chan answer {
		ch := make(chan answer, 1)
		go func() { ch <- b.do(t, "GET", path, nil, bearerAs(tok)...) }()
		return ch
	}
	var held []chan answer
	for i, path := range []string{"/api/slots/s1" + at, "/api/slots/s1/changes?from=1"} {
		held = append(held, send(va, path))
		select {
		case <-g.arrived:
		case a := <-held[i]:
			t.Fatalf("%s returned before reading: %d %s", path, a.status, a.body)
		}
	}
	refusedAt := func(what string, ch chan answer, status int) {
		t.Helper()
		select {
		case <-g.arrived:
			t.Fatalf("%s: a replay started beyond the cap", what)
		case a := <-ch:
			if a.status != status || a.header.Get("Retry-After") == "" {
				t.Fatalf("%s: %d (Retry-After %q) %s; want %d", what, a.status, a.header.Get("Retry-After"), a.body, status)
			}
		}
	}
	refusedAt("a third replay of one subject", send(va, "/api/slots/s1"+at), http.StatusTooManyRequests)
	held = append(held, send(vb, "/api/slots/s1"+at))
	<-g.arrived
	refusedAt("a fourth replay in all", send(vb, "/api/slots/s1/changes"), http.StatusServiceUnavailable)
	// A plain read is not a replay: it is never refused for them.
	if a := b.do(t, "GET", "/api/slots/s1", nil, bearerAs(va)...); a.status != http.StatusOK {
		t.Fatalf("plain read while replays are capped: %d %s", a.status, a.body)
	}
	for range 3 {
		g.gate <- struct{}{}
	}
	for _, ch := range held {
		if a := <-ch; a.status != http.StatusOK {
			t.Fatalf("held replay: %d %s", a.status, a.body)
		}
	}
	// The places were given back.
	ch := send(va, "/api/slots/s1"+at)
	<-g.arrived
	g.gate <- struct{}{}
	if a := <-ch; a.status != http.StatusOK {
		t.Fatalf("after the others: %d %s", a.status, a.body)
	}
}

// Issue 33 item 2 (answers sized) with issue 37's pages: a newest-first
// changes answer holds at most limit changes, never splitting one event's,
// and says next_to, the to to ask for the older ones; the pages together
// are the whole answer.
func TestSlotChangesArePaged(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.occupy(t, "s1")
	for i := 0; i < 6; i++ {
		a := b.do(t, "POST", "/api/slots/s1/extend", map[string]any{"until": time.Now().Add(2*time.Hour + time.Duration(i)*time.Minute)})
		if a.status != http.StatusOK {
			t.Fatalf("extend: %d %s", a.status, a.body)
		}
	}
	type page struct {
		Changes []projections.SlotChange `json:"changes"`
		NextTo  *events.Position         `json:"next_to"`
		To      projections.AsOf         `json:"to"`
	}
	var whole page
	b.do(t, "GET", "/api/slots/s1/changes?order=newest", nil).decode(t, &whole)
	if whole.NextTo != nil || len(whole.Changes) < 8 {
		t.Fatalf("unpaged: %d changes, next_to %v", len(whole.Changes), whole.NextTo)
	}
	var got []projections.SlotChange
	seen := map[events.Position]int{}
	path := "/api/slots/s1/changes?order=newest&limit=3"
	for pages := 0; ; pages++ {
		if pages > len(whole.Changes) {
			t.Fatal("paging does not end")
		}
		var p page
		a := b.do(t, "GET", path, nil)
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", path, a.status, a.body)
		}
		a.decode(t, &p)
		for _, c := range p.Changes {
			if pg, ok := seen[c.Position]; ok && pg != pages {
				t.Fatalf("%s: the changes of event %d are split over two pages", path, c.Position)
			}
			seen[c.Position] = pages
		}
		got = append(append([]projections.SlotChange(nil), p.Changes...), got...)
		if p.NextTo == nil {
			break
		}
		path = fmt.Sprintf("/api/slots/s1/changes?order=newest&limit=3&to=%d", *p.NextTo)
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(whole.Changes)
	if string(gj) != string(wj) {
		t.Fatalf("pages:\n %s\nwhole:\n %s", gj, wj)
	}
}
