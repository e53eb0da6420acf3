package slots_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// racingStore lets another writer extend the slot right before each of
// the first `races` appends to it, so those appends lose the race.
type racingStore struct {
	*memstore.Store
	races int
	until time.Time
}

func (r *racingStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if stream == events.SlotStream("alpha") && r.races > 0 && strings.HasPrefix(evs[0].Type, "OccupancyExtended") {
		r.races--
		r.until = r.until.Add(time.Minute)
		if _, err := r.Store.Append(ctx, stream, events.Any(), events.New(events.OccupancyExtended{Slot: "alpha", By: "bob", Until: r.until}, events.Metadata{Actor: "bob"})); err != nil {
			return events.AppendResult{}, err
		}
	}
	return r.Store.Append(ctx, stream, exp, evs...)
}

// A command that loses the race decides again on the winner's write (its
// append then lands on top of it); one that loses every round gives up
// after events.DecideAttempts with a conflict saying why.
func TestCommandsDecideAgainAfterALostRace(t *testing.T) {
	ctx := context.Background()
	for _, races := range []int{3, events.DecideAttempts} {
		mem := memstore.New()
		t.Cleanup(func() { mem.Close() })
		st := &racingStore{Store: mem, until: time.Now().Add(2 * time.Hour)}
		svc := slots.NewService(st, slots.Config{})
		register(t, svc, "alpha")
		if err := svc.Occupy(ctx, alice, "alpha", slots.OccupyCmd{Until: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		st.races = races
		err := svc.Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: time.Now().Add(48 * time.Hour)})
		full, lerr := slots.LoadSlot(ctx, mem, "alpha")
		if lerr != nil {
			t.Fatal(lerr)
		}
		if races < events.DecideAttempts {
			if err != nil || full.Revision != uint64(2+races) || full.Until.Before(time.Now().Add(47*time.Hour)) {
				t.Fatalf("after %d lost races: %v, slot at revision %d until %s; want alice's extend on top of bob's", races, err, full.Revision, full.Until)
			}
			continue
		}
		e := wantCode(t, err, slots.CodeConflict)
		if e.Reason != apperr.ReasonChangedConcurrently || e.Args["what"] != "slot alpha" ||
			e.Message != "slot alpha changed concurrently 10 times; try again" {
			t.Fatalf("budget spent: %+v", e)
		}
		if full.Revision != uint64(1+races) {
			t.Fatalf("slot at revision %d, want only bob's %d extends after the occupy", full.Revision, races)
		}
	}
}
