package kurrent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/events"
)

// wireMeta is the user metadata JSON written with every event: the
// envelope's metadata, plus the caller's event id when it is not a UUID
// (KurrentDB ids are UUIDs; a stable UUID is derived from such an id).
type wireMeta struct {
	events.Metadata
	ID string `json:"slotkeeper_id,omitempty"`
}

// idNamespace derives KurrentDB event ids from non-UUID Slotkeeper ids.
var idNamespace = uuid.MustParse("8f0f3c2e-6a51-4a6f-9a59-2b7c6f1d8e11")

// toExpected maps the store's condition to the client's. Every case is
// spelled out: the client's own default (nil → Any) must never be reached.
func toExpected(e events.ExpectedRevision) (esdb.ExpectedRevision, error) {
	if rev, ok := e.ExactRevision(); ok {
		return esdb.Revision(rev), nil
	}
	switch {
	case e.IsNoStream():
		return esdb.NoStream{}, nil
	case e.IsStreamExists():
		return esdb.StreamExists{}, nil
	case e.IsAny():
		return esdb.Any{}, nil
	}
	return nil, fmt.Errorf("kurrent: unknown expected revision %v", e)
}

// Append implements events.Store. Events are written as application/json with
// their metadata as JSON user metadata. Connection failures are retried with
// the same event ids, which KurrentDB treats as the same write. Returns an
// error wrapping events.ErrWrongRevision (an *events.WrongRevisionError) when
// the condition fails.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if err := events.ValidateAppend(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	exp, err := toExpected(expected)
	if err != nil {
		return events.AppendResult{}, err
	}
	if len(evs) == 0 {
		return s.checkOnly(ctx, stream, expected)
	}
	now := time.Now().UTC()
	data := make([]esdb.EventData, len(evs))
	for i, e := range evs {
		id, err := uuid.Parse(e.ID)
		wm := wireMeta{Metadata: e.Meta}
		switch {
		case e.ID == "":
			id = uuid.New()
		case err != nil || id.String() != e.ID:
			id = uuid.NewSHA1(idNamespace, []byte(e.ID))
			wm.ID = e.ID
		}
		if wm.Time.IsZero() {
			wm.Time = now
		}
		meta, err := json.Marshal(wm)
		if err != nil {
			return events.AppendResult{}, fmt.Errorf("kurrent: metadata of %s: %w", e.Type, err)
		}
		payload := []byte(e.Data)
		if len(payload) == 0 {
			payload = []byte("null")
		}
		data[i] = esdb.EventData{EventID: id, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: payload, Metadata: meta}
	}
	var res events.AppendResult
	err = s.do(ctx, func(ctx context.Context, c *esdb.Client) error {
		wr, err := c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: exp}, data...)
		if err != nil {
			return err
		}
		// The answer's position is the transaction's: its commit position
		// and its first event's prepare position. For one event that
		// prepare position is the event's own (see toPosition).
		res = events.AppendResult{NextExpected: wr.NextExpectedVersion, Position: events.Position(wr.PreparePosition)}
		return nil
	})
	if err != nil {
		return events.AppendResult{}, s.appendErr(stream, expected, err)
	}
	if len(evs) > 1 || res.Position == 0 || uint64(res.Position) == math.MaxUint64 {
		// The last event's own position is not in the answer: read it.
		last, err := s.ReadStream(ctx, stream, res.NextExpected, 1, events.Forward)
		if err != nil {
			return events.AppendResult{}, fmt.Errorf("kurrent: append to %s was written; reading its position: %w", stream, err)
		}
		if len(last) != 1 || last[0].Revision != res.NextExpected {
			return events.AppendResult{}, fmt.Errorf("kurrent: append to %s was written; its last event %d is not readable", stream, res.NextExpected)
		}
		res.Position = last[0].Position
	}
	return res, nil
}

