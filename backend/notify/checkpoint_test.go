package notify_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// seenLog is the store as one notifier run sees it: where its
// subscriptions start, which job streams it reads, and it can refuse the
// appends a process that died right after a POST never made (the
// delivery's outcome and any checkpoint).
type seenLog struct {
	events.Store
	dead    bool
	mu      sync.Mutex
	from    []events.Position
	streams map[string]int
}

func (s *seenLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	s.mu.Lock()
	s.from = append(s.from, after)
	s.mu.Unlock()
	return s.Store.SubscribeAll(ctx, after, f, h)
}

func (s *seenLog) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	s.mu.Lock()
	if s.streams == nil {
		s.streams = map[string]int{}
	}
	s.streams[stream]++
	s.mu.Unlock()
	return s.Store.ReadStream(ctx, stream, from, max, dir)
}

func (s *seenLog) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if s.dead && (strings.HasPrefix(stream, events.CheckpointStreamPrefix) || evs[0].Type == "NotificationDelivered") {
		return events.AppendResult{}, context.Canceled // the process is gone
	}
	return s.Store.Append(ctx, stream, exp, evs...)
}

// runOn starts a notifier on st; postTimeout bounds a POST and so how long
// an attempt with no recorded outcome stays open.
func runOn(t *testing.T, st events.Store, h *hook, postTimeout time.Duration) (stop func()) {
	n := notify.New(st, notify.Config{WebhookURL: h.srv.URL, BaseURL: "http://dash.local/", RetryInitial: 5 * time.Millisecond,
		HTTP: &http.Client{Timeout: postTimeout}, CheckpointEvery: 20 * time.Millisecond,
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

// A restarted notifier starts from its checkpoint: it reads none of the
// finished deliveries' streams again and sends none of them again. A crash
// after a POST and before its outcome (and before any checkpoint covering
// it) sends that message again: delivery is at least once, never lost.
//
// Not parallel: its bursts of deliveries would push the timing-sensitive
// webhook tests past their short POST deadlines.
func TestNotifierRestartsFromItsCheckpoint(t *testing.T) {
	st := memstore.New()
	defer st.Close()
	h := newHook(t)
	h.got = make(chan notify.Message, 512)
	const old = 120
	for i := range old {
		id := fmt.Sprintf("old%03d", i)
		appendJob(t, st, id, "alpha", events.JobQueued{JobID: id, Kind: events.KindReset, Slot: "alpha"}, events.JobSucceeded{JobID: id})
	}
	stop := runOn(t, &seenLog{Store: st}, h, 10*time.Second)
	for range old {
		h.next(t)
	}
	for i := range old {
		waitSettled(t, st, fmt.Sprintf("old%03d", i), 1)
	}
	stop()
	cps, err := st.ReadStream(context.Background(), events.CheckpointStream("notify"), 0, 0, events.Forward)
	if err != nil {
		t.Fatalf("no checkpoint after the first run: %v", err)
	}
	p, _ := events.Decode(cps[len(cps)-1])
	mark := p.(events.ConsumerCheckpointed).Position
	if last, _ := st.ReadStream(context.Background(), events.JobStream(fmt.Sprintf("old%03d", old-1)), 0, 0, events.Forward); mark < last[1].Position {
		// The Runner's position follows the log's head (the outcomes
		// recorded after it too), so the mark may pass the last
		// terminal event; it must not stop short of it.
		t.Fatalf("checkpoint at %d, want at least the last terminal event %d", mark, last[1].Position)
	}

	// Run 2 posts j1's message and dies before recording its outcome or
	// a checkpoint.
	dying := &seenLog{Store: st, dead: true}
	stop = runOn(t, dying, h, 200*time.Millisecond)
	appendJob(t, st, "j1", "beta", events.JobQueued{JobID: "j1", Kind: events.KindReset, Slot: "beta"}, events.JobSucceeded{JobID: "j1"})
	if m := h.next(t); !strings.Contains(m.Text, "slot beta") {
		t.Fatalf("message: %s", m.Text)
	}
	stop()

	// Run 3 starts from run 1's checkpoint and sends j1's message again
	// (after the dead attempt's deadline), and nothing older.
	posts := h.posts.Load()
	seen := &seenLog{Store: st}
	stop = runOn(t, seen, h, 10*time.Second)
	defer stop()
	if m := h.next(t); !strings.Contains(m.Text, "slot beta") {
		t.Fatalf("message after the restart: %s", m.Text)
	}
	waitSettled(t, st, "j1", 1)
	if got := h.posts.Load() - posts; got != 1 {
		t.Errorf("the restart posted %d times, want once (j1 again)", got)
	}
	for _, l := range []*seenLog{dying, seen} {
		l.mu.Lock()
		if len(l.from) != 1 || l.from[0] != mark {
			t.Errorf("a restart subscribed from %v, want the checkpoint %d", l.from, mark)
		}
		for s := range l.streams {
			if strings.Contains(s, "old") {
				t.Errorf("a restart read %s, a delivery settled before its checkpoint", s)
			}
		}
		l.mu.Unlock()
	}
}
