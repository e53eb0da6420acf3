// Package httpc is the HTTP plumbing the Coolify and Bitbucket clients
// share: bearer auth, context-bound requests tagged with the job attempt
// (User-Agent, X-Slotkeeper-Job, X-Request-Id), classification of transport
// failures (canceled vs. transport, sent vs. not sent), bounded honouring of
// 429 Retry-After, the bounded backoff used to confirm deletes, and the one
// decision of what an answer means: found, absent (only a 404 in the
// provider's own words), or unknown.
package httpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/retry"
)

// maxBody bounds how much of an answer is read; provider answers we use are
// small, and a huge one must not exhaust memory.
const maxBody = 4 << 20

// RateLimit bounds how 429 answers are retried.
type RateLimit struct {
	// Retries is how many times a 429 is retried before giving up with
	// CodeRateLimited.
	Retries int
	// MaxWait caps one Retry-After wait; a longer Retry-After gives up at once.
	MaxWait time.Duration
	// Default is the wait when Retry-After is missing or unreadable.
	Default time.Duration
}

// Client sends requests to one provider.
type Client struct {
	Base  string // e.g. "http://host/api/v1", no trailing slash
	Token string
	HTTP  *http.Client
	Rate  RateLimit
	// Message extracts the provider's message from an error body.
	Message func(body []byte) string
	// NotFound reports whether a 404's body is the provider's own "does
	// not exist". Any other 404 (a proxy's HTML page, an empty body, a
	// stranger's JSON) says nothing about the resource. nil: none is.
	NotFound func(body []byte) bool
	// Clock times Retry-After waits and delete confirmations; nil is the
	// wall clock. Tests pass a clock.Fake so a 60 s Retry-After costs no
	// wall time.
	Clock clock.Clock
	// Budget, if set, is the credential's API budget: every request waits
	// for it (budget.go). nil: none.
	Budget *Budget
}

func (c *Client) clock() clock.Clock {
	if c.Clock == nil {
		return clock.Real()
	}
	return c.Clock
}

// Response is a provider answer of any status.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request and returns the answer whatever its status, retrying
// 429 within the RateLimit bounds. It returns an *providers.Error only when
// no answer came (Code canceled or transport) or 429 persisted. mutating
// says whether the request could change something: then a request that was
// written but not answered is Uncertain.
func (c *Client) Do(ctx context.Context, op, resource, method, path string, query url.Values, body any, mutating bool) (*Response, *providers.Error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, &providers.Error{Op: op, Resource: resource, Code: providers.CodeInvalid, Message: "encode body", Err: err}
		}
	}
	for attempt := 0; ; attempt++ {
		resp, perr := c.once(ctx, op, resource, method, path, query, payload, mutating)
		if perr != nil {
			return nil, perr
		}
		if resp.Status != http.StatusTooManyRequests {
			return resp, nil
		}
		wait, ok := retryAfter(resp.Header.Get("Retry-After"), c.Rate.Default, c.clock().Now())
		if attempt >= c.Rate.Retries || !ok || wait > c.Rate.MaxWait {
			return nil, c.Fail(op, resource, resp, providers.CodeRateLimited, false)
		}
		if c.Budget != nil {
			// The budget recorded the Retry-After: the next attempt's
			// acquire waits it out with every other caller.
			continue
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// The wait would outlast the caller's deadline (the job step's):
			// give up now with a retryable answer instead of being canceled
			// half way through it.
			e := c.Fail(op, resource, resp, providers.CodeRateLimited, false)
			e.Message += " (Retry-After " + wait.String() + " is past the deadline)"
			return nil, e
		}
		if err := clock.Sleep(ctx, c.clock(), wait); err != nil {
			return nil, &providers.Error{Op: op, Resource: resource, Status: resp.Status, Code: providers.CodeCanceled, Message: "canceled while waiting out Retry-After", Err: err}
		}
	}
}

