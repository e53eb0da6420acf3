package clock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func recv(t *testing.T, c <-chan time.Time) (time.Time, bool) {
	t.Helper()
	select {
	case at := <-c:
		return at, true
	default:
		return time.Time{}, false
	}
}

// Timers fire when Advance passes their due time, in due order (the time
// reads each one's due time); not before; Stop and Reset leave no stale
// value; a zero timer fires at once.
func TestFakeTimers(t *testing.T) {
	f := clock.NewFake(t0)
	late := f.NewTimer(3 * time.Second)
	early := f.NewTimer(time.Second)
	f.Advance(999 * time.Millisecond)
	if _, ok := recv(t, early.C()); ok {
		t.Fatal("fired early")
	}
	f.Advance(5 * time.Second)
	if at, ok := recv(t, early.C()); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("early: %v %v", at, ok)
	}
	if at, ok := recv(t, late.C()); !ok || !at.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("late: %v %v", at, ok)
	}
	if got := f.Now(); !got.Equal(t0.Add(5999 * time.Millisecond)) {
		t.Fatalf("now %v", got)
	}
	if late.Stop() {
		t.Fatal("Stop of a fired timer reported active")
	}
	// Fired but not read, then Reset: the stale value is gone.
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	if tm.Reset(time.Minute) {
		t.Fatal("Reset of a fired timer reported active")
	}
	if _, ok := recv(t, tm.C()); ok {
		t.Fatal("stale value after Reset")
	}
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported inactive")
	}
	f.Advance(time.Hour)
	if _, ok := recv(t, tm.C()); ok {
		t.Fatal("a stopped timer fired")
	}
	if _, ok := recv(t, f.NewTimer(0).C()); !ok {
		t.Fatal("a zero timer did not fire at once")
	}
	if f.Armed() != 0 {
		t.Fatalf("%d armed", f.Armed())
	}
}

// A ticker fires each period and drops ticks nobody read.
func TestFakeTicker(t *testing.T) {
	f := clock.NewFake(t0)
	tk := f.NewTicker(time.Minute)
	f.Advance(time.Minute)
	if at, ok := recv(t, tk.C()); !ok || !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("tick 1: %v %v", at, ok)
	}
	f.Advance(10 * time.Minute) // ten ticks, one kept
	if at, ok := recv(t, tk.C()); !ok || !at.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("tick kept: %v %v", at, ok)
	}
	if _, ok := recv(t, tk.C()); ok {
		t.Fatal("dropped ticks were kept")
	}
	tk.Stop()
	f.Advance(time.Hour)
	if _, ok := recv(t, tk.C()); ok || f.Armed() != 0 {
		t.Fatal("a stopped ticker ticked")
	}
}

// BlockUntil returns once the code under test waits on its timers; a
// goroutine waiting through Sleep wakes when the test advances past it.
func TestFakeBlockUntilAndSleep(t *testing.T) {
	f := clock.NewFake(t0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	done := make(chan error, 2)
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		wg.Add(1)
		go func() { defer wg.Done(); done <- clock.Sleep(ctx, f, d) }()
	}
	if err := f.BlockUntil(ctx, 2); err != nil {
		t.Fatal(err)
	}
	f.Advance(2 * time.Second)
	wg.Wait()
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	short, stop := context.WithCancel(ctx)
	stop()
	if err := f.BlockUntil(short, 1); err == nil {
		t.Fatal("BlockUntil of an ended context returned nil")
	}
	if err := clock.Sleep(short, f, time.Hour); err == nil {
		t.Fatal("Sleep of an ended context returned nil")
	}
}

// Real is the wall clock.
func TestReal(t *testing.T) {
	c := clock.Real()
	tm := c.NewTimer(time.Millisecond)
	defer tm.Stop()
	at := <-tm.C()
	if c.Since(at) < 0 || at.After(c.Now()) {
		t.Fatal("real timer out of order with Now")
	}
}
