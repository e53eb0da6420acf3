package slots_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// t0 is where the tests' fake clocks start.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// watchedLog is the store as one scheduler run sees it: it records where
// its subscriptions start and how many slot events they deliver, and can
// refuse checkpoint appends (a crash after a side effect, before the
// checkpoint that would cover it).
type watchedLog struct {
	events.Store
	noCheckpoints bool
	mu            sync.Mutex
	from          []events.Position
	delivered     int
	reached       events.Position
	reachedCh     chan struct{}
	want          events.Position
}

func (w *watchedLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	w.mu.Lock()
	w.from = append(w.from, after)
	w.mu.Unlock()
	return w.Store.SubscribeAll(ctx, after, f, func(ctx context.Context, ev events.RecordedEvent) error {
		w.mu.Lock()
		w.delivered++
		w.mu.Unlock()
		// "Reached" once the consumer has dealt with the event, not when
		// it was handed over: a stop right after must find it folded.
		if err := h(ctx, ev); err != nil {
			return err
		}
		w.mu.Lock()
		w.reached = ev.Position
		if w.reachedCh != nil && ev.Position >= w.want {
			close(w.reachedCh)
			w.reachedCh = nil
		}
		w.mu.Unlock()
		return nil
	})
}

func (w *watchedLog) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if w.noCheckpoints && strings.HasPrefix(stream, events.CheckpointStreamPrefix) {
		return events.AppendResult{}, context.DeadlineExceeded // the process died first
	}
	return w.Store.Append(ctx, stream, exp, evs...)
}

// runScheduler starts RunDeadlines on log and returns its stop function,
// which waits for it to return.
func runScheduler(t *testing.T, log events.Store, clk clock.Clock) func() {
	t.Helper()
	svc := slots.NewService(log, slots.Config{DeadlineReset: true, Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.RunDeadlines(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunDeadlines: %v", err)
		}
	}
}

// deadlineResets lists the slots of the deadline resets in the log, in order.
func deadlineResets(t *testing.T, log events.Store) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, err := log.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	err = log.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Type == "JobQueued" && ev.Meta.Actor == slots.ActorDeadline {
			p, err := events.Decode(ev)
			if err != nil {
				return err
			}
			out = append(out, p.(events.JobQueued).Slot)
		}
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if ctx.Err() == nil {
		t.Fatal(err)
	}
	return out
}

// waitForReset waits until the log holds a deadline reset of slot.
func waitForReset(t *testing.T, log events.Store, slot string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := log.SubscribeAll(ctx, 0, events.Filter{EventTypes: []string{"JobQueued"}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Meta.Actor == slots.ActorDeadline && strings.Contains(string(ev.Data), `"slot":"`+slot+`"`) {
			cancel()
		}
		return nil
	})
	if ctx.Err() != context.Canceled {
		t.Fatalf("no deadline reset of %s: %v", slot, err)
	}
}

// shiftedPool is a log with alpha, beta and gamma registered through a
// service on a clock the test moves forward; the log closes with the test.
func shiftedPool(t *testing.T) (*memstore.Store, *clock.Fake, *slots.Service) {
	t.Helper()
	log := memstore.New()
	t.Cleanup(func() { log.Close() })
	clk := clock.NewFake(t0)
	svc := slots.NewService(log, slots.Config{Clock: clk})
	for _, n := range []string{"alpha", "beta", "gamma"} {
		register(t, svc, n)
	}
	return log, clk, svc
}

