package projections

import (
	"maps"
	"slices"
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
		if id := PayloadJobID(p); id != "" {
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
	case strings.HasPrefix(ev.Stream, events.PRStreamPrefix):
		slot = PRSlot(p)
		if sv := st.GetSlot(slot); sv != nil {
			if nv := ApplySlot(*sv, ev, p); nv.Position == ev.Position {
				st.PutSlot(&nv)
				ch.Slot = &nv
			}
		}
		ch.PullRequest = projectPR(st, ev, p)
	}
	a := AuditOf(ev, p, slot)
	ch.Audit = &a
	return ch
}

// PRSlot is the slot a pull request's event is about (the PR shown on its
// slot, issue 34), "" for the others.
func PRSlot(p events.Payload) string {
	switch e := p.(type) {
	case events.PRSlotTaken:
		return e.Slot
	case events.PRDeployQueued:
		return e.Slot
	}
	return ""
}

// Ownership is the set of views a quiet batch (ProjectQuiet) may change in
// place. A view enters it the first time the batch touches it, by replacing
// it in the State with a private copy of its mutable parts (steps,
// attempts, latest jobs, active job); from then on the batch's later events
// change that copy in place instead of allocating a new view, new slices and
// a new map per event. That is safe only while nobody else can see the
// views: the memory read model applies a quiet batch under its write lock
// and hands out no Change for it, and calls Reset before it unlocks, so every
// view a reader can hold is never changed again.
type Ownership struct {
	slots map[string]struct{}
	jobs  map[string]struct{}
}

// Reset forgets every owned view (at the end of a quiet batch).
func (o *Ownership) Reset() {
	clear(o.slots)
	clear(o.jobs)
}

// slot returns the State's view of name, owned by the batch (nil if there is none).
func (o *Ownership) slot(st State, name string) *SlotView {
	sv := st.GetSlot(name)
	if sv == nil {
		return nil
	}
	if _, ok := o.slots[name]; ok {
		return sv
	}
	c := *sv
	c.LatestJobs = maps.Clone(sv.LatestJobs)
	if sv.ActiveJob != nil {
		a := *sv.ActiveJob
		c.ActiveJob = &a
	}
	st.PutSlot(&c)
	if o.slots == nil {
		o.slots = map[string]struct{}{}
	}
	o.slots[name] = struct{}{}
	return &c
}

// job returns the State's view of id, owned by the batch (nil if there is none).
func (o *Ownership) job(st State, id string) *JobView {
	jv := st.GetJob(id)
	if jv == nil {
		return nil
	}
	if _, ok := o.jobs[id]; ok {
		return jv
	}
	c := *jv
	c.Steps = slices.Clone(jv.Steps)
	c.Attempts = slices.Clone(jv.Attempts)
	st.PutJob(&c) // same slot and queued position: no index changes
	o.own(id)
	return &c
}

func (o *Ownership) own(id string) {
	if o.jobs == nil {
		o.jobs = map[string]struct{}{}
	}
	o.jobs[id] = struct{}{}
}

// ProjectQuiet is Project for a batch whose changes nobody sees (a replay):
// it leaves st exactly as Project would, event after event, and returns only
// the audit entry, but changes the views own holds in place (see
// Ownership). The reducers are the same ones Project uses.
func ProjectQuiet(st State, own *Ownership, e Event) AuditEntry {
	ev, p, err := e.RecordedEvent, e.Payload, e.Err
	if err != nil {
		a := AuditOf(ev, events.Unknown{Type: ev.Type}, "")
		a.Summary = "undecodable event: " + err.Error()
		return a
	}
	slot := ""
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		slot = ev.Stream[len(events.SlotStreamPrefix):]
		sv := own.slot(st, slot)
		fresh := sv == nil
		if fresh {
			sv = &SlotView{Name: slot, Lifecycle: LifecycleVacant, LatestJobs: map[string]JobRef{}, Resources: []events.Resource{}}
		}
		nv := applySlot(*sv, ev, p, true)
		if id := PayloadJobID(p); id != "" {
			if j := st.GetJob(id); j != nil {
				nv, _ = refreshSlotJob(nv, *j, true)
			}
		}
		switch {
		case !fresh:
			*sv = nv // the same view when the event changed nothing
		case nv.Position == ev.Position:
			// A new view: nobody else has seen its map or pointers.
			*sv = nv
			st.PutSlot(sv)
			if own.slots == nil {
				own.slots = map[string]struct{}{}
			}
			own.slots[slot] = struct{}{}
		}
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		id := ev.Stream[len(events.JobStreamPrefix):]
		jv := own.job(st, id)
		if jv == nil {
			nj := applyJob(JobView{ID: id, State: JobQueued, Attempts: []Attempt{}, Steps: []StepView{}, Remaining: []events.Resource{}}, ev, p, true)
			if nj.Position != ev.Position {
				break
			}
			st.PutJob(&nj)
			own.own(id)
			jv = &nj
		} else {
			nj := applyJob(*jv, ev, p, true)
			if nj.Position != ev.Position {
				break
			}
			if nj.Slot != jv.Slot || nj.QueuedPosition != jv.QueuedPosition || nj.Kind != jv.Kind {
				// The indexes move: PutJob must see the old view beside the new.
				c := nj
				st.PutJob(&c)
				jv = &c
			} else {
				*jv = nj
			}
		}
		slot = jv.Slot
		if sv := own.slot(st, slot); sv != nil {
			nv := applySlot(*sv, ev, p, true)
			nv, _ = refreshSlotJob(nv, *jv, true)
			*sv = nv
		}
	case strings.HasPrefix(ev.Stream, events.NotifyStreamPrefix):
		if j := st.GetJob(ev.Stream[len(events.NotifyStreamPrefix):]); j != nil {
			slot = j.Slot
		}
	case strings.HasPrefix(ev.Stream, events.PRStreamPrefix):
		slot = PRSlot(p)
		if sv := own.slot(st, slot); sv != nil {
			*sv = applySlot(*sv, ev, p, true)
		}
		projectPR(st, ev, p)
	}
	return AuditOf(ev, p, slot)
}
