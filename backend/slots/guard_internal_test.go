package slots

import (
	"context"
	"fmt"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/events"
)

// registryLog appends n claims to the registry, each completed by its
// slot's SlotRegistered except every seventh (a claim lost in a crash);
// the slots from retire on are retired.
func registryLog(t testing.TB, store events.Store, prefix string, n, retire int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("%s%03d", prefix, i)
		reg := events.SlotRegistered{Slot: name, ProjectUUID: "p" + name, AppUUID: "a" + name, DBUUID: "d" + name, Repo: events.RepoRef{Project: "P", Slug: name}}
		if _, err := store.Append(ctx, events.SlotRegistryStream, events.Any(), events.New(events.SlotClaimed{SlotRegistered: reg}, events.Metadata{Actor: "alice"})); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			continue
		}
		evs := []events.EventData{events.New(reg, events.Metadata{Actor: "alice"})}
		if i >= retire {
			evs = append(evs, events.New(events.SlotRetired{Slot: name}, events.Metadata{Actor: "alice"}))
		}
		if _, err := store.Append(ctx, events.SlotStream(name), events.Any(), evs...); err != nil {
			t.Fatal(err)
		}
	}
}

// The consumer runtime's properties (backend/consumer/consumertest) hold
// for the slot-owner index, and retired slots leave it.
func TestOwnersConsumer(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New: func(events.Store) consumer.Fold { return newOwnersFold() },
		Log: func(t testing.TB, store events.Store) { registryLog(t, store, "s", 30, 20) },
		Grow: func(t testing.TB, store events.Store, rounds int) {
			head, err := store.Head(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for r := range rounds {
				// Registered and retired; none lost (i%7 == 3 never comes).
				registryLog(t, store, fmt.Sprintf("g%d-%d-", head, r), 3, 0)
			}
		},
		Size: func(f consumer.Fold) int { return len(f.(*ownersFold).Regs) + len(f.(*ownersFold).Pending) },
	})
}
