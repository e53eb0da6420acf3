package httpc

import (
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// TestDefaults pins the defaults the Coolify and Bitbucket Options document.
func TestDefaults(t *testing.T) {
	c := New("http://127.0.0.1:1", "tok", nil, 0, 0, nil, nil)
	if c.HTTP == nil || c.HTTP.CheckRedirect == nil {
		t.Fatal("default HTTP client must not follow redirects")
	}
	if want := (RateLimit{Retries: 3, MaxWait: 30 * time.Second, Default: time.Second}); c.Rate.Retries != want.Retries || c.Rate.MaxWait != want.MaxWait || c.Rate.Default != want.Default || c.Clock != nil {
		t.Fatalf("Rate = %+v, want %+v", c.Rate, want)
	}
	if c := New("", "", nil, -1, 5*time.Second, nil, nil); c.Rate.Retries != 0 || c.Rate.MaxWait != 5*time.Second {
		t.Fatalf("negative retries / explicit MaxWait: Rate = %+v", c.Rate)
	}
	if got, want := ConfirmDefaults(providers.Backoff{}), (providers.Backoff{Initial: 250 * time.Millisecond, Max: 5 * time.Second, Total: 2 * time.Minute}); got != want {
		t.Fatalf("ConfirmDefaults(zero) = %+v, want %+v", got, want)
	}
	set := providers.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Total: 3 * time.Millisecond}
	if got := ConfirmDefaults(set); got != set {
		t.Fatalf("ConfirmDefaults kept nothing: %+v", got)
	}
}

// TestAbsentOnlyInTheProvidersWords pins the one decision of what an answer
// means: only a 404 the client's NotFound recognises is absent; any other
// 404 is foreign (unknown on a lookup, uncertain on a mutating call).
func TestAbsentOnlyInTheProvidersWords(t *testing.T) {
	c := New("http://127.0.0.1:1", "tok", nil, 0, 0, nil, func(b []byte) bool { return string(b) == `{"own":1}` })
	cases := []struct {
		name      string
		resp      Response
		lookup    providers.Lookup
		code      providers.Code // "" = no error
		uncertain bool           // of Unexpected on a mutating call
	}{
		{"200", Response{Status: 200, Body: []byte(`{}`)}, providers.Found, "", false},
		{"own 404", Response{Status: 404, Body: []byte(`{"own":1}`)}, providers.Absent, providers.CodeNotFound, false},
		{"HTML 404", Response{Status: 404, Body: []byte("<html>404 Not Found</html>")}, providers.Unknown, providers.CodeForeign, true},
		{"empty 404", Response{Status: 404}, providers.Unknown, providers.CodeForeign, true},
		{"other JSON 404", Response{Status: 404, Body: []byte(`{"message":"x"}`)}, providers.Unknown, providers.CodeForeign, true},
		{"403", Response{Status: 403, Body: []byte(`{"own":1}`)}, providers.Unknown, providers.CodeForbidden, false},
		{"502", Response{Status: 502}, providers.Unknown, providers.CodeServer, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := c.Lookup("op", "res", &tc.resp)
			if l != tc.lookup || (err == nil) != (tc.code == "") || err != nil && (err.Code != tc.code || err.Uncertain) {
				t.Fatalf("Lookup = %v, %v; want %v, %q", l, err, tc.lookup, tc.code)
			}
			if c.Absent(&tc.resp) != (tc.lookup == providers.Absent) {
				t.Fatalf("Absent disagrees with Lookup")
			}
			if tc.code != "" && tc.lookup != providers.Absent {
				if e := c.Unexpected("op", "res", &tc.resp, true); e.Code != tc.code || e.Uncertain != tc.uncertain {
					t.Fatalf("Unexpected(mutating) = %s uncertain=%v, want %s %v", e.Code, e.Uncertain, tc.code, tc.uncertain)
				}
			}
		})
	}
	// Without a NotFound reader no 404 is ever absent.
	bare := New("", "", nil, 0, 0, nil, nil)
	if l, _ := bare.Lookup("op", "res", &Response{Status: 404, Body: []byte(`{"own":1}`)}); l != providers.Unknown {
		t.Fatalf("nil NotFound: %v", l)
	}
}
