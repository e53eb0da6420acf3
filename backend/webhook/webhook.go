// Package webhook is the one sender of every webhook POST Slotkeeper makes
// (job outcomes from backend/notify, deadline warnings from
// backend/waitlist). It imports nothing of ours: it speaks HTTP only, so
// both may use it without reaching upward.
//
// Every POST it makes is signed when a secret is set
// (X-Slotkeeper-Signature: sha256=HMAC-SHA256(secret, body)), follows no
// redirect (a 3xx is the answer: following one would re-post the body to
// another host and hand it the secret URL as Referer), and never puts the
// webhook URL in an error (for Slack the URL is the credential). What to do
// with a failure — retry, record, give up — is the caller's.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// HeaderSignature carries Sign(secret, body) when a secret is set.
const HeaderSignature = "X-Slotkeeper-Signature"

// Sender posts bodies to one webhook URL.
type Sender struct {
	url    string
	secret string
	client *http.Client
}

// New returns a sender to rawURL, signing with secret (empty: unsigned).
// client may be nil (a 10 s timeout per request); a copy of it is used with
// redirects turned off, whatever its own policy.
func New(rawURL, secret string, client *http.Client) *Sender {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Sender{url: rawURL, secret: secret, client: &c}
}

// Post sends body as JSON with the extra headers hdr (may be nil) and
// returns the status. A 3xx is returned as is, not followed. The error is
// a transport error with the URL redacted.
func (s *Sender) Post(ctx context.Context, body []byte, hdr http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, ErrURL
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if s.secret != "" {
		req.Header.Set(HeaderSignature, Sign(s.secret, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, s.redact(err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Sign is the X-Slotkeeper-Signature of body: "sha256=" and the hex
// HMAC-SHA256 of the exact body bytes under secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig is Sign(secret, body): the one check of a
// signed delivery coming in (Bitbucket's X-Hub-Signature has the same
// form, "sha256=<hex HMAC-SHA256 of the body>"). The compare is constant
// time; an empty secret verifies nothing.
func Verify(secret string, body []byte, sig string) bool {
	if secret == "" || !strings.HasPrefix(sig, "sha256=") {
		return false
	}
	return hmac.Equal([]byte(Sign(secret, body)), []byte(sig))
}

// ErrURL: the webhook URL is not one a request can be made to.
var ErrURL = errors.New("the webhook URL is not usable")

// TransportError is a POST that got no answer: the connection failed, was
// cut, or the answer did not come in time (Timeout). Its message never
// holds the URL. Callers record what kind it was (notify's failure codes).
type TransportError struct {
	Timeout bool
	msg     string
}

func (e *TransportError) Error() string { return e.msg }

// redact strips the URL from a transport error (net/http's *url.Error
// prints it) and, to be sure, any copy of it left in the message.
func (s *Sender) redact(err error) error {
	var ue *url.Error
	msg, timeout := err.Error(), false
	if errors.As(err, &ue) {
		msg, timeout = ue.Err.Error(), ue.Timeout()
		if timeout {
			msg = "timed out: " + msg
		}
	}
	msg = strings.ReplaceAll(msg, s.url, RedactURL(s.url))
	return &TransportError{Timeout: timeout, msg: msg}
}

// RedactURL shows a webhook URL without what makes it a secret: only its
// scheme and host.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return "(webhook URL)"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
