package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime/debug"
	"slices"

	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// The per-stream index is written lazily, in bulk.
//
// A commit of 30 appends to 30 streams would otherwise dirty 30 index pages
// and 30 stream pages scattered over the file (bbolt copies every touched
// page and its parents on commit), which costs more than the log pages and
// the fsyncs themselves. So a commit writes only the log; the index and the
// streams' last revisions of recent events live in memory (the tail), and
// every Options.IndexFlushEvents events the writer folds the tail into the
// index and streams buckets inside that commit's transaction, together with
// the meta key "indexed" = the position the buckets are complete up to.
//
// The log stays the only truth: Open rebuilds the tail by reading the log
// after "indexed" (at most one flush interval plus one batch), so a crash
// loses nothing and costs little at start.

var keyIndexed = []byte("indexed")

// tailStream is one stream's events after the index's high-water mark.
type tailStream struct {
	first     events.Revision // revision of positions[0]
	positions []uint64
}

func (t *tailStream) last() events.Revision { return t.first + uint64(len(t.positions)) - 1 }

// pending is a stream's state while a batch is being written: what the
// requests earlier in the batch made of it.
type pending struct {
	last      events.Revision
	exists    bool
	first     events.Revision // revision of added[0]
	added     []uint64
	persisted bool // last came from the streams bucket (no tail yet)
}

// lastRevision is a stream's newest revision as the writer sees it: the
// batch's own changes, then the tail, then the streams bucket. Only the
// writer calls it, and only the writer changes the tail, so no lock.
func (s *Store) lastRevision(streams *bolt.Bucket, batch map[string]*pending, stream string) *pending {
	if p, ok := batch[stream]; ok {
		return p
	}
	p := &pending{}
	if t, ok := s.tail[stream]; ok {
		p.last, p.exists = t.last(), true
	} else if v := streams.Get([]byte(stream)); v != nil {
		p.last, p.exists, p.persisted = binary.BigEndian.Uint64(v), true, true
	}
	batch[stream] = p
	return p
}

