// Package events is Slotkeeper's vocabulary: the event catalogue, the envelope
// every store writes and reads, and the Store interface that the embedded bbolt
// store and the KurrentDB adapter both implement.
//
// Nothing in this package imports anything else of Slotkeeper's.
package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Position is an event's place in the global order of a store. Every event
// has a position of its own, also within one multi-event append (for
// KurrentDB the prepare position, see docs/kurrent.md), so "after position
// p" always means "after that one event". Positions only grow; they are not
// necessarily contiguous (KurrentDB's are log offsets). The
// zero Position means "before the first event", so SubscribeAll(ctx, 0, …)
// delivers everything. Positions are stable across restarts, which is why SSE
// event ids are positions.
type Position uint64

// Revision numbers the events of one stream from 0, like KurrentDB does.
type Revision = uint64

// Direction of a stream read.
type Direction int

const (
	Forward Direction = iota
	Backward
)

// ExpectedRevision is the optimistic-concurrency condition of an append. Every
// append by a job attempt uses Exact: that is the fence of DESIGN.md invariant 1.
type ExpectedRevision struct {
	kind expectedKind
	rev  uint64
}

type expectedKind uint8

const (
	expectAny expectedKind = iota
	expectNoStream
	expectStreamExists
	expectExact
)

// Any appends whatever the stream holds. Use it only where no decision depends
// on the stream's state (e.g. the audit of a rejected request).
func Any() ExpectedRevision { return ExpectedRevision{kind: expectAny} }

// NoStream appends only when the stream has no events yet.
func NoStream() ExpectedRevision { return ExpectedRevision{kind: expectNoStream} }

// StreamExists appends only when the stream has at least one event.
func StreamExists() ExpectedRevision { return ExpectedRevision{kind: expectStreamExists} }

// Exact appends only when the stream's last event has revision rev.
func Exact(rev Revision) ExpectedRevision { return ExpectedRevision{kind: expectExact, rev: rev} }

// IsAny, IsNoStream, IsStreamExists and ExactRevision let adapters translate the
// condition to their own driver's type.
func (e ExpectedRevision) IsAny() bool          { return e.kind == expectAny }
func (e ExpectedRevision) IsNoStream() bool     { return e.kind == expectNoStream }
func (e ExpectedRevision) IsStreamExists() bool { return e.kind == expectStreamExists }
func (e ExpectedRevision) ExactRevision() (Revision, bool) {
	return e.rev, e.kind == expectExact
}

// Satisfied reports whether a stream whose last revision is last (exists=false
// for an empty stream) meets the condition. Stores use it so that every store
// means the same thing by each case.
func (e ExpectedRevision) Satisfied(last Revision, exists bool) bool {
	switch e.kind {
	case expectAny:
		return true
	case expectNoStream:
		return !exists
	case expectStreamExists:
		return exists
	default:
		return exists && last == e.rev
	}
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectAny:
		return "any"
	case expectNoStream:
		return "no-stream"
	case expectStreamExists:
		return "stream-exists"
	default:
		return fmt.Sprintf("revision %d", e.rev)
	}
}

// Metadata travels with every event.
type Metadata struct {
	// Actor is who caused the event: a person ("alice"), a worker
	// ("worker:host-1:3") or the system ("system:deadline"). For requests it
	// is the authenticated subject's display name (backend/auth).
	Actor string `json:"actor,omitempty"`
	// ActorID is the authenticated subject's stable id ("user:…",
	// "token:…"), empty for workers and the system. Names are for people;
	// the id is what an audit follows when a name could be mistaken.
	ActorID string `json:"actor_id,omitempty"`
	// CorrelationID ties every event caused by one request or one job together.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID is the id of the event or request that directly caused this one.
	CausationID string `json:"causation_id,omitempty"`
	// ClientRequestID is the X-Request-Id a caller sent, kept apart from
	// the server-generated CorrelationID so that no caller can splice its
	// request into another request's trail.
	ClientRequestID string `json:"client_request_id,omitempty"`
	// Time is when the event was decided (UTC). Stores fill it when zero.
	Time time.Time `json:"time"`
	// Schema is the payload's encoding version (see Catalogue).
	Schema int `json:"schema,omitempty"`
}

// EventData is an event on its way into a store.
type EventData struct {
	ID   string          // unique id (a UUID); stores fill it when empty
	Type string          // the event's name from the catalogue
	Data json.RawMessage // the JSON payload
	Meta Metadata
}

// RecordedEvent is an event as read back from a store.
type RecordedEvent struct {
	ID       string
	Stream   string
	Revision Revision
	Position Position
	Type     string
	Data     json.RawMessage
	Meta     Metadata
}

// AppendResult tells where an append landed.
type AppendResult struct {
	// NextExpected is the revision of the last event written: pass Exact of it
	// to the next append to keep the fence.
	NextExpected Revision
	// Position is the global position of the last event written.
	Position Position
}

