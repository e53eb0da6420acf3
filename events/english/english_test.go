package english

import (
	"strings"
	"testing"
)

// Every template is well formed: brackets and braces close, are not
// nested, and name known formats.
func TestTemplatesAreWellFormed(t *testing.T) {
	for code, tmpl := range table {
		inPart, inValue := false, false
		var name strings.Builder
		for _, r := range tmpl {
			switch {
			case r == '[' && !inPart && !inValue:
				inPart = true
			case r == ']' && inPart && !inValue:
				inPart = false
			case r == '{' && !inValue:
				inValue = true
				name.Reset()
			case r == '}' && inValue:
				inValue = false
				n, format, ok := strings.Cut(name.String(), "|")
				if n == "" || strings.ContainsAny(n, " ") || (ok && formats[format] == nil) {
					t.Errorf("%s: bad value {%s} in %q", code, name.String(), tmpl)
				}
			case strings.ContainsRune("[]{}", r):
				t.Errorf("%s: stray %q in %q", code, r, tmpl)
			case inValue:
				name.WriteRune(r)
			}
		}
		if inPart || inValue {
			t.Errorf("%s: unclosed in %q", code, tmpl)
		}
	}
}

func TestSay(t *testing.T) {
	for _, c := range []struct {
		code string
		args map[string]string
		want string
	}{
		{"audit.ev.step_done", map[string]string{"step": "deploy"}, "deploy done"},
		{"audit.ev.step_done", map[string]string{"step": "deploy", "absent": "true", "detail": "gone"}, "deploy done (already absent): gone"},
		{"audit.ev.SlotOccupied", map[string]string{"by": "ann", "until": "2026-03-04T14:06:07+09:00"}, "occupied by ann until 2026-03-04 05:06 UTC"},
		{"audit.ev.WaitlistJoined", map[string]string{"who": "ann", "duration": "7200"}, "ann joined the waitlist for 2h0m0s"},
		{"refusal.duration_invalid", map[string]string{"duration": "soon"}, `duration "soon": use a positive Go duration such as 2h or 90m`},
		{"no.such.code", nil, "no.such.code"},
	} {
		if got := Say(c.code, c.args); got != c.want {
			t.Errorf("Say(%s) = %q, want %q", c.code, got, c.want)
		}
	}
}

// Every variant has its code's sentence beside it.
func TestVariantsHaveTheirCode(t *testing.T) {
	for code := range table {
		if base := Base(code); base != code && !Has(base) {
			t.Errorf("variant %s without %s", code, base)
		}
	}
	if Variant("audit.ev.JobAccepted", "resumed") != "audit.ev.JobAccepted/resumed" || Variant("audit.ev.JobAccepted", "nope") != "audit.ev.JobAccepted" {
		t.Fatal("Variant")
	}
}