// The scheduler starts from its checkpoint: a restart folds only the slot
// events after it, not the history before. A crash after it queued a reset
// and before a checkpoint covered it does not make the next run queue that
// reset again, and a deadline that passed while nothing ran still fires.
func TestDeadlinesRestartFromTheirCheckpoint(t *testing.T) {
	ctx := context.Background()
	log, clk, svc := shiftedPool(t)
	now := clk.Now()
	for n, until := range map[string]time.Time{"alpha": now.Add(time.Hour), "beta": now.Add(2 * time.Hour)} {
		if err := svc.Occupy(ctx, alice, n, slots.OccupyCmd{Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	// History: alpha extended 1,200 times.
	for i := 1; i <= 1200; i++ {
		if err := svc.Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: now.Add(time.Hour + time.Duration(i)*time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	history := head(t, log)

	// Run 1 folds everything and leaves a checkpoint when it stops.
	w1 := &watchedLog{Store: log, reachedCh: make(chan struct{}), want: history}
	reached := w1.reachedCh
	stop := runScheduler(t, w1, clk)
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the first run did not fold the history")
	}
	stop()
	cp, err := log.ReadStream(ctx, events.CheckpointStream("deadlines"), 0, 0, events.Forward)
	if err != nil || len(cp) == 0 {
		t.Fatalf("no checkpoint after the first run: %v", err)
	}
	p, _ := events.Decode(cp[len(cp)-1])
	// The newest covers the whole history (and the checkpoints written
	// while folding it, which are no slot events).
	last := p.(events.ConsumerCheckpointed).Position
	if last < history || last >= cp[len(cp)-1].Position {
		t.Fatalf("checkpoint at %d, want from the last slot event %d to the checkpoint's own %d", last, history, cp[len(cp)-1].Position)
	}

	// While nothing runs, beta's deadline passes and gamma is occupied
	// with a deadline a moment after the next start.
	clk.Set(t0.Add(2*time.Hour + time.Second))
	if err := svc.Occupy(ctx, alice, "gamma", slots.OccupyCmd{Until: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}

	// Run 2 starts from the checkpoint, queues beta's reset and dies
	// before any checkpoint covers it.
	w2 := &watchedLog{Store: log, noCheckpoints: true}
	stop = runScheduler(t, w2, clk)
	waitForReset(t, log, "beta")
	stop()
	w2.mu.Lock()
	if len(w2.from) != 1 || w2.from[0] != last {
		t.Errorf("the restart subscribed from %v, want its checkpoint %d", w2.from, last)
	}
	if w2.delivered > 10 {
		t.Errorf("the restart folded %d slot events; the history before its checkpoint holds %d", w2.delivered, history)
	}
	w2.mu.Unlock()

	// Run 3 starts from the same (older) checkpoint: it refolds beta's
	// reset and does not queue it again; gamma's deadline, shortly after
	// its start, fires (its first pass, where a second beta reset would
	// have been queued, came before).
	clk.Set(t0.Add(3*time.Hour - 300*time.Millisecond))
	stop = runScheduler(t, &watchedLog{Store: log}, clk)
	bctx, bcancel := context.WithTimeout(ctx, 20*time.Second)
	defer bcancel()
	if err := clk.BlockUntil(bctx, 1); err != nil { // its first pass is done
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	waitForReset(t, log, "gamma")
	stop()
	if got := deadlineResets(t, log); strings.Join(got, ",") != "beta,gamma" {
		t.Fatalf("deadline resets %v, want beta then gamma, once each", got)
	}
}

// TestDeadlinesParkAnEventTheyCannotApply: a slot event whose payload does
// not decode (an import of a bad export, a bug) is parked — recorded with
// its position and error — and the scheduler goes on: another slot's
// deadline still queues its reset. Before, the fold's error ended the
// subscription, the scheduler stopped ("ERROR deadline scheduler stopped")
// and no deadline triggered a reset again.
func TestDeadlinesParkAnEventTheyCannotApply(t *testing.T) {
	ctx := context.Background()
	log, clk, svc := shiftedPool(t)
	occupy := func(n string, until time.Time) {
		t.Helper()
		if err := svc.Occupy(ctx, alice, n, slots.OccupyCmd{Until: until}); err != nil {
			t.Fatal(err)
		}
	}
	occupy("alpha", clk.Now().Add(time.Hour))
	// The bad event comes before beta's occupancy: a scheduler that stops
	// on it never learns of beta's deadline.
	bad, err := log.Append(ctx, events.SlotStream("alpha"), events.Any(), events.EventData{ID: "00000000-0000-4000-8000-0000000000b1",
		Type: "OccupancyExtended", Data: []byte(`{"until":"not a time"}`), Meta: events.Metadata{Actor: "test", Schema: 1}})
	if err != nil {
		t.Fatal(err)
	}
	occupy("beta", clk.Now().Add(time.Hour))
	clk.Advance(2 * time.Hour) // both deadlines passed

	health := consumer.NewHealth(slog.New(slog.NewTextHandler(io.Discard, nil)))
	sched := slots.NewService(log, slots.Config{DeadlineReset: true, Clock: clk, Health: health})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sched.RunDeadlines(runCtx) }()
	waitForReset(t, log, "beta")
	// And it still follows the log: a deadline set now, a moment away,
	// fires too.
	occupy("gamma", clk.Now().Add(300*time.Millisecond))
	clk.Advance(time.Second)
	waitForReset(t, log, "gamma")
	select {
	case err := <-done:
		t.Fatalf("the scheduler stopped: %v", err)
	default:
	}
	rep := health.Report()
	if rep.ParkedTotal != 1 || len(rep.Parked) != 1 {
		t.Fatalf("parked %+v, want the one bad event", rep)
	}
	if p := rep.Parked[0]; p.Consumer != "deadlines" || p.Position != bad.Position || p.Stream != "slot-alpha" || p.Type != "OccupancyExtended" || !strings.Contains(p.Error, "decode") {
		t.Errorf("parked %+v, want deadlines, slot-alpha@%d, OccupancyExtended, a decode error", p, bad.Position)
	}
	if err := health.Err(); err != nil {
		t.Errorf("a parked event made readiness fail: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunDeadlines: %v", err)
	}
}
