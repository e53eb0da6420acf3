package projections

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// CheckpointWaiter waits until a shared read model's checkpoint reached a
// position. The local runner answers at once when this process projects;
// otherwise another process does and only the checkpoint tells.
type CheckpointWaiter struct {
	RM    ReadModel
	Local *Runner
}

// WaitFor polls the checkpoint until it reached pos, ctx ends, or the
// read model's database is down (waiting cannot help then).
func (w CheckpointWaiter) WaitFor(ctx context.Context, pos events.Position) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if w.Local.Position() >= pos {
			return nil
		}
		p, err := w.RM.Position(ctx)
		switch {
		case err == nil && p >= pos:
			return nil
		case errors.Is(err, ErrUnavailable):
			return err // waiting cannot help while the database is down
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
