package jobs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// TestSharedRead: concurrent waits share one read of the build queue; a
// waiting reader whose context ends returns at once; a good answer serves
// for its freshness, a failed one is not kept.
func TestSharedRead(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	var s sharedRead[int]
	var fetches atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	fetch := func(context.Context) (int, error) {
		fetches.Add(1)
		started <- struct{}{}
		<-release
		return 7, nil
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	got := make([]int, 5)
	wg.Add(1)
	go func() { defer wg.Done(); got[0], _ = s.get(ctx, fc.Now, time.Second, fetch) }()
	<-started
	for i := 1; i < 5; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = s.get(ctx, fc.Now, time.Second, fetch) }()
	}
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(errors.New("cancelled"))
	if _, err := s.get(cctx, fc.Now, time.Second, fetch); err == nil || err.Error() != "cancelled" {
		t.Errorf("a cancelled reader waiting for the read in flight: %v, want its cause at once", err)
	}
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d reads for five concurrent readers, want 1", n)
	}
	for i, v := range got {
		if v != 7 {
			t.Errorf("reader %d got %d", i, v)
		}
	}
	fc.Advance(2 * time.Second)
	if _, err := s.get(ctx, fc.Now, time.Second, func(context.Context) (int, error) { return 0, errors.New("503") }); err == nil {
		t.Fatal("a stale answer served instead of a new read")
	}
	v, err := s.get(ctx, fc.Now, time.Second, func(context.Context) (int, error) { return 9, nil })
	if err != nil || v != 9 {
		t.Errorf("after a failed read: %d %v, want a new read", v, err)
	}
}
