package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// record is an ordered log of what the services did.
type record struct {
	mu    sync.Mutex
	steps []string
}

func (r *record) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

func (r *record) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// loop is a Loop that records its start, drain, halt and end.
func loop(r *record, name string) *Loop {
	return &Loop{
		Init:    func(context.Context) error { r.add("init " + name); return nil },
		Run:     func(ctx context.Context) error { <-ctx.Done(); r.add("end " + name); return nil },
		OnDrain: func() { r.add("drain " + name) },
	}
}

// TestListStopsInReverse: services start in order; Drain and Stop reach
// them last started first, and each Stop returns once its service ended.
func TestListStopsInReverse(t *testing.T) {
	ctx := context.Background()
	r := &record{}
	l := &List{}
	must(t, l.Start(ctx, "store", OnClose(func() { r.add("close store") })))
	must(t, l.Start(ctx, "a", loop(r, "a")))
	b := loop(r, "b")
	b.Halt = func(context.Context) error { r.add("halt b"); return nil }
	must(t, l.Start(ctx, "b", b))
	l.Drain()
	l.Stop(ctx)
	want := []string{"init a", "init b", "drain b", "drain a", "halt b", "end b", "end a", "close store"}
	if got := r.get(); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	l.Stop(ctx) // twice: nothing more
	if got := r.get(); len(got) != len(want) {
		t.Fatalf("a second Stop did more: %v", got)
	}
}

// TestLoopOutlivesStartCtx: a service lives until Stop, not until the ctx
// its start was given ends (a signal ends the start-up, then the shutdown
// stops the parts in order).
func TestLoopOutlivesStartCtx(t *testing.T) {
	running := make(chan context.Context, 1)
	l := &Loop{Run: func(ctx context.Context) error { running <- ctx; <-ctx.Done(); return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	must(t, l.Start(ctx))
	runCtx := <-running
	cancel()
	if runCtx.Err() != nil {
		t.Fatal("the loop's ctx ended with its start's ctx")
	}
	must(t, l.Stop(context.Background()))
	if runCtx.Err() == nil {
		t.Fatal("Stop did not end the loop's ctx")
	}
}

// TestLoopStoppedByItself: a loop whose Run fails is reported to OnExit
// with its error; one asked to stop is not.
func TestLoopStoppedByItself(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("boom")
	exits := make(chan string, 2)
	l := &List{OnExit: func(name string, err error) {
		if !errors.Is(err, boom) {
			t.Errorf("%s: %v", name, err)
		}
		exits <- name
	}}
	fail := make(chan struct{})
	must(t, l.Start(ctx, "failing", &Loop{Run: func(ctx context.Context) error {
		select {
		case <-fail:
			return boom
		case <-ctx.Done():
			return ctx.Err()
		}
	}}))
	must(t, l.Start(ctx, "fine", &Loop{Run: func(ctx context.Context) error { <-ctx.Done(); return boom }}))
	close(fail)
	if got := <-exits; got != "failing" {
		t.Fatalf("OnExit(%q)", got)
	}
	l.Stop(ctx)
	select {
	case got := <-exits:
		t.Fatalf("OnExit(%q) for a loop that was stopped", got)
	default:
	}
}

// TestLoopReadyAndInit: Start waits for Ready; a Run that fails before it,
// or an Init that fails, fails the start, and the service is stopped.
func TestLoopReadyAndInit(t *testing.T) {
	ctx := context.Background()
	ready := make(chan struct{})
	l := &Loop{Ready: ready, Run: func(ctx context.Context) error { close(ready); <-ctx.Done(); return nil }}
	must(t, l.Start(ctx))
	<-l.Started()
	must(t, l.Stop(ctx))

	boom := errors.New("boom")
	never := make(chan struct{})
	f := &Loop{Ready: never, Run: func(context.Context) error { return boom }}
	if err := f.Start(ctx); !errors.Is(err, boom) {
		t.Fatalf("start: %v, want boom", err)
	}
	<-f.Stopped()

	ran := false
	i := &Loop{Init: func(context.Context) error { return boom }, Run: func(context.Context) error { ran = true; return nil }}
	if err := i.Start(ctx); !errors.Is(err, boom) || ran {
		t.Fatalf("start: %v (ran %v), want boom and no run", err, ran)
	}
	<-i.Stopped()
	must(t, i.Stop(ctx))

	// ctx ends while waiting for Ready: the start is abandoned.
	cctx, cancel := context.WithCancel(ctx)
	w := &Loop{Ready: never, Run: func(ctx context.Context) error { <-ctx.Done(); return nil }}
	cancel()
	if err := w.Start(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("start: %v, want canceled", err)
	}
	<-w.Stopped()
}

// TestStopIsBounded: a loop that does not end is abandoned when the
// shutdown's ctx ends, with an error; Stop without Start is no error.
func TestStopIsBounded(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	l := &Loop{Run: func(context.Context) error { <-stuck; return nil }}
	must(t, l.Start(context.Background()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("stop: %v, want the deadline", err)
	}
	never := &Loop{Run: func(context.Context) error { t.Error("ran after Stop"); return nil }}
	must(t, never.Stop(context.Background()))
	must(t, never.Start(context.Background()))
	<-never.Stopped()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
