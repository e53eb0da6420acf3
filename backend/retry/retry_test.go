package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/retry"
)

func TestDelayDoublesToTheCap(t *testing.T) {
	b := retry.Backoff{Initial: 250 * time.Millisecond, Max: 2 * time.Second}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w {
			t.Fatalf("Delay(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := b.Delay(200); got != 2*time.Second {
		t.Fatalf("Delay(200) = %v: no overflow past the cap", got)
	}
	if c := retry.Constant(time.Second); c.Delay(1) != time.Second || c.Delay(9) != time.Second {
		t.Fatalf("constant: %v %v", c.Delay(1), c.Delay(9))
	}
}

func TestJitterStaysBelowTheSchedule(t *testing.T) {
	b := retry.Backoff{Initial: time.Second, Max: 8 * time.Second, Jitter: 0.5}
	seen := map[time.Duration]bool{}
	for range 200 {
		d := b.Delay(3) // 4 s before jitter
		if d < 2*time.Second || d > 4*time.Second {
			t.Fatalf("jittered wait %v outside [2s, 4s]", d)
		}
		seen[d] = true
	}
	if len(seen) < 2 {
		t.Fatal("jitter drew the same wait every time")
	}
}

// TestPollWaitsOnTheClock: Poll's waits are the clock's timers, so a fake
// clock runs the whole schedule without wall time, and the total bound is
// the clock's too.
func TestPollWaitsOnTheClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fc := clock.NewFake(start)
	var at []time.Duration
	done := make(chan error, 1)
	go func() {
		ok, err := retry.Poll(context.Background(), fc, retry.Backoff{Initial: time.Second, Max: 4 * time.Second}, 10*time.Second, func() (bool, error) {
			at = append(at, fc.Now().Sub(start))
			return false, nil
		})
		if ok {
			err = errors.New("done without a check saying so")
		}
		done <- err
	}()
	stop := fc.AutoAdvance(nil)
	defer stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// 0, +1, +2, +4, then the bound cuts the 4 s wait to 3 s.
	want := []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second, 10 * time.Second}
	if len(at) != len(want) {
		t.Fatalf("checks at %v, want %v", at, want)
	}
	for i := range want {
		if at[i] != want[i] {
			t.Fatalf("checks at %v, want %v", at, want)
		}
	}
}

func TestPollEndsWithItsContext(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := retry.Poll(ctx, fc, retry.Constant(time.Hour), 0, func() (bool, error) { return false, nil })
		done <- err
	}()
	if err := fc.BlockUntil(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
}

func TestWaitsResetAndBound(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	w := retry.Backoff{Initial: time.Second, Max: time.Minute}.Start(fc)
	if w.Next() != time.Second {
		t.Fatal(w.Next())
	}
	ctx := context.Background()
	go func() { _ = fc.BlockUntil(ctx, 1); fc.Advance(time.Second) }()
	if err := w.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if w.Next() != 2*time.Second {
		t.Fatalf("after one wait: %v", w.Next())
	}
	w.Reset()
	if w.Next() != time.Second {
		t.Fatalf("after Reset: %v", w.Next())
	}
	w.Within(0)
	if err := w.Wait(ctx); !errors.Is(err, retry.ErrExhausted) {
		t.Fatalf("past the bound: %v", err)
	}
}
