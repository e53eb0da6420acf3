package kurrent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"github.com/slotkeeper/slotkeeper/events"
)

// handlerError marks an error returned by the caller's handler, which ends
// the subscription instead of causing a resubscription.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// SubscribeAll implements events.Store with a catch-up subscription to $all.
//
// The client's subscription starts at End{} unless told otherwise and never
// resubscribes by itself; here it starts after `after` (exclusive; 0 = from the
// start) and, whenever it drops, is opened again after the last event handed to
// h, with bounded exponential backoff, until ctx ends or the store closes. The
// last delivered position is remembered as the client's full (commit, prepare)
// pair, and anything at or before it is skipped, so a resubscription neither
// loses nor repeats an event.
//
// `after` is a prepare position (toPosition). The subscription starts from
// the KurrentDB position (after, after): every event whose prepare position
// is greater is also greater in (commit, prepare) order, because an event's
// commit position is never below its prepare position. Events of the same
// transaction before it (same commit position, smaller prepare position) may
// come too and are skipped here, by prepare position.
//
// The filter is sent to the server (stream prefixes, or else event types as an
// exact-match regex) to save bandwidth, and applied again here, because a
// KurrentDB filter can select on stream or on type but not both.
// KurrentDB's own '$' events are never delivered.
func (s *Store) SubscribeAll(ctx context.Context, after events.Position, filter events.Filter, h events.Handler) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if after > 0 {
		if err := s.checkStart(ctx, after); err != nil {
			return err
		}
	}
	last := esdb.Position{Commit: uint64(after), Prepare: uint64(after)}
	backoff := s.opts.MinBackoff
	for {
		delivered, err := s.subscribeOnce(ctx, &last, filter, h)
		var he handlerError
		switch {
		case errors.As(err, &he):
			return he.err
		case ctx.Err() != nil:
			return ctx.Err()
		case s.isClosed():
			return events.ErrClosed
		}
		// A refusal (no $all read, bad credentials, an invalid position)
		// is the same on every try: retrying would look healthy while the
		// consumer never moves.
		var pe *events.PermanentError
		if errors.As(err, &pe) || func() bool { pe = permanent(err); return pe != nil }() {
			s.notePermanent(pe)
			return pe
		}
		if delivered {
			backoff = s.opts.MinBackoff
		}
		s.log.Warn("subscription dropped, resubscribing", "after", last.Commit, "in", backoff, "err", err)
		if err := s.sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// checkStart makes sure `after` is the position of an event of this log.
// KurrentDB refuses a start inside a record (InvalidArgument "Trying to
// read from an invalid position.", K: RpcExceptions.cs:259-260), which the
// resubscribe loop reports as permanent; but it takes a start beyond its
// end without a word, goes live and skips everything up to it
// (K: Enumerator.AllSubscriptionFiltered.cs:167-169,218-226): a checkpoint
// from a wiped or replaced log would silently lose events. So the event is
// read first: forward from its position the first event read is itself.
//
// Not finding it can also mean a follower that has not applied it yet (the
// position came from the leader), so "beyond the end" is reported only
// once it has lasted RetryTimeout.
func (s *Store) checkStart(ctx context.Context, after events.Position) error {
	deadline := time.Now().Add(s.opts.RetryTimeout)
	backoff := s.opts.MinBackoff
	for {
		var found *esdb.RecordedEvent
		err := s.do(ctx, func(ctx context.Context, c *esdb.Client) error {
			found = nil
			from := esdb.Position{Commit: uint64(after), Prepare: uint64(after)}
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: from}, 1)
			if err != nil {
				return err
			}
			defer rs.Close()
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			found = ev.OriginalEvent()
			return nil
		})
		switch pe := permanent(err); {
		case pe != nil && errors.Is(pe, events.ErrInvalidPosition):
			err = events.InvalidPosition(after, "not the position of an event in this KurrentDB log (positions are never computed; use one read from the store)")
			s.notePermanent(err.(*events.PermanentError))
			return err
		case pe != nil:
			s.notePermanent(pe)
			return pe
		case err != nil:
			return err
		case found != nil && toPosition(found.Position) == after:
			return nil
		case found != nil:
			err := events.InvalidPosition(after, "not the position of an event in this KurrentDB log")
			s.notePermanent(err.(*events.PermanentError))
			return err
		case time.Now().After(deadline):
			err := events.InvalidPosition(after, "beyond the end of this KurrentDB log: a checkpoint from a wiped or another store?")
			s.notePermanent(err.(*events.PermanentError))
			return err
		}
		if err := s.sleep(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// subscribeOnce runs one server subscription until it drops. It advances
// *last past every event it has handled or skipped and reports whether it
// received anything (used to reset the backoff).
func (s *Store) subscribeOnce(ctx context.Context, last *esdb.Position, filter events.Filter, h events.Handler) (bool, error) {
	c, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer s.release(c)

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-subCtx.Done():
		}
	}()

	opts := esdb.SubscribeToAllOptions{From: esdb.Start{}, Filter: serverFilter(filter)}
	if last.Commit > 0 || last.Prepare > 0 {
		opts.From = *last // exclusive, as KurrentDB defines it
	}
	sub, err := c.c.SubscribeToAll(subCtx, opts)
	if err != nil {
		if isConnErr(err) {
			s.invalidate(c, err)
		}
		return false, err
	}
	defer sub.Close()

	got := false
	for {
		ev := sub.Recv()
		switch {
		case ev.SubscriptionDropped != nil:
			err := ev.SubscriptionDropped.Error
			if isConnErr(err) {
				s.invalidate(c, err)
			}
			return got, fmt.Errorf("kurrent: subscription dropped: %w", err)
		case ev.EventAppeared != nil:
			got = true
			if err := ctx.Err(); err != nil {
				// gRPC may have buffered more events than the caller wants.
				return got, err
			}
			rec := ev.EventAppeared.OriginalEvent()
			if rec == nil || !after(rec.Position, *last) {
				continue // a replay of something already handled
			}
			if last.Commit > 0 || last.Prepare > 0 {
				if toPosition(rec.Position) <= toPosition(*last) {
					// Before the start, in the same transaction: an earlier
					// event of a multi-event append that was resumed from
					// the middle (its commit position is above the start).
					continue
				}
			}
			if r, ok := s.fromRecorded(rec); ok && filter.Match(r.Stream, r.Type) {
				if err := h(ctx, r); err != nil {
					return got, handlerError{err}
				}
			}
			*last = rec.Position
		}
		// Checkpoints, CaughtUp and FellBehind need nothing: resuming from
		// the last event (not the last checkpoint) is the safe choice.
	}
}

// after reports whether p comes after q in $all order.
func after(p, q esdb.Position) bool {
	return p.Commit > q.Commit || (p.Commit == q.Commit && p.Prepare > q.Prepare)
}

// serverFilter is the part of filter KurrentDB can apply itself. It always
// excludes system events when nothing else is asked for.
func serverFilter(f events.Filter) *esdb.SubscriptionFilter {
	switch {
	case len(f.StreamPrefixes) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: f.StreamPrefixes}
	case len(f.EventTypes) > 0:
		quoted := make([]string, len(f.EventTypes))
		for i, t := range f.EventTypes {
			quoted[i] = regexp.QuoteMeta(t)
		}
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Regex: "^(?:" + strings.Join(quoted, "|") + ")$"}
	default:
		return esdb.ExcludeSystemEventsFilter()
	}
}
