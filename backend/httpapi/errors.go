package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Code is the machine-readable kind of an API error. It is what the
// dashboard switches on; the HTTP status is derived from it in one place
// (statusOf).
type Code string

// The API's error codes (docs/api.md lists them with their statuses).
const (
	CodeInvalid          Code = "invalid"
	CodeUnauthenticated  Code = "unauthenticated"
	CodeForbidden        Code = "forbidden"
	CodeUnsupportedMedia Code = "unsupported_media_type"
	CodeMisdirected      Code = "misdirected"
	CodeUnprocessable    Code = "unprocessable"
	CodeNotFound         Code = "not_found"
	CodeMethodNotAllowed Code = "method_not_allowed"
	CodeConflict         Code = "conflict"
	CodeRequestTimeout   Code = "request_timeout"
	CodeTooLarge         Code = "too_large"
	CodeTooMany          Code = "too_many"
	CodeUpstream         Code = "upstream"
	CodeUnavailable      Code = "unavailable"
	// CodeStoreChanged: the event store is not the one this process started
	// on (wiped, rewound or replaced); it answers no authenticated request until
	// restarted.
	CodeStoreChanged Code = "store_changed"
	CodeInternal     Code = "internal"
)

// statusOf is the single code → HTTP status map.
var statusOf = map[Code]int{
	CodeInvalid:          http.StatusBadRequest,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodeForbidden:        http.StatusForbidden,
	CodeUnsupportedMedia: http.StatusUnsupportedMediaType,
	CodeMisdirected:      http.StatusMisdirectedRequest,
	CodeUnprocessable:    http.StatusUnprocessableEntity,
	CodeNotFound:         http.StatusNotFound,
	CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	CodeConflict:         http.StatusConflict,
	CodeRequestTimeout:   http.StatusRequestTimeout,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeTooMany:          http.StatusTooManyRequests,
	CodeUpstream:         http.StatusBadGateway,
	CodeUnavailable:      http.StatusServiceUnavailable,
	CodeStoreChanged:     http.StatusServiceUnavailable,
	CodeInternal:         http.StatusInternalServerError,
}

// Error is an API error as handlers return it. The error handler renders it
// as {"error":{"code","message","details"}}.
type Error struct {
	Code    Code
	Message string
	Details map[string]any
	Err     error // the cause, logged for internal errors, never sent
	// RetryAfter (seconds) is sent as Retry-After with 429 and 503
	// (default 2).
	RetryAfter int
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// errf builds an *Error with a formatted message.
func errf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalidField builds the CodeInvalid error that names the offending field
// in its details.
func invalidField(field, msg string) *Error {
	return &Error{Code: CodeInvalid, Message: msg, Details: map[string]any{"field": field}}
}

// errorBody is the wire shape of every error.
type errorBody struct {
	Error errorPayload `json:"error"`
}

type errorPayload struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// slotsCode maps the slots errors' codes; any other is CodeInternal.
var slotsCode = map[slots.Code]Code{
	slots.CodeInvalid:       CodeInvalid,
	slots.CodeForbidden:     CodeForbidden,
	slots.CodeNotFound:      CodeNotFound,
	slots.CodeConflict:      CodeConflict,
	slots.CodeUnprocessable: CodeUnprocessable,
	slots.CodeUpstream:      CodeUpstream,
}

// toAPIError classifies any error a handler (or echo itself) returns.
func toAPIError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	// A dependency that is down or not the one we started on is the same
	// answer whoever met it (a command's store call, a read of the read
	// model): try again later, not "internal error".
	if de := dependencyError(err); de != nil {
		return de
	}
	var se *slots.Error
	if errors.As(err, &se) {
		code, ok := slotsCode[se.Code]
		if !ok {
			code = CodeInternal
		}
		return &Error{Code: code, Message: se.Message, Details: se.Details, Err: se}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok && s != "" {
			msg = s
		}
		switch he.Code {
		case http.StatusNotFound:
			return &Error{Code: CodeNotFound, Message: "no such route", Err: err}
		case http.StatusMethodNotAllowed:
			return &Error{Code: CodeMethodNotAllowed, Message: "method not allowed on this route", Err: err}
		case http.StatusRequestEntityTooLarge:
			return &Error{Code: CodeTooLarge, Message: msg, Err: err}
		case http.StatusTooManyRequests:
			return &Error{Code: CodeTooMany, Message: msg, Err: err}
		case http.StatusServiceUnavailable:
			return &Error{Code: CodeUnavailable, Message: msg, Err: err}
		}
		if he.Code >= 400 && he.Code < 500 {
			return &Error{Code: CodeInvalid, Message: msg, Err: err}
		}
		return &Error{Code: CodeInternal, Message: "internal error", Err: err}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Code: CodeTooLarge, Message: fmt.Sprintf("body larger than %d bytes", mbe.Limit), Details: map[string]any{"limit": mbe.Limit}, Err: err}
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &Error{Code: CodeRequestTimeout, Message: "the request body was not received in time", Err: err}
	case errors.Is(err, projections.ErrInvalid):
		return &Error{Code: CodeInvalid, Message: err.Error(), Err: err}
	case errors.Is(err, projections.ErrNotFound), errors.Is(err, events.ErrStreamNotFound):
		return &Error{Code: CodeNotFound, Message: "not found", Err: err}
	case errors.Is(err, events.ErrWrongRevision):
		return &Error{Code: CodeConflict, Message: "changed concurrently, try again", Err: err}
	case errors.Is(err, events.ErrInvalidStream):
		return &Error{Code: CodeInvalid, Message: err.Error(), Err: err}
	case errors.Is(err, events.ErrClosed), errors.Is(err, context.Canceled):
		return &Error{Code: CodeUnavailable, Message: "server is shutting down", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Message: "timed out", Err: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

// dependencyError is the 503 of an outage of the event store or the read
// model, nil for any other error.
func dependencyError(err error) *Error {
	switch {
	case errors.Is(err, events.ErrStoreChanged):
		return &Error{Code: CodeStoreChanged, Message: "the event store is not the one this server started on (wiped, replaced or rewound); it answers nothing until restarted",
			Details: map[string]any{"dependency": "event store"}, Err: err, RetryAfter: 30}
	case errors.Is(err, events.ErrUnavailable):
		return &Error{Code: CodeUnavailable, Message: "the event store is unavailable; try again",
			Details: map[string]any{"dependency": "event store"}, Err: err}
	case errors.Is(err, projections.ErrUnavailable):
		return &Error{Code: CodeUnavailable, Message: "the read model is unavailable; try again",
			Details: map[string]any{"dependency": "read model"}, Err: err}
	}
	return nil
}

// errorHandler is echo's HTTPErrorHandler: the one place where errors become
// statuses. Only internal errors are logged as errors; client mistakes are
// logged at debug level by the request logger.
func (s *Server) errorHandler(err error, c echo.Context) {
	ae := toAPIError(err)
	status, ok := statusOf[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 && status != http.StatusServiceUnavailable {
		s.log.ErrorContext(c.Request().Context(), "request failed",
			slog.String("correlation_id", requestID(c)), slog.String("error", err.Error()))
	}
	if c.Response().Committed {
		return
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		retry := "2"
		if ae.RetryAfter > 0 {
			retry = strconv.Itoa(ae.RetryAfter)
		}
		c.Response().Header().Set("Retry-After", retry)
	}
	if ae.Code == CodeRequestTimeout {
		// The rest of the body may still be on its way: don't read it.
		c.Response().Header().Set(echo.HeaderConnection, "close")
	}
	body := errorBody{Error: errorPayload{Code: ae.Code, Message: ae.Message, Details: ae.Details}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
