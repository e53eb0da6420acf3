package slots_test

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// stepClock reads a time the test sets; its timers are real.
type stepClock struct {
	clock.Clock
	t time.Time
}

func (c *stepClock) Now() time.Time { return c.t }

// A slot the waitlist holds for someone can be occupied only by them until
// the hold ends; nothing is appended for the refused occupy.
func TestOccupyRespectsWaitlistHold(t *testing.T) {
	t.Parallel()
	clk := &stepClock{Clock: clock.Real(), t: time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)}
	svc, st := setup(t, slots.Config{Clock: clk})
	ctx := context.Background()
	register(t, svc, "alpha")
	register(t, svc, "beta")
	for _, name := range []string{"alpha", "beta"} {
		rev := events.Revision(0)
		if _, err := st.Append(ctx, events.SlotStream(name), events.Exact(rev), events.New(events.SlotHeld{
			Slot: name, OfferID: "o-" + name, ForID: "user:bob", For: "bob", Until: clk.t.Add(15 * time.Minute)}, events.Metadata{})); err != nil {
			t.Fatal(err)
		}
	}
	until := clk.t.Add(time.Hour)
	before := head(t, st)
	err := svc.Occupy(ctx, slots.Actor{Name: "carol", ID: "user:carol"}, "alpha", slots.OccupyCmd{Until: until})
	e := wantCode(t, err, slots.CodeConflict)
	if e.Details["state"] != "held" || e.Details["held_for"] != "bob" {
		t.Fatalf("details = %v", e.Details)
	}
	// Same display name, another subject: still refused.
	wantCode(t, svc.Occupy(ctx, slots.Actor{Name: "bob", ID: "user:other-bob"}, "alpha", slots.OccupyCmd{Until: until}), slots.CodeConflict)
	if h := head(t, st); h != before {
		t.Fatalf("refused occupy appended: head %d → %d", before, h)
	}
	if err := svc.Occupy(ctx, slots.Actor{Name: "bob", ID: "user:bob"}, "alpha", slots.OccupyCmd{Until: until}); err != nil {
		t.Fatalf("holder occupies: %v", err)
	}
	// Once the hold's time is over, anyone may take the slot.
	clk.t = clk.t.Add(16 * time.Minute)
	if err := svc.Occupy(ctx, slots.Actor{Name: "carol", ID: "user:carol"}, "beta", slots.OccupyCmd{Until: clk.t.Add(time.Hour)}); err != nil {
		t.Fatalf("occupy after the hold expired: %v", err)
	}
}