// checkOnly answers an append of zero events: KurrentDB would accept it
// without writing anything, so the condition is checked against the stream's
// last event here, like the other stores do.
func (s *Store) checkOnly(ctx context.Context, stream string, expected events.ExpectedRevision) (events.AppendResult, error) {
	last, err := s.ReadStream(ctx, stream, math.MaxUint64, 1, events.Backward)
	exists := err == nil && len(last) > 0
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		return events.AppendResult{}, err
	}
	var rev events.Revision
	if exists {
		rev = last[0].Revision
	}
	if !expected.Satisfied(rev, exists) {
		return events.AppendResult{}, &events.WrongRevisionError{Stream: stream, Expected: expected, Actual: rev, Exists: exists}
	}
	head, err := s.Head(ctx)
	if err != nil {
		return events.AppendResult{}, err
	}
	return events.AppendResult{NextExpected: rev, Position: head}, nil
}

// appendErr translates the client's errors at the adapter's edge.
func (s *Store) appendErr(stream string, expected events.ExpectedRevision, err error) error {
	var esErr *esdb.Error
	if errors.As(err, &esErr) && esErr.Code() == esdb.ErrorCodeWrongExpectedVersion {
		w := &events.WrongRevisionError{Stream: stream, Expected: expected}
		w.Actual, w.Exists = parseActual(esErr.Error())
		return w
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, events.ErrClosed) || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("kurrent: append to %s: %w", stream, err)
}

// parseActual reads the stream's revision out of the client's message
// "wrong expected version: expecting 'x' but got 'y'"; the client keeps the
// number only in the text. It is informational (WrongRevisionError.Actual).
func parseActual(msg string) (events.Revision, bool) {
	_, got, ok := strings.Cut(msg, "but got '")
	if !ok {
		return 0, false
	}
	got, _, _ = strings.Cut(got, "'")
	rev, err := strconv.ParseUint(got, 10, 64)
	if err != nil {
		return 0, false // "no_stream"
	}
	return rev, true
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	if err := events.ValidateStream(stream); err != nil {
		return nil, err
	}
	opts := esdb.ReadStreamOptions{Direction: esdb.Forwards, From: esdb.Revision(from)}
	if dir == events.Backward {
		opts.Direction = esdb.Backwards
		if from == math.MaxUint64 {
			opts.From = esdb.End{}
		}
	}
	// "All" is MaxInt64, not MaxUint64: the server's count is a signed
	// 64-bit number in the .NET clients, and a read never needs more.
	count := uint64(math.MaxInt64)
	if max > 0 {
		count = uint64(max)
	}
	var out []events.RecordedEvent
	err := s.do(ctx, func(ctx context.Context, c *esdb.Client) error {
		out = out[:0]
		rs, err := c.ReadStream(ctx, stream, opts, count)
		if err != nil {
			return err
		}
		defer rs.Close()
		for {
			ev, err := rs.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if r, ok := s.fromRecorded(ev.OriginalEvent()); ok {
				out = append(out, r)
			}
		}
	})
	var esErr *esdb.Error
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &esErr) && (esErr.Code() == esdb.ErrorCodeResourceNotFound || esErr.Code() == esdb.ErrorCodeStreamDeleted):
		return nil, fmt.Errorf("%w: %s", events.ErrStreamNotFound, stream)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, events.ErrClosed), errors.Is(err, ErrUnavailable):
		return nil, err
	default:
		return nil, fmt.Errorf("kurrent: read %s: %w", stream, err)
	}
}

