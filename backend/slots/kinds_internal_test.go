package slots

import (
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// TestEveryKindHasRules: each job kind declared in events (its step table)
// has its kindRule here with every fact the commands need of it, and no
// rule names a kind events does not declare. A kind added to
// events/jobs.go kindTable without its entry in kindRules fails here, not
// with an "unknown job kind" refusal at run time.
func TestEveryKindHasRules(t *testing.T) {
	kinds := events.JobKinds()
	if len(kinds) == 0 {
		t.Fatal("events declares no job kind")
	}
	for _, k := range kinds {
		r, ok := kindRules[k]
		if !ok {
			t.Errorf("kind %s has no entry in kindRules (backend/slots/kinds.go)", k)
			continue
		}
		if r.params == nil {
			t.Errorf("kind %s: kindRules has no params check", k)
		}
		if r.start == nil {
			t.Errorf("kind %s: kindRules has no start condition", k)
		}
	}
	for k := range kindRules {
		if !slices.Contains(kinds, k) {
			t.Errorf("kindRules has %q, which events does not declare (events/jobs.go kindTable)", k)
		}
	}
	// The refusal of an unknown kind is the rule's absence, and names the
	// kinds from the same declaration.
	err := validateParams("nonsense", nil)
	if err == nil {
		t.Fatal("an unknown kind was accepted")
	}
	if got, want := err.(*Error).Args["kinds"], strings.Join(kinds, ", "); got != want {
		t.Errorf("unknown kind's kinds = %q, want %q", got, want)
	}
}
