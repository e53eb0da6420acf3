package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"

	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// A job whose view left the bounded memory read model is served exactly as
// before: GET /api/jobs/:id, its events, the slot's job pages and the audit
// pages answer byte for byte what a server whose read model keeps
// everything answers.
func TestOldJobsAreServedAsBefore(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	g := projtest.NewGen(store, 2027)
	projtest.Must(t, g.Random(ctx, 4, 3000))

	bounded := memory.NewWithLimits(store, memory.Limits{RecentJobs: 2, RecentAudit: 10})
	small := &bundle{store: store, deps: func(d *Deps) { d.Reads = bounded }}
	small.start(t, HubOptions{})
	t.Cleanup(func() { store.Close() })
	full := &bundle{store: store, token: small.token} // one token: names are unique
	full.start(t, HubOptions{})
	// Both servers' tokens are in the log now; the bounded model catches up.
	_, err := projections.Replay(ctx, store, bounded, 0, 0)
	projtest.Must(t, err)
	head, err := store.Head(ctx)
	projtest.Must(t, err)
	projtest.Must(t, full.runner.WaitFor(ctx, head))
	if _, jobs := bounded.Held(); jobs > 4 {
		t.Fatalf("the bounded read model holds %d job views", jobs)
	}

	same := func(path string) []byte {
		t.Helper()
		a, b := full.do(t, "GET", path, nil), small.do(t, "GET", path, nil)
		if a.status != b.status || string(a.body) != string(b.body) {
			t.Fatalf("GET %s differs:\n  everything: %d %s\n  bounded:    %d %s", path, a.status, a.body, b.status, b.body)
		}
		return a.body
	}
	jobs := 0
	for name := range g.Slots {
		cursor := ""
		for {
			path := "/api/slots/" + name + "/jobs?limit=3"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			var page projections.Page
			projtest.Must(t, json.Unmarshal(same(path), &page))
			for _, j := range page.Jobs {
				same("/api/jobs/" + j.ID)
				same("/api/jobs/" + j.ID + "/events")
				jobs++
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		for _, kind := range []string{"reset", "teardown", "promote"} {
			same("/api/slots/" + name + "/jobs/latest?kind=" + kind)
		}
		same("/api/audit?limit=50&slot=" + url.QueryEscape(name))
	}
	if jobs < 50 {
		t.Fatalf("only %d jobs compared", jobs)
	}
	for after := 0; after < int(head); after += 997 {
		same(fmt.Sprintf("/api/audit?limit=200&after=%d", after))
	}
	same("/api/jobs/no-such-job")
}
