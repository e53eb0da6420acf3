package slots

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checkpoints of the deadline scheduler (backend/consumer): the folded
// state of every slot (without the per-job counts it does not use) and the
// position of the last slot event folded. A restart folds only what came
// after; deadlines that passed meanwhile fire at once.
const (
	deadlinesConsumer = "deadlines"
	deadlinesVersion  = 1
	// deadlinesSaveEvery is how far (in log positions) the fold must have
	// moved for a checkpoint to be worth writing (one also goes in when the
	// scheduler stops).
	deadlinesSaveEvery = 1000
)

// deadlineState is the scheduler's fold, what its checkpoints hold.
type deadlineState struct {
	Slots map[string]*SlotState `json:"slots"`
}

// fold applies one slot event.
func (d deadlineState) fold(ev events.RecordedEvent) error {
	name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
	ss := d.Slots[name]
	if ss == nil {
		ss = &SlotState{Name: name}
		d.Slots[name] = ss
	}
	err := ss.Apply(ev)
	// Per-job records grow with history and the scheduler never reads
	// them: only the lock holder's stay.
	for id := range ss.VacatedBy {
		if id != ss.LockJob {
			delete(ss.VacatedBy, id)
		}
	}
	for id := range ss.PromotedBy {
		if id != ss.LockJob {
			delete(ss.PromotedBy, id)
		}
	}
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
	from, ok, why, err := consumer.LoadCheckpoint(ctx, s.store, deadlinesConsumer, deadlinesVersion, &st)
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
		mu    sync.Mutex
		pos   = from // last slot event folded
		saved = from
		tried = map[string]time.Time{} // slot → deadline a reset was attempted for
		wake  = make(chan struct{}, 1)
	)
	save := func(ctx context.Context) {
		mu.Lock()
		p := pos
		var err error
		if p > saved {
			err = consumer.SaveCheckpoint(ctx, s.store, deadlinesConsumer, deadlinesVersion, p, st)
		}
		if err == nil {
			saved = max(saved, p)
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
			var err error
			mu.Lock()
			if strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) {
				err = st.fold(ev)
			}
			pos = ev.Position
			mu.Unlock()
			if ev.Position == startHead {
				close(caughtUp)
			}
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
		behind := pos - saved
		mu.Unlock()
		for _, name := range due {
			res, err := s.releaseExpired(ctx, name)
			if err != nil {
				s.log.InfoContext(ctx, "deadline reset not queued", "slot", name, "err", err)
				continue
			}
			s.log.InfoContext(ctx, "deadline passed; reset queued", "slot", name, "job", res.JobID, "not_before", res.NotBefore)
		}
		if behind >= deadlinesSaveEvery {
			save(ctx)
		}
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
