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

// TestAfterFuncAndWithTimeoutFollowTheClock: on a Fake, AfterFunc's
// function and WithTimeout's end come when Advance passes their time, not
// before; Reset moves them and Stop cancels them for good.
func TestAfterFuncAndWithTimeoutFollowTheClock(t *testing.T) {
	fc := clock.NewFake(dueT0)
	fired := make(chan time.Time, 4)
	f := clock.AfterFunc(fc, time.Minute, func() { fired <- fc.Now() })
	fc.Advance(30 * time.Second)
	f.Reset(time.Minute) // now due at +90s
	fc.Advance(59 * time.Second)
	select {
	case at := <-fired:
		t.Fatalf("fired at %v, before its time", at)
	default:
	}
	fc.Advance(time.Second)
	if at := <-fired; !at.Equal(dueT0.Add(90 * time.Second)) {
		t.Fatalf("fired at %v", at)
	}
	f.Reset(time.Second)
	f.Stop()
	if f.Reset(time.Second) {
		t.Fatal("Reset after Stop armed the timer")
	}
	fc.Advance(time.Hour)
	if fc.Armed() != 0 || len(fired) != 0 {
		t.Fatalf("after Stop: %d armed, %d fired", fc.Armed(), len(fired))
	}

	ctx, cancel := clock.WithTimeout(context.Background(), fc, 10*time.Second)
	defer cancel()
	fc.Advance(9 * time.Second)
	if ctx.Err() != nil {
		t.Fatal("ended before its timeout")
	}
	fc.Advance(time.Second)
	<-ctx.Done()
	if context.Cause(ctx) != context.DeadlineExceeded {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}
