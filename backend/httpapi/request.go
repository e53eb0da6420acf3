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
	ctxRequestID = "slotkeeper.request_id"
	ctxActor     = "slotkeeper.actor"
)

// Header names of the API.
const (
	HeaderRequestID = "X-Request-Id"
	HeaderActor     = "X-Slotkeeper-Actor"
	DefaultActor    = "anonymous"
)

// MaxBodyBytes is the largest request body the API reads (docs/api.md).
const MaxBodyBytes = 64 << 10

// requestID returns the correlation id of the request.
func requestID(c echo.Context) string {
	s, _ := c.Get(ctxRequestID).(string)
	return s
}

// actorOf returns the slots.Actor of the request: the person named by the
// X-Slotkeeper-Actor header and the request id as correlation id.
func actorOf(c echo.Context) slots.Actor {
	name, _ := c.Get(ctxActor).(string)
	return slots.Actor{Name: name, CorrelationID: requestID(c)}
}

// validRequestID accepts a caller's X-Request-Id only when it is short and
// plain, because it is copied into every event and log line of the request.
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

// checkActor validates the X-Slotkeeper-Actor header: 1..64 bytes of letters,
// digits, spaces and ".-_@+", no control, format (bidi, zero-width) or
// surrounding space characters — the name is shown to other people and
// stored forever.
func checkActor(s string) error {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) || len(s) > 64 || strings.TrimSpace(s) != s {
		return fmt.Errorf("header %s must be 1..64 bytes of UTF-8 without surrounding spaces", HeaderActor)
	}
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune(" .-_@+", r)) {
			return fmt.Errorf("header %s contains %U, which is not allowed (letters, digits, space and .-_@+ only)", HeaderActor, r)
		}
	}
	return nil
}

// decodeActor undoes the percent-encoding a browser must use to send a
// non-Latin-1 name (e.g. Hangul) in a header. '%' is not allowed in names,
// so a header without it is taken as it is.
func decodeActor(h string) (string, error) {
	if !strings.Contains(h, "%") {
		return h, nil
	}
	s, err := url.PathUnescape(h)
	if err != nil {
		return "", fmt.Errorf("header %s: invalid percent-encoding", HeaderActor)
	}
	return s, nil
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
func decodeBody(c echo.Context, dst any, optional bool) error {
	req := c.Request()
	body := http.MaxBytesReader(c.Response(), req.Body, MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		return toAPIError(err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return errf(CodeInvalid, "a JSON body is required")
	}
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return errf(CodeInvalid, "Content-Type must be application/json, not %q", ct)
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