// Filter selects events of a subscription. Empty fields select everything; a
// record passes when it matches any prefix (if any are given) and any type
// (if any are given).
type Filter struct {
	StreamPrefixes []string
	EventTypes     []string
}

// Match reports whether a record passes the filter.
func (f Filter) Match(stream, typ string) bool {
	if len(f.StreamPrefixes) > 0 {
		ok := false
		for _, p := range f.StreamPrefixes {
			if strings.HasPrefix(stream, p) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.EventTypes) > 0 {
		for _, t := range f.EventTypes {
			if t == typ {
				return true
			}
		}
		return false
	}
	return true
}

// Handler receives subscription events one at a time, in global order. A
// non-nil error ends the subscription and is returned by SubscribeAll.
type Handler func(ctx context.Context, ev RecordedEvent) error

// Store is an append-only log of streams with a global order.
type Store interface {
	// Append writes evs to stream atomically if expected holds, else it returns
	// an error wrapping ErrWrongRevision and writes nothing. An acknowledged
	// append is durable. Appending zero events only checks the condition.
	// Returns ErrInvalidStream, ErrInvalidEventType or ErrEventTooLarge for bad
	// input (also an append over the store's own size limit), before
	// anything is written. Returns an error wrapping ErrOutcomeUnknown when
	// the append may or may not have been written.
	Append(ctx context.Context, stream string, expected ExpectedRevision, evs ...EventData) (AppendResult, error)

	// ReadStream reads up to max events (max <= 0: all) of stream starting at
	// revision from, in direction dir. For Backward, from = math.MaxUint64
	// means "from the end". Returns ErrStreamNotFound for an empty stream.
	ReadStream(ctx context.Context, stream string, from Revision, max int, dir Direction) ([]RecordedEvent, error)

	// SubscribeAll delivers every event after position `after` (exclusive)
	// that matches filter: first the stored ones (catch-up), then new ones as
	// they are committed, with no gap and no duplicate. It blocks until ctx is
	// done (returning ctx.Err()), the handler fails (returning its error) or
	// the store closes (ErrClosed).
	//
	// `after` is 0 or the Position of an event read from this store: never
	// a computed one (Position-1 and the like), since positions need not be
	// contiguous. Any other start, and one beyond the store's end, fails at
	// once with an error wrapping ErrInvalidPosition (and ErrPermanent).
	// Errors wrapping ErrPermanent end the subscription: the store does
	// not retry them, and neither should the caller.
	SubscribeAll(ctx context.Context, after Position, filter Filter, h Handler) error

	// Head returns the position of the newest event (0 for an empty store).
	Head(ctx context.Context) (Position, error)

	// Close releases the store. Running subscriptions end with ErrClosed.
	Close() error
}

// Sentinel errors. Stores wrap them with context; test with errors.Is.
var (
	ErrWrongRevision    = errors.New("events: wrong expected revision")
	ErrStreamNotFound   = errors.New("events: stream not found")
	ErrInvalidStream    = errors.New("events: invalid stream name")
	ErrInvalidEventType = errors.New("events: invalid event type")
	ErrEventTooLarge    = errors.New("events: event too large")
	ErrInvalidData      = errors.New("events: event data is not valid JSON")
	ErrClosed           = errors.New("events: store closed")
	ErrLocked           = errors.New("events: store is in use by another process")
	// ErrCorrupt is permanent: reading again gives the same bytes, so
	// callers stop (and say so) instead of retrying. Stores wrap it with the
	// file, the position and what to do.
	ErrCorrupt = errors.New("events: data file is corrupt or not a slotkeeper store")
	// ErrInvalidPosition: SubscribeAll was asked to start after a position
	// that is not an event's of this store (never computed by the caller:
	// positions are not contiguous), or that lies beyond its end (a
	// checkpoint from a wiped or another log). It also wraps ErrPermanent.
	ErrInvalidPosition = errors.New("events: not a position of an event in this store")
	// ErrPermanent is wrapped by errors a retry cannot fix: the store
	// refuses this process (permission denied, bad credentials) or the
	// request (an invalid position). Consumers stop and report it (readiness
	// names it) instead of retrying. Use errors.Is; *PermanentError says why.
	ErrPermanent = errors.New("events: the store refuses the request permanently")
	// ErrOutcomeUnknown: an append was sent but its answer was lost (a
	// timeout, the connection lost after the request went out): it may or
	// may not have been written. The store has already retried what it
	// safely could (an Exact or NoStream append, with the same event ids);
	// the caller must read the stream to find out, never assume either way.
	ErrOutcomeUnknown = errors.New("events: append outcome unknown (it may have been written)")
)

// PermanentError is a refusal a retry cannot fix (see ErrPermanent). Reason
// is for people, e.g. "the KurrentDB user may not read $all".
type PermanentError struct {
	Reason string
	Err    error // the store's own error, kept for the log
}

func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "events: " + e.Reason
	}
	return "events: " + e.Reason + ": " + e.Err.Error()
}

