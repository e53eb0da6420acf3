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
// their metadata as JSON user metadata. Returns an error wrapping
// events.ErrWrongRevision (an *events.WrongRevisionError) when the condition
// fails, events.ErrEventTooLarge for an append over the server's limits
// (Options.MaxAppendSize: refused, never split, since an append is atomic)
// and events.ErrOutcomeUnknown when the answer was lost after the request
// went out.
//
// Retries: a failure before the request was complete wrote nothing and is
// retried (any condition). After a lost answer only Exact and NoStream
// appends are re-sent, with the same event ids: KurrentDB finds their first
// copy at any depth and answers it instead of writing again (K:
// Services/Storage/ReaderIndex/IndexWriter.cs:260-320). Any and StreamExists
// appends are deduplicated only through an in-memory cache of recent ids
// that a restart or failover loses (IndexWriter.cs:75,91,200-221), so a
// re-send could write them twice: they end with ErrOutcomeUnknown.
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
	size := 0
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
		// KurrentDB's size of an event (K: Data/Event.cs:46-47), checked
		// against its limits as it does (K: Streams.Append.cs:64-73).
		n := len(payload) + len(meta) + 2*len(e.Type)
		if n > s.opts.MaxAppendEventSize {
			return events.AppendResult{}, fmt.Errorf("%w: %s is %d bytes as KurrentDB counts it, its limit per event is %d", events.ErrEventTooLarge, e.Type, n, s.opts.MaxAppendEventSize)
		}
		if size += n; size > s.opts.MaxAppendSize {
			return events.AppendResult{}, fmt.Errorf("%w: the append of %d events is over KurrentDB's limit of %d bytes per append", events.ErrEventTooLarge, len(evs), s.opts.MaxAppendSize)
		}
		data[i] = esdb.EventData{EventID: id, EventType: e.Type, ContentType: esdb.ContentTypeJson, Data: payload, Metadata: meta}
	}
	_, retrySafe := expected.ExactRevision()
	retrySafe = retrySafe || expected.IsNoStream()

	deadline := time.Now().Add(s.opts.RetryTimeout)
	backoff := s.opts.MinBackoff
	for {
		c, err := s.acquire(ctx)
		if err != nil {
			return events.AppendResult{}, err // nothing was sent
		}
		wr, err := c.c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: exp}, data...)
		if err == nil {
			s.release(c)
			return s.appended(ctx, stream, len(evs), wr)
		}
		stage := stageOf(err)
		if stage == stageSendEOF {
			// The server ended the call before reading it all, and the
			// library drops the status that says why (G: client.go:83-86).
			// Ask again with nothing to write: the same connection and
			// stream, so the answer is the server's reason.
			stage, err = s.probeAppend(ctx, c, stream, err)
		}
		if isConnErr(err) {
			s.invalidate(c, err)
		}
		s.release(c)
		switch {
		case stage == stageAnswered:
			return events.AppendResult{}, s.appendErr(stream, expected, err)
		case stage == stageNoAnswer && !retrySafe:
			return events.AppendResult{}, outcomeUnknown(stream, expected, err)
		case ctx.Err() != nil:
			if stage == stageNoAnswer {
				return events.AppendResult{}, outcomeUnknown(stream, expected, ctx.Err())
			}
			return events.AppendResult{}, ctx.Err()
		case time.Now().After(deadline):
			if stage == stageNoAnswer {
				return events.AppendResult{}, outcomeUnknown(stream, expected, err)
			}
			return events.AppendResult{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
		case stage == stageNotSent && !isConnErr(err):
			return events.AppendResult{}, s.appendErr(stream, expected, err)
		}
		s.log.Warn("append not confirmed, retrying with the same event ids", "stream", stream, "expected", expected.String(), "err", err)
		if err := s.sleep(ctx, backoff); err != nil {
			if stage == stageNoAnswer {
				return events.AppendResult{}, outcomeUnknown(stream, expected, err)
			}
			return events.AppendResult{}, err
		}
		backoff = min(2*backoff, s.opts.MaxBackoff)
	}
}

