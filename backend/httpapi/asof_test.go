package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// withoutAsOf is an answer's JSON without as_of, as a canonical string.
func withoutAsOf(t *testing.T, body []byte) (string, projections.AsOf) {
	t.Helper()
	var m map[string]any
	projtest.Must(t, json.Unmarshal(body, &m))
	var as projections.AsOf
	raw, _ := json.Marshal(m["as_of"])
	projtest.Must(t, json.Unmarshal(raw, &as))
	delete(m, "as_of")
	out, _ := json.Marshal(m)
	return string(out), as
}

// canonical is a view's JSON through a map, so key order matches withoutAsOf.
func canonical(t *testing.T, v any) string {
	t.Helper()
	raw, _ := json.Marshal(v)
	var m map[string]any
	projtest.Must(t, json.Unmarshal(raw, &m))
	out, _ := json.Marshal(m)
	return string(out)
}

// GET /api/slots/{name}?at= and /api/jobs/{id}?at= answer, at positions of
// a generated history, the views a read model replayed up to exactly that
// position holds, plus as_of; before a slot existed: 404.
func TestSlotAndJobAsOfOverHTTP(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	g := projtest.NewGen(store, 281)
	projtest.Must(t, g.Random(ctx, 3, 500))
	head, err := store.Head(ctx)
	projtest.Must(t, err)
	b := &bundle{store: store}
	b.start(t, HubOptions{})

	ref := memory.New(store)
	for _, p := range []events.Position{1, 7, 60, 233, 400, head} {
		_, err := projections.Replay(ctx, store, ref, p, 0)
		projtest.Must(t, err)
		for name := range g.Slots {
			a := b.do(t, "GET", fmt.Sprintf("/api/slots/%s?at=%d", name, p), nil)
			want, werr := ref.Slot(ctx, name)
			if werr != nil {
				if a.status != 404 {
					t.Errorf("slot %s at %d (before it existed): %d %s", name, p, a.status, a.body)
				}
				continue
			}
			if a.status != 200 {
				t.Fatalf("slot %s at %d: %d %s", name, p, a.status, a.body)
			}
			got, as := withoutAsOf(t, a.body)
			if got != canonical(t, want) {
				t.Errorf("slot %s at %d:\n as of:    %s\n replayed: %s", name, p, got, canonical(t, want))
			}
			if as.Position != p {
				t.Errorf("slot %s at %d: as_of.position %d", name, p, as.Position)
			}
			page, err := ref.JobsBySlot(ctx, name, "", projections.MaxLimit, "")
			projtest.Must(t, err)
			for _, j := range page.Jobs {
				a := b.do(t, "GET", fmt.Sprintf("/api/jobs/%s?at=%d", j.ID, p), nil)
				got, _ := withoutAsOf(t, a.body)
				if a.status != 200 || got != canonical(t, j) {
					t.Errorf("job %s at %d: %d\n as of:    %s\n replayed: %s", j.ID, p, a.status, got, canonical(t, j))
				}
			}
		}
	}
	for _, bad := range []string{"0", "-1", "abc", "2026-13-01T00:00:00Z", "2026-01-02", "1&at=2", "18446744073709551616"} {
		a := b.do(t, "GET", "/api/slots/s000?at="+bad, nil)
		var e errorBody
		_ = json.Unmarshal(a.body, &e)
		if a.status != 400 || e.Error.Details["field"] != "at" {
			t.Errorf("?at=%s: %d %s, want 400 naming at", bad, a.status, a.body)
		}
		if a := b.do(t, "GET", "/api/jobs/x?at="+bad, nil); a.status != 400 {
			t.Errorf("job ?at=%s: %d", bad, a.status)
		}
	}
}

