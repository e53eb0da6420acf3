package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Code is the machine-readable kind of an API error: backend/apperr's one
// code type, which the commands return too. It is what the dashboard
// switches on; the HTTP status is derived from it in one place (statusOf).
type Code = apperr.Code

// The API's error codes (docs/api.md lists them with their statuses).
const (
	CodeInvalid          = apperr.Invalid
	CodeUnauthenticated  = apperr.Unauthenticated
	CodeForbidden        = apperr.Forbidden
	CodeUnsupportedMedia = apperr.UnsupportedMedia
	CodeMisdirected      = apperr.Misdirected
	CodeUnprocessable    = apperr.Unprocessable
	CodeNotFound         = apperr.NotFound
	CodeMethodNotAllowed = apperr.MethodNotAllowed
	CodeConflict         = apperr.Conflict
	CodeRequestTimeout   = apperr.RequestTimeout
	CodeTooLarge         = apperr.TooLarge
	CodeTooMany          = apperr.TooMany
	CodeUpstream         = apperr.Upstream
	CodeUnavailable      = apperr.Unavailable
	CodeStoreChanged     = apperr.StoreChanged
	CodeInternal         = apperr.Internal
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

// Error is an API error as handlers (and the commands they call) return
// it: apperr's one type. The error handler renders it as
// {"error":{"code","reason","args","message","details"}}.
type Error = apperr.Error

// errf builds an *Error with a formatted message.
func errf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalidField builds the CodeInvalid error that names the offending field
// in its details.
func invalidField(field, msg string) *Error { return apperr.InvalidField(field, msg) }

// errorBody is the wire shape of every error.
type errorBody struct {
	Error errorPayload `json:"error"`
}

// errorPayload: reason and args are always sent (a reason of its own, or
// the code), so the dashboard can always pick a sentence (docs/api.md
// "Reasons").
type errorPayload struct {
	Code    Code              `json:"code"`
	Reason  apperr.Reason     `json:"reason"`
	Args    map[string]string `json:"args"`
	Message string            `json:"message"`
	Details map[string]any    `json:"details,omitempty"`
}

// payloadOf is the wire form of ae.
func payloadOf(ae *Error) errorPayload {
	p := errorPayload{Code: ae.Code, Reason: ae.Reason, Args: ae.Args, Message: ae.Message, Details: ae.Details}
	if p.Reason == "" {
		p.Reason = apperr.Reason(ae.Code)
		if field, ok := ae.Details["field"].(string); ok && ae.Code == CodeInvalid {
			p.Reason, p.Args = apperr.ReasonInvalidField, map[string]string{"field": field}
		}
	}
	if p.Args == nil {
		p.Args = map[string]string{}
	}
	return p
}

// toAPIError classifies any error a handler (or echo itself) returns.
func toAPIError(err error) *Error {
	// A dependency that is down or not the one we started on is the same
	// answer whoever met it (a command's store call, a read of the read
	// model): try again later, not "internal error".
	var ae *Error
	if errors.As(err, &ae) && ae.Code != CodeInternal {
		return ae
	}
	if de := dependencyError(err); de != nil {
		return de
	}
	if ae != nil {
		return ae
	}
	if ae := authError(err); ae != nil {
		return ae
	}
	var ce *events.ContendedError
	if errors.As(err, &ce) {
		return contended(ce.Stream, err)
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
		var wre *events.WrongRevisionError
		what := ""
		if errors.As(err, &wre) {
			what = wre.Stream
		}
		return contended(what, err)
	case errors.Is(err, events.ErrInvalidStream):
		return &Error{Code: CodeInvalid, Message: err.Error(), Err: err}
	case errors.Is(err, events.ErrClosed), errors.Is(err, context.Canceled):
		return &Error{Code: CodeUnavailable, Message: "server is shutting down", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Message: "timed out", Err: err}
	}
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

// contended is the conflict of a lost race that reached the handler
// without a command's retries (apperr.Decided words those).
func contended(what string, err error) *Error {
	e := apperr.RefuseAs(CodeConflict, apperr.ReasonChangedConcurrently, "unretried", "what", what)
	e.Err = err
	return e
}

// authError classifies the account directory's errors (backend/auth's
// sentinels), nil for any other error.
func authError(err error) *Error {
	switch {
	case errors.Is(err, auth.ErrInvalid):
		return errf(CodeInvalid, "%s", strings.TrimPrefix(err.Error(), "auth: invalid input: "))
	case errors.Is(err, auth.ErrExists):
		return &Error{Code: CodeConflict, Message: strings.TrimPrefix(err.Error(), "auth: "), Reason: apperr.ReasonNameTaken, Err: err}
	case errors.Is(err, auth.ErrNotFound):
		return &Error{Code: CodeNotFound, Message: "no such user or token", Err: err}
	}
	return nil
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
	body := errorBody{Error: payloadOf(ae)}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
