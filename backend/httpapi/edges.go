package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Parsers of query parameters. Every parameter a route reads goes through
// one of them (or a check beside its handler), so a bad value is a 400
// naming the field and never reaches a read model that would fail on it
// (issue 16: ?cursor=garbage was a 500).

// queryPosition reads an optional store position (a decimal in
// 1..2^64-1); ok is false when the parameter is absent.
func queryPosition(c echo.Context, name string) (uint64, bool, error) {
	v := c.QueryParam(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := parsePosition(v)
	if err != nil {
		return 0, false, invalidField(name, fmt.Sprintf("query %s must be a store position (a decimal number from 1 to %d)", name, uint64(1<<64-1)))
	}
	return n, true, nil
}

// parsePosition accepts only plain decimal digits ("+1", "0x1", " 1" and
// "0" are refused) that fit in 64 bits.
func parsePosition(v string) (uint64, error) {
	if v == "" || len(v) > 20 {
		return 0, strconv.ErrRange
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, strconv.ErrRange
	}
	return n, nil
}

// DefaultBodyReadTimeout bounds reading one request body (Deps.BodyReadTimeout).
const DefaultBodyReadTimeout = 10 * time.Second

// bodyDeadline gives every request that carries a body a deadline for
// reading it: a body trickled at a byte a second would otherwise hold a
// connection and a goroutine for hours. A read past the deadline fails with
// os.ErrDeadlineExceeded, which the error handler answers with 408 (and the
// connection is closed).
//
// The deadline is set before anything else runs and is never cleared here:
// when a handler (or a refusal: 401, 404, 421, 413) does not read the body,
// net/http drains what is left after the handler returns, and a deadline
// cleared in a defer would let that drain wait forever (issue 25). net/http
// itself resets the read deadline for the next request on the connection
// (the header timeout, then the idle timeout), so keep-alive is unaffected.
// Requests without a body (net/http gives them http.NoBody: the stream and
// every plain GET) are left alone; a stream must not be cut at the deadline.
func (s *Server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		// An error means the writer cannot set deadlines (a test recorder):
		// nothing to bound then.
		_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(s.d.BodyReadTimeout))
		return next(c)
	}
}
