// Package memstore is an in-memory events.Store. It is not durable: it exists
// for unit tests of pure logic and as the reference the conformance suite is
// checked against. Production and the demo use boltstore or kurrent.
package memstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/events"
)

// Store keeps every event in a slice; positions are 1-based indexes.
type Store struct {
	mu      sync.Mutex
	all     []events.RecordedEvent
	streams map[string][]int // stream -> indexes into all
	changed chan struct{}    // closed and replaced on every commit
	closed  bool
}

var _ events.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{streams: map[string][]int{}, changed: make(chan struct{})}
}

// Append implements events.Store.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if err := events.ValidateAppend(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return events.AppendResult{}, events.ErrClosed
	}
	idx := s.streams[stream]
	exists := len(idx) > 0
	var last events.Revision
	if exists {
		last = events.Revision(len(idx) - 1)
	}
	if !expected.Satisfied(last, exists) {
		return events.AppendResult{}, &events.WrongRevisionError{Stream: stream, Expected: expected, Actual: last, Exists: exists}
	}
	res := events.AppendResult{NextExpected: last, Position: events.Position(len(s.all))}
	now := time.Now().UTC()
	for _, e := range evs {
		rev := events.Revision(len(idx))
		if e.ID == "" {
			e.ID = uuid.NewString()
		}
		if e.Meta.Time.IsZero() {
			e.Meta.Time = now
		}
		s.all = append(s.all, events.RecordedEvent{
			ID: e.ID, Stream: stream, Revision: rev, Position: events.Position(len(s.all) + 1),
			Type: e.Type, Data: append([]byte(nil), e.Data...), Meta: e.Meta,
		})
		idx = append(idx, len(s.all)-1)
		res = events.AppendResult{NextExpected: rev, Position: events.Position(len(s.all))}
	}
	s.streams[stream] = idx
	if len(evs) > 0 {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return res, nil
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	if err := events.ValidateStream(stream); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx := s.streams[stream]
	if len(idx) == 0 {
		return nil, fmt.Errorf("%w: %s", events.ErrStreamNotFound, stream)
	}
	if max <= 0 {
		max = math.MaxInt
	}
	var out []events.RecordedEvent
	if dir == events.Forward {
		for r := from; r < uint64(len(idx)) && len(out) < max; r++ {
			out = append(out, s.all[idx[r]])
		}
		return out, nil
	}
	start := from
	if start >= uint64(len(idx)) {
		start = uint64(len(idx) - 1)
	}
	for r := int64(start); r >= 0 && len(out) < max; r-- {
		out = append(out, s.all[idx[r]])
	}
	return out, nil
}

// SubscribeAll implements events.Store.
func (s *Store) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	next := int(after) // index of the first event to deliver
	s.mu.Lock()
	head := len(s.all)
	s.mu.Unlock()
	if next > head {
		// Positions are 1, 2, …: beyond the head is not one of this store.
		return events.InvalidPosition(after, fmt.Sprintf("beyond the end of this store (head %d)", head))
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return events.ErrClosed
		}
		batch := s.all[min(next, len(s.all)):]
		wait := s.changed
		s.mu.Unlock()
		for _, ev := range batch {
			// A cancelled subscriber gets nothing more, even mid-batch.
			if err := ctx.Err(); err != nil {
				return err
			}
			next++
			if !f.Match(ev.Stream, ev.Type) {
				continue
			}
			if err := h(ctx, ev); err != nil {
				return err
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}

// Head implements events.Store.
func (s *Store) Head(context.Context) (events.Position, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return events.Position(len(s.all)), nil
}

// Close implements events.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.changed)
	}
	return nil
}