// probeAppend finds out why the server ended an append mid-stream: it sends
// an append of no events to the same stream, which KurrentDB supports and
// which writes nothing (K: Messages/ClientMessage.cs:214-215,
// Services/Storage/StorageWriterService.cs:341). Access
// or credentials refused, or the node gone, come back as such; a server
// that takes it had refused the events themselves, and the one refusal
// KurrentDB makes while an append streams in is its size limit
// (K: Streams.Append.cs:64-73).
func (s *Store) probeAppend(ctx context.Context, c *conn, stream string, sendErr error) (appendStage, error) {
	_, err := c.c.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}})
	switch {
	case err == nil:
		return stageAnswered, fmt.Errorf("%w: KurrentDB ended the append while it was being sent, as it does for one over its size limit; "+
			"the server's limit is below the configured %d bytes per append (set maxAppendSize, docs/kurrent.md): %v",
			events.ErrEventTooLarge, s.opts.MaxAppendSize, sendErr)
	case isConnErr(err) || stageOf(err) != stageAnswered:
		return stageNotSent, err // the connection broke: nothing was committed
	}
	return stageAnswered, err
}

// outcomeUnknown is the error of an append whose answer was lost.
func outcomeUnknown(stream string, expected events.ExpectedRevision, err error) error {
	return fmt.Errorf("kurrent: append to %s (%s): %w: %w", stream, expected, events.ErrOutcomeUnknown, err)
}

// appended turns the server's answer into the store's. KurrentDB answers
// with the position of the append's last event, as both commit and prepare
// position (K: Services/RequestManager/Managers/WriteEvents.cs:85-91), so no
// read is needed: a read could hit a follower that has not applied the
// write yet (docs/kurrent.md, Leader and followers). Only an answer of
// another shape (no position; or, from servers that wrote multi-event
// appends as a transaction, a commit position above the first event's
// prepare position) makes it read the last event back.
func (s *Store) appended(ctx context.Context, stream string, n int, wr *esdb.WriteResult) (events.AppendResult, error) {
	res := events.AppendResult{NextExpected: wr.NextExpectedVersion, Position: events.Position(wr.CommitPosition)}
	if wr.CommitPosition == wr.PreparePosition && wr.CommitPosition != 0 && wr.CommitPosition != math.MaxUint64 {
		return res, nil
	}
	if n == 1 && wr.PreparePosition != 0 && wr.PreparePosition != math.MaxUint64 {
		res.Position = events.Position(wr.PreparePosition)
		return res, nil
	}
	last, err := s.ReadStream(ctx, stream, res.NextExpected, 1, events.Forward)
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("kurrent: append to %s was written; reading its position: %w", stream, err)
	}
	if len(last) != 1 || last[0].Revision != res.NextExpected {
		return events.AppendResult{}, fmt.Errorf("kurrent: append to %s was written; its last event %d is not readable", stream, res.NextExpected)
	}
	res.Position = last[0].Position
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
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, events.ErrClosed) ||
		errors.Is(err, ErrUnavailable) || errors.Is(err, events.ErrEventTooLarge) {
		return err
	}
	if m := err.Error(); strings.Contains(m, "Maximum Append Size") || strings.Contains(m, "Maximum Append Event Size") {
		// The server's own size refusal, when it came as the answer
		// (K: RpcExceptions.cs:120-132): the configured limit is too high.
		return fmt.Errorf("%w: KurrentDB refused the append (set maxAppendSize to the server's limit, docs/kurrent.md): %v", events.ErrEventTooLarge, err)
	}
	if pe := permanent(err); pe != nil {
		s.notePermanent(pe)
		return fmt.Errorf("kurrent: append to %s: %w", stream, pe)
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
	case permanent(err) != nil:
		pe := permanent(err)
		s.notePermanent(pe)
		return nil, fmt.Errorf("kurrent: read %s: %w", stream, pe)
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
		if pe := permanent(err); pe != nil {
			s.notePermanent(pe)
			return 0, fmt.Errorf("kurrent: head: %w", pe)
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
