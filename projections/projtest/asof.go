package projtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// testAsOf (issue 28, item 5): for random positions of a generated history,
// the "as of" answers of the read model under test (History.SlotAsOf, from
// checkpoints every 16 events so most answers resume one, and JobAsOf,
// through its job index) equal the views a reference read model
// replayed up to exactly that position holds: every slot and every job, by
// position and by the time of the event at that position; a slot or job
// that did not exist yet is ErrNotFound. SlotChanges between two of the
// positions starts from the first view's fields and ends at the second's.
func testAsOf(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	log := memstore.New()
	Must(t, NewGen(log, 28).Random(ctx, 8, 3000))
	rm := open(t, log)
	Catchup(t, log, rm, 500)
	head, err := log.Head(ctx)
	Must(t, err)
	times := eventTimes(t, log)
	names, err := rm.(projections.SlotNamer).SlotNames(ctx)
	Must(t, err)
	jobs := allJobs(t, rm, projections.JobFilter{}, projections.MaxLimit)

	rnd := rand.New(rand.NewPCG(28, 5))
	positions := []events.Position{1, head}
	for range 14 {
		positions = append(positions, events.Position(1+rnd.Uint64N(uint64(head))))
	}
	slices.Sort(positions)
	positions = slices.Compact(positions)

	ref := reference(log) // replayed forward from one position to the next
	h := projections.NewHistory(log, projections.HistoryOptions{Every: 16})
	var prev map[string]projections.SlotView
	var prevPos events.Position
	for _, p := range positions {
		reached, err := projections.Replay(ctx, log, ref, p, 0)
		Must(t, err)
		if reached != p {
			t.Fatalf("reference replayed to %d, want %d", reached, p)
		}
		views := map[string]projections.SlotView{}
		for _, name := range names {
			want, werr := ref.Slot(ctx, name)
			for _, at := range []projections.At{{Position: p}, {Time: times[p]}} {
				got, as, err := h.SlotAsOf(ctx, rm, name, at)
				if errors.Is(werr, projections.ErrNotFound) {
					if !errors.Is(err, projections.ErrNotFound) {
						t.Errorf("slot %s at %+v: %v, want not found (not registered yet)", name, at, err)
					}
					continue
				}
				Must(t, werr)
				Must(t, err)
				diffJSON(t, fmt.Sprintf("slot %s at %d (%+v): as of, replayed", name, p, at), got, want)
				if at.Position != 0 && as.Position != p {
					t.Errorf("slot %s at %d: as_of.position %d", name, p, as.Position)
				}
				switch {
				case at.Position != 0 && as.Live != (p == head):
					t.Errorf("slot %s at %d: live %v", name, p, as.Live)
				case at.Position == 0 && as.Live:
					// No event of its streams after that time: the live view.
					now, err := rm.Slot(ctx, name)
					Must(t, err)
					diffJSON(t, fmt.Sprintf("slot %s at %v (live): as of, now", name, at.Time), got, now)
				}
			}
			if werr == nil {
				views[name] = want
			}
		}
		for _, id := range jobs {
			want, werr := ref.Job(ctx, id)
			got, _, err := projections.JobAsOf(ctx, log, rm, id, projections.At{Position: p})
			if errors.Is(werr, projections.ErrNotFound) {
				if !errors.Is(err, projections.ErrNotFound) {
					t.Errorf("job %s at %d: %v, want not found", id, p, err)
				}
				continue
			}
			Must(t, werr)
			Must(t, err)
			diffJSON(t, fmt.Sprintf("job %s at %d: as of, replayed", id, p), got, want)
		}
		if prev != nil {
			checkChanges(ctx, t, h, rm, prevPos, p, prev, views)
		}
		prev, prevPos = views, p
	}
}

// checkChanges: every change of History.SlotChanges(from, to) lies in (from, to];
// per field, the first change starts from the view at from and the last
// ends at the view at to; a field that differs has a change.
func checkChanges(ctx context.Context, t *testing.T, h *projections.History, rm projections.ReadModel, from, to events.Position, a, b map[string]projections.SlotView) {
	t.Helper()
	for name, vb := range b {
		va := a[name]
		page, err := h.SlotChanges(ctx, rm, name, projections.At{Position: from}, projections.At{Position: to}, projections.MaxChangesLimit)
		Must(t, err)
		if page.NextFrom != 0 {
			t.Fatalf("slot %s changes %d..%d: more than one page (next from %d)", name, from, to, page.NextFrom)
		}
		changes := page.Changes
		first, last := map[string]projections.SlotChange{}, map[string]projections.SlotChange{}
		for _, c := range changes {
			if c.Position <= from || c.Position > to {
				t.Errorf("slot %s changes %d..%d: a change at %d", name, from, to, c.Position)
			}
			if c.Field == projections.FieldResource {
				continue
			}
			if _, ok := first[c.Field]; !ok {
				first[c.Field] = c
			}
			last[c.Field] = c
		}
		for _, f := range []string{projections.FieldOccupant, projections.FieldDeadline, projections.FieldLifecycle, projections.FieldActiveJob} {
			wa, wb := fieldOf(va, f), fieldOf(vb, f)
			c1, ok := first[f]
			if !ok {
				if !reflect.DeepEqual(wa, wb) {
					t.Errorf("slot %s %s changed %d..%d (%v → %v) with no change listed", name, f, from, to, wa, wb)
				}
				continue
			}
			if _, known := a[name]; known && !reflect.DeepEqual(c1.Before, wa) {
				t.Errorf("slot %s %s: first change from %v, view at %d has %v", name, f, c1.Before, from, wa)
			}
			if !reflect.DeepEqual(last[f].After, wb) {
				t.Errorf("slot %s %s: last change to %v, view at %d has %v", name, f, last[f].After, to, wb)
			}
		}
	}
}

// fieldOf is a view's field as SlotChange values hold it.
func fieldOf(v projections.SlotView, field string) any {
	switch field {
	case projections.FieldOccupant:
		if v.Occupant != "" {
			return v.Occupant
		}
	case projections.FieldDeadline:
		if v.Deadline != nil {
			return *v.Deadline
		}
	case projections.FieldLifecycle:
		if v.Lifecycle != "" {
			return v.Lifecycle
		}
	case projections.FieldActiveJob:
		if v.ActiveJob != nil {
			return projections.ActiveJobRef{ID: v.ActiveJob.ID, Kind: v.ActiveJob.Kind}
		}
	}
	return nil
}

// eventTimes maps every position of log to its event's time.
func eventTimes(t *testing.T, log events.Store) map[events.Position]time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()
	head, err := log.Head(ctx)
	Must(t, err)
	out := map[events.Position]time.Time{}
	done := errors.New("done")
	err = log.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out[ev.Position] = ev.Meta.Time
		if ev.Position >= head {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatal(err)
	}
	return out
}
