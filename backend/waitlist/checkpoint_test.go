package waitlist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// fakeClock is moved by hand.
type fakeClock struct {
	clock.Clock // its timers are real
	mu          sync.Mutex
	t           time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// lastTime is the time of the log's newest event.
func lastTime(t testing.TB, store events.Store) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, err := store.Head(ctx)
	must(t, err)
	var at time.Time
	err = store.SubscribeAll(ctx, head-1, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		at = ev.Meta.Time
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return at
}

// history writes a realistic log of about n events: projtest's generator
// (slots occupied, extended, reset, promoted, torn down and replaced, jobs
// failing and resumed) with people joining, leaving, accepting and
// declining, and the waitlist consumer offering, holding, expiring and
// warning in between. It returns the clock at the end.
func history(t testing.TB, store events.Store, seed uint64, prefix string, n int) *fakeClock {
	t.Helper()
	ctx := context.Background()
	g := projtest.NewGen(store, seed)
	g.Prefix = prefix
	if err := g.Random(ctx, 6, 0); err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{Clock: clock.Real()}
	svc := slots.NewService(store, slots.Config{Clock: clk})
	wl := New(store, svc, Config{Clock: clk, Logger: quiet()})
	rnd := rand.New(rand.NewPCG(seed, 7))
	people := []string{"ana", "ben", "cy", "dee", "eli", "fay", "gus", "hal"}
	for g.Appended < n {
		if err := g.Random(ctx, 0, g.Appended+1+rnd.IntN(60)); err != nil {
			t.Fatal(err)
		}
		must(t, wl.Sync(ctx))
		genNow := lastTime(t, store)
		clk.set(genNow)
		var offered []*Offer
		waiting := map[string]string{}
		wl.r.View(func() {
			for _, o := range wl.st.Offers {
				offered = append(offered, o)
			}
			for id, e := range wl.st.Entries {
				waiting[e.Who] = id
			}
		})
		var err error
		who := people[rnd.IntN(len(people))]
		a := slots.Actor{Name: who, ID: "user:" + who}
		switch id, ok := waiting[who]; {
		case !ok:
			_, _, err = wl.Join(ctx, a, JoinCmd{Duration: "3h", Prefix: []string{"", prefix + "s00"}[rnd.IntN(2)]})
		case rnd.IntN(8) == 0:
			_, err = wl.Leave(ctx, a, id, false)
		}
		must(t, err)
		for _, o := range offered {
			oa := slots.Actor{Name: o.Who, ID: o.WhoID}
			switch rnd.IntN(3) {
			case 0:
				_, _, err = wl.Accept(ctx, oa, o.EntryID)
			case 1:
				_, err = wl.Decline(ctx, oa, o.EntryID)
			}
			// Refusals (expired, slot taken meanwhile) are part of the mix.
			_ = err
		}
		must(t, wl.Sync(ctx))
		if _, err := wl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		// Time passes: offers expire, deadlines come near (the generator's
		// occupancies last 8 hours from its own clock).
		clk.set(genNow.Add([]time.Duration{time.Minute, 20 * time.Minute, 7*time.Hour + 20*time.Minute}[rnd.IntN(3)]))
		must(t, wl.Sync(ctx))
		if _, err := wl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		// The generator's model of each slot follows what the waitlist did.
		for name, s := range g.Slots {
			ss, err := slots.LoadSlot(ctx, store, name)
			must(t, err)
			s.Rev, s.Occupant = ss.Revision, ss.Occupant
		}
	}
	return clk
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

// all reads the whole log.
func all(t testing.TB, store events.Store) []events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, err := store.Head(ctx)
	must(t, err)
	var out []events.RecordedEvent
	if head == 0 {
		return nil
	}
	err = store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return out
}

// answers is everything the consumer decides and shows from its fold at
// now: the fold itself, the view, warnings, figures and the planned appends
// (new offers' ids, random, blanked).
func answers(t testing.TB, st *State, now time.Time) string {
	t.Helper()
	clk := &fakeClock{Clock: clock.Real(), t: now}
	s := New(nil, nil, Config{Clock: clk, Logger: quiet()})
	s.st = st
	b, err := json.Marshal(st.encode())
	must(t, err)
	acts, next := s.plan(now)
	var plan []string
	for _, a := range acts {
		for _, e := range a.evs {
			data := e.Data
			if e.Type == "OfferMade" {
				var m events.OfferMade
				must(t, json.Unmarshal(e.Data, &m))
				m.OfferID = ""
				data, _ = json.Marshal(m)
			}
			plan = append(plan, fmt.Sprintf("%s %v %s %s", a.stream, a.exp, e.Type, data))
		}
	}
	out, err := json.Marshal(map[string]any{"fold": json.RawMessage(b), "view": s.View(context.Background()),
		"warnings": s.Warnings(), "stats": s.Stats(), "plan": plan, "next": next})
	must(t, err)
	return string(out)
}

func foldAll(t testing.TB, evs []events.RecordedEvent) *State {
	st := NewState()
	for _, ev := range evs {
		_ = st.Apply(ev) // unknown event types are part of the mix
	}
	return st
}

// The consumer runtime's properties (backend/consumer/consumertest) hold
// for the waitlist's fold: from a checkpoint at any cut, across a crash at
// a checkpoint write, past an unusable checkpoint, it answers (view,
// warnings, figures, planned appends) as the fold from 0. (Its bounded
// size is TestFoldSizeDoesNotGrowWithHistory; the effects across a crash
// are TestCrashAcrossCheckpointWrite.)
func TestConsumer(t *testing.T) {
	var now time.Time // the clock at the end of the case's history
	opts := New(nil, nil, Config{}).options()
	consumertest.Run(t, consumertest.Case{
		New:    func(events.Store) consumer.Fold { return NewState() },
		Packed: opts.Packed,
		Log: func(t testing.TB, store events.Store) {
			now = history(t, store, 11, "", 1200).Now()
		},
		Observe: func(f consumer.Fold) any { return answers(t, f.(*State), now) },
	})
}

// The suite's history holds every kind of event the fold keeps.
func TestConsumerHistoryShowsEverything(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	history(t, store, 11, "", 1200)
	evs := all(t, store)
	for _, typ := range []string{"OfferMade", "OfferAccepted", "OfferExpired", "OfferDeclined", "SlotHeld", "DeadlineWarning", "SlotRetired"} {
		if len(count(evs, typ)) == 0 {
			t.Fatalf("the history holds no %s", typ)
		}
	}
}

func count(evs []events.RecordedEvent, typ string) []events.RecordedEvent {
	var out []events.RecordedEvent
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// The fold keeps per slot only what offers and warnings need: it does not
// grow with finished history, and retired slots leave it.
func TestFoldSizeDoesNotGrowWithHistory(t *testing.T) {
	store := memstore.New()
	defer store.Close()
	history(t, store, 5, "a", 2000)
	small := foldAll(t, all(t, store))
	history(t, store, 6, "b", 12000) // a second generator's history after the first's
	evs := all(t, store)
	big := foldAll(t, evs)
	live := map[string]bool{}
	for _, ev := range evs {
		if strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) {
			name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
			switch ev.Type {
			case "SlotRegistered":
				live[name] = true
			case "SlotRetired":
				delete(live, name)
			}
		}
	}
	for name, si := range big.slots {
		if !live[name] && !si.st.Locked() && big.offerFor(name) == nil {
			t.Errorf("retired slot %s stayed in the fold", name)
		}
		if n := len(si.st.VacatedBy); n > 2 {
			t.Errorf("slot %s keeps %d vacating jobs", name, n)
		}
		if n := len(si.st.PromotedBy); n > 1 {
			t.Errorf("slot %s keeps %d promoting jobs", name, n)
		}
		if n := len(si.warned); n > 2 {
			t.Errorf("slot %s keeps %d warnings", name, n)
		}
	}
	if len(count(evs, "DeadlineWarning")) < 20 || len(count(evs, "SlotVacated")) < 50 {
		t.Fatal("the history is too small to show growth")
	}
	// Six times the history, about the same fold: a live pool's slots, the
	// people waiting, bounded samples.
	perSlot := func(s *State) float64 { return float64(s.size()) / float64(max(len(s.slots), 1)) }
	if perSlot(big) > 2*perSlot(small)+8 {
		t.Fatalf("fold entries per slot grew from %.1f to %.1f with history", perSlot(small), perSlot(big))
	}
}

// crashStore is a process's view of the store that dies at its k-th
// checkpoint append: before it (the append is lost) or right after it.
// Once dead, every append fails.
type crashStore struct {
	events.Store
	k     int
	after bool

	mu    sync.Mutex
	n     int
	dead  bool
	died  chan struct{}
	wrote []events.Position
}

var errDead = errors.New("process died")

func (c *crashStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return events.AppendResult{}, errDead
	}
	if !strings.HasPrefix(stream, events.CheckpointStreamPrefix) {
		return c.Store.Append(ctx, stream, exp, evs...)
	}
	c.n++
	if c.n < c.k {
		res, err := c.Store.Append(ctx, stream, exp, evs...)
		c.wrote = append(c.wrote, res.Position)
		return res, err
	}
	c.dead = true
	close(c.died)
	if c.after {
		res, err := c.Store.Append(ctx, stream, exp, evs...)
		c.wrote = append(c.wrote, res.Position)
		if err != nil {
			return res, err
		}
	}
	return events.AppendResult{}, errDead
}

