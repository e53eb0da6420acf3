package projections

import (
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// Event is a recorded event with its payload decoded. Runners decode on the
// subscription's goroutine, so decoding (the costliest part of projecting)
// runs beside the apply loop instead of in it.
type Event struct {
	events.RecordedEvent
	// Payload is the decoded payload (events.Unknown for an unknown type);
	// nil when Err is set.
	Payload events.Payload
	// Err is set when a payload of a known type does not decode.
	Err error
}

// DecodeEvent decodes ev's payload.
func DecodeEvent(ev events.RecordedEvent) Event {
	p, err := events.Decode(ev)
	return Event{RecordedEvent: ev, Payload: p, Err: err}
}

// State is the view storage one batch reads and writes. The memory read model
// implements it over its maps; the postgres one over the rows a batch loaded.
// Views are shared by pointer and never modified once put (the reducers copy
// on write), so the same view can sit in the store and in a Change.
type State interface {
	// GetSlot and GetJob return nil for a view the state does not hold.
	GetSlot(name string) *SlotView
	GetJob(id string) *JobView
	PutSlot(v *SlotView)
	PutJob(v *JobView)
}

// Project applies one event to st with the pure reducers and returns the
// change it made: the audit entry always, the slot and job views when they
// changed. Events of unknown types only get an audit entry. A job's events
// reach its slot through the job's own view (JobView.Slot), which is the
// job→slot index. An event whose payload does not decode is recorded in the
// audit feed and otherwise skipped, so one bad event cannot stop the read
// model.
func Project(st State, e Event) Change {
	ev, p, err := e.RecordedEvent, e.Payload, e.Err
	if err != nil {
		a := AuditOf(ev, events.Unknown{Type: ev.Type}, "")
		a.Summary = "undecodable event: " + err.Error()
		return Change{Position: ev.Position, Audit: &a}
	}
	ch := Change{Position: ev.Position}
	slot := ""
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		slot = ev.Stream[len(events.SlotStreamPrefix):]
		sv := st.GetSlot(slot)
		if sv == nil {
			sv = &SlotView{Name: slot, Lifecycle: LifecycleVacant, LatestJobs: map[string]JobRef{}, Resources: []events.Resource{}}
		}
		nv := ApplySlot(*sv, ev, p)
		if id := payloadJobID(p); id != "" {
			if j := st.GetJob(id); j != nil {
				nv, _ = RefreshSlotJob(nv, *j)
			}
		}
		if nv.Position == ev.Position {
			st.PutSlot(&nv)
			ch.Slot = &nv
		}
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		id := ev.Stream[len(events.JobStreamPrefix):]
		jv := st.GetJob(id)
		if jv == nil {
			jv = &JobView{ID: id, State: JobQueued, Attempts: []Attempt{}, Steps: []StepView{}, Remaining: []events.Resource{}}
		}
		nj := ApplyJob(*jv, ev, p)
		if nj.Position != ev.Position {
			break
		}
		st.PutJob(&nj)
		ch.Job = &nj
		slot = nj.Slot
		if sv := st.GetSlot(slot); sv != nil {
			nv := ApplySlot(*sv, ev, p)
			nv, _ = RefreshSlotJob(nv, nj)
			if nv.Position == ev.Position {
				st.PutSlot(&nv)
				ch.Slot = &nv
			}
		}
	case strings.HasPrefix(ev.Stream, events.NotifyStreamPrefix):
		if j := st.GetJob(ev.Stream[len(events.NotifyStreamPrefix):]); j != nil {
			slot = j.Slot
		}
	}
	a := AuditOf(ev, p, slot)
	ch.Audit = &a
	return ch
}