func (c *Client) once(ctx context.Context, op, resource, method, path string, query url.Values, payload []byte, mutating bool) (*Response, *providers.Error) {
	if err := ctx.Err(); err != nil {
		// Never start a request after cancellation.
		return nil, &providers.Error{Op: op, Resource: resource, Code: providers.CodeCanceled, Err: err}
	}
	defer providers.RequestStarting(ctx)()
	u := c.Base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var sent atomic.Bool // set from the transport's goroutine
	trace := &httptrace.ClientTrace{WroteHeaders: func() { sent.Store(true) }}
	var rd io.Reader
	if payload != nil {
		rd = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, u, rd)
	if err != nil {
		return nil, &providers.Error{Op: op, Resource: resource, Code: providers.CodeInvalid, Message: "build request", Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	// Tie the request to its job attempt in the provider's logs.
	req.Header.Set("User-Agent", providers.UserAgent(ctx))
	req.Header.Set(providers.HeaderRequestID, providers.NewRequestID(ctx))
	if tag, ok := providers.CallTagFrom(ctx); ok {
		req.Header.Set(providers.HeaderJob, tag.String())
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Budget != nil {
		if err := c.Budget.acquire(ctx); err != nil {
			var eb errBudget
			if errors.As(err, &eb) {
				return nil, &providers.Error{Op: op, Resource: resource, Status: http.StatusTooManyRequests, Code: providers.CodeRateLimited,
					Message: eb.Error() + ", past this call's deadline (nothing was sent)"}
			}
			return nil, &providers.Error{Op: op, Resource: resource, Code: providers.CodeCanceled, Message: "canceled while waiting for API budget (nothing was sent)", Err: err}
		}
	}
	resp, err := c.HTTP.Do(req)
	if c.Budget != nil {
		c.Budget.release(resp)
	}
	if err != nil {
		return nil, c.transportError(ctx, op, resource, err, mutating && sent.Load())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		// The status line came but the body broke off: for a mutating call
		// a 2xx status alone is not a definite answer we can read.
		return nil, c.transportError(ctx, op, resource, err, mutating)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// transportError classifies a failure with no (complete) answer.
func (c *Client) transportError(ctx context.Context, op, resource string, err error, uncertain bool) *providers.Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // drop the URL: keep errors short (it never holds a token)
	}
	code := providers.CodeTransport
	if ctx.Err() != nil {
		code, err = providers.CodeCanceled, errors.Join(ctx.Err(), err)
	}
	return &providers.Error{Op: op, Resource: resource, Code: code, Uncertain: uncertain, Err: c.redact(err)}
}

// Absent reports whether resp is the provider saying, in its own words,
// that the resource does not exist: a 404 whose body NotFound recognises.
// It is the only answer that may be read as absent (DESIGN.md invariant 6).
func (c *Client) Absent(resp *Response) bool {
	return resp.Status == http.StatusNotFound && c.NotFound != nil && c.NotFound(resp.Body)
}

// Lookup reads the answer to a GET of one resource: 200 is Found (the
// caller decodes the body), Absent comes with a CodeNotFound error, and
// anything else — a foreign 404 included — is Unknown with an error.
func (c *Client) Lookup(op, resource string, resp *Response) (providers.Lookup, *providers.Error) {
	switch {
	case resp.Status == http.StatusOK:
		return providers.Found, nil
	case c.Absent(resp):
		return providers.Absent, c.Fail(op, resource, resp, providers.CodeNotFound, false)
	}
	return providers.Unknown, c.Unexpected(op, resource, resp, false)
}

// CodeFor maps an answer's status to a Code; a 404 not in the provider's
// own words is CodeForeign, never CodeNotFound.
func (c *Client) CodeFor(resp *Response) providers.Code {
	if resp.Status == http.StatusNotFound && !c.Absent(resp) {
		return providers.CodeForeign
	}
	return codeForStatus(resp.Status)
}

// Unexpected builds the error for an answer the caller cannot use, coded by
// CodeFor. On a mutating call a 5xx or a foreign answer is Uncertain: the
// request may have reached the provider and acted before the answer went
// wrong.
func (c *Client) Unexpected(op, resource string, resp *Response, mutating bool) *providers.Error {
	code := c.CodeFor(resp)
	return c.Fail(op, resource, resp, code, mutating && (resp.Status >= 500 || code == providers.CodeForeign))
}

// Fail builds the error for an answer the caller did not expect, with the
// caller's code. Uncertain is the caller's call (a 5xx on a mutating
// request may have taken effect).
func (c *Client) Fail(op, resource string, resp *Response, code providers.Code, uncertain bool) *providers.Error {
	msg := ""
	if c.Message != nil && code != providers.CodeForeign {
		msg = c.Message(resp.Body)
	}
	if msg == "" {
		msg = strings.Join(strings.Fields(string(resp.Body)), " ")
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
	}
	if code == providers.CodeForeign {
		msg = "not the provider's own not-found answer (a proxy's page or a wrong base URL?): " + msg
	}
	return &providers.Error{Op: op, Resource: resource, Status: resp.Status, Code: code, Message: c.redactString(msg), Uncertain: uncertain}
}

// New returns a Client with the defaults both provider clients document:
// hc nil is NewHTTPClient(); rateRetries 0 is 3 (negative: no retries);
// maxRetryAfter <= 0 is 30s; a 429 without a readable Retry-After waits 1s.
// message and notFound are the provider's readers of its error bodies
// (Client.Message, Client.NotFound).
func New(base, token string, hc *http.Client, rateRetries int, maxRetryAfter time.Duration, message func(body []byte) string, notFound func(body []byte) bool) Client {
	if hc == nil {
		hc = NewHTTPClient()
	}
	if rateRetries == 0 {
		rateRetries = 3
	}
	if maxRetryAfter <= 0 {
		maxRetryAfter = 30 * time.Second
	}
	return Client{
		Base: base, Token: token, HTTP: hc,
		Rate:    RateLimit{Retries: max(rateRetries, 0), MaxWait: maxRetryAfter, Default: time.Second},
		Message: message, NotFound: notFound,
	}
}

// ConfirmDefaults returns b with each unset (<= 0) bound given the default
// both provider clients document: 250ms doubling to 5s, giving up after 2
// minutes.
func ConfirmDefaults(b providers.Backoff) providers.Backoff {
	if b.Initial <= 0 {
		b.Initial = 250 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 5 * time.Second
	}
	if b.Total <= 0 {
		b.Total = 2 * time.Minute
	}
	return b
}

// NewHTTPClient returns the default client: no overall timeout (ctx bounds
// each call) and no redirects — a redirected DELETE or a token sent on to
// another place is never what we want; a 3xx is reported instead.
func NewHTTPClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// codeForStatus maps an HTTP status to a Code. Coolify's 400 "Invalid
// token." is told apart by the caller; a foreign 404 by CodeFor.
func codeForStatus(status int) providers.Code {
	switch {
	case status == 401:
		return providers.CodeUnauthorized
	case status == 403:
		return providers.CodeForbidden
	case status == 404:
		return providers.CodeNotFound
	case status == 409:
		return providers.CodeConflict
	case status == 422 || status == 400:
		return providers.CodeUnprocessable
	case status == 429:
		return providers.CodeRateLimited
	case status >= 500:
		return providers.CodeServer
	}
	return providers.CodeServer // any other unexpected answer: treat as a server fault
}

// redact removes the token from anything that might echo it.
func (c *Client) redactString(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token, "[redacted]")
}

type redacted struct{ msg string }

func (r redacted) Error() string { return r.msg }

func (c *Client) redact(err error) error {
	if c.Token != "" && strings.Contains(err.Error(), c.Token) {
		return redacted{c.redactString(err.Error())}
	}
	return err
}

// retryAfter reads a Retry-After header (seconds or an HTTP date).
func retryAfter(h string, def time.Duration, now time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return def, true
	}
	if n, err := strconv.Atoi(h); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(0, t.Sub(now)), true
	}
	return def, true
}

// Poll calls check until it reports done, returns an error, or the Total
// bound passes (then it returns false, nil). It waits between calls on the
// client's clock with b's doubling backoff, and stops at once when ctx is
// done.
func (c *Client) Poll(ctx context.Context, b providers.Backoff, check func() (done bool, err error)) (bool, error) {
	return retry.Poll(ctx, c.clock(), retry.Backoff{Initial: b.Initial, Max: b.Max}, b.Total, check)
}
