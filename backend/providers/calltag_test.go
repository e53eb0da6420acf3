package providers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// TestCallTagIsHeaderSafe: a tag cannot split a header or an argument, and
// an untagged context has no tag.
func TestCallTagIsHeaderSafe(t *testing.T) {
	if _, ok := providers.CallTagFrom(context.Background()); ok {
		t.Fatal("tag on a bare context")
	}
	ctx := providers.WithCallTag(context.Background(), providers.CallTag{Job: "a\r\nX-Evil: 1 b", Attempt: 2})
	tag, ok := providers.CallTagFrom(ctx)
	if !ok || tag.String() != "a__X-Evil:_1_b/2" {
		t.Fatalf("tag %q %v", tag.String(), ok)
	}
	for _, s := range []string{providers.UserAgent(ctx), providers.NewRequestID(ctx)} {
		if strings.ContainsAny(s, "\r\n") || !strings.Contains(s, "a__X-Evil:_1_b") {
			t.Fatalf("unsafe or untagged: %q", s)
		}
	}
	if a, b := providers.NewRequestID(ctx), providers.NewRequestID(ctx); a == b {
		t.Fatalf("request ids repeat: %s", a)
	}
}
