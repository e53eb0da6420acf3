package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// TestKindQueriesMatchTheVocabulary: the `kind` query of every route that
// takes one accepts exactly the kinds the vocabulary gives it (queryKind:
// events.SlotPlanKinds for the slot's plan, events.JobKinds for the lists of
// jobs), and the contract (openapi.json) lists that same set as its enum,
// in the same order. A kind added in events/jobs.go reaches the handlers by
// itself; the contract's enums fail here until they name it.
func TestKindQueriesMatchTheVocabulary(t *testing.T) {
	want := map[string][]string{
		"/api/slots/{name}/plan":        events.SlotPlanKinds(),
		"/api/slots/{name}/jobs":        events.JobKinds(),
		"/api/slots/{name}/jobs/latest": events.JobKinds(),
		"/api/jobs":                     events.JobKinds(),
	}
	doc := loadOpenAPI(t)
	for path, kinds := range want {
		var op struct {
			Parameters []struct {
				Name, In string
				Schema   struct{ Enum []string }
			}
		}
		if err := json.Unmarshal(doc.Paths[path]["get"], &op); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		var enum []string
		for _, p := range op.Parameters {
			if p.Name == "kind" && p.In == "query" {
				enum = p.Schema.Enum
			}
		}
		if !slices.Equal(enum, kinds) {
			t.Errorf("openapi.json GET %s: kind enum %v, the handler takes %v", path, enum, kinds)
		}
	}

	// The handlers: a list of jobs takes every kind, the slot's plan
	// refuses (400, field kind) exactly the kinds it does not plan.
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.occupy(t, "s1")
	for _, k := range events.JobKinds() {
		for _, url := range []string{"/api/slots/s1/jobs?kind=" + k, "/api/jobs?kind=" + k} {
			if a := b.do(t, http.MethodGet, url, nil); a.status != http.StatusOK {
				t.Errorf("GET %s: %d %s", url, a.status, a.body)
			}
		}
		a := b.do(t, http.MethodGet, "/api/slots/s1/plan?kind="+k, nil)
		refused := a.status == http.StatusBadRequest && a.apiError(t).Args["field"] == "kind"
		if planned := slices.Contains(events.SlotPlanKinds(), k); planned == refused {
			t.Errorf("GET plan?kind=%s (planned by the slot: %v): %d %s", k, planned, a.status, a.body)
		}
	}
}
