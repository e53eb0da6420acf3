package projections_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
	"go.uber.org/goleak"
)

// flaky fails some Apply calls before applying anything, like a database
// that drops the connection.
type flaky struct {
	*memory.Store
	mu    sync.Mutex
	calls int
	fail  map[int]bool
}

var errInjected = errors.New("injected apply failure")

func (f *flaky) Apply(ctx context.Context, evs []projections.Event) ([]projections.Change, error) {
	f.mu.Lock()
	f.calls++
	fail := f.fail[f.calls]
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return f.Store.Apply(ctx, evs)
}

func TestRunnerRetriesAFailedBatchFromTheCheckpoint(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 21).Random(ctx, 5, 2000))
	target := &flaky{Store: memory.New(log), fail: map[int]bool{2: true, 3: true, 7: true}}
	var reported []error
	var mu sync.Mutex
	r := projections.NewRunner(log, target, projections.RunnerOptions{
		MaxBatch: 100, RetryDelay: time.Millisecond,
		OnError: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() },
	})
	feed := r.Subscribe(1 << 14)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	head, _ := log.Head(ctx)
	projtest.Must(t, r.WaitFor(ctx, head))
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
	mu.Lock()
	if len(reported) != 3 || !errors.Is(reported[0], errInjected) || !errors.Is(r.Err(), errInjected) {
		t.Errorf("reported errors = %v (last %v), want the 3 injected ones", reported, r.Err())
	}
	mu.Unlock()
	// The feed saw every position once, in order, despite the retries.
	for want := events.Position(1); want <= head; want++ {
		c := <-feed.C
		if c.Position != want {
			t.Fatalf("feed: got %d, want %d", c.Position, want)
		}
	}
	select {
	case c, ok := <-feed.C:
		if ok {
			t.Fatalf("feed has an extra change at %d", c.Position)
		}
	default:
	}
	ref := memory.New(log)
	projtest.Catchup(t, log, ref, 0)
	diffs, err := projections.Compare(ctx, target, ref)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
}

func TestRunnerEndsWhenTheStoreCloses(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	r := projections.NewRunner(log, memory.New(log), projections.RunnerOptions{})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	projtest.Must(t, log.Close())
	select {
	case err := <-done:
		if !errors.Is(err, events.ErrClosed) {
			t.Fatalf("Run = %v, want events.ErrClosed", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not end after the store closed")
	}
}

// damagedLog is a store whose record at position bad cannot be read:
// every subscription that reaches it ends with an error wrapping
// events.ErrCorrupt, as the embedded store's does on a checksum mismatch.
type damagedLog struct {
	events.Store
	bad   events.Position
	tries sync.Mutex
	subs  int
}

func (d *damagedLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	d.tries.Lock()
	d.subs++
	d.tries.Unlock()
	return d.Store.SubscribeAll(ctx, after, f, func(ctx context.Context, ev events.RecordedEvent) error {
		if ev.Position == d.bad {
			return fmt.Errorf("boltstore: /data/events.db: record at position %d: %w: record checksum mismatch", ev.Position, events.ErrCorrupt)
		}
		return h(ctx, ev)
	})
}

// A damaged store is not retried forever: Run returns the ErrCorrupt error
// after the first attempt (a retry would read the same bytes), so that
// whoever waits for the read model (serve's start-up, verify) can stop and
// say why instead of hanging.
func TestRunnerStopsOnADamagedStore(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 7).Random(ctx, 3, 50))
	d := &damagedLog{Store: log, bad: 30}
	var reported []error
	r := projections.NewRunner(d, memory.New(log), projections.RunnerOptions{
		RetryDelay: time.Millisecond,
		OnError:    func(err error) { reported = append(reported, err) },
	})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "position 30") {
			t.Fatalf("Run = %v, want the ErrCorrupt error naming position 30", err)
		}
	case <-ctx.Done():
		t.Fatalf("Run still retrying a damaged store (%d subscriptions)", d.subs)
	}
	if d.subs != 1 || len(reported) != 0 {
		t.Fatalf("%d subscriptions and %d retried errors, want 1 and none", d.subs, len(reported))
	}
	if p := r.Position(); p >= 30 {
		t.Fatalf("runner at %d, past the damaged record", p)
	}
}

func TestWaitForHonoursItsContext(t *testing.T) {
	log := memstore.New()
	r := projections.NewRunner(log, memory.New(log), projections.RunnerOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.WaitFor(ctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFor on a runner that never ran = %v, want context.Canceled", err)
	}
	if err := r.WaitFor(context.Background(), 0); err != nil {
		t.Fatalf("WaitFor(0) = %v", err)
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// refusingLog refuses every subscription as a store does a user it will not
// serve (events.ErrPermanent), counting them.
type refusingLog struct {
	events.Store
	mu   sync.Mutex
	subs int
}

func (l *refusingLog) SubscribeAll(context.Context, events.Position, events.Filter, events.Handler) error {
	l.mu.Lock()
	l.subs++
	l.mu.Unlock()
	return &events.PermanentError{Reason: "the user may not read $all", Err: errors.New("PermissionDenied")}
}

// Issue 24, item 2: a permanent refusal stops the runner (it used to retry
// every RetryDelay for ever while looking healthy), and Err names it.
func TestRunnerStopsOnPermanentRefusal(t *testing.T) {
	log := &refusingLog{Store: memstore.New()}
	r := projections.NewRunner(log, memory.New(log), projections.RunnerOptions{RetryDelay: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := r.Run(ctx)
	if !errors.Is(err, events.ErrPermanent) {
		t.Fatalf("Run: %v, want the permanent refusal", err)
	}
	if !errors.Is(r.Err(), events.ErrPermanent) {
		t.Fatalf("Err() = %v", r.Err())
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if log.subs != 1 {
		t.Fatalf("%d subscriptions, want 1", log.subs)
	}
}
