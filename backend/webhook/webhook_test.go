package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestSender: the one webhook sender signs every body when a secret is
// set (and only then), follows no redirect (307 re-posts, 302 turns into a
// GET: neither reaches the other host, so no Referer carries the secret
// path there), and keeps the URL out of its errors.
func TestSender(t *testing.T) {
	var mu sync.Mutex
	var other []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		other = append(other, r.Method+" referer="+r.Header.Get("Referer"))
		mu.Unlock()
	}))
	defer elsewhere.Close()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusFound, http.StatusPermanentRedirect} {
		var sig, referer string
		var body []byte
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ = io.ReadAll(r.Body)
			sig, referer = r.Header.Get(HeaderSignature), r.Header.Get("Referer")
			http.Redirect(w, r, elsewhere.URL+"/steal", code)
		}))
		// A client whose own policy follows redirects: the sender's wins.
		s := New(hook.URL+"/hooks/XSECRETX", "k", &http.Client{})
		status, err := s.Post(context.Background(), []byte(`{"text":"hi"}`), http.Header{"X-Extra": {"1"}})
		hook.Close()
		if err != nil || status != code {
			t.Fatalf("%d: got %d, %v; want the redirect status itself", code, status, err)
		}
		if string(body) != `{"text":"hi"}` || sig != Sign("k", body) || referer != "" {
			t.Errorf("%d: body %q sig %q referer %q", code, body, sig, referer)
		}
	}
	mu.Lock()
	if len(other) != 0 {
		t.Errorf("redirects followed: %v", other)
	}
	mu.Unlock()

	// Unsigned without a secret.
	var got http.Header
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	if _, err := New(hook.URL, "", nil).Post(context.Background(), []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	hook.Close()
	if _, ok := got[HeaderSignature]; ok || got.Get("Content-Type") != "application/json" {
		t.Errorf("headers without a secret: %v", got)
	}
	// A transport error does not name the URL (it is the credential).
	_, err := New(hook.URL+"/hooks/XSECRETX", "", nil).Post(context.Background(), nil, nil)
	if err == nil || strings.Contains(err.Error(), "XSECRETX") {
		t.Errorf("error to a closed server: %v", err)
	}
}

// TestPostErrorsSayTheirKind: a URL no request can be made to is ErrURL, a
// refused connection a *TransportError that is no time-out (the notifier
// records their codes, events.FailureWebhook*); neither names the URL.
func TestPostErrorsSayTheirKind(t *testing.T) {
	if _, err := New("http://exa mple.test/XSECRETX", "", nil).Post(context.Background(), []byte("{}"), nil); !errors.Is(err, ErrURL) {
		t.Errorf("an unusable URL: %v, want ErrURL", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/XSECRETX"
	ln.Close() // nothing listens there: the connection is refused
	_, err = New(url, "", nil).Post(context.Background(), []byte("{}"), nil)
	var te *TransportError
	if !errors.As(err, &te) || te.Timeout {
		t.Fatalf("a refused connection: %#v, want a *TransportError, no time-out", err)
	}
	if strings.Contains(err.Error(), "XSECRETX") {
		t.Errorf("the error names the URL: %v", err)
	}
}
