// Package apperr is the one error type of Slotkeeper's commands and API:
// a Code (what kind of refusal; the HTTP layer maps it to a status in one
// place, backend/httpapi statusOf), an English Message for people and logs,
// and a stable Reason with string Args from which the dashboard makes its
// own sentence in the reader's language (docs/api.md "Reasons").
//
// The command packages (slots, waitlist) return *Error; the HTTP layer
// renders any *Error it meets, however deep it is wrapped, so no handler
// translates errors by hand.
package apperr

import (
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/english"
)

// Code is the machine-readable kind of an error. Its HTTP status is decided
// by the HTTP layer's one map (backend/httpapi statusOf).
type Code string

// The codes (docs/api.md "Errors" lists them with their statuses).
const (
	Invalid          Code = "invalid" // 400: bad name, body, time, field
	Unauthenticated  Code = "unauthenticated"
	Forbidden        Code = "forbidden" // 403: outside the configured scope, not yours, missing permission
	UnsupportedMedia Code = "unsupported_media_type"
	Misdirected      Code = "misdirected"
	Unprocessable    Code = "unprocessable" // 422: well-formed but cannot be done (a resource the provider says does not exist)
	NotFound         Code = "not_found"
	MethodNotAllowed Code = "method_not_allowed"
	Conflict         Code = "conflict" // 409: wrong state, blocking job, lost race, a resource another slot owns
	RequestTimeout   Code = "request_timeout"
	TooLarge         Code = "too_large"
	TooMany          Code = "too_many"
	Upstream         Code = "upstream" // 502: a provider could not answer
	Unavailable      Code = "unavailable"
	// StoreChanged: the event store is not the one this process started on
	// (wiped, rewound or replaced); it answers no authenticated request
	// until restarted.
	StoreChanged Code = "store_changed"
	Internal     Code = "internal" // 500: the store failed
)

// Error is a refusal or failure with a code. Message is English and stays
// as it is worded (clients and tests read it); Reason and Args are the
// machine form of the same sentence.
type Error struct {
	Code    Code
	Message string
	// Reason is a stable snake_case code of what happened (see Reason);
	// empty means "just the code".
	Reason Reason
	// Args are the values the sentence names (slot, job, occupant, …),
	// all strings: times in RFC 3339, numbers in decimal.
	Args map[string]string
	// Details carries machine-readable context the API has always sent,
	// e.g. {"blocking_job": id, "state": "occupied"}.
	Details map[string]any
	// Err is the cause: logged for internal errors, never sent.
	Err error
	// RetryAfter (seconds) is how long a client should wait before trying
	// again (the HTTP layer sends it as Retry-After with 429 and 503).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New builds an *Error with a formatted message.
func New(code Code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// Refuse is the refusal for reason r with args kv (name, value pairs, as
// Because takes them). Its Message is the reason's English sentence,
// "refusal.<r>" of the server's one English table (events/english), filled
// with the same args the dashboard words the reason from: the sentence is
// written once per language, not once per call site.
func Refuse(code Code, r Reason, kv ...string) *Error {
	return RefuseAs(code, r, "", kv...)
}

// RefuseAs is Refuse worded by the English table's more specific
// "refusal.<r>/<variant>" (which field, which command refused); the
// dashboard words the reason itself.
func RefuseAs(code Code, r Reason, variant string, kv ...string) *Error {
	e := (&Error{Code: code}).Because(r, kv...)
	e.Message = english.Say(english.Variant("refusal."+string(r), variant), e.Args)
	return e
}

// Because sets the error's reason and its args, given as name, value
// pairs (an odd last name gets ""), and returns e.
func (e *Error) Because(r Reason, kv ...string) *Error {
	e.Reason = r
	if len(kv) > 0 {
		e.Args = make(map[string]string, (len(kv)+1)/2)
		for i := 0; i < len(kv); i += 2 {
			v := ""
			if i+1 < len(kv) {
				v = kv[i+1]
			}
			e.Args[kv[i]] = v
		}
	}
	return e
}

// With adds details to e and returns it.
func (e *Error) With(details map[string]any) *Error {
	if len(details) == 0 {
		return e
	}
	if e.Details == nil {
		e.Details = make(map[string]any, len(details))
	}
	maps.Copy(e.Details, details)
	return e
}

// InvalidField is the Invalid error that names the offending field (in
// details.field and as the reason's field arg).
func InvalidField(field, msg string) *Error {
	return (&Error{Code: Invalid, Message: msg, Details: map[string]any{"field": field}}).Because(ReasonInvalidField, "field", field)
}

// CodeOf returns err's Code (Internal for an error without one).
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Decided turns what events.Decide returned into a command's error: nil
// and the round's own *Error pass through; a spent budget is the Conflict
// "<what> changed concurrently N times; try again"; anything else (the
// store refused or may have written the append) is Internal, with a hint
// when the outcome is unknown.
func Decided(err error, what string) error {
	if err == nil {
		return nil
	}
	var ce *events.ContendedError
	if errors.As(err, &ce) {
		return Refuse(Conflict, ReasonChangedConcurrently, "what", what, "attempts", strconv.Itoa(ce.Attempts))
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return Internalf(err, "append to %s", what)
}

// Internalf is the Internal error of a failed store call. When the store
// cannot tell whether a write landed (events.ErrOutcomeUnknown) the message
// says so, so that the caller reads before trying again: a blind retry
// could conflict with its own write.
func Internalf(err error, format string, a ...any) *Error {
	msg := fmt.Sprintf(format, a...)
	if errors.Is(err, events.ErrOutcomeUnknown) {
		msg += ": the outcome is unknown (it may have been written); read the slot before trying again"
	}
	return &Error{Code: Internal, Message: msg, Err: err}
}
