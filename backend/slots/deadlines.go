package slots

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// RunDeadlines queues a reset (actor "system:deadline", with the grace
// period) for every occupied slot whose deadline passed, at most once per
// deadline. It learns of slots from the log (SubscribeAll on slot- streams)
// and sleeps on one timer set to the earliest deadline. It returns when ctx is
// done (nil) or the subscription fails. With DeadlineReset off it only waits
// for ctx.
func (s *Service) RunDeadlines(ctx context.Context) error {
	if !s.cfg.DeadlineReset {
		<-ctx.Done()
		return nil
	}
	var (
		mu     sync.Mutex
		states = map[string]*SlotState{}
		tried  = map[string]time.Time{} // slot → deadline a reset was attempted for
		wake   = make(chan struct{}, 1)
	)
	subErr := make(chan error, 1)
	go func() {
		subErr <- s.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.SlotStreamPrefix}},
			func(_ context.Context, ev events.RecordedEvent) error {
				name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
				mu.Lock()
				st := states[name]
				if st == nil {
					st = &SlotState{Name: name}
					states[name] = st
				}
				err := st.Apply(ev)
				mu.Unlock()
				select {
				case wake <- struct{}{}:
				default:
				}
				return err
			})
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := s.now()
		var due []string
		next := time.Time{}
		mu.Lock()
		for name, st := range states {
			if !st.Occupied || st.Retired || st.Locked() || st.Until.IsZero() ||
				st.DeadlineResetFor.Equal(st.Until) || tried[name].Equal(st.Until) {
				continue
			}
			if !st.Until.After(now) {
				due = append(due, name)
				tried[name] = st.Until
			} else if next.IsZero() || st.Until.Before(next) {
				next = st.Until
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
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(s.now()), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			if ctx.Err() != nil || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-wake:
		case <-timer.C:
		}
	}
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
