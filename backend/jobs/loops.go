package jobs

import (
	"context"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// untilStop returns ctx, ended also when stop is closed: the engine's
// loops stop on Stop while the work they started runs on under ctx.
func untilStop(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// maintainer is one maintenance loop of the engine: it asks the index which
// jobs are due for it (find), runs act for each in its own goroutine with
// the job pinned in the index, and sleeps until the next one falls due or
// the index changes: clock.Due on the engine's clock. The rescuer and the
// releaser are maintainers.
type maintainer struct {
	idx  *index
	clk  clock.Clock
	find func(now time.Time) (ids []string, next time.Time)
	act  func(ctx context.Context, id string)
	wake <-chan struct{}

	mu       sync.Mutex
	stopping bool
	tasks    sync.WaitGroup
}

func newMaintainer(idx *index, want interest, clk clock.Clock, find func(time.Time) ([]string, time.Time), act func(context.Context, string)) *maintainer {
	return &maintainer{idx: idx, clk: clk, find: find, act: act, wake: idx.wake(want)}
}

// run loops until ctx ends or stop is closed. Tasks still running are
// waited for by wait.
func (m *maintainer) run(ctx context.Context, stop <-chan struct{}) {
	if !m.idx.waitCaughtUp(ctx, stop) {
		return
	}
	lctx, cancel := untilStop(ctx, stop)
	defer cancel()
	clock.Due(lctx, m.clk, m.wake, func(_ context.Context, now time.Time) time.Time {
		ids, next := m.find(now.UTC())
		for _, id := range ids {
			m.spawn(ctx, id)
		}
		return next
	})
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