// Unwrap lets errors.Is find ErrPermanent and the cause.
func (e *PermanentError) Unwrap() []error { return []error{ErrPermanent, e.Err} }

// Refuser is implemented by stores that can be refused as a whole (the
// KurrentDB adapter: access denied, bad credentials). Refused returns the
// first such refusal (wrapping ErrPermanent) or nil; readiness names it.
type Refuser interface {
	Refused() error
}

// InvalidPosition is the error stores return for a start position that is
// not an event's (see ErrInvalidPosition); detail says which case.
func InvalidPosition(p Position, detail string) error {
	return &PermanentError{Reason: fmt.Sprintf("position %d: %s", p, detail), Err: ErrInvalidPosition}
}

// WrongRevisionError carries the detail of a failed condition.
type WrongRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	Actual   Revision
	Exists   bool
}

func (e *WrongRevisionError) Error() string {
	actual := "no stream"
	if e.Exists {
		actual = fmt.Sprintf("revision %d", e.Actual)
	}
	return fmt.Sprintf("events: append to %q expected %s, stream is at %s", e.Stream, e.Expected, actual)
}

func (e *WrongRevisionError) Unwrap() error { return ErrWrongRevision }

// Limits every store enforces, so behaviour doesn't change with the backend.
const (
	// MaxStreamNameLen is the longest stream name, in bytes.
	MaxStreamNameLen = 200
	// MaxEventTypeLen is the longest event type name, in bytes.
	MaxEventTypeLen = 100
	// MaxEventSize is the largest payload + metadata of one event, in bytes.
	// KurrentDB 25.1+ allows 16 MiB per event and 256 MiB per append (25.0:
	// 1 MiB per whole append; the adapter knows the node's limits, see
	// docs/kurrent.md); ours is far below because no Slotkeeper event needs
	// more than a few KB.
	MaxEventSize = 1 << 20
	// MaxAppendEvents is the most events one append may carry.
	MaxAppendEvents = 10_000
	// MaxAppendSize is the largest total (as MaxEventSize counts it) of one
	// append: an embedded store holds a whole append in one transaction.
	MaxAppendSize = 16 << 20
)

// ValidateStream checks a stream name: 1..MaxStreamNameLen bytes of valid UTF-8,
// no control characters, not starting with '$' (KurrentDB system streams).
func ValidateStream(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrInvalidStream)
	case len(s) > MaxStreamNameLen:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidStream, len(s), MaxStreamNameLen)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidStream)
	case s[0] == '$':
		return fmt.Errorf("%w: %q starts with '$' (reserved for system streams)", ErrInvalidStream, s)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: %q contains a control character", ErrInvalidStream, s)
		}
	}
	return nil
}

// ValidateEventType checks an event type: a letter, then letters, digits, '_',
// '.' or '-', at most MaxEventTypeLen bytes.
func ValidateEventType(t string) error {
	if t == "" || len(t) > MaxEventTypeLen {
		return fmt.Errorf("%w: %q (1..%d characters)", ErrInvalidEventType, t, MaxEventTypeLen)
	}
	for i, r := range t {
		ok := r < utf8.RuneSelf && (unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || r == '_' || r == '.' || r == '-')))
		if !ok {
			return fmt.Errorf("%w: %q (a letter, then letters, digits, '_', '.', '-')", ErrInvalidEventType, t)
		}
	}
	return nil
}

// ValidateAppend checks a whole append before a store writes anything.
func ValidateAppend(stream string, evs []EventData) error {
	if err := ValidateStream(stream); err != nil {
		return err
	}
	if len(evs) > MaxAppendEvents {
		return fmt.Errorf("%w: %d events in one append, limit %d", ErrEventTooLarge, len(evs), MaxAppendEvents)
	}
	total := 0
	for i := range evs {
		if err := ValidateEventType(evs[i].Type); err != nil {
			return err
		}
		// Sizes first: they are cheap, and json.Valid of a huge payload is not.
		// Metadata counts too (its strings are caller-controlled); 512 bytes
		// cover the fixed part of the envelope.
		m := &evs[i].Meta
		n := len(evs[i].Data) + len(evs[i].ID) + len(m.Actor) + len(m.ActorID) + len(m.CorrelationID) + len(m.CausationID) + len(m.ClientRequestID) + 512
		if n > MaxEventSize {
			return fmt.Errorf("%w: %s is %d bytes with its metadata, limit %d", ErrEventTooLarge, evs[i].Type, n, MaxEventSize)
		}
		total += n
		if total > MaxAppendSize {
			return fmt.Errorf("%w: the append is over %d bytes, limit %d", ErrEventTooLarge, total, MaxAppendSize)
		}
		if len(evs[i].Data) > 0 && !json.Valid(evs[i].Data) {
			return fmt.Errorf("%w: event %d (%s)", ErrInvalidData, i, evs[i].Type)
		}
	}
	return nil
}
