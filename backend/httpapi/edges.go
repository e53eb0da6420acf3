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

// bodyDeadline gives every request that may carry a body a deadline for
// reading it: a body trickled at a byte a second would otherwise hold a
// connection and a goroutine for hours. A read past the deadline fails with
// os.ErrDeadlineExceeded, which the error handler answers with 408 (and the
// connection is closed). Reads without a body (GET, HEAD, the stream) are
// left alone.
func (s *Server) bodyDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.Method == http.MethodGet || req.Method == http.MethodHead || req.Body == nil || req.Body == http.NoBody {
			return next(c)
		}
		rc := http.NewResponseController(c.Response().Writer)
		if err := rc.SetReadDeadline(time.Now().Add(s.d.BodyReadTimeout)); err == nil {
			defer rc.SetReadDeadline(time.Time{})
		}
		return next(c)
	}
}
