package slots

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checkpoints of the deadline scheduler (backend/consumer): the folded
// state of every slot that is not retired (only what deadlines read: no
// registration, lock spec, hold or per-job records), gzipped (consumer.Pack)
// so a pool of thousands of slots fits one event, and the position of the
// last slot event folded. A restart folds only what came after; deadlines
// that passed meanwhile fire at once.
const (
	deadlinesConsumer = "deadlines"
	deadlinesVersion  = 2
	// deadlinesSaveEvery is how many events the fold must have passed
	// for a checkpoint to be worth writing (looked at after each pass and
	// when the scheduler stops). Counted in events, not positions:
	// KurrentDB's positions are byte offsets.
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

// RunDeadlines queues a reset (actor "system:deadline", with the grace
// period) for every occupied slot whose deadline passed, at most once per
// deadline. It learns of slots from the log (SubscribeAll on slot- streams,
// from its checkpoint) and sleeps on one timer set to the earliest
// deadline. It returns when ctx is done (nil, after a last checkpoint) or
// the subscription fails. With DeadlineReset off it only waits for ctx.
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
	st := deadlineState{Slots: map[string]*SlotState{}}
	var packed consumer.Packed
	from, ok, why, err := consumer.LoadCheckpoint(ctx, s.store, deadlinesConsumer, deadlinesVersion, &packed)
	if err == nil && ok {
		if uerr := packed.Unpack(&st); uerr != nil || st.Slots == nil {
			ok, why = false, fmt.Sprintf("state does not unpack: %v", uerr)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("deadlines: read checkpoint: %w", err)
	}
	if !ok {
		if why != "" {
			s.log.Warn("deadlines: checkpoint ignored, folding the log from the start", "why", why)
		}
		st, from = deadlineState{Slots: map[string]*SlotState{}}, 0
	}
	var (
		mu           sync.Mutex
		pos          = from // last event folded
		saved        = from
		folded       int // events folded since the start, and at the last checkpoint
		foldedAtSave int
		tried        = map[string]time.Time{} // slot → deadline a reset was attempted for
		wake         = make(chan struct{}, 1)
	)
	// save writes a checkpoint once the fold passed deadlinesSaveEvery
	// events since the last one: a restart refolds fewer than that, and a
	// quiet pool does not fill its log with checkpoints.
	save := func(ctx context.Context) {
		mu.Lock()
		p := pos
		var err error
		if p > saved && folded-foldedAtSave >= deadlinesSaveEvery {
			var b []byte
			if b, err = consumer.Pack(st); err == nil {
				err = consumer.SaveCheckpoint(ctx, s.store, deadlinesConsumer, deadlinesVersion, p, json.RawMessage(b))
			}
		}
		if err == nil {
			saved = max(saved, p)
			foldedAtSave = folded
		}
		mu.Unlock()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("deadlines: checkpoint not written", "err", err)
		}
	}
	defer func() {
		// The last checkpoint outlives ctx, briefly.
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		save(c)
	}()
	// Caught up first, so the first pass sees the log as it is now and
	// not a checkpoint's older picture (a slot locked since, say).
	startHead, err := s.store.Head(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("deadlines: read the log's head: %w", err)
	}
	caughtUp := make(chan struct{})
	if from >= startHead {
		close(caughtUp)
	}
	subErr := make(chan error, 1)
	go func() {
		// Unfiltered, from the checkpoint: the tail is short, and every
		// event moves the position, so the checkpoint covers the whole log
		// and catching up to the head is visible.
		subErr <- s.store.SubscribeAll(ctx, from, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
			if ev.Position == startHead {
				defer close(caughtUp)
			}
			if strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix) {
				// Checkpoints (ours too) are no progress: counting them
				// would make each one call for the next.
				return nil
			}
			var err error
			mu.Lock()
			if strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) {
				// An event that does not apply is parked, not fatal: one bad
				// event must not end every deadline of the pool (issue 25).
				// The slot's fold lacks that event; a reset it leads to is
				// re-checked on the fresh stream (releaseExpired).
				err = s.cfg.Health.Park(deadlinesConsumer, ev, st.fold(ev))
			}
			pos = ev.Position
			folded++
			mu.Unlock()
			select {
			case wake <- struct{}{}:
			default:
			}
			return err
		})
	}()
	select {
	case <-caughtUp:
	case <-ctx.Done():
		return nil
	case err := <-subErr:
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return consumer.Loop(ctx, s.now, wake, subErr, func(ctx context.Context) time.Time {
		now := s.now()
		var due []string
		next := time.Time{}
		mu.Lock()
		for name, ss := range st.Slots {
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
		mu.Unlock()
		for _, name := range due {
			res, err := s.releaseExpired(ctx, name)
			if err != nil {
				s.log.InfoContext(ctx, "deadline reset not queued", "slot", name, "err", err)
				continue
			}
			s.log.InfoContext(ctx, "deadline passed; reset queued", "slot", name, "job", res.JobID, "not_before", res.NotBefore)
		}
		save(ctx)
		return next
	})
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