// Head implements events.Store: the position of the newest Slotkeeper event.
// KurrentDB writes its own events ($stats-…, $settings, …) into $all; they are
// skipped, because no subscription of ours ever delivers them and a caller
// waiting "until caught up with Head" would wait forever.
func (s *Store) Head(ctx context.Context) (events.Position, error) {
	var head events.Position
	err := s.do(ctx, func(ctx context.Context, c *esdb.Client) error {
		var from esdb.AllPosition = esdb.End{}
		for {
			rs, err := c.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: from}, uint64(s.opts.HeadPage))
			if err != nil {
				return err
			}
			n := 0
			for {
				ev, err := rs.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					rs.Close()
					return err
				}
				n++
				rec := ev.OriginalEvent()
				if !isSystem(rec) {
					rs.Close()
					head = toPosition(rec.Position)
					return nil
				}
				from = rec.Position
			}
			rs.Close()
			if n < s.opts.HeadPage {
				head = 0 // only system events, or none at all
				return nil
			}
		}
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, events.ErrClosed) || errors.Is(err, ErrUnavailable) {
			return 0, err
		}
		return 0, fmt.Errorf("kurrent: head: %w", err)
	}
	return head, nil
}

// isSystem reports KurrentDB's own events, which Slotkeeper never writes
// (events.ValidateStream refuses '$' streams).
func isSystem(r *esdb.RecordedEvent) bool {
	return strings.HasPrefix(r.StreamID, "$") || strings.HasPrefix(r.EventType, "$")
}

// fromRecorded converts a client event; ok is false for system events.
func (s *Store) fromRecorded(r *esdb.RecordedEvent) (events.RecordedEvent, bool) {
	if r == nil || isSystem(r) {
		return events.RecordedEvent{}, false
	}
	var wm wireMeta
	if len(r.UserMetadata) > 0 {
		if err := json.Unmarshal(r.UserMetadata, &wm); err != nil {
			// Events written by other tools may carry other metadata; the
			// payload is still worth delivering.
			s.log.Debug("event metadata is not Slotkeeper's", "stream", r.StreamID, "err", err)
		}
	}
	id := wm.ID
	if id == "" {
		id = r.EventID.String()
	}
	if wm.Time.IsZero() {
		wm.Time = r.CreatedDate
	}
	if r.Position.Commit != math.MaxUint64 && r.Position.Commit < r.Position.Prepare {
		s.shapeWarn.Do(func() {
			s.log.Warn("KurrentDB reported an event whose commit position is below its prepare position; "+
				"resuming from such an event's position could skip the rest of its append (docs/kurrent.md, Positions)",
				"stream", r.StreamID, "commit", r.Position.Commit, "prepare", r.Position.Prepare)
		})
	}
	var data json.RawMessage
	if len(r.Data) > 0 && string(r.Data) != "null" {
		data = append(json.RawMessage(nil), r.Data...)
	}
	return events.RecordedEvent{
		ID: id, Stream: r.StreamID, Revision: r.EventNumber, Position: toPosition(r.Position),
		Type: r.EventType, Data: data, Meta: wm.Metadata,
	}, true
}

// toPosition is an event's events.Position: its prepare position.
//
// KurrentDB orders $all by the pair (commit, prepare). The commit position is
// not unique: the events of one transaction with a commit record (a
// multi-event append on servers that write one) all carry the commit
// record's position. The prepare position is the log offset of the event's
// own record, so it is unique, and since an append's records are written
// one after the other by the single writer, prepare order is $all order.
// Where commit == prepare (one event per record, as servers report for
// single events and for transactions without a commit record), the position
// is the same number the adapter used before (the commit position), so
// checkpoints and SSE ids stored by older versions stay valid.
//
// The pair cannot be rebuilt from the prepare position alone, but it need
// not be: SubscribeAll starts after position p from the KurrentDB position
// (p, p) and skips what the server sends at or before p, which resumes
// exactly after the event.
//
// Stream reads on old servers carry no commit position (MaxUint64); the
// prepare position is always there. A server that reports neither gives 0.
func toPosition(p esdb.Position) events.Position {
	switch {
	case p.Prepare != math.MaxUint64:
		return events.Position(p.Prepare)
	case p.Commit != math.MaxUint64:
		return events.Position(p.Commit)
	}
	return 0
}
