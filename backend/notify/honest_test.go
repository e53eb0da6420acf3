package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

const (
	secret     = "whsec-test-3f9a"
	secretPath = "/services/T000/B000/XSECRETXPATHX"
)

// receiver is a webhook whose answer per post is chosen by answer (the
// n-th post, from 1). It records each post's delivery id and whether its
// signature verified.
type receiver struct {
	mu     sync.Mutex
	posts  []post
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

type post struct {
	delivery, bodyDelivery string
	attempt                int
	signed                 bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m notify.Message
	_ = json.Unmarshal(body, &m)
	rc.mu.Lock()
	rc.posts = append(rc.posts, post{
		delivery: r.Header.Get(notify.HeaderDelivery), bodyDelivery: m.DeliveryID, attempt: m.Attempt,
		signed: r.Header.Get(webhook.HeaderSignature) == webhook.Sign(secret, body),
	})
	n := len(rc.posts)
	rc.mu.Unlock()
	rc.answer(n, w, r)
}

func (rc *receiver) all() []post {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]post(nil), rc.posts...)
}

// serveOn serves h on addr ("127.0.0.1:0" for any port) until the test
// ends or the returned stop is called.
func serveOn(t *testing.T, addr string, h http.Handler) (url string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	var once sync.Once
	stop = func() { once.Do(func() { srv.Close() }) }
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

// notifier runs a notifier on st posting to url; its logs go to logs.
func notifier(t *testing.T, st events.Store, url string, logs io.Writer, timeout time.Duration) (stop func()) {
	t.Helper()
	n := notify.New(st, notify.Config{
		WebhookURL: url, Secret: secret, BaseURL: "http://dash.local", HTTP: &http.Client{Timeout: timeout},
		RetryInitial: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, Attempts: 3,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func endJob(t *testing.T, st events.Store, id string) string {
	t.Helper()
	appendJob(t, st, id, "alpha", events.JobQueued{JobID: id, Kind: events.KindReset, Slot: "alpha"}, events.JobSucceeded{JobID: id})
	evs, err := st.ReadStream(context.Background(), events.JobStream(id), 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	return evs[len(evs)-1].ID // the delivery id is the terminal event's id
}

// outcomes lists the notify stream's event types with attempt numbers,
// e.g. "A1 F1 A2 D2".
func outcomes(evs []events.RecordedEvent) (string, []events.NotificationFailed) {
	var b []string
	var fails []events.NotificationFailed
	for _, ev := range evs {
		p, _ := events.Decode(ev)
		switch e := p.(type) {
		case events.NotificationAttempted:
			b = append(b, "A"+itoa(e.Attempt))
		case events.NotificationDelivered:
			b = append(b, "D"+itoa(e.Attempt))
		case events.NotificationFailed:
			s := "F" + itoa(e.Attempt)
			if e.Final {
				s += "!"
			}
			b = append(b, s)
			fails = append(fails, e)
		}
	}
	return strings.Join(b, " "), fails
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestWebhookDeliveriesAreHonest: receivers that fail, time out, redirect
// or refuse; each delivery ends delivered or failed in the log, attempts
// are recorded before their POST, every post of one delivery carries the
// same delivery id (header and body) and a signature that verifies, and
// the webhook URL appears in no log line and no event.
func TestWebhookDeliveriesAreHonest(t *testing.T) {
	t.Parallel()
	elsewhere := &receiver{answer: func(int, http.ResponseWriter, *http.Request) {}}
	elseURL, _ := serveOn(t, "127.0.0.1:0", elsewhere)
	cases := []struct {
		name   string
		answer func(n int, w http.ResponseWriter, r *http.Request)
		want   string // notify stream
		err    string // the last failure's error contains
		code   string // the last failure's code (events.FailureWebhook*)
	}{
		{"fails then recovers", func(n int, w http.ResponseWriter, r *http.Request) {
			if n < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}, "A1 F1 A2 F2 A3 D3", "HTTP 503", events.FailureWebhookReceiver},
		{"always fails", func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
			"A1 F1 A2 F2 A3 F3!", "HTTP 500", events.FailureWebhookReceiver},
		{"refuses", func(n int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusGone) }, "A1 F1!", "HTTP 410", events.FailureWebhookRefused},
		{"times out once", func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				<-r.Context().Done() // never answers; the client gives up
			}
		}, "A1 F1 A2 D2", "timed out", events.FailureWebhookTimeout},
		{"redirects", func(n int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elseURL+"/steal", http.StatusFound)
		}, "A1 F1!", "redirect not followed", events.FailureWebhookRedirect},
		{"redirects keeping the body", func(n int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elseURL+"/steal", http.StatusTemporaryRedirect)
		}, "A1 F1!", "redirect not followed", events.FailureWebhookRedirect},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := memstore.New()
			t.Cleanup(func() { st.Close() }) // after the notifier stopped
			rc := &receiver{answer: tc.answer}
			base, _ := serveOn(t, "127.0.0.1:0", rc)
			var logs syncBuf
			// A post's time-out is only reached where the receiver never
			// answers; elsewhere a short one turned a slow answer on a
			// loaded machine into a failure the case did not expect.
			timeout := 30 * time.Second
			if tc.err == "timed out" {
				timeout = 2 * time.Second
			}
			notifier(t, st, base+secretPath, &logs, timeout)
			id := endJob(t, st, "j1")
			evs := waitSettled(t, st, "j1", 1)
			got, fails := outcomes(evs)
			if got != tc.want {
				t.Fatalf("notify stream %q, want %q", got, tc.want)
			}
			if len(fails) > 0 && !strings.Contains(fails[len(fails)-1].Error, tc.err) {
				t.Errorf("last failure %q, want it to say %q", fails[len(fails)-1].Error, tc.err)
			}
			// Every failure carries its code (the dashboard words it); a
			// time-out names its bound.
			for _, f := range fails {
				if f.ErrorCode != tc.code {
					t.Errorf("failure %d: code %q, want %q (%s)", f.Attempt, f.ErrorCode, tc.code, f.Error)
				}
				if want := map[bool]string{true: "2s"}[tc.code == events.FailureWebhookTimeout]; f.ErrorArgs["bound"] != want {
					t.Errorf("failure %d: args %v, want bound %q", f.Attempt, f.ErrorArgs, want)
				}
			}
			posts := rc.all()
			if len(posts) != strings.Count(tc.want, "A") {
				t.Errorf("%d posts, want one per recorded attempt (%s)", len(posts), tc.want)
			}
			for i, p := range posts {
				if p.delivery != id || p.bodyDelivery != id || p.attempt != i+1 || !p.signed {
					t.Errorf("post %d: %+v, want delivery %s attempt %d, signed", i+1, p, id, i+1)
				}
			}
			for _, ev := range evs {
				if strings.Contains(string(ev.Data), "XSECRETXPATHX") {
					t.Errorf("event %s holds the webhook URL: %s", ev.Type, ev.Data)
				}
			}
			if strings.Contains(logs.String(), "XSECRETXPATHX") {
				t.Errorf("the logs hold the webhook URL:\n%s", logs.String())
			}
		})
	}
	if n := len(elsewhere.all()); n != 0 {
		t.Errorf("a redirect was followed: %d posts to its target", n)
	}
}