// GET /api/slots/{name}/changes lists each field an event changed with
// that event, its actor and time: an occupancy, the reset job that became
// active, the resources it deleted, the slot vacated and the job finished.
func TestSlotChangesOverHTTP(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	g := projtest.NewGen(store, 282)
	s, err := g.Register(ctx, "dune")
	projtest.Must(t, err)
	registered, _ := store.Head(ctx)
	projtest.Must(t, g.Occupy(ctx, s, "alice"))
	occupied, _ := store.Head(ctx)
	job, err := g.Job(ctx, s, events.KindReset, projtest.Succeed)
	projtest.Must(t, err)
	b := &bundle{store: store}
	b.start(t, HubOptions{})

	var out struct {
		Slot    string                   `json:"slot"`
		From    projections.AsOf         `json:"from"`
		To      projections.AsOf         `json:"to"`
		Changes []projections.SlotChange `json:"changes"`
	}
	a := b.do(t, "GET", fmt.Sprintf("/api/slots/dune/changes?from=%d", registered), nil)
	if a.status != 200 {
		t.Fatalf("changes: %d %s", a.status, a.body)
	}
	a.decode(t, &out)
	if out.From.Position != registered || !out.To.Live {
		t.Errorf("from %+v to %+v", out.From, out.To)
	}
	seen := map[string]projections.SlotChange{}
	for _, c := range out.Changes {
		key := c.Field + " " + c.Change + " " + fmt.Sprint(c.After)
		if c.Change == "lost" {
			key = c.Field + " lost " + fmt.Sprint(c.Before)
		}
		seen[key] = c
		if c.Position <= registered || c.Type == "" || c.Actor == "" || c.Time.IsZero() {
			t.Errorf("change without its event: %+v", c)
		}
	}
	if c, ok := seen["occupant  alice"]; !ok || c.Type != "SlotOccupied" || c.Actor != "alice" || c.Position != occupied {
		t.Errorf("occupant alice: %+v (all: %s)", c, a.body)
	}
	if c, ok := seen[fmt.Sprintf("active_job  map[id:%s kind:reset]", job)]; !ok || c.Type != "JobAccepted" {
		t.Errorf("active job %s: %+v (all: %s)", job, c, a.body)
	}
	if c, ok := seen["resource lost map[id:db-dune kind:database]"]; !ok || c.Type != "DBDeleted" {
		t.Errorf("database lost: %+v (all: %s)", c, a.body)
	}
	if c, ok := seen["occupant  <nil>"]; !ok || c.Type != "SlotVacated" {
		t.Errorf("occupant cleared: %+v (all: %s)", c, a.body)
	}
	if c, ok := seen["lifecycle  vacant"]; !ok || c.Position <= occupied {
		t.Errorf("lifecycle back to vacant: %+v (all: %s)", c, a.body)
	}
	// from after to, a bad value, an unknown slot.
	for path, want := range map[string]int{
		fmt.Sprintf("/api/slots/dune/changes?from=%d&to=%d", occupied, registered): 400,
		"/api/slots/dune/changes?to=soon":                                          400,
		"/api/slots/nope/changes":                                                  404,
		"/api/slots/dune/changes?limit=0":                                          400,
		"/api/slots/dune/changes?limit=5001":                                       400,
	} {
		if a := b.do(t, "GET", path, nil); a.status != want {
			t.Errorf("%s: %d %s, want %d", path, a.status, a.body, want)
		}
	}

	// Paged (issue 37): limit=2 pages, each from the last one's next_from
	// up to the first page's to.position, list the same changes.
	var pages []projections.SlotChange
	next := ""
	for i := 0; ; i++ {
		var page struct {
			To       projections.AsOf         `json:"to"`
			Changes  []projections.SlotChange `json:"changes"`
			NextFrom events.Position          `json:"next_from"`
		}
		a := b.do(t, "GET", "/api/slots/dune/changes?limit=2"+next, nil)
		if a.status != 200 {
			t.Fatalf("page %d: %d %s", i, a.status, a.body)
		}
		a.decode(t, &page)
		if len(page.Changes) > 2+4 || i > len(out.Changes) {
			t.Fatalf("page %d: %d changes (%s)", i, len(page.Changes), a.body)
		}
		pages = append(pages, page.Changes...)
		if page.NextFrom == 0 {
			break
		}
		next = fmt.Sprintf("&from=%d&to=%d", page.NextFrom, page.To.Position)
	}
	all := b.do(t, "GET", "/api/slots/dune/changes", nil)
	var whole struct {
		Changes []projections.SlotChange `json:"changes"`
	}
	all.decode(t, &whole)
	got, _ := json.Marshal(pages)
	want, _ := json.Marshal(whole.Changes)
	if len(whole.Changes) < 6 || string(got) != string(want) {
		t.Errorf("pages of 2:\n %s\nwhole:\n %s", got, want)
	}

	// Newest first: the latest two changes' events, then older pages
	// through next_to; put back in order, the same list.
	var newest [][]projections.SlotChange
	next = ""
	for i := 0; ; i++ {
		var page struct {
			Changes []projections.SlotChange `json:"changes"`
			NextTo  events.Position          `json:"next_to"`
		}
		a := b.do(t, "GET", "/api/slots/dune/changes?order=newest&limit=2"+next, nil)
		if a.status != 200 || i > len(whole.Changes) {
			t.Fatalf("newest page %d: %d %s", i, a.status, a.body)
		}
		a.decode(t, &page)
		newest = append([][]projections.SlotChange{page.Changes}, newest...)
		if page.NextTo == 0 {
			break
		}
		next = fmt.Sprintf("&to=%d", page.NextTo)
	}
	var back []projections.SlotChange
	for _, p := range newest {
		back = append(back, p...)
	}
	got, _ = json.Marshal(back)
	if string(got) != string(want) {
		t.Errorf("newest pages of 2:\n %s\nwhole:\n %s", got, want)
	}
	if a := b.do(t, "GET", "/api/slots/dune/changes?order=sideways", nil); a.status != 400 {
		t.Errorf("order=sideways: %d %s", a.status, a.body)
	}
}

// GET /api/freshness: a caught-up read model is live; a page at an older
// position is that many events behind and the oldest event it misses is
// that old; a read model below the head the process started with is
// rebuilding.
func TestFreshness(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	projtest.Must(t, projtest.NewGen(store, 283).Random(ctx, 2, 50))
	b := &bundle{store: store}
	b.start(t, HubOptions{})
	head := b.head(t)
	var f freshness
	b.do(t, "GET", "/api/freshness", nil).decode(t, &f)
	if f.Head != head || f.ReadModel != head || f.BehindEvents != 0 || f.Rebuilding {
		t.Errorf("caught up: %+v, head %d", f, head)
	}
	b.do(t, "GET", "/api/freshness?position=10", nil).decode(t, &f)
	if f.BehindEvents != uint64(head-10) || f.BehindSeconds <= 0 {
		t.Errorf("page at 10: %+v, head %d", f, head)
	}
	// The same log, so the same token (names are unique across subjects).
	r := &bundle{store: store, token: b.token}
	r.start(t, HubOptions{LiveFrom: head + 1000})
	r.do(t, "GET", "/api/freshness", nil).decode(t, &f)
	if !f.Rebuilding {
		t.Errorf("below LiveFrom: %+v", f)
	}
}
