package providers_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

func TestValidators(t *testing.T) {
	cases := []struct {
		name string
		f    func(string) error
		ok   []string
		bad  []string
	}{
		{"uuid", providers.ValidateUUID,
			[]string{"nc0k04gk8g0cgsk440g0koko", "og888os", "doogksw", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
			[]string{"", "abc", "ABCDEFGHIJ", "abc/defghij", "abc..defgh", "-abcdefgh", "abcdefgh-", "abc--defgh", "abcdefgh\n", "аbcdefgh", strings.Repeat("a", 65)}},
		{"project key", providers.ValidateProjectKey,
			[]string{"SLOT", "slot", "A1_B"},
			[]string{"", "1A", "_A", "A-B", "A.B", "~me", "A/B", "ÄB", strings.Repeat("A", 129)}},
		{"slug", providers.ValidateSlug,
			[]string{"slot-a", "a", "my_app.v2", "0day"},
			[]string{"", "Slot", "a b", "a/b", "..", "a..b", ".a", "-a", "_a", "a.git", "a%2f", "ѕlot", "a\tb", strings.Repeat("a", 129)}},
		{"repo name", providers.ValidateRepoName,
			[]string{"My_App.v2", "slot-a"},
			[]string{"My App", "a/b", "x.GIT", "..x"}},
		{"branch", providers.ValidateBranch,
			[]string{"main", "feature/x-1", "release-1.2", "a.b/c_d"},
			[]string{"", "-x", "a..b", "a b", "a~", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a@{1}", "@", ".a", "a/.b", "a.lock", "a/b.lock/c", "a/", "a.", "a//b", "é", "a\x00"}},
		{"sha", providers.ValidateSHA,
			[]string{strings.Repeat("a", 40), strings.Repeat("0", 64)},
			[]string{"", "abc", strings.Repeat("A", 40), strings.Repeat("g", 40), strings.Repeat("a", 41)}},
	}
	for _, c := range cases {
		for _, s := range c.ok {
			if err := c.f(s); err != nil {
				t.Errorf("%s %q refused: %v", c.name, s, err)
			}
		}
		for _, s := range c.bad {
			err := c.f(s)
			if err == nil {
				t.Errorf("%s %q accepted", c.name, s)
				continue
			}
			for _, r := range err.Error() {
				if r < 0x20 || r > 0x7e {
					t.Errorf("%s %q: error message holds %q", c.name, s, r)
				}
			}
		}
	}
}

func TestInvalidError(t *testing.T) {
	err := providers.Invalid("coolify.GetDatabase", "a\x00b\u0430", errors.New("bad"))
	if err.Code != providers.CodeInvalid || !errors.Is(err, providers.ErrInvalid) || err.Retryable() {
		t.Fatalf("%#v", err)
	}
	if strings.ContainsAny(err.Error(), "\x00\u0430") {
		t.Fatalf("raw input in error: %q", err.Error())
	}
}
