package jobs

import (
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// The step tables (events.Steps, the one declaration of each kind's steps)
// and the bodies here match both ways: every step of every kind's table has
// a body, every body is a step some table runs, and a step outside a kind's
// table has none for that kind.
func TestStepTablesAndBodiesMatch(t *testing.T) {
	inTable := map[string]bool{}
	for _, kind := range events.JobKinds() {
		for _, tmpl := range []bool{false, true} {
			steps := events.Steps(kind, tmpl)
			if len(steps) == 0 {
				t.Fatalf("%s: empty step table", kind)
			}
			for _, s := range steps {
				inTable[s.Name] = true
				if stepOf(kind, s.Name) == nil {
					t.Errorf("%s step %s has no body (add it to its file's bodies, listed in runs)", kind, s.Name)
				}
			}
		}
	}
	for name := range runs {
		if !inTable[name] {
			t.Errorf("body of %s: no kind's step table runs it (events/jobs.go kindTable)", name)
		}
	}
	if stepOf(events.KindPromote, events.StepDeleteDB) != nil {
		t.Error("a promote runs delete_db")
	}
	if stepOf("nonsense", events.StepDeleteDB) != nil {
		t.Error("an unknown kind has a body")
	}
}