// TestWebhookDownAcrossRestart: the receiver is down (connection refused)
// while the first notifier runs; it records the failed attempt and stops.
// A second notifier on the same log resumes the delivery once the receiver
// is back: one post, the same delivery id, attempt 2.
func TestWebhookDownAcrossRestart(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	defer st.Close()
	// A port that is free: the receiver is down.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs syncBuf
	n := notify.New(st, notify.Config{
		WebhookURL: "http://" + addr + secretPath, Secret: secret, RetryInitial: time.Hour, Attempts: 3,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	id := endJob(t, st, "j1")
	waitFor(t, st, "j1", "NotificationFailed")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The receiver is back; a new process's notifier, two hours later (the
	// retry recorded in the log is due), resumes.
	rc := &receiver{answer: func(int, http.ResponseWriter, *http.Request) {}}
	serveOn(t, addr, rc)
	n = notify.New(st, notify.Config{
		WebhookURL: "http://" + addr + secretPath, Secret: secret, RetryInitial: time.Hour, Attempts: 3,
		Now:    func() time.Time { return time.Now().Add(2 * time.Hour) },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- n.Run(ctx) }()
	defer func() { cancel(); <-done }()
	evs := waitSettled(t, st, "j1", 1)
	got, fails := outcomes(evs)
	if got != "A1 F1 A2 D2" {
		t.Fatalf("notify stream %q, want A1 F1 A2 D2", got)
	}
	if fails[0].ErrorCode != events.FailureWebhookNoAnswer {
		t.Errorf("a refused connection's code %q, want %q (%s)", fails[0].ErrorCode, events.FailureWebhookNoAnswer, fails[0].Error)
	}
	if p := rc.all(); len(p) != 1 || p[0].delivery != id || p[0].attempt != 2 || !p[0].signed {
		t.Fatalf("posts after the restart: %+v, want one, delivery %s attempt 2, signed", p, id)
	}
	if strings.Contains(logs.String(), "XSECRETXPATHX") {
		t.Errorf("the logs hold the webhook URL:\n%s", logs.String())
	}
}

// waitFor waits until notify-<job> holds an event of type typ.
func waitFor(t *testing.T, st events.Store, job, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	found := false
	_ = st.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.NotifyStream(job)}, EventTypes: []string{typ}}, func(context.Context, events.RecordedEvent) error {
		found = true
		cancel()
		return nil
	})
	if !found {
		t.Fatalf("notify-%s never got %s", job, typ)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestUnusableWebhookURLIsCoded: a URL no request can be made to fails
// once, for good (it stays unusable until the setting changes), with the
// code webhook_url (the dashboard says to check the server's webhook
// setting), and the URL is in no event.
func TestUnusableWebhookURLIsCoded(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	var logs syncBuf
	notifier(t, st, "http://exa mple.test"+secretPath, &logs, 5*time.Second)
	endJob(t, st, "j1")
	got, fails := outcomes(waitSettled(t, st, "j1", 1))
	if got != "A1 F1!" {
		t.Fatalf("notify stream %q, want one attempt that failed for good", got)
	}
	for _, f := range fails {
		if f.ErrorCode != events.FailureWebhookURL || strings.Contains(f.Error, "XSECRETXPATHX") {
			t.Errorf("failure %d: code %q, error %q", f.Attempt, f.ErrorCode, f.Error)
		}
	}
}
