package slots

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
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

// poolLog appends, for slots named prefix<from>…prefix<to-1>: a registration, an
// occupancy, extensions, and for nine in ten a teardown that retires the
// slot and releases its lock.
func poolLog(t testing.TB, store events.Store, prefix string, from, to int) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := from; i < to; i++ {
		name := fmt.Sprintf("%s%03d", prefix, i)
		job := "job-" + name
		until := at.Add(time.Duration(i) * time.Hour)
		evs := []events.Payload{
			events.SlotRegistered{Slot: name, ProjectUUID: "p" + name, AppUUID: "a" + name, DBUUID: "d" + name, Repo: events.RepoRef{Project: "P", Slug: name}},
			events.SlotOccupied{Slot: name, By: "alice", Until: until},
			events.OccupancyExtended{Slot: name, Until: until.Add(time.Hour)},
		}
		if i%10 != 0 {
			evs = append(evs,
				events.JobAccepted{Slot: name, JobID: job, Kind: events.KindTeardown, Run: 1, Job: &events.JobQueued{JobID: job, Slot: name, Kind: events.KindTeardown}},
				events.SlotRetired{Slot: name, JobID: job},
				events.JobReleased{Slot: name, JobID: job, Outcome: events.StatusSucceeded})
		}
		for _, p := range evs {
			if _, err := store.Append(ctx, events.SlotStream(name), events.Any(), events.New(p, events.Metadata{Actor: "alice", Time: at})); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The consumer runtime's properties (backend/consumer/consumertest) hold
// for the deadline scheduler's fold, and torn-down slots leave it.
func TestDeadlinesConsumer(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New:    func(events.Store) consumer.Fold { return &deadlineState{Slots: map[string]*SlotState{}} },
		Packed: true,
		Log:    func(t testing.TB, store events.Store) { poolLog(t, store, "s", 0, 40) },
		Grow: func(t testing.TB, store events.Store, rounds int) {
			head, err := store.Head(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// Slots 1 to 9 of each ten: all retired.
			for r := range rounds {
				poolLog(t, store, fmt.Sprintf("g%d-%d-", head, r), 1, 10)
			}
		},
		Size: func(f consumer.Fold) int { return len(f.(*deadlineState).Slots) },
	})
}
