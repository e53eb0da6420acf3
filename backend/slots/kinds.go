package slots

import (
	"encoding/json"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/events"
)

// kindRule is what the commands know of a job kind beyond its declaration
// in events (its step table and plan, events/jobs.go kindTable): the one
// place per kind for the facts that need a slot's state. validateParams,
// canStart, notBefore and slotOutcome read them, so a new kind is one entry
// here; TestEveryKindHasRules fails when a kind in events has none, or an
// entry lacks a fact.
type kindRule struct {
	// params checks a job's params before anything is loaded.
	params func(map[string]string) error
	// start is the kind's own condition on the slot, after the ones every
	// kind has (registered, not locked, not retired: canStart).
	start func(*SlotState) error
	// grace: the job waits Config.Grace before it may run (a reset: the
	// occupant may still cancel it).
	grace bool
	// outcome is the slot event the job's success implies, or nil (none,
	// or the slot already records it); nil for a kind that changes no slot
	// state on success.
	outcome func(*events.JobState, *SlotState) events.Payload
}

// kindRules is every job kind's kindRule.
var kindRules = map[string]kindRule{
	events.KindReset: {
		params: noParams,
		start: func(st *SlotState) error {
			if !st.Occupied {
				return refuseAs(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotNotOccupied, "release", "slot", st.Name)
			}
			return notIncomplete(st)
		},
		grace: true,
		outcome: func(j *events.JobState, st *SlotState) events.Payload {
			if j.Done[events.StepVacate] && st.Occupied && !st.VacatedBy[j.ID] {
				return events.SlotVacated{Slot: st.Name, JobID: j.ID}
			}
			return nil
		},
	},
	events.KindTeardown: {
		params: noParams,
		start: func(st *SlotState) error {
			if st.Occupied {
				return refuse(map[string]any{"state": st.Lifecycle(), "occupant": st.Occupant}, apperr.ReasonSlotOccupied, "slot", st.Name, "occupant", st.Occupant)
			}
			return nil
		},
		outcome: func(j *events.JobState, st *SlotState) events.Payload {
			if j.Done[events.StepRetire] && !st.Retired {
				return events.SlotRetired{Slot: st.Name, JobID: j.ID}
			}
			return nil
		},
	},
	events.KindPromote: {
		params: func(p map[string]string) error {
			if !projectKeyRe.MatchString(p["project"]) {
				return invalid("project %q: a letter, then letters, digits or '_'", p["project"])
			}
			return validateSlug("name", p["name"])
		},
		start:   notIncomplete,
		outcome: promoteOutcome,
	},
	events.KindAdopt:        {params: orphanParams, start: anyState},
	events.KindDeleteOrphan: {params: orphanParams, start: anyState},
	events.KindPRDeploy: {
		params: validatePRParams,
		start: func(st *SlotState) error {
			if !st.Occupied {
				return refuseAs(map[string]any{"state": st.Lifecycle()}, apperr.ReasonSlotNotOccupied, "pr_deploy", "slot", st.Name)
			}
			if err := notIncomplete(st); err != nil {
				return err
			}
			if st.Reg.Template == nil {
				return conflict(map[string]any{"state": st.Lifecycle()}, "slot %s has no template: nothing says how to deploy it", st.Name)
			}
			return nil
		},
	},
}

// noParams: the kind takes no params (any given are ignored, as before).
func noParams(map[string]string) error { return nil }

// orphanParams: the orphan a reconciliation job adopts (adoptResource).
func orphanParams(p map[string]string) error {
	_, err := adoptResource(p)
	return err
}

// anyState: the kind starts from any state canStart lets through.
func anyState(*SlotState) error { return nil }

// notIncomplete refuses a slot a teardown left incomplete.
func notIncomplete(st *SlotState) error {
	if st.Incomplete {
		return incomplete(st)
	}
	return nil
}

// promoteOutcome is a promote's SlotPromoted, with the pushed commit from
// push_code's result.
func promoteOutcome(j *events.JobState, st *SlotState) events.Payload {
	if _, done := st.PromotedBy[j.ID]; !j.Done[events.StepRecordRepo] || done {
		return nil
	}
	var sha string
	if ev, ok := j.Results[events.StepPushCode]; ok {
		var cp events.CodePushed
		if json.Unmarshal(ev.Data, &cp) == nil {
			sha = cp.SHA
		}
	}
	return events.SlotPromoted{Slot: st.Name, JobID: j.ID, NewRepo: PromoteTarget(j), SHA: sha}
}
