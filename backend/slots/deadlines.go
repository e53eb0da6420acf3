package slots

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checkpoints of the deadline scheduler (backend/consumer): the folded
// state of every slot that is not retired (only what deadlines read: no
// registration, lock spec, hold or per-job records), gzipped (Packed)
// so a pool of thousands of slots fits one event, and the position of the
// last slot event folded. A restart folds only what came after; deadlines
// that passed meanwhile fire at once.
const (
	deadlinesConsumer = "deadlines"
	deadlinesVersion  = 2
	// deadlinesSaveEvery is how many events the fold must have passed
	// for a checkpoint to be worth writing as it folds (and one is
	// written when the scheduler stops). Counted in events, not
	// positions: KurrentDB's positions are byte offsets.
	deadlinesSaveEvery = 1000
)

// deadlineState is the scheduler's fold, what its checkpoints hold.
type deadlineState struct {
	Slots map[string]*SlotState `json:"slots"`
}

// fold applies one slot event. A slot enters the fold with its
// registration and leaves it when it is retired (a retired slot has no
// deadline, and its name is never registered again): so the fold, its
// checkpoint and each pass over it follow the pool, not its history.
func (d deadlineState) fold(ev events.RecordedEvent) error {
	name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
	ss := d.Slots[name]
	if ss == nil {
		if !ev.Is(events.SlotRegistered{}) {
			return nil // a retired slot's last events (its release)
		}
		ss = &SlotState{Name: name}
		d.Slots[name] = ss
	}
	err := ss.Apply(ev)
	if ss.Retired {
		delete(d.Slots, name)
		return err
	}
	// What the scheduler never reads: the registration, the lock's job
	// spec, the hold, a teardown's remainder, the per-job records.
	ss.Reg, ss.Lock, ss.LockMeta, ss.Hold, ss.Remaining = events.SlotRegistered{}, events.JobAccepted{}, events.Metadata{}, events.SlotHeld{}, nil
	clear(ss.VacatedBy)
	clear(ss.PromotedBy)
	return err
}

// Name implements consumer.Fold.
func (d *deadlineState) Name() string { return deadlinesConsumer }

// Version implements consumer.Fold.
func (d *deadlineState) Version() int { return deadlinesVersion }

// Wants implements consumer.Fold: slot events.
func (d *deadlineState) Wants(ev events.RecordedEvent) bool {
	return strings.HasPrefix(ev.Stream, events.SlotStreamPrefix)
}

// Apply implements consumer.Fold. An event that does not apply is parked,
// not fatal: one bad event must not end every deadline of the pool (issue
// 25). The slot's fold lacks that event; a reset it leads to is re-checked
// on the fresh stream (releaseExpired).
func (d *deadlineState) Apply(ev events.RecordedEvent) error { return d.fold(ev) }

// Snapshot implements consumer.Fold.
func (d *deadlineState) Snapshot() (any, error) { return d, nil }

// Restore implements consumer.Fold.
func (d *deadlineState) Restore(b []byte) error {
	var st deadlineState
	if err := json.Unmarshal(b, &st); err != nil {
		return err
	}
	if st.Slots == nil {
		return fmt.Errorf("no slots")
	}
	*d = st
	return nil
}

// RunDeadlines queues a reset (actor "system:deadline", with the grace
// period) for every occupied slot whose deadline passed, at most once per
// deadline. It is a consumer.Runner of deadlineState: it learns of slots
// from the log (from its checkpoint), and its Step sleeps on one timer of
// the clock set to the earliest deadline. It returns when ctx is done (nil,
// after a last checkpoint) or the subscription fails. With DeadlineReset
// off it only waits for ctx.
//
// A reset is a conditional append to the slot's stream that records the
// deadline it is for (DeadlineResetFor), and checkpoints only summarise the
// log: a crash between a reset and the next checkpoint refolds that record
// and queues nothing twice; a deadline that passed while nothing ran is in
// the fold and fires at the next start. So each deadline gets exactly one
// reset.
func (s *Service) RunDeadlines(ctx context.Context) error {
	if !s.cfg.DeadlineReset {
		<-ctx.Done()
		return nil
	}
	d := &deadlineState{Slots: map[string]*SlotState{}}
	var r *consumer.Runner
	tried := map[string]time.Time{} // slot → deadline a reset was attempted for (Step's own)
	r = consumer.NewRunner(s.store, d, consumer.Options{Packed: true, Clock: s.cfg.Clock, Health: s.cfg.Health, Logger: s.log,
		// A restart refolds fewer than deadlinesSaveEvery events, and a
		// quiet pool does not fill its log with checkpoints: one at stop
		// only if something was folded since the last.
		Save: consumer.SavePolicy{Every: deadlinesSaveEvery},
		Step: func(ctx context.Context) time.Time {
			var due []string
			var next time.Time
			r.View(func() { due, next = d.due(s.now(), tried) })
			for _, name := range due {
				res, err := s.releaseExpired(ctx, name)
				if err != nil {
					s.log.InfoContext(ctx, "deadline reset not queued", "slot", name, "err", err)
					continue
				}
				s.log.InfoContext(ctx, "deadline passed; reset queued", "slot", name, "job", res.JobID, "not_before", res.NotBefore)
			}
			return next
		}})
	return r.Run(ctx)
}

// due lists the slots whose deadline passed at now and that got no reset
// for it (marking them tried), and when the next deadline comes (zero:
// none).
func (d *deadlineState) due(now time.Time, tried map[string]time.Time) (due []string, next time.Time) {
	for name, ss := range d.Slots {
		if !ss.Occupied || ss.Retired || ss.Locked() || ss.Until.IsZero() ||
			ss.DeadlineResetFor.Equal(ss.Until) || tried[name].Equal(ss.Until) {
			continue
		}
		if !ss.Until.After(now) {
			due = append(due, name)
			tried[name] = ss.Until
		} else if next.IsZero() || ss.Until.Before(next) {
			next = ss.Until
		}
	}
	return due, next
}

// releaseExpired queues the deadline reset of one slot, re-checking on the
// fresh stream that the deadline really passed and was not extended.
func (s *Service) releaseExpired(ctx context.Context, slot string) (JobAcceptedResult, error) {
	a := Actor{Name: ActorDeadline}
	return s.newJob(ctx, a, slot, events.KindReset, nil, func(st *SlotState) error {
		if st.Until.After(s.now()) {
			return conflict(nil, "deadline of %s was extended", slot)
		}
		if st.DeadlineResetFor.Equal(st.Until) {
			return conflict(nil, "a deadline reset for %s was already queued", slot)
		}
		return nil
	})
}
