package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// filter is events.Filter prepared for matching record bytes without
// allocating.
type filter struct {
	prefixes [][]byte
	types    []string
}

func newFilter(f events.Filter) filter {
	var m filter
	for _, p := range f.StreamPrefixes {
		m.prefixes = append(m.prefixes, []byte(p))
	}
	m.types = f.EventTypes
	return m
}

// match mirrors events.Filter.Match on bytes.
func (f filter) match(stream, typ []byte) bool {
	if len(f.prefixes) > 0 {
		ok := false
		for _, p := range f.prefixes {
			if bytes.HasPrefix(stream, p) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.types) == 0 {
		return true
	}
	for _, t := range f.types {
		if string(typ) == t {
			return true
		}
	}
	return false
}

// chunk is what a subscription's reader hands to its handler loop.
type chunk struct {
	evs []events.RecordedEvent
	err error
}

// SubscribeAll implements events.Store.
//
// A reader goroutine reads the log in chunks of Options.ReadChunk records,
// each in its own short read transaction, one chunk ahead of the handler (so
// reading and the handler's decoding use both cores during catch-up). At the
// head it waits for the writer's commit signal. The signal channel is taken
// before each read, so a commit between the read and the wait is never
// missed. SubscribeAll returns only after the reader has stopped.
func (s *Store) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Positions are contiguous here, so every one up to the head is an
	// event's; beyond it is a checkpoint from another or a wiped log.
	if head, err := s.Head(ctx); err != nil {
		return err
	} else if after > head {
		return events.InvalidPosition(after, fmt.Sprintf("beyond the end of this store (head %d): a checkpoint from a wiped or another store?", head))
	}
	full := make(chan chunk, 1)
	free := make(chan []events.RecordedEvent, 2)
	for range cap(free) {
		free <- make([]events.RecordedEvent, 0, s.opts.ReadChunk)
	}
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go s.readLog(uint64(after)+1, newFilter(f), free, full, stop, stopped)
	defer func() {
		close(stop)
		<-stopped
	}()
	for {
		var c chunk
		select {
		case c = <-full:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return events.ErrClosed
		}
		if c.err != nil {
			return c.err
		}
		for i := range c.evs {
			// A cancelled subscriber gets nothing more, even mid-chunk.
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := h(ctx, c.evs[i]); err != nil {
				return err
			}
			c.evs[i] = events.RecordedEvent{} // let the payload go
		}
		free <- c.evs[:0]
	}
}

// readLog is a subscription's reader: it sends chunks of matching events
// from position next on, in order, until stop is closed.
func (s *Store) readLog(next uint64, m filter, free chan []events.RecordedEvent, full chan<- chunk, stop, stopped chan struct{}) {
	defer close(stopped)
	for {
		var buf []events.RecordedEvent
		select {
		case buf = <-free:
		case <-stop:
			return
		}
		s.mu.Lock()
		wait := s.changed
		s.mu.Unlock()
		// Read only up to the published head, taken after the signal channel:
		// bbolt makes a commit visible to readers before the writer has
		// updated the stream tail and the head, and a subscriber that acts on
		// an event must find it through ReadStream and Head too. A commit
		// published after this load closes wait, so nothing is missed.
		limit := s.head.Load()
		scanned := 0
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketLog).Cursor()
			for k, v := c.Seek(u64(next)); k != nil && scanned < s.opts.ReadChunk; k, v = c.Next() {
				pos := binary.BigEndian.Uint64(k)
				if pos > limit {
					break
				}
				scanned++
				next = pos + 1
				hd, err := decodeHeader(v)
				if err != nil {
					return s.damaged(pos, err)
				}
				if !m.match(hd.stream, hd.typ) {
					continue
				}
				e, err := hd.finish(events.Position(pos))
				if err != nil {
					return s.damaged(pos, err)
				}
				buf = append(buf, e)
			}
			return nil
		})
		if err != nil || len(buf) > 0 {
			select {
			case full <- chunk{evs: buf, err: err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		} else {
			free <- buf // nothing matched: keep the buffer
		}
		if scanned == s.opts.ReadChunk {
			continue // more to catch up on
		}
		// At the head as of this read. If a commit landed after the read,
		// wait is already closed and the loop reads again.
		select {
		case <-wait:
		case <-stop:
			return
		case <-s.done:
			return // the handler loop sees done too and returns ErrClosed
		}
	}
}
