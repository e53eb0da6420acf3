package projections_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// The reference: SlotAsOf and SlotChanges as they were before issue 37,
// folding the slot's whole history (SlotHistory, then Cut) for every
// answer. History must answer exactly as they do.

type refState struct {
	slots map[string]*projections.SlotView
	jobs  map[string]*projections.JobView
}

func (s *refState) GetSlot(n string) *projections.SlotView { return s.slots[n] }
func (s *refState) GetJob(id string) *projections.JobView  { return s.jobs[id] }
func (s *refState) PutSlot(v *projections.SlotView)        { s.slots[v.Name] = v }
func (s *refState) PutJob(v *projections.JobView)          { s.jobs[v.ID] = v }

func refFold(name string, evs []events.RecordedEvent, each func(ev events.RecordedEvent, before, after *projections.SlotView)) *projections.SlotView {
	st := &refState{slots: map[string]*projections.SlotView{}, jobs: map[string]*projections.JobView{}}
	for _, ev := range evs {
		before := st.slots[name]
		projections.Project(st, projections.DecodeEvent(ev))
		if each != nil {
			each(ev, before, st.slots[name])
		}
	}
	return st.slots[name]
}

func refHistory(ctx context.Context, log projections.StreamReader, rm projections.ReadModel, name string) ([]events.RecordedEvent, events.Position, error) {
	limit, err := rm.Position(ctx)
	if err != nil {
		return nil, 0, err
	}
	ids, err := projections.SlotJobIDs(ctx, rm, name)
	if err != nil {
		return nil, 0, err
	}
	evs, err := projections.SlotHistory(ctx, log, name, ids, limit)
	return evs, limit, err
}

func refSlotAsOf(ctx context.Context, log projections.StreamReader, rm projections.ReadModel, name string, at projections.At) (projections.SlotView, projections.AsOf, error) {
	evs, limit, err := refHistory(ctx, log, rm, name)
	if err != nil {
		return projections.SlotView{}, projections.AsOf{}, err
	}
	evs, as := projections.Cut(evs, at, limit)
	v := refFold(name, evs, nil)
	if v == nil {
		return projections.SlotView{}, as, fmt.Errorf("slot %q at position %d: %w", name, as.Position, projections.ErrNotFound)
	}
	return *v, as, nil
}

func refSlotChanges(ctx context.Context, log projections.StreamReader, rm projections.ReadModel, name string, from, to projections.At) ([]projections.SlotChange, projections.AsOf, projections.AsOf, error) {
	evs, limit, err := refHistory(ctx, log, rm, name)
	if err != nil {
		return nil, projections.AsOf{}, projections.AsOf{}, err
	}
	var fromEvs []events.RecordedEvent
	var fromAs projections.AsOf
	if !from.IsZero() {
		fromEvs, fromAs = projections.Cut(evs, from, limit)
	}
	toEvs, toAs := projections.Cut(evs, to, limit)
	if fromAs.Position > toAs.Position {
		return nil, fromAs, toAs, fmt.Errorf("%w: from (position %d) is after to (position %d)", projections.ErrInvalid, fromAs.Position, toAs.Position)
	}
	out := []projections.SlotChange{}
	skip, i := len(fromEvs), 0
	refFold(name, toEvs, func(ev events.RecordedEvent, before, after *projections.SlotView) {
		i++
		if i <= skip || after == nil || before == after {
			return
		}
		out = append(out, projections.DiffSlot(ev, before, after)...)
	})
	return out, fromAs, toAs, nil
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	projtest.Must(t, err)
	return string(b)
}

// sameErr: both nil, or both the same kind of refusal.
func sameErr(a, b error) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	case errors.Is(b, projections.ErrNotFound):
		return errors.Is(a, projections.ErrNotFound)
	case errors.Is(b, projections.ErrInvalid):
		return errors.Is(a, projections.ErrInvalid)
	}
	return a.Error() == b.Error()
}

