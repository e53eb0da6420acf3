package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The rescuer abandons attempts whose lease expired (their worker crashed or
// lost the store): once lease_until + RescueGrace has passed for a job the
// log shows running, and no attempt of this engine runs it, it appends
// JobAbandoned{uncertain_step, completed, remaining} with the job stream's
// expected revision (which also fences the attempt, should it still be
// alive), then releases the slot lock. Writes: JobAbandoned (job stream),
// [TeardownIncomplete,] JobReleased (slot stream).
func (e *Engine) newRescuer() *maintainer {
	return newMaintainer(e.idx, wantRunning, e.cfg.Clock,
		func(now time.Time) ([]string, time.Time) { return e.idx.expired(now, e.cfg.RescueGrace) },
		e.rescue)
}

// rescue abandons job id if its lease has still expired when read afresh.
func (e *Engine) rescue(ctx context.Context, id string) {
	j, err := slots.LoadJob(ctx, e.store, id)
	if err != nil || j.Status != events.StatusRunning || j.LeaseUntil.Add(e.cfg.RescueGrace).After(e.now()) {
		return
	}
	meta := e.systemMeta(slots.ActorRescuer, &j)
	_, err = e.store.Append(ctx, events.JobStream(id), events.Exact(j.Revision), events.New(events.JobAbandoned{
		JobID: id, Attempt: j.Attempt, Worker: j.Worker, LeaseUntil: j.LeaseUntil,
		UncertainStep: j.InFlight, CompletedSteps: j.Completed(), Remaining: j.Remaining(),
	}, meta))
	if err != nil {
		if !errors.Is(err, events.ErrWrongRevision) {
			e.log.WarnContext(ctx, "rescue failed", "job", id, "err", err)
		}
		return
	}
	e.log.WarnContext(ctx, "attempt abandoned: lease expired", "job", id, "attempt", j.Attempt, "abandoned_worker", j.Worker,
		"uncertain_step", j.InFlight, "correlation_id", meta.CorrelationID)
	if _, err := e.slots.ReleaseLock(ctx, &j, events.StatusAbandoned, meta); err != nil {
		e.log.WarnContext(ctx, "release after abandon failed", "job", id, "err", err)
	}
}
