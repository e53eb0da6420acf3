package jobs

import (
	"context"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// The releaser frees the slot lock of a job whose terminal event someone
// else wrote (a person's cancel, the rescuer, a shutdown that could not
// release) or whose attempt died between its terminal event and its own
// release, once no attempt can still act: RescueGrace after the terminal
// event if the attempt wrote it itself, else RescueGrace after the lease's
// end. For a succeeded job the release carries the slot event the success
// implies (SlotVacated, SlotRetired, SlotPromoted), written once. Writes:
// [slot event | TeardownIncomplete,] JobReleased (slot stream).
func (e *Engine) newReleaser() *maintainer {
	return newMaintainer(e.idx, wantEnded, e.cfg.Clock,
		func(now time.Time) ([]string, time.Time) { return e.idx.releasable(now, e.cfg.RescueGrace) },
		e.release)
}

// release frees the slot lock of terminal job id, read afresh, if the lock
// is still for the job's current run.
func (e *Engine) release(ctx context.Context, id string) {
	j, err := slots.LoadJob(ctx, e.store, id)
	if err != nil || !j.Terminal() {
		return
	}
	st, err := e.slots.Load(ctx, j.Queued.Slot)
	if err != nil || !st.LockedFor(&j) {
		return // released, or a resume's lock for the next run
	}
	meta := e.systemMeta(slots.ActorRepair, &j)
	ok, err := e.slots.ReleaseLock(ctx, &j, j.Status, meta)
	if err != nil {
		e.log.WarnContext(ctx, "release failed", "job", id, "err", err)
		return
	}
	if ok {
		e.log.InfoContext(ctx, "slot lock released", "job", id, "slot", j.Queued.Slot, "outcome", j.Status, "correlation_id", meta.CorrelationID)
	}
}