// TestHistoryEqualsFullFold (issue 37 item 3): History's answers, resumed
// from checkpoints, equal the full fold's (the implementation before it,
// kept above as the reference) for random moments and ranges — positions,
// times between events, before the slot existed, now and past now — while
// the read model moves on (the checkpoints are extended) and with paging
// (every page's changes, followed to the end, are the reference's list,
// oldest first through NextFrom and newest first through NextTo).
func TestHistoryEqualsFullFold(t *testing.T) {
	ctx := context.Background()
	log := memstore.New()
	t.Cleanup(func() { log.Close() })
	g := projtest.NewGen(log, 37)
	projtest.Must(t, g.Random(ctx, 3, 2500))
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	all, err := allEvents(ctx, log, head)
	projtest.Must(t, err)

	rm := memory.New(log)
	names := []string{"nope"}
	for name := range g.Slots {
		names = append(names, name)
	}
	slices.Sort(names)
	rnd := rand.New(rand.NewPCG(37, 3))
	randomAt := func(limit events.Position) projections.At {
		switch rnd.IntN(8) {
		case 0:
			return projections.At{}
		case 1:
			return projections.At{Position: limit + 1 + events.Position(rnd.IntN(50))}
		case 2, 3:
			// A time: an event's, or between two events.
			ev := all[rnd.IntN(len(all))]
			return projections.At{Time: ev.Meta.Time.Add(time.Duration(rnd.IntN(3)-1) * time.Millisecond)}
		}
		return projections.At{Position: 1 + events.Position(rnd.Uint64N(uint64(head)))}
	}
	for _, every := range []int{1, 7, 64} {
		h := projections.NewHistory(log, projections.HistoryOptions{Every: every, Slots: 2})
		for _, upTo := range []events.Position{head / 3, head / 2, head} {
			_, err := projections.Replay(ctx, log, rm, upTo, 0)
			projtest.Must(t, err)
			for range 40 {
				name := names[rnd.IntN(len(names))]
				at := randomAt(upTo)
				got, gas, gerr := h.SlotAsOf(ctx, rm, name, at)
				want, was, werr := refSlotAsOf(ctx, log, rm, name, at)
				what := fmt.Sprintf("every %d, read model at %d: slot %s at %+v", every, upTo, name, at)
				if !sameErr(gerr, werr) {
					t.Fatalf("%s: error %v, reference %v", what, gerr, werr)
				}
				if asJSON(t, got) != asJSON(t, want) || asJSON(t, gas) != asJSON(t, was) {
					t.Fatalf("%s:\n history:   %s %+v\n reference: %s %+v", what, asJSON(t, got), gas, asJSON(t, want), was)
				}

				from, to := randomAt(upTo), randomAt(upTo)
				if rnd.IntN(4) == 0 {
					from = projections.At{}
				}
				if rnd.IntN(2) == 0 && from.Position > 0 && from.Position < upTo {
					to = projections.At{Position: min(upTo, from.Position+events.Position(rnd.IntN(40)))} // a tiny range
				}
				wch, wfa, wta, werr := refSlotChanges(ctx, log, rm, name, from, to)
				limit := 1 + rnd.IntN(60)
				gch := []projections.SlotChange{}
				var gfa, gta projections.AsOf
				pageFrom, pageTo := from, to
				for pages := 0; ; pages++ {
					p, err := h.SlotChanges(ctx, rm, name, pageFrom, pageTo, limit)
					what := fmt.Sprintf("every %d, read model at %d: slot %s changes %+v..%+v (page %d from %+v, limit %d)", every, upTo, name, from, to, pages, pageFrom, limit)
					if pages == 0 {
						if !sameErr(err, werr) {
							t.Fatalf("%s: error %v, reference %v", what, err, werr)
						}
						gfa, gta = p.From, p.To
					} else {
						projtest.Must(t, err)
						if p.To.Position != gta.Position {
							t.Fatalf("%s: to %+v, first page's %+v", what, p.To, gta)
						}
					}
					if len(p.Changes) > limit+16 {
						t.Fatalf("%s: %d changes on a page", what, len(p.Changes))
					}
					gch = append(gch, p.Changes...)
					if p.NextFrom == 0 {
						break
					}
					pageFrom, pageTo = projections.At{Position: p.NextFrom}, projections.At{Position: gta.Position}
				}
				if werr != nil {
					continue
				}
				if gfa != wfa || gta != wta {
					t.Fatalf("every %d: slot %s changes %+v..%+v: from/to %+v %+v, reference %+v %+v", every, name, from, to, gfa, gta, wfa, wta)
				}
				if asJSON(t, gch) != asJSON(t, wch) {
					t.Fatalf("every %d: slot %s changes %+v..%+v (limit %d):\n history:   %s\n reference: %s", every, name, from, to, limit, asJSON(t, gch), asJSON(t, wch))
				}

				// Newest first: pages followed through NextTo, put back
				// in log order, are the same list.
				var newest [][]projections.SlotChange
				pageTo = to
				for pages := 0; ; pages++ {
					p, err := h.SlotChangesNewest(ctx, rm, name, from, pageTo, limit)
					projtest.Must(t, err)
					if pages == 0 && (p.From != wfa || p.To != wta) {
						t.Fatalf("every %d: slot %s newest %+v..%+v: from/to %+v %+v, reference %+v %+v", every, name, from, to, p.From, p.To, wfa, wta)
					}
					if len(p.Changes) > limit+16 || pages > len(wch)+1 {
						t.Fatalf("every %d: slot %s newest page %d: %d changes (limit %d)", every, name, pages, len(p.Changes), limit)
					}
					newest = append(newest, p.Changes)
					if p.NextTo == 0 {
						break
					}
					pageTo = projections.At{Position: p.NextTo}
				}
				back := []projections.SlotChange{}
				for i := len(newest) - 1; i >= 0; i-- {
					back = append(back, newest[i]...)
				}
				if asJSON(t, back) != asJSON(t, wch) {
					t.Fatalf("every %d: slot %s newest %+v..%+v (limit %d):\n history:   %s\n reference: %s", every, name, from, to, limit, asJSON(t, back), asJSON(t, wch))
				}
			}
		}
		rm = memory.New(log) // the next round extends from the start again
	}
}

