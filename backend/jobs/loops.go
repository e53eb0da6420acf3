package jobs

import (
	"context"
	"sync"
	"time"
)

// sleepUntil waits until next (zero: an hour, i.e. only for a wake), a
// wake, stop or the end of ctx, and reports whether the loop goes on. Every
// loop of the engine sleeps on one timer like this; none polls.
func sleepUntil(ctx context.Context, timer *time.Timer, now time.Time, next time.Time, wake, stop <-chan struct{}) bool {
	wait := time.Hour
	if !next.IsZero() {
		wait = max(next.Sub(now), time.Millisecond)
	}
	timer.Reset(wait)
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-wake:
	case <-timer.C:
	}
	return true
}

// maintainer is one maintenance loop of the engine: it asks the index which
// jobs are due for it (find), runs act for each in its own goroutine with
// the job pinned in the index, and sleeps until the next one falls due or
// the index changes. The rescuer and the releaser are maintainers.
type maintainer struct {
	idx  *index
	now  func() time.Time
	find func(now time.Time) (ids []string, next time.Time)
	act  func(ctx context.Context, id string)
	wake <-chan struct{}

	mu       sync.Mutex
	stopping bool
	tasks    sync.WaitGroup
}

func newMaintainer(idx *index, want interest, now func() time.Time, find func(time.Time) ([]string, time.Time), act func(context.Context, string)) *maintainer {
	return &maintainer{idx: idx, now: now, find: find, act: act, wake: idx.wake(want)}
}

// run loops until ctx ends or stop is closed. Tasks still running are
// waited for by wait.
func (m *maintainer) run(ctx context.Context, stop <-chan struct{}) {
	if !m.idx.waitCaughtUp(ctx, stop) {
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		ids, next := m.find(m.now())
		for _, id := range ids {
			m.spawn(ctx, id)
		}
		if !sleepUntil(ctx, timer, m.now(), next, m.wake, stop) {
			return
		}
	}
}

func (m *maintainer) spawn(ctx context.Context, id string) {
	m.mu.Lock()
	if m.stopping {
		m.mu.Unlock()
		return
	}
	m.tasks.Add(1)
	m.mu.Unlock()
	m.idx.pin(id) // found unpinned: no other task of this loop runs on it
	go func() {
		defer m.tasks.Done()
		defer m.idx.unpin(id)
		m.act(ctx, id)
	}()
}

// stop makes the loop start no more tasks.
func (m *maintainer) stop() {
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
}

func (m *maintainer) wait() { m.tasks.Wait() }