// The consumer dies before or after its k-th checkpoint write while it
// catches up on a log with work to do; the next start, from whichever
// checkpoint is newest, folds as from 0 and offers, holds and warns
// exactly once.
func TestCrashAcrossCheckpointWrite(t *testing.T) {
	base := memstore.New()
	defer base.Close()
	clk := history(t, base, 23, "", 3000)
	evs := all(t, base)
	for _, after := range []bool{false, true} {
		for k := 1; k <= 4; k++ {
			t.Run(fmt.Sprintf("k=%d,after=%v", k, after), func(t *testing.T) {
				ctx := context.Background()
				store := memstore.New()
				defer store.Close()
				for _, ev := range evs {
					_, err := store.Append(ctx, ev.Stream, events.Any(), events.EventData{ID: ev.ID, Type: ev.Type, Data: ev.Data, Meta: ev.Meta})
					must(t, err)
				}
				// Work for the consumer: a reset succeeds on a vacant slot,
				// with everyone who can waiting.
				work(t, store, clk)
				cs := &crashStore{Store: store, k: k, after: after, died: make(chan struct{})}
				svc := slots.NewService(store, slots.Config{Clock: clk})
				first := New(cs, svc, Config{Clock: clk, Logger: quiet(), CheckpointEvery: 700, CheckpointGap: time.Nanosecond})
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- first.Run(rctx) }()
				select {
				case <-cs.died:
				case <-first.CaughtUp():
					// Caught up before the k-th checkpoint: it dies at the
					// shutdown's.
				}
				cancel()
				must(t, <-done)
				if len(cs.wrote) == 0 && k > 1 {
					t.Fatalf("no checkpoint written before the crash at the %d-th", k)
				}

				second := New(store, svc, Config{Clock: clk, Logger: quiet()})
				must(t, second.r.Start(ctx))
				if from, _, _ := second.r.Started(); k > 1 && from == 0 {
					t.Fatal("the second process did not start from a checkpoint")
				}
				settleInternal(t, ctx, store, second)
				final := all(t, store)
				var got string
				second.r.View(func() { got = answers(t, second.st, clk.Now()) })
				if want := answers(t, foldAll(t, final), clk.Now()); got != want {
					t.Fatalf("after the restart:\n got %s\nwant %s", got, want)
				}
				exactlyOnce(t, final)
				if len(count(final, "OfferMade")) <= len(count(evs, "OfferMade")) {
					t.Fatal("the work made no offer")
				}
			})
		}
	}
}

