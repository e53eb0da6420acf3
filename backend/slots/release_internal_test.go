package slots

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// The one release of a job's lock writes, with JobReleased, what the
// outcome means for the slot: a success's slot event once, a teardown that
// touched anything and did not succeed its TeardownIncomplete (never on a
// retired slot), and nothing more for a job that never ran.
func TestReleaseEventsSayWhatTheOutcomeMeans(t *testing.T) {
	job := func(kind string, done ...string) *events.JobState {
		j := &events.JobState{ID: "j1"}
		q := events.JobQueued{JobID: "j1", Kind: kind, Slot: "s1", Steps: events.StepNames(kind, false),
			Params:    map[string]string{"project": "P", "name": "new"},
			Resources: []events.Resource{{Kind: events.ResDatabase, ID: "db"}, {Kind: events.ResApplication, ID: "app"}}}
		recs := []events.EventData{events.New(q, events.Metadata{})}
		if len(done) > 0 {
			recs = append(recs, events.New(events.JobClaimed{JobID: "j1", Worker: "w", Attempt: 1}, events.Metadata{}))
		}
		for _, s := range done {
			var p events.Payload = events.StepSucceeded{StepResult: events.StepResult{JobID: "j1", Step: s}}
			if s == events.StepPushCode {
				p = events.CodePushed{StepResult: events.StepResult{JobID: "j1", Step: s}, SHA: "abc"}
			}
			recs = append(recs, events.New(p, events.Metadata{}))
		}
		for _, d := range recs {
			if err := j.Record(d); err != nil {
				t.Fatal(err)
			}
		}
		return j
	}
	slot := func(kind string) *SlotState {
		return &SlotState{Name: "s1", Occupied: true, LockJob: "j1", LockKind: kind, VacatedBy: map[string]bool{}, PromotedBy: map[string]events.RepoRef{}}
	}
	types := func(evs []events.EventData) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Type)
		}
		return out
	}
	retired := slot(events.KindTeardown)
	retired.Retired = true
	vacated := slot(events.KindReset)
	vacated.VacatedBy["j1"] = true
	for _, c := range []struct {
		name    string
		st      *SlotState
		j       *events.JobState
		outcome string
		want    []string
	}{
		{"reset succeeded", slot(events.KindReset), job(events.KindReset, events.StepVacate), events.StatusSucceeded, []string{"SlotVacated", "JobReleased"}},
		{"reset release retried", vacated, job(events.KindReset, events.StepVacate), events.StatusSucceeded, []string{"JobReleased"}},
		{"teardown succeeded", slot(events.KindTeardown), job(events.KindTeardown, events.StepRetire), events.StatusSucceeded, []string{"SlotRetired", "JobReleased"}},
		{"teardown failed after a step", slot(events.KindTeardown), job(events.KindTeardown, events.StepDeleteDB), events.StatusFailed, []string{"TeardownIncomplete", "JobReleased"}},
		{"teardown cancelled before it ran", slot(events.KindTeardown), job(events.KindTeardown), events.StatusCancelled, []string{"JobReleased"}},
		{"teardown failed on a retired slot", retired, job(events.KindTeardown, events.StepDeleteDB), events.StatusFailed, []string{"JobReleased"}},
		{"promote succeeded", slot(events.KindPromote), job(events.KindPromote, events.StepPushCode, events.StepRecordRepo), events.StatusSucceeded, []string{"SlotPromoted", "JobReleased"}},
		{"reset failed", slot(events.KindReset), job(events.KindReset, events.StepDeleteDB), events.StatusFailed, []string{"JobReleased"}},
	} {
		evs := releaseEvents(c.st, c.j, c.outcome, events.Metadata{Actor: "w"})
		if got := types(evs); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		switch evs[0].Type {
		case "TeardownIncomplete":
			var ti events.TeardownIncomplete
			_ = json.Unmarshal(evs[0].Data, &ti)
			if len(ti.Remaining) != 1 || ti.Remaining[0].Kind != events.ResApplication {
				t.Errorf("%s: remaining %v, want the application only", c.name, ti.Remaining)
			}
		case "SlotPromoted":
			var sp events.SlotPromoted
			_ = json.Unmarshal(evs[0].Data, &sp)
			if sp.NewRepo != (events.RepoRef{Project: "P", Slug: "new"}) || sp.SHA != "abc" {
				t.Errorf("%s: %+v", c.name, sp)
			}
		}
		var rel events.JobReleased
		_ = json.Unmarshal(evs[len(evs)-1].Data, &rel)
		if rel.Outcome != c.outcome || rel.JobID != "j1" {
			t.Errorf("%s: released %+v", c.name, rel)
		}
	}
}
