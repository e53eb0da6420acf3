package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// flakyReads is a read model whose database can be taken down: every query
// then fails as the PostgreSQL read model's do (projections.ErrUnavailable).
type flakyReads struct {
	projections.ReadModel
	down *atomic.Bool
}

func (f flakyReads) err() error {
	if f.down.Load() {
		return fmt.Errorf("%w: connection refused", projections.ErrUnavailable)
	}
	return nil
}

func (f flakyReads) Position(ctx context.Context) (events.Position, error) {
	if err := f.err(); err != nil {
		return 0, err
	}
	return f.ReadModel.Position(ctx)
}

func (f flakyReads) ListSlots(ctx context.Context) ([]projections.SlotView, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.ReadModel.ListSlots(ctx)
}

func (f flakyReads) Slot(ctx context.Context, name string) (projections.SlotView, error) {
	if err := f.err(); err != nil {
		return projections.SlotView{}, err
	}
	return f.ReadModel.Slot(ctx, name)
}

// TestReadModelOutage: with the read model down, reads are 503 with
// Retry-After (not 500 "internal error"), and commands decide from the log
// and answer their success: 202 "recorded" when the view cannot be read
// back (before: the occupy was appended, then answered 500), the release's
// ownership check from the log (before: 500 from the read model).
func TestReadModelOutage(t *testing.T) {
	down := &atomic.Bool{}
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		// Only the reads fail: the read-your-writes wait (on the
		// projection's position) still ends at once, so it keeps its
		// default bound — a 200 ms one turned a register on a loaded
		// machine into a 202.
		d.Reads = flakyReads{ReadModel: d.Reads, down: down}
	}
	b.start(t, HubOptions{})
	b.register(t, "s1")
	down.Store(true)

	a := b.do(t, http.MethodGet, "/api/slots", nil)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || a.apiError(t).Code != CodeUnavailable {
		t.Fatalf("read during the outage: %d %s (Retry-After %q)", a.status, a.body, a.header.Get("Retry-After"))
	}
	a = b.do(t, http.MethodPost, "/api/slots/s1/occupy", map[string]any{"until": time.Now().Add(time.Hour)})
	if a.status != http.StatusAccepted {
		t.Fatalf("occupy during the outage: %d %s, want 202", a.status, a.body)
	}
	evs, err := b.store.ReadStream(context.Background(), events.SlotStream("s1"), 0, 0, events.Forward)
	if err != nil || evs[len(evs)-1].Type != "SlotOccupied" {
		t.Fatalf("the occupy is not in the log: %v", err)
	}
	a = b.do(t, http.MethodPost, "/api/slots/s1/release", nil)
	if a.status != http.StatusAccepted {
		t.Fatalf("release of one's own slot during the outage: %d %s, want 202", a.status, a.body)
	}
}

// TestWritesRefusedAtOnceWhileTheStoreIsGoneOrChanged: while Writable
// says the store is unreachable or not the one started on, a state change
// is answered at once with its 503 and its code, and nothing is appended.
func TestWritesRefusedAtOnceWhileTheStoreIsGoneOrChanged(t *testing.T) {
	var state atomic.Pointer[error]
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.Writable = func() error {
			if e := state.Load(); e != nil {
				return *e
			}
			return nil
		}
	}
	b.start(t, HubOptions{})
	b.register(t, "s1")
	head := b.head(t)
	for _, c := range []struct {
		err  error
		code Code
	}{
		{fmt.Errorf("%w: no answer within 2s", events.ErrUnavailable), CodeUnavailable},
		{fmt.Errorf("%w: replaced", events.ErrStoreChanged), CodeStoreChanged},
	} {
		state.Store(&c.err)
		a := b.do(t, http.MethodPost, "/api/slots/s1/occupy", map[string]any{"until": time.Now().Add(time.Hour)})
		if a.status != http.StatusServiceUnavailable || a.apiError(t).Code != c.code || a.header.Get("Retry-After") == "" {
			t.Fatalf("occupy while %v: %d %s", c.err, a.status, a.body)
		}
	}
	if h := b.head(t); h != head {
		t.Fatalf("refused commands appended: head %d → %d", head, h)
	}
}

func (f flakyReads) ListPullRequests(ctx context.Context) ([]projections.PRView, events.Position, error) {
	if err := f.err(); err != nil {
		return nil, 0, err
	}
	return f.ReadModel.(projections.PRLister).ListPullRequests(ctx)
}
