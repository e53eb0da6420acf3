package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

var dueT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestDueRunsAtTheTimeStepAsked: Due calls step again when the time it
// returned comes on the clock, or at once on a wake, and not before.
func TestDueRunsAtTheTimeStepAsked(t *testing.T) {
	fc := clock.NewFake(dueT0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake := make(chan struct{}, 1)
	calls := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		clock.Due(ctx, fc, wake, func(_ context.Context, now time.Time) time.Time {
			calls <- now
			return now.Add(time.Minute)
		})
	}()
	if got := <-calls; !got.Equal(dueT0) {
		t.Fatalf("first call at %v", got)
	}
	dueArmed(t, fc)
	fc.Advance(59 * time.Second)
	select {
	case got := <-calls:
		t.Fatalf("called at %v, before its time", got)
	default:
	}
	fc.Advance(time.Second)
	if got := <-calls; !got.Equal(dueT0.Add(time.Minute)) {
		t.Fatalf("second call at %v", got)
	}
	dueArmed(t, fc)
	wake <- struct{}{}
	if got := <-calls; !got.Equal(dueT0.Add(time.Minute)) {
		t.Fatalf("woken call at %v", got)
	}
	cancel()
	<-done
}

// TestEveryKeepsItsPeriod: Every runs do each period on the clock, the
// first one a period after the start.
func TestEveryKeepsItsPeriod(t *testing.T) {
	fc := clock.NewFake(dueT0)
	ctx, cancel := context.WithCancel(context.Background())
	runs := make(chan time.Time, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		clock.Every(ctx, fc, 10*time.Second, func(context.Context) { runs <- fc.Now() })
	}()
	for i := 1; i <= 3; i++ {
		dueArmed(t, fc)
		fc.Advance(10 * time.Second)
		if got := <-runs; !got.Equal(dueT0.Add(time.Duration(i) * 10 * time.Second)) {
			t.Fatalf("run %d at %v", i, got)
		}
	}
	cancel()
	<-done
	if len(runs) != 0 {
		t.Fatalf("%d extra runs", len(runs))
	}
}

func dueArmed(t *testing.T, fc *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
}
