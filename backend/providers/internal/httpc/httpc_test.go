package httpc

import (
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// TestDefaults pins the defaults the Coolify and Bitbucket Options document.
func TestDefaults(t *testing.T) {
	c := New("http://127.0.0.1:1", "tok", nil, 0, 0, nil)
	if c.HTTP == nil || c.HTTP.CheckRedirect == nil {
		t.Fatal("default HTTP client must not follow redirects")
	}
	if want := (RateLimit{Retries: 3, MaxWait: 30 * time.Second, Default: time.Second}); c.Rate != want {
		t.Fatalf("Rate = %+v, want %+v", c.Rate, want)
	}
	if c := New("", "", nil, -1, 5*time.Second, nil); c.Rate.Retries != 0 || c.Rate.MaxWait != 5*time.Second {
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