// flushIndex writes the tail and the batch's changes into the index and
// streams buckets and moves the high-water mark to head.
func flushIndex(tx *bolt.Tx, tail map[string]*tailStream, batch map[string]*pending, head uint64) error {
	index, streams := tx.Bucket(bucketIndex), tx.Bucket(bucketStreams)
	// Sorted, so that the B+tree is walked once left to right.
	names := make([]string, 0, len(tail)+len(batch))
	for n := range tail {
		names = append(names, n)
	}
	for n, p := range batch {
		if _, ok := tail[n]; !ok && len(p.added) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		var last events.Revision
		put := func(first events.Revision, positions []uint64) error {
			for i, pos := range positions {
				last = first + uint64(i)
				if err := index.Put(indexKey(n, last), u64(pos)); err != nil {
					return err
				}
			}
			return nil
		}
		if t, ok := tail[n]; ok {
			if err := put(t.first, t.positions); err != nil {
				return err
			}
		}
		if p, ok := batch[n]; ok && len(p.added) > 0 {
			if err := put(p.first, p.added); err != nil {
				return err
			}
		}
		if err := streams.Put([]byte(n), u64(last)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyIndexed, u64(head))
}

// applyTail adds a committed batch's changes to the tail (or clears it after
// a flush). Readers see the tail under idxMu.
func (s *Store) applyTail(batch map[string]*pending, flushed bool) {
	s.idxMu.Lock()
	defer s.idxMu.Unlock()
	if flushed {
		s.tail, s.tailEvents = map[string]*tailStream{}, 0
		return
	}
	for n, p := range batch {
		if len(p.added) == 0 {
			continue
		}
		if t, ok := s.tail[n]; ok {
			t.positions = append(t.positions, p.added...)
		} else {
			s.tail[n] = &tailStream{first: p.first, positions: p.added}
		}
		s.tailEvents += len(p.added)
	}
}

// loadTail rebuilds the tail from the log after the "indexed" mark, checking
// that each stream continues where the index left it.
func loadTail(tx *bolt.Tx) (map[string]*tailStream, int, error) {
	tail := map[string]*tailStream{}
	var from uint64
	if v := tx.Bucket(bucketMeta).Get(keyIndexed); v != nil {
		if len(v) != 8 {
			return nil, 0, fmt.Errorf("%w: indexed mark of %d bytes", events.ErrCorrupt, len(v))
		}
		from = binary.BigEndian.Uint64(v)
	}
	streams := tx.Bucket(bucketStreams)
	n := 0
	c := tx.Bucket(bucketLog).Cursor()
	for k, v := c.Seek(u64(from + 1)); k != nil; k, v = c.Next() {
		pos := binary.BigEndian.Uint64(k)
		h, err := decodeHeader(v)
		if err != nil {
			return nil, 0, fmt.Errorf("position %d: %w", pos, err)
		}
		t, ok := tail[string(h.stream)]
		if !ok {
			var want events.Revision
			if v := streams.Get(h.stream); v != nil {
				want = binary.BigEndian.Uint64(v) + 1
			}
			if h.rev != want {
				return nil, 0, fmt.Errorf("%w: %s@%d at position %d, the index ends at revision %d", events.ErrCorrupt, h.stream, h.rev, pos, want)
			}
			t = &tailStream{first: h.rev}
			tail[string(h.stream)] = t
		} else if h.rev != t.last()+1 {
			return nil, 0, fmt.Errorf("%w: %s@%d at position %d follows revision %d", events.ErrCorrupt, h.stream, h.rev, pos, t.last())
		}
		t.positions = append(t.positions, pos)
		n++
	}
	return tail, n, nil
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) (_ []events.RecordedEvent, err error) {
	defer guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	if err := events.ValidateStream(stream); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The read transaction starts and the tail is copied under one lock, so
	// the two agree: a flush's commit may already be visible in both (the
	// tail wins, its entries are the same), but never in neither.
	s.idxMu.RLock()
	tx, err := s.db.Begin(false)
	var tail tailStream
	if t, ok := s.tail[stream]; ok {
		tail = tailStream{first: t.first, positions: slices.Clone(t.positions)}
	}
	s.idxMu.RUnlock()
	if err != nil {
		if err == bolt.ErrDatabaseNotOpen {
			return nil, events.ErrClosed
		}
		return nil, err
	}
	defer tx.Rollback()

	var last events.Revision
	exists := len(tail.positions) > 0
	if exists {
		last = tail.last()
	} else if v := tx.Bucket(bucketStreams).Get([]byte(stream)); v != nil {
		last, exists = binary.BigEndian.Uint64(v), true
	}
	if !exists {
		return nil, fmt.Errorf("%w: %s", events.ErrStreamNotFound, stream)
	}
	logB, index := tx.Bucket(bucketLog), tx.Bucket(bucketIndex)
	position := func(rev events.Revision) ([]byte, error) {
		if len(tail.positions) > 0 && rev >= tail.first {
			return u64(tail.positions[rev-tail.first]), nil
		}
		p := index.Get(indexKey(stream, rev))
		if len(p) != 8 {
			return nil, fmt.Errorf("%w: %s@%d missing from the index", events.ErrCorrupt, stream, rev)
		}
		return p, nil
	}
	var out []events.RecordedEvent
	read := func(rev events.Revision) error {
		p, err := position(rev)
		if err != nil {
			return err
		}
		rec := logB.Get(p)
		if rec == nil {
			return fmt.Errorf("%w: %s@%d at position %d missing from the log", events.ErrCorrupt, stream, rev, binary.BigEndian.Uint64(p))
		}
		e, err := decodeRecord(rec, events.Position(binary.BigEndian.Uint64(p)))
		if err != nil {
			return s.damaged(binary.BigEndian.Uint64(p), err)
		}
		out = append(out, e)
		return nil
	}
	full := func() bool { return max > 0 && len(out) >= max }
	if dir == events.Backward {
		for r := int64(min(from, last)); r >= 0 && !full(); r-- {
			if err := read(uint64(r)); err != nil {
				return nil, err
			}
		}
	} else {
		for r := from; r <= last && !full(); r++ {
			if err := read(r); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
