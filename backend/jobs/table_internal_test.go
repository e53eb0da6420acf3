package jobs

import (
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// Every step of every kind's table (events.Steps) has a body here, and a
// step outside a kind's table has none for that kind.
func TestStepTableHasABodyForEveryStep(t *testing.T) {
	for _, kind := range []string{events.KindReset, events.KindTeardown, events.KindPromote, events.KindAdopt, events.KindDeleteOrphan} {
		for _, tmpl := range []bool{false, true} {
			steps := events.Steps(kind, tmpl)
			if len(steps) == 0 {
				t.Fatalf("%s: empty step table", kind)
			}
			for _, s := range steps {
				if stepOf(kind, s.Name) == nil {
					t.Errorf("%s step %s has no body", kind, s.Name)
				}
			}
		}
	}
	if stepOf(events.KindPromote, events.StepDeleteDB) != nil {
		t.Error("a promote runs delete_db")
	}
	if stepOf("nonsense", events.StepDeleteDB) != nil {
		t.Error("an unknown kind has a body")
	}
}