// work appends a successful reset of a vacant, unlocked slot, after which
// someone waiting should get it.
func work(t *testing.T, store events.Store, clk *fakeClock) {
	t.Helper()
	ctx := context.Background()
	st := foldAll(t, all(t, store))
	if len(st.Order) == 0 {
		wl := New(store, nil, Config{Clock: clk, Logger: quiet()})
		_, _, err := wl.Join(ctx, slots.Actor{Name: "zed", ID: "user:zed"}, JoinCmd{Duration: "1h"})
		must(t, err)
	}
	for name, si := range st.slots {
		if !si.st.Exists || si.st.Retired || si.st.Incomplete || si.st.Locked() || st.offerFor(name) != nil || !strings.HasPrefix(name, "s00") {
			continue
		}
		m := events.Metadata{Actor: "worker:test", Time: clk.Now()}
		job := "job-work-" + name
		_, err := store.Append(ctx, events.SlotStream(name), events.Exact(si.st.Revision),
			events.New(events.JobAccepted{Slot: name, JobID: job, Kind: events.KindReset}, m),
			events.New(events.SlotVacated{Slot: name, JobID: job}, m),
			events.New(events.JobReleased{Slot: name, JobID: job, Outcome: "succeeded"}, m))
		must(t, err)
		return
	}
	t.Fatal("no slot to reset")
}

func settleInternal(t *testing.T, ctx context.Context, store events.Store, svc *Service) {
	t.Helper()
	for i := 0; i < 20; i++ {
		must(t, svc.Sync(ctx))
		before, _ := store.Head(ctx)
		if _, err := svc.Step(ctx); err != nil {
			t.Fatal(err)
		}
		after, _ := store.Head(ctx)
		if after == before {
			return
		}
	}
	t.Fatal("the consumer did not settle")
}

// exactlyOnce checks the log: an offer only for a slot and an entry without
// an open one, one hold per offer, one warning per deadline and lead.
func exactlyOnce(t *testing.T, evs []events.RecordedEvent) {
	t.Helper()
	st := NewState()
	seen := map[string]bool{}
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		var key string
		switch e := p.(type) {
		case events.OfferMade:
			if o := st.offerFor(e.Slot); o != nil {
				t.Fatalf("offer of %s at %d while offer %s is open", e.Slot, ev.Position, o.ID)
			}
			if o := st.offerOf(e.EntryID); o != nil {
				t.Fatalf("offer to entry %s at %d while offer %s is open", e.EntryID, ev.Position, o.ID)
			}
		case events.SlotHeld:
			key = "hold " + e.OfferID
		case events.DeadlineWarning:
			key = fmt.Sprintf("warning %s %s %d", e.Slot, e.Deadline, e.LeadSeconds)
		}
		if key != "" && seen[key] {
			t.Fatalf("%s twice (at %d)", key, ev.Position)
		}
		seen[key] = true
		_ = st.Apply(ev)
	}
}
