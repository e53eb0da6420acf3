package slots

import (
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// The deadline scheduler's fold (and so its checkpoint and each pass over
// it) follows the pool, not its history: retired slots leave it, even when
// their release comes after the retirement, and what the scheduler never
// reads is not kept. Fails if retired slots stay or lock specs are kept.
func TestDeadlineFoldFollowsThePool(t *testing.T) {
	st := deadlineState{Slots: map[string]*SlotState{}}
	pos := events.Position(0)
	fold := func(name string, rev events.Revision, p events.Payload) {
		t.Helper()
		pos++
		d := events.New(p, events.Metadata{Actor: "alice", Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
		if err := st.fold(events.RecordedEvent{Stream: events.SlotStream(name), Revision: rev, Position: pos, Type: d.Type, Data: d.Data, Meta: d.Meta}); err != nil {
			t.Fatal(err)
		}
	}
	until := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for i := range 500 {
		name := fmt.Sprintf("s%03d", i)
		fold(name, 0, events.SlotRegistered{Slot: name, ProjectUUID: "p" + name, AppUUID: "a" + name, DBUUID: "d" + name, Repo: events.RepoRef{Project: "P", Slug: name}})
		fold(name, 1, events.SlotOccupied{Slot: name, By: "alice", Until: until})
		job := "job-" + name
		fold(name, 2, events.JobAccepted{Slot: name, JobID: job, Kind: events.KindTeardown, Run: 1, Job: &events.JobQueued{JobID: job, Slot: name, Kind: events.KindTeardown}})
		if i%10 != 0 { // nine in ten are torn down
			fold(name, 3, events.SlotRetired{Slot: name, JobID: job})
			fold(name, 4, events.JobReleased{Slot: name, JobID: job, Outcome: events.StatusSucceeded})
		}
	}
	if len(st.Slots) != 50 {
		t.Fatalf("the fold holds %d slots, want the 50 not retired", len(st.Slots))
	}
	for name, ss := range st.Slots {
		if !ss.Occupied || !ss.Until.Equal(until) || ss.LockJob != "job-"+name || ss.Lock.Job != nil || ss.Reg.AppUUID != "" {
			t.Fatalf("slot %s folds to %+v", name, ss)
		}
	}
	b, err := consumer.Pack(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 8<<10 {
		t.Fatalf("the checkpoint of 50 slots packs to %d bytes", len(b))
	}
}
