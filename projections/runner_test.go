package projections_test

import (
	"context"
	"errors"
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
