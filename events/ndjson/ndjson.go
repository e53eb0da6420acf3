// Package ndjson exports an event log as newline-delimited JSON, one object
// per event, and imports such an export into an empty store. It works on any
// events.Store, so it also moves a log between the embedded store and
// KurrentDB. Export streams (constant memory, whatever the log's size) and
// is resumable: a later export with From = the last position written picks
// up exactly after it.
package ndjson

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/slotkeeper/slotkeeper/events"
)

// Line is one exported event.
type Line struct {
	Position events.Position `json:"position"`
	Stream   string          `json:"stream"`
	Revision events.Revision `json:"revision"`
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Data     json.RawMessage `json:"data,omitempty"`
	Metadata events.Metadata `json:"metadata"`
}

// ExportOptions select what Export writes.
type ExportOptions struct {
	// From is exclusive: events after this position (0: from the start).
	From events.Position
	// To is inclusive (0: the head when Export starts).
	To events.Position
	// StreamPrefix, if set, keeps only streams starting with it.
	StreamPrefix string
}

// ExportResult says what was written.
type ExportResult struct {
	Events int
	Last   events.Position // position of the last event written (0: none)
}

var errDone = errors.New("ndjson: range done")

// Export writes the events in (From, To] to w, one JSON object per line.
// Returns ErrBadRange for From > To.
func Export(ctx context.Context, s events.Store, w io.Writer, o ExportOptions) (ExportResult, error) {
	to := o.To
	if to == 0 {
		h, err := s.Head(ctx)
		if err != nil {
			return ExportResult{}, err
		}
		to = h
	}
	if o.From > to && o.To != 0 {
		return ExportResult{}, fmt.Errorf("%w: --from %d is after --to %d", ErrBadRange, o.From, o.To)
	}
	var res ExportResult
	if o.From >= to {
		return res, nil
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	// Unfiltered, so the event at `to` (which exists: it is the head, or
	// any position a user named that the log skips is passed) always ends
	// the subscription; the prefix is applied here.
	err := s.SubscribeAll(ctx, o.From, events.Filter{}, func(ctx context.Context, ev events.RecordedEvent) error {
		if ev.Position > to {
			return errDone
		}
		if o.StreamPrefix == "" || len(ev.Stream) >= len(o.StreamPrefix) && ev.Stream[:len(o.StreamPrefix)] == o.StreamPrefix {
			if err := enc.Encode(Line{Position: ev.Position, Stream: ev.Stream, Revision: ev.Revision, ID: ev.ID, Type: ev.Type, Data: ev.Data, Metadata: ev.Meta}); err != nil {
				return err
			}
			res.Events++
			res.Last = ev.Position
		}
		if ev.Position == to {
			return errDone
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDone) {
		return res, err
	}
	return res, bw.Flush()
}

// ErrBadRange is returned for an empty or inverted export range.
var ErrBadRange = errors.New("ndjson: bad range")

// ErrNotEmpty is returned by Import when the target store holds events.
var ErrNotEmpty = errors.New("ndjson: the target store is not empty")

// ErrMismatch is returned by Import when the target would not reproduce the
// export: a revision that does not follow, or (without Renumber) a position
// the target assigns differently.
var ErrMismatch = errors.New("ndjson: the target store cannot reproduce the export")

// ImportOptions tune Import.
type ImportOptions struct {
	// Renumber accepts positions that differ from the export's (moving
	// between store kinds: KurrentDB and the embedded store number the log
	// differently). Order and revisions are always kept.
	Renumber bool
	// MaxLine bounds one line (default 16 MiB).
	MaxLine int
	// CheckEvent, if set, is Check's further test of every line beyond the
	// catalogue (the application's names and ids: slots.ValidateImported).
	CheckEvent func(stream, typ string, data []byte) error
}

// ImportResult says what was loaded.
type ImportResult struct {
	Events  int
	Appends int
}

// Check reads an export through and reports the first line Import would
// refuse, or one whose event is not of the catalogue (an unknown type, a
// payload that does not decode: events.Validate), with its line number. It
// writes nothing: run it before Import so that a bad line leaves the store
// empty. It returns the number of lines read.
func Check(r io.Reader, o ImportOptions) (int, error) {
	if o.MaxLine <= 0 {
		o.MaxLine = 16 << 20
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), o.MaxLine)
	var (
		lineNo  int
		lastPos events.Position
	)
	for sc.Scan() {
		lineNo++
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return lineNo, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if l.Stream == "" || l.Type == "" {
			return lineNo, fmt.Errorf("line %d: stream and type are required", lineNo)
		}
		if l.Position <= lastPos {
			return lineNo, fmt.Errorf("line %d: position %d does not follow %d", lineNo, l.Position, lastPos)
		}
		lastPos = l.Position
		if err := events.Validate(l.Type, l.Data); err != nil {
			return lineNo, fmt.Errorf("line %d (%s@%d): %w", lineNo, l.Stream, l.Revision, err)
		}
		if o.CheckEvent != nil {
			if err := o.CheckEvent(l.Stream, l.Type, l.Data); err != nil {
				return lineNo, fmt.Errorf("line %d (%.200q@%d): %w", lineNo, l.Stream, l.Revision, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return lineNo, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	return lineNo, nil
}

// Import loads an export into an empty store, one Append per run of
// consecutive events of one stream, each with the expected revision that
// makes the revisions equal the export's. A bad line stops it with its
// line number; what was appended before stays (the store was empty, so
// remove it and retry).
func Import(ctx context.Context, s events.Store, r io.Reader, o ImportOptions) (ImportResult, error) {
	if h, err := s.Head(ctx); err != nil {
		return ImportResult{}, err
	} else if h != 0 {
		return ImportResult{}, fmt.Errorf("%w (head %d)", ErrNotEmpty, h)
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 16 << 20
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), o.MaxLine)
	var (
		res     ImportResult
		run     []Line
		lineNo  int
		lastPos events.Position
	)
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		first := run[0]
		exp := events.NoStream()
		if first.Revision > 0 {
			exp = events.Exact(first.Revision - 1)
		}
		evs := make([]events.EventData, len(run))
		for i, l := range run {
			evs[i] = events.EventData{ID: l.ID, Type: l.Type, Data: l.Data, Meta: l.Metadata}
		}
		ar, err := s.Append(ctx, first.Stream, exp, evs...)
		if err != nil {
			if errors.Is(err, events.ErrWrongRevision) {
				return fmt.Errorf("%w: %s revision %d does not follow the stream (line %d): %v", ErrMismatch, first.Stream, first.Revision, lineNo-len(run)+1, err)
			}
			return fmt.Errorf("append %s (line %d): %w", first.Stream, lineNo-len(run)+1, err)
		}
		last := run[len(run)-1]
		if ar.NextExpected != last.Revision {
			return fmt.Errorf("%w: %s got revision %d for %d", ErrMismatch, last.Stream, ar.NextExpected, last.Revision)
		}
		if !o.Renumber && ar.Position != last.Position {
			return fmt.Errorf("%w: the event at line %d got position %d, the export says %d (use --renumber to move between store kinds)", ErrMismatch, lineNo, ar.Position, last.Position)
		}
		res.Events += len(run)
		res.Appends++
		run = run[:0]
		return nil
	}
	for sc.Scan() {
		lineNo++
		if err := ctx.Err(); err != nil {
			return res, err
		}
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return res, fmt.Errorf("line %d: %w", lineNo, err)
		}
		if l.Stream == "" || l.Type == "" {
			return res, fmt.Errorf("line %d: stream and type are required", lineNo)
		}
		if l.Position <= lastPos {
			return res, fmt.Errorf("line %d: position %d does not follow %d", lineNo, l.Position, lastPos)
		}
		// A run continues only with the same stream at the next revision
		// and (unless renumbering) the next position, so that one append
		// lands exactly where the export says.
		if n := len(run); n > 0 {
			prev := run[n-1]
			if l.Stream != prev.Stream || l.Revision != prev.Revision+1 || (!o.Renumber && l.Position != prev.Position+1) || n >= 500 {
				lineNo-- // flush reports the run's own lines
				err := flush()
				lineNo++
				if err != nil {
					return res, err
				}
			}
		}
		run = append(run, l)
		lastPos = l.Position
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("line %d: %w", lineNo+1, err)
	}
	return res, flush()
}
