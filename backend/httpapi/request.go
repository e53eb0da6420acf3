package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// Request-scoped values kept on the echo context.
const (
	ctxRequestID       = "slotkeeper.request_id"
	ctxClientRequestID = "slotkeeper.client_request_id"
)

// Header names of the API.
const (
	HeaderRequestID = "X-Request-Id"
	// HeaderActor was how callers named themselves before sign-in existed.
	// It is ignored: the actor is the authenticated subject.
	HeaderActor  = "X-Slotkeeper-Actor"
	DefaultActor = "anonymous"
)

// MaxBodyBytes is the largest request body the API reads (docs/api.md).
const MaxBodyBytes = 64 << 10

// requestID returns the correlation id of the request.
func requestID(c echo.Context) string {
	s, _ := c.Get(ctxRequestID).(string)
	return s
}

// actorOf returns the slots.Actor of the request: the authenticated
// subject (never a header), the server's request id as correlation id and
// the caller's own X-Request-Id, if any, as client request id.
func actorOf(c echo.Context) slots.Actor {
	sub, ok := subjectOf(c)
	if !ok {
		sub.Name = DefaultActor
	}
	cid, _ := c.Get(ctxClientRequestID).(string)
	return slots.Actor{Name: sub.Name, ID: sub.ID, CorrelationID: requestID(c), ClientRequestID: cid}
}

// validRequestID accepts a caller's X-Request-Id (kept as its client
// request id) only when it is short and plain, because it is copied into
// every event and log line of the request.
func validRequestID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._:-", r))) {
			return false
		}
	}
	return true
}

// checkActor validates a person's name given in a body or query (an
// occupant, an audit filter): 1..64 bytes of letters, digits, spaces and
// ".-_@+", no control, format (bidi, zero-width) or surrounding space
// characters — the name is shown to other people and stored forever.
func checkActor(s string) error {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) || len(s) > 64 || strings.TrimSpace(s) != s {
		return errors.New("must be 1..64 bytes of UTF-8 without surrounding spaces")
	}
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" .-_@+", r)) {
			return fmt.Errorf("contains %U, which is not allowed (letters, digits, space and .-_@+ only)", r)
		}
	}
	return nil
}

// checkSubjectID validates a subject id given in a query or body:
// "user:<id>" or "token:<id>" with an identifier the directory could have
// made (checkName's rule).
func checkSubjectID(s string) error {
	kind, id, _ := strings.Cut(s, ":")
	if kind != "user" && kind != "token" {
		return errors.New(`must be "user:<id>" or "token:<id>"`)
	}
	return checkName(id)
}

// maxNameLen bounds path identifiers (slot names, job ids).
const maxNameLen = 100

// pathName reads and checks a path parameter naming a slot or a job. The
// check is about safety at the edge (no path traversal, slashes, encoded
// separators, non-ASCII look-alikes or control characters); the slots
// service applies its own, stricter naming rules.
func pathName(c echo.Context, param string) (string, error) {
	raw := c.Param(param)
	s, err := url.PathUnescape(raw)
	if err != nil {
		return "", invalidField(param, fmt.Sprintf("%s: invalid escaping", param))
	}
	if err := checkName(s); err != nil {
		return "", invalidField(param, fmt.Sprintf("%s %q: %v", param, s, err))
	}
	return s, nil
}

// checkName is the edge rule for identifiers: 1..100 ASCII letters, digits,
// '-', '_' or '.', not starting with '.' or '-'.
func checkName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("longer than %d bytes", maxNameLen)
	}
	if s[0] == '.' || s[0] == '-' {
		return errors.New("must not start with '.' or '-'")
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.') {
			if b >= utf8.RuneSelf {
				return errors.New("only ASCII letters, digits, '-', '_' and '.' are allowed (non-ASCII characters are refused)")
			}
			return fmt.Errorf("character %q is not allowed (letters, digits, '-', '_', '.')", b)
		}
	}
	return nil
}

// decodeBody decodes a JSON request body into dst strictly: at most
// MaxBodyBytes, unknown fields rejected, exactly one JSON value. An empty
// body is accepted only when optional is true (dst keeps its zero value).
//
// The Content-Type must be application/json also when the body is empty
// (415 otherwise): an HTML form or a no-cors fetch from another page cannot
// send it. The value must be a JSON object: null, arrays and scalars are
// refused with 400.
func decodeBody(c echo.Context, dst any, optional bool) error {
	req := c.Request()
	if err := requireJSON(req); err != nil {
		return err
	}
	body := http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		return toAPIError(err)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return errf(CodeInvalid, "a JSON body is required")
	}
	if trimmed[0] != '{' {
		return errf(CodeInvalid, "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errf(CodeInvalid, "body must hold exactly one JSON value")
	}
	return nil
}

// decodeError turns encoding/json's errors into messages that name the field.
func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf("malformed JSON at byte %d", syn.Offset)}
	case errors.As(err, &typ):
		return invalidField(typ.Field, fmt.Sprintf("field %q must be %s, got JSON %s", typ.Field, typ.Type, typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalidField(f, fmt.Sprintf("unknown field %q", f))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errf(CodeInvalid, "truncated JSON body")
	}
	// time.Time and other UnmarshalJSON errors (e.g. a bad timestamp).
	return &Error{Code: CodeInvalid, Message: "invalid body: " + err.Error()}
}

// queryInt reads an optional integer query parameter within [lo, hi].
func queryInt(c echo.Context, name string, def, lo, hi int) (int, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalidField(name, fmt.Sprintf("query %s must be an integer in %d..%d", name, lo, hi))
	}
	return n, nil
}

// newRequestID makes a correlation id for a request that brought none.
func newRequestID() string { return uuid.NewString() }
