package waitlist_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	skclock "github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestWarningWebhookIsSignedAndFollowsNoRedirect: a deadline warning is
// posted as job outcomes are (backend/webhook): signed with the webhook
// secret, a 307 to another host is not followed (the body is not re-posted
// there, and so the secret path never reaches it as Referer), and the URL
// is in no log line. Before, the waitlist had its own sender: unsigned,
// following redirects with the secret URL as Referer.
func TestWarningWebhookIsSignedAndFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	const secret, secretPath = "whsec-wl-71c2", "/services/T1/B1/XWLSECRETX"
	type seen struct {
		path, sig, referer string
		body               []byte
	}
	var mu sync.Mutex
	var atHook, elsewhere []seen
	record := func(into *[]seen) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			*into = append(*into, seen{r.URL.Path, r.Header.Get(webhook.HeaderSignature), r.Header.Get("Referer"), body})
			mu.Unlock()
		}
	}
	other := httptest.NewServer(record(&elsewhere))
	defer other.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(&atHook)(w, r)
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	}))
	defer hook.Close()
	var logs bytes.Buffer
	var logMu sync.Mutex
	h := &waitlist.Webhook{URL: hook.URL + secretPath, Secret: secret, BaseURL: "http://dash.local", ExtendBy: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)), Attempts: 3}
	h.Send(context.Background(), events.DeadlineWarning{Slot: "alpha", Occupant: "bob", Deadline: t0, LeadSeconds: 600})

	mu.Lock()
	defer mu.Unlock()
	if len(atHook) != 1 {
		t.Fatalf("%d posts to the webhook, want 1 (a 3xx is final, not retried)", len(atHook))
	}
	if got := atHook[0]; got.path != secretPath || got.sig != webhook.Sign(secret, got.body) {
		t.Errorf("post %s signature %q, want %q", got.path, got.sig, webhook.Sign(secret, got.body))
	}
	if len(elsewhere) != 0 {
		t.Errorf("the 307 was followed: %d posts to the other host (Referer %q)", len(elsewhere), elsewhere[0].referer)
	}
	for _, s := range append(atHook, elsewhere...) {
		if s.referer != "" {
			t.Errorf("Referer sent: %q", s.referer)
		}
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "XWLSECRETX") {
		t.Errorf("the logs hold the webhook URL:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestWarningWebhookRetriesOnTheClock: a 503 is retried Attempts times,
// one second apart on the webhook's clock (a fake here: no wall time), and
// a success ends the retries.
func TestWarningWebhookRetriesOnTheClock(t *testing.T) {
	t.Parallel()
	fc := skclock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := fc.Now()
	var mu sync.Mutex
	var at []time.Duration
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, fc.Now().Sub(start))
		n := len(at)
		mu.Unlock()
		if n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer hook.Close()
	defer fc.AutoAdvance(nil)()
	h := &waitlist.Webhook{URL: hook.URL, ExtendBy: time.Hour, Attempts: 5, Clock: fc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h.Send(context.Background(), events.DeadlineWarning{Slot: "alpha", Occupant: "bob", Deadline: start, LeadSeconds: 600})
	mu.Lock()
	defer mu.Unlock()
	if want := []time.Duration{0, time.Second, 2 * time.Second}; len(at) != 3 || at[1] != want[1] || at[2] != want[2] {
		t.Fatalf("posts at %v, want %v", at, want)
	}
}