func allEvents(ctx context.Context, log events.Store, head events.Position) ([]events.RecordedEvent, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []events.RecordedEvent
	done := errors.New("done")
	err := log.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= head {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		return nil, err
	}
	return out, nil
}

// TestHistoryConcurrent: questions about the same slots at once, while the
// read model moves on (so the checkpoints are built and extended under
// them), never fail and, under -race, share the index safely; once the
// read model stops, every answer is the full fold's.
func TestHistoryConcurrent(t *testing.T) {
	ctx := context.Background()
	log := memstore.New()
	t.Cleanup(func() { log.Close() })
	g := projtest.NewGen(log, 38)
	projtest.Must(t, g.Random(ctx, 2, 1500))
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	var names []string
	for name := range g.Slots {
		names = append(names, name)
	}
	rm := memory.New(log)
	_, err = projections.Replay(ctx, log, rm, head/4, 0)
	projtest.Must(t, err)
	h := projections.NewHistory(log, projections.HistoryOptions{Every: 16, Slots: 1})
	done := make(chan error, 9)
	go func() {
		_, err := projections.Replay(ctx, log, rm, head, 0)
		done <- err
	}()
	for i := range 8 {
		go func() {
			rnd := rand.New(rand.NewPCG(38, uint64(i)))
			for range 40 {
				name := names[rnd.IntN(len(names))]
				at := projections.At{Position: 1 + events.Position(rnd.Uint64N(uint64(head)))}
				if _, _, err := h.SlotAsOf(ctx, rm, name, at); err != nil && !errors.Is(err, projections.ErrNotFound) {
					done <- err
					return
				}
				if _, err := h.SlotChanges(ctx, rm, name, at, projections.At{}, 50); err != nil && !errors.Is(err, projections.ErrInvalid) {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 9 {
		projtest.Must(t, <-done)
	}
	for _, name := range names {
		for _, at := range []projections.At{{}, {Position: head / 2}} {
			got, gas, gerr := h.SlotAsOf(ctx, rm, name, at)
			want, was, werr := refSlotAsOf(ctx, log, rm, name, at)
			if !sameErr(gerr, werr) {
				t.Fatalf("slot %s at %+v: error %v, reference %v", name, at, gerr, werr)
			}
			if asJSON(t, got) != asJSON(t, want) || gas != was {
				t.Errorf("slot %s at %+v after concurrent questions:\n history:   %s %+v\n reference: %s %+v", name, at, asJSON(t, got), gas, asJSON(t, want), was)
			}
		}
	}
}
