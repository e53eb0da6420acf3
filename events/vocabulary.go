package events

import (
	"slices"
)

// The job vocabulary as lists, derived from the step tables and the
// terminal list of jobs.go rather than written out again: every list of
// kinds, steps or statuses elsewhere — the dashboard's generated
// frontend/src/generated/vocabulary.ts, its vocabulary.json, the insights'
// step durations, the live stream's metrics — is read from here (issue 36
// item 3). A kind or step added to a table reaches all of them; a Kind* or
// Step* constant left out of every table fails TestEveryKindAndStepIsInATable.

// JobKinds lists every job kind (each has a step table), in display order:
// kindTable's.
func JobKinds() []string {
	out := make([]string, len(kindTable))
	for i, k := range kindTable {
		out[i] = k.name
	}
	return out
}

// SlotPlanKinds lists, in JobKinds' order, the kinds the slot's plan route
// plans (its `kind` query).
func SlotPlanKinds() []string {
	var out []string
	for _, k := range kindTable {
		if k.slotPlan {
			out = append(out, k.name)
		}
	}
	return out
}

// StepOrder lists every step name once: kind by kind (JobKinds' order),
// each kind's steps in the order the engine runs them (a reset's ready
// table first: it runs the plain reset's steps in the same order, with its
// creates before vacate).
func StepOrder() []string {
	var out []string
	for _, k := range JobKinds() {
		for _, template := range []bool{true, false} {
			for _, s := range table(k, template) {
				if !slices.Contains(out, s.Name) {
					out = append(out, s.Name)
				}
			}
		}
	}
	return out
}

// EndedStatuses lists the statuses a terminal event leaves, in terminals'
// order.
func EndedStatuses() []string {
	out := make([]string, len(terminals))
	for i, t := range terminals {
		out[i] = t.status
	}
	return out
}

// Statuses lists every job status: queued, running, then the ended ones.
func Statuses() []string {
	return append([]string{StatusQueued, StatusRunning}, EndedStatuses()...)
}

// ResumableStatuses lists the ended statuses a job of any kind may be
// resumed from, whatever it did before it ended (Resumable; a cancelled
// teardown that had started is resumable too, which needs the job).
func ResumableStatuses() []string {
	return slices.DeleteFunc(EndedStatuses(), func(s string) bool { return !Resumable("", s, false) })
}
