package consumer

import (
	"context"
	"log/slog"
	"runtime/debug"
	"time"
)

// ReleaseAfterCatchUp waits until every consumer of the log caught up with
// the head it started at (waits), then hands the pages of their catch-up
// garbage back to the system. The Go runtime returns freed memory only
// slowly; a restart after a long stop (or a first start on a big log) would
// otherwise keep the high-water mark of folding it all at once as its
// private memory for minutes (issue 13: RssAnon).
func ReleaseAfterCatchUp(ctx context.Context, waits []func(context.Context) error, log *slog.Logger) error {
	t0 := time.Now()
	for _, w := range waits {
		if err := w(ctx); err != nil {
			return nil // shutting down
		}
	}
	debug.FreeOSMemory()
	log.Info("consumers caught up; catch-up memory returned", slog.Duration("took", time.Since(t0)))
	return nil
}

// Closed waits for ch to close, or for ctx (a wait of ReleaseAfterCatchUp).
func Closed(ch <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
