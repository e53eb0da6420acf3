package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// hook is a loopback webhook that records message bodies and can fail the
// first N posts.
type hook struct {
	srv   *httptest.Server
	fails atomic.Int32
	got   chan notify.Message
	posts atomic.Int32
}

func newHook(t *testing.T) *hook {
	h := &hook{got: make(chan notify.Message, 16)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.posts.Add(1)
		if h.fails.Add(-1) >= 0 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		var m notify.Message
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("webhook body %s: %v", b, err)
		}
		h.got <- m
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) next(t *testing.T) notify.Message {
	t.Helper()
	select {
	case m := <-h.got:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	return notify.Message{}
}

func appendJob(t *testing.T, st events.Store, id, slot string, evs ...events.Payload) {
	t.Helper()
	var data []events.EventData
	for _, p := range evs {
		data = append(data, events.New(p, events.Metadata{Actor: "worker:x", CorrelationID: "corr-" + id}))
	}
	if _, err := st.Append(context.Background(), events.JobStream(id), events.Any(), data...); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, st events.Store, h *hook) (stop func()) {
	n := notify.New(st, notify.Config{WebhookURL: h.srv.URL, BaseURL: "http://dash.local/", RetryInitial: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}
}

func TestNotifiesOncePerTerminalEvent(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	defer st.Close()
	h := newHook(t)
	h.fails.Store(2) // the first two posts get 502: retried with backoff
	appendJob(t, st, "j1", "alpha",
		events.JobQueued{JobID: "j1", Kind: events.KindTeardown, Slot: "alpha"},
		events.JobFailed{JobID: "j1", Reason: "HTTP 403", FailedStep: events.StepDeleteRepo,
			CompletedSteps: []string{events.StepDeleteDB, events.StepDeleteApp},
			Remaining:      []events.Resource{{Kind: events.ResRepository, ID: "SLOT/alpha"}, {Kind: events.ResProject, ID: "p1"}}})
	stop := run(t, st, h)
	m := h.next(t)
	for _, want := range []string{"teardown of slot alpha failed at step delete_repo", "delete_db, delete_app", "repository SLOT/alpha", "project p1", "http://dash.local/jobs/j1"} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Text)
		}
	}
	if len(m.Blocks) == 0 || !strings.Contains(m.Blocks[1].Elem[0].Text, "<http://dash.local/jobs/j1|") {
		t.Errorf("blocks = %+v", m.Blocks)
	}
	if got := h.posts.Load(); got != 3 {
		t.Errorf("%d posts, want 3 (two failures, one delivery)", got)
	}
	waitSettled(t, st, "j1", 1)
	stop()

	// A restart reads the same log: j1 is not notified again. The resumed
	// j1's success and j2 are (in log order, so j1's old event was passed).
	stop = run(t, st, h)
	defer stop()
	appendJob(t, st, "j1", "alpha", events.JobResumed{JobID: "j1"}, events.JobSucceeded{JobID: "j1"})
	if m := h.next(t); !strings.Contains(m.Text, "teardown of slot alpha succeeded") {
		t.Fatalf("second message: %s", m.Text)
	}
	appendJob(t, st, "j2", "beta", events.JobQueued{JobID: "j2", Kind: events.KindReset, Slot: "beta"}, events.JobSucceeded{JobID: "j2"})
	if m := h.next(t); !strings.Contains(m.Text, "reset of slot beta succeeded") {
		t.Fatalf("third message: %s", m.Text)
	}
	waitSettled(t, st, "j1", 2)
	evs, err := st.ReadStream(context.Background(), events.NotifyStream("j1"), 0, 0, events.Forward)
	// Three attempts of the failure's delivery (two failed, one delivered),
	// one of the success's: each attempt and its outcome.
	if err != nil || len(evs) != 8 {
		t.Fatalf("notify-j1 holds %d events (%v), want 8", len(evs), err)
	}
}

func TestTwoNotifiersSendOnce(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	defer st.Close()
	h := newHook(t)
	stop1 := run(t, st, h)
	defer stop1()
	stop2 := run(t, st, h)
	defer stop2()
	for _, id := range []string{"a", "b", "c"} {
		appendJob(t, st, id, "s", events.JobQueued{JobID: id, Kind: events.KindReset, Slot: "s"}, events.JobCancelled{JobID: id, By: "bob"})
	}
	appendJob(t, st, "z", "s", events.JobQueued{JobID: "z", Kind: events.KindReset, Slot: "s"}, events.JobSucceeded{JobID: "z"})
	seen := map[string]int{}
	for range 4 {
		m := h.next(t)
		for _, id := range []string{"a", "b", "c", "z"} {
			if strings.Contains(m.Text, "/jobs/"+id) {
				seen[id]++
			}
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %s notified %d times", id, n)
		}
	}
	// Both notifiers have passed every event once z's claim exists; a fifth
	// message would be a duplicate.
	for _, id := range []string{"a", "b", "c", "z"} {
		waitSettled(t, st, id, 1)
		evs, _ := st.ReadStream(context.Background(), events.NotifyStream(id), 0, 0, events.Forward)
		if len(evs) != 2 || evs[0].Type != "NotificationAttempted" || evs[1].Type != "NotificationDelivered" {
			t.Errorf("notify-%s has %d events, want one attempt and its delivery", id, len(evs))
		}
	}
	select {
	case m := <-h.got:
		t.Errorf("duplicate notification: %s", m.Text)
	default:
	}
}

// waitSettled waits until notify-<job> records n final outcomes
// (NotificationDelivered, or NotificationFailed with Final) and returns
// the stream.
func waitSettled(t *testing.T, st events.Store, job string, n int) []events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var evs []events.RecordedEvent
	settled := 0
	err := st.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.NotifyStream(job)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream != events.NotifyStream(job) {
			return nil
		}
		evs = append(evs, ev)
		p, _ := events.Decode(ev)
		switch e := p.(type) {
		case events.NotificationDelivered:
			settled++
		case events.NotificationFailed:
			if e.Final {
				settled++
			}
		}
		if settled >= n {
			cancel()
		}
		return nil
	})
	if settled < n {
		t.Fatalf("notify-%s: %d of %d deliveries settled (%v): %d events", job, settled, n, err, len(evs))
	}
	return evs
}
