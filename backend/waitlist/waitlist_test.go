package waitlist_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	bclock "github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	t0    = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	admin = slots.Actor{Name: "admin", ID: "user:admin"}
	bob   = slots.Actor{Name: "bob", ID: "user:bob"}
	carol = slots.Actor{Name: "carol", ID: "user:carol"}
	dave  = slots.Actor{Name: "dave", ID: "user:dave"}
)

type env struct {
	t     *testing.T
	ctx   context.Context
	clk   *bclock.Fake // the consumer's timers fire as the test advances it
	store events.Store
	mem   *memstore.Store
	slots *slots.Service
	wl    *waitlist.Service
}

func newEnv(t *testing.T, cfg waitlist.Config) *env {
	t.Helper()
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	clk := bclock.NewFake(t0)
	e := &env{t: t, ctx: context.Background(), clk: clk, store: mem, mem: mem}
	e.slots = slots.NewService(mem, slots.Config{Clock: clk})
	cfg.Clock = clk
	e.wl = waitlist.New(mem, e.slots, cfg)
	return e
}

// another returns a second waitlist service (another process) on the store.
func (e *env) another(store events.Store) *waitlist.Service {
	return waitlist.New(store, e.slots, waitlist.Config{Clock: e.clk})
}

func (e *env) register(name string) {
	e.t.Helper()
	err := e.slots.Register(e.ctx, admin, slots.RegisterCmd{Name: name, ProjectUUID: "project-" + name, AppUUID: "app-" + name, DBUUID: "db-" + name,
		Repo: events.RepoRef{Project: "SLOT", Slug: name}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "t"}, TemplateRef: "main"})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) occupy(a slots.Actor, name string, until time.Time) {
	e.t.Helper()
	if err := e.slots.Occupy(e.ctx, a, name, slots.OccupyCmd{Until: until}); err != nil {
		e.t.Fatalf("occupy %s by %s: %v", name, a.Name, err)
	}
}

func (e *env) slotRev(name string) events.Revision {
	e.t.Helper()
	st, err := slots.LoadSlot(e.ctx, e.store, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Revision
}

// reset records a reset of an occupied slot the way the engine does:
// JobAccepted, (time passes), SlotVacated and JobReleased with outcome. A
// failed reset leaves the slot occupied.
func (e *env) reset(name, outcome string, took time.Duration) string {
	e.t.Helper()
	job := "job-" + name + "-" + e.clk.Now().Format("150405")
	m := func() events.Metadata { return events.Metadata{Actor: "worker:test", Time: e.clk.Now()} }
	if _, err := e.store.Append(e.ctx, events.SlotStream(name), events.Exact(e.slotRev(name)),
		events.New(events.JobAccepted{Slot: name, JobID: job, Kind: events.KindReset}, m())); err != nil {
		e.t.Fatal(err)
	}
	e.clk.Advance(took)
	var evs []events.EventData
	if outcome == "succeeded" {
		if _, err := e.store.Append(e.ctx, events.JobStream(job), events.Any(), events.New(events.JobSucceeded{JobID: job, Attempt: 1}, m())); err != nil {
			e.t.Fatal(err)
		}
		evs = append(evs, events.New(events.SlotVacated{Slot: name, JobID: job}, m()))
	} else {
		if _, err := e.store.Append(e.ctx, events.JobStream(job), events.Any(), events.New(events.JobFailed{JobID: job, Attempt: 1, Reason: "500"}, m())); err != nil {
			e.t.Fatal(err)
		}
	}
	evs = append(evs, events.New(events.JobReleased{Slot: name, JobID: job, Outcome: outcome}, m()))
	if _, err := e.store.Append(e.ctx, events.SlotStream(name), events.Exact(e.slotRev(name)), evs...); err != nil {
		e.t.Fatal(err)
	}
	return job
}

func (e *env) join(a slots.Actor, c waitlist.JoinCmd) string {
	e.t.Helper()
	if c.Duration == "" {
		c.Duration = "2h"
	}
	id, _, err := e.wl.Join(e.ctx, a, c)
	if err != nil {
		e.t.Fatalf("join %s: %v", a.Name, err)
	}
	return id
}

// settle runs the consumer of svc to a fixpoint at the current clock:
// fold the log, do what is missing, until a step appends nothing.
func settle(t *testing.T, ctx context.Context, store events.Store, svc *waitlist.Service) {
	t.Helper()
	for i := 0; i < 20; i++ {
		if err := svc.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		before, _ := store.Head(ctx)
		if _, err := svc.Step(ctx); err != nil {
			t.Fatal(err)
		}
		after, _ := store.Head(ctx)
		if after == before {
			return
		}
	}
	t.Fatal("the waitlist consumer did not settle in 20 steps")
}

func (e *env) settle() { e.t.Helper(); settle(e.t, e.ctx, e.store, e.wl) }

// count returns the events of type typ in the whole log, in order.
func count(t *testing.T, store events.Store, typ string) []events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, _ := store.Head(ctx)
	var out []events.RecordedEvent
	if head == 0 {
		return nil
	}
	err := store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Type == typ {
			out = append(out, ev)
		}
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return out
}

func payload[T events.Payload](t *testing.T, ev events.RecordedEvent) T {
	t.Helper()
	p, err := events.Decode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return p.(T)
}

func entry(t *testing.T, v waitlist.View, who string) *waitlist.EntryView {
	t.Helper()
	for i := range v.Entries {
		if v.Entries[i].Who == who {
			return &v.Entries[i]
		}
	}
	return nil
}

func wantCode(t *testing.T, err error, code apperr.Code) {
	t.Helper()
	var we *apperr.Error
	if !errors.As(err, &we) || we.Code != code {
		t.Fatalf("err = %v, want waitlist code %s", err, code)
	}
}

// A verified reset offers the slot to the head of the queue; the slot is
// held for them; an expired offer passes to the next, who accepts.
func TestOfferAfterResetExpiresToTheNextWhoAccepts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	bobEntry := e.join(bob, waitlist.JoinCmd{Duration: "2h", Note: "demo"})
	carolEntry := e.join(carol, waitlist.JoinCmd{Duration: "3h"})
	e.settle()
	if n := len(count(t, e.store, "OfferMade")); n != 0 {
		t.Fatalf("%d offers while every slot is occupied", n)
	}

	e.reset("alpha", "succeeded", 3*time.Minute)
	e.settle()
	made := count(t, e.store, "OfferMade")
	if len(made) != 1 {
		t.Fatalf("offers = %d, want 1", len(made))
	}
	om := payload[events.OfferMade](t, made[0])
	if om.EntryID != bobEntry || om.Slot != "alpha" || !om.ExpiresAt.Equal(e.clk.Now().Add(15*time.Minute)) {
		t.Fatalf("offer = %+v", om)
	}
	held := count(t, e.store, "SlotHeld")
	if len(held) != 1 || payload[events.SlotHeld](t, held[0]).ForID != "user:bob" {
		t.Fatalf("holds = %v", held)
	}
	v := e.wl.View(e.ctx)
	if b := entry(t, v, "bob"); b == nil || b.Offer == nil || b.Offer.Slot != "alpha" || b.Position != 1 {
		t.Fatalf("bob's entry = %+v", b)
	}
	// Held for bob: carol cannot take it directly.
	err := e.slots.Occupy(e.ctx, carol, "alpha", slots.OccupyCmd{Until: e.clk.Now().Add(time.Hour)})
	if slots.ErrorCode(err) != slots.CodeConflict {
		t.Fatalf("carol's occupy of a held slot: %v", err)
	}

	// 15 minutes and nobody answered: the offer expires and passes on.
	e.clk.Advance(15 * time.Minute)
	e.settle()
	if n := len(count(t, e.store, "OfferExpired")); n != 1 {
		t.Fatalf("expired = %d, want 1", n)
	}
	made = count(t, e.store, "OfferMade")
	if len(made) != 2 || payload[events.OfferMade](t, made[1]).EntryID != carolEntry {
		t.Fatalf("second offer = %v", made)
	}
	if n := len(count(t, e.store, "SlotHeld")); n != 2 {
		t.Fatalf("holds = %d, want 2", n)
	}
	// bob's late accept is refused (his entry is gone with the expiry).
	_, _, err = e.wl.Accept(e.ctx, bob, bobEntry)
	wantCode(t, err, apperr.NotFound)

	e.clk.Advance(time.Minute)
	slot, _, err := e.wl.Accept(e.ctx, carol, carolEntry)
	if err != nil || slot != "alpha" {
		t.Fatalf("carol accepts: %q %v", slot, err)
	}
	st, _ := slots.LoadSlot(e.ctx, e.store, "alpha")
	if !st.Occupied || st.Occupant != "carol" || !st.Until.Equal(e.clk.Now().Add(3*time.Hour)) {
		t.Fatalf("slot after accept: %+v", st)
	}
	e.settle()
	if n := len(count(t, e.store, "OfferAccepted")); n != 1 {
		t.Fatalf("accepted = %d, want 1", n)
	}
	if v := e.wl.View(e.ctx); len(v.Entries) != 0 {
		t.Fatalf("waitlist after the hand-over: %+v", v.Entries)
	}
	if n := len(count(t, e.store, "SlotHoldReleased")); n != 0 {
		t.Fatalf("an accepted hold was released separately (%d)", n)
	}
}

// A declined offer passes on; with nobody left, the hold is lifted.
func TestDeclinePassesOnAndLiftsTheHold(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	bobEntry := e.join(bob, waitlist.JoinCmd{})
	e.reset("alpha", "succeeded", time.Minute)
	e.settle()
	if _, err := e.wl.Decline(e.ctx, bob, bobEntry); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := len(count(t, e.store, "SlotHoldReleased")); n != 1 {
		t.Fatalf("hold releases = %d, want 1", n)
	}
	e.occupy(carol, "alpha", e.clk.Now().Add(time.Hour)) // free for anyone again
}

// Only a verified successful reset offers a slot.
func TestFailedResetOffersNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.register("beta")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	e.reset("alpha", "failed", time.Minute)
	// A vacant slot that was never reset is not offered either.
	e.settle()
	if n := len(count(t, e.store, "OfferMade")); n != 0 {
		t.Fatalf("offers after a failed reset = %d", n)
	}
	// An uncertain (abandoned) reset neither.
	st, _ := slots.LoadSlot(e.ctx, e.store, "alpha")
	if st.Locked() || !st.Occupied {
		t.Fatalf("failed reset left %+v", st)
	}
	e.reset("alpha", "abandoned", time.Minute)
	e.settle()
	if n := len(count(t, e.store, "OfferMade")); n != 0 {
		t.Fatalf("offers after an abandoned reset = %d", n)
	}
}

// failingStore "crashes" the process: every append to a slot stream fails.
type failingStore struct {
	events.Store
}

var errCrash = errors.New("crashed")

func (f failingStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if strings.HasPrefix(stream, events.SlotStreamPrefix) {
		return events.AppendResult{}, errCrash
	}
	return f.Store.Append(ctx, stream, exp, evs...)
}

// The process is down when the reset succeeds, then dies between OfferMade
// and SlotHeld: after each restart the offer and its hold still happen, each
// exactly once.
func TestCrashBetweenResetSuccessAndOffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	// The reset succeeds while no waitlist process runs.
	e.reset("alpha", "succeeded", time.Minute)

	// Restart 1: it offers, and dies before the hold lands.
	first := waitlist.New(failingStore{e.store}, e.slots, waitlist.Config{Clock: e.clk})
	if err := first.Sync(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Step(e.ctx); !errors.Is(err, errCrash) && err != nil {
		t.Fatal(err)
	}
	if n := len(count(t, e.store, "OfferMade")); n != 1 {
		t.Fatalf("offers after the first process = %d, want 1", n)
	}
	if n := len(count(t, e.store, "SlotHeld")); n != 0 {
		t.Fatalf("holds after the crash = %d, want 0", n)
	}

	// Restart 2: a fresh process resumes from the log.
	second := e.another(e.store)
	settle(t, e.ctx, e.store, second)
	third := e.another(e.store)
	settle(t, e.ctx, e.store, third)
	if n := len(count(t, e.store, "OfferMade")); n != 1 {
		t.Fatalf("offers after restarts = %d, want exactly 1", n)
	}
	if n := len(count(t, e.store, "SlotHeld")); n != 1 {
		t.Fatalf("holds after restarts = %d, want exactly 1", n)
	}
}

// gateStore makes the first two waitlist appends wait for each other, so
// two processes decide on the same state before either writes.
type gateStore struct {
	events.Store
	arrived sync.WaitGroup
}

func (g *gateStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if stream == events.WaitlistStream && len(evs) > 0 && evs[0].Type == "OfferMade" {
		g.arrived.Done()
		g.arrived.Wait()
	}
	return g.Store.Append(ctx, stream, exp, evs...)
}

// Two processes see the same successful reset and both try to offer the
// slot: one offer and one hold are written.
func TestTwoProcessesRaceToOfferOneSlot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	e.join(carol, waitlist.JoinCmd{})
	e.reset("alpha", "succeeded", time.Minute)

	g := &gateStore{Store: e.store}
	g.arrived.Add(2)
	p1, p2 := e.another(g), e.another(g)
	for _, p := range []*waitlist.Service{p1, p2} {
		if err := p.Sync(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for _, p := range []*waitlist.Service{p1, p2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Step(e.ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := len(count(t, e.store, "OfferMade")); n != 1 {
		t.Fatalf("offers after the race = %d, want 1", n)
	}
	// Both go on (the hold races the same way) until nothing is missing.
	g.arrived.Add(1000) // the gate is open from now on
	for range 3 {
		settle(t, e.ctx, e.store, p1)
		settle(t, e.ctx, e.store, p2)
	}
	if n := len(count(t, e.store, "OfferMade")); n != 1 {
		t.Fatalf("offers = %d, want 1", n)
	}
	if n := len(count(t, e.store, "SlotHeld")); n != 1 {
		t.Fatalf("holds = %d, want 1", n)
	}
}

// The same race with both consumers running live (Run) and a reset landing
// under them.
func TestTwoRunningConsumersOfferOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	// A deadline past every warning lead time: a running consumer would
	// otherwise append a DeadlineWarning to slot-alpha while this test's
	// reset helper appends there with an exact revision.
	e.occupy(dave, "alpha", t0.Add(24*time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	procs := []*waitlist.Service{e.another(e.store), e.another(e.store)}
	for _, p := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Run(ctx) }()
	}
	e.reset("alpha", "succeeded", time.Minute)
	// Wait (on the fold, no sleep) until both processes saw the hold.
	for _, p := range procs {
		for {
			head, _ := e.store.Head(ctx)
			if err := p.WaitFor(ctx, head); err != nil {
				t.Fatal(err)
			}
			if n := len(count(t, e.store, "SlotHeld")); n >= 1 {
				break
			}
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			err := p.WaitFor(wctx, head+1)
			wcancel()
			if err != nil {
				t.Fatalf("no hold: %v", err)
			}
		}
	}
	cancel()
	wg.Wait()
	if n := len(count(t, e.store, "OfferMade")); n != 1 {
		t.Fatalf("offers = %d, want 1", n)
	}
	if n := len(count(t, e.store, "SlotHeld")); n != 1 {
		t.Fatalf("holds = %d, want 1", n)
	}
}

// Bad input gets its code and appends nothing.
func TestBadInputAppendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	bobEntry := e.join(bob, waitlist.JoinCmd{})
	carolEntry := e.join(carol, waitlist.JoinCmd{})
	e.reset("alpha", "succeeded", time.Minute)
	e.settle()
	head, _ := e.store.Head(e.ctx)

	_, _, err := e.wl.Join(e.ctx, bob, waitlist.JoinCmd{Duration: "1h"})
	wantCode(t, err, apperr.Conflict) // joining twice
	_, _, err = e.wl.Join(e.ctx, dave, waitlist.JoinCmd{Duration: "800h"})
	wantCode(t, err, apperr.Unprocessable) // beyond the maximum occupancy
	_, _, err = e.wl.Join(e.ctx, dave, waitlist.JoinCmd{Duration: "soon"})
	wantCode(t, err, apperr.Invalid)
	_, _, err = e.wl.Join(e.ctx, dave, waitlist.JoinCmd{Duration: "1h", Prefix: "../x"})
	wantCode(t, err, apperr.Invalid)
	_, err = e.wl.Decline(e.ctx, carol, carolEntry)
	wantCode(t, err, apperr.Conflict) // declining nothing
	_, _, err = e.wl.Accept(e.ctx, carol, bobEntry)
	wantCode(t, err, apperr.Forbidden) // someone else's offer
	_, err = e.wl.Leave(e.ctx, carol, bobEntry, false)
	wantCode(t, err, apperr.Forbidden)
	_, err = e.wl.Reorder(e.ctx, admin, carolEntry, 0, "")
	wantCode(t, err, apperr.Unprocessable)
	_, err = e.wl.Reorder(e.ctx, admin, carolEntry, 5, "vip")
	wantCode(t, err, apperr.Unprocessable)
	_, _, err = e.wl.Accept(e.ctx, bob, "nope")
	wantCode(t, err, apperr.NotFound)
	e.clk.Advance(15 * time.Minute)
	_, _, err = e.wl.Accept(e.ctx, bob, bobEntry)
	wantCode(t, err, apperr.Conflict) // expired (before the consumer noticed)
	if h, _ := e.store.Head(e.ctx); h != head {
		t.Fatalf("refused commands appended: head %d → %d", head, h)
	}
}

// FIFO, one entry per person, and an admin's reorder with its reason.
func TestQueueOrderAndReorder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.join(bob, waitlist.JoinCmd{})
	e.join(carol, waitlist.JoinCmd{})
	daveEntry := e.join(dave, waitlist.JoinCmd{})
	if _, err := e.wl.Reorder(e.ctx, admin, daveEntry, 0, "demo for a customer at noon"); err != nil {
		t.Fatal(err)
	}
	e.settle()
	v := e.wl.View(e.ctx)
	var got []string
	for _, en := range v.Entries {
		got = append(got, en.Who)
	}
	if strings.Join(got, ",") != "dave,bob,carol" {
		t.Fatalf("order = %v", got)
	}
	re := count(t, e.store, "WaitlistReordered")
	if len(re) != 1 || payload[events.WaitlistReordered](t, re[0]).Reason == "" || re[0].Meta.Actor != "admin" {
		t.Fatalf("reorder event = %+v", re)
	}
}

// The estimate says "unknown" without a measured reset, then uses the
// median reset and the current deadlines, and says so.
func TestEstimatedWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.register("beta")
	e.occupy(dave, "alpha", t0.Add(time.Hour))
	e.occupy(admin, "beta", t0.Add(3*time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	e.settle()
	est := entry(t, e.wl.View(e.ctx), "bob").EstimatedWait
	if est.Seconds != nil || !strings.HasPrefix(est.Basis, "unknown") {
		t.Fatalf("estimate without data = %+v", est)
	}
	// One measured reset of 4 minutes on beta; it is occupied again after.
	e.reset("beta", "succeeded", 4*time.Minute)
	e.settle()
	// bob got beta offered; declines it and rejoins; carol joins too.
	v := e.wl.View(e.ctx)
	if _, err := e.wl.Decline(e.ctx, bob, entry(t, v, "bob").ID); err != nil {
		t.Fatal(err)
	}
	e.settle()
	e.occupy(admin, "beta", e.clk.Now().Add(5*time.Hour))
	e.join(bob, waitlist.JoinCmd{})
	e.join(carol, waitlist.JoinCmd{})
	e.settle()
	v = e.wl.View(e.ctx)
	now := e.clk.Now()
	b, c := entry(t, v, "bob").EstimatedWait, entry(t, v, "carol").EstimatedWait
	if b.Seconds == nil || !b.At.Equal(t0.Add(time.Hour).Add(4*time.Minute)) || !strings.Contains(b.Basis, "median reset 4m0s (from 1 resets)") {
		t.Fatalf("bob's estimate = %+v (now %s)", b, now)
	}
	if c.Seconds == nil || !c.At.Equal(now.Add(5*time.Hour).Add(4*time.Minute)) {
		t.Fatalf("carol's estimate = %+v", c)
	}
}

// Warnings at 60 and 10 minutes before a deadline: one event per lead and
// deadline, re-armed when the deadline moves, none while a reset runs.
func TestDeadlineWarnings(t *testing.T) {
	t.Parallel()
	var sent []events.DeadlineWarning
	var mu sync.Mutex
	e := newEnv(t, waitlist.Config{OnWarning: func(_ context.Context, w events.DeadlineWarning) {
		mu.Lock()
		sent = append(sent, w)
		mu.Unlock()
	}})
	e.register("alpha")
	e.register("beta")
	deadline := t0.Add(2 * time.Hour)
	e.occupy(bob, "alpha", deadline)
	e.occupy(carol, "beta", t0.Add(2*time.Hour))
	// beta is being reset (released early): never warned.
	if _, err := e.slots.Release(e.ctx, carol, "beta"); err != nil {
		t.Fatal(err)
	}
	warnings := func() []events.DeadlineWarning {
		var out []events.DeadlineWarning
		for _, ev := range count(t, e.store, "DeadlineWarning") {
			out = append(out, payload[events.DeadlineWarning](t, ev))
		}
		return out
	}
	e.settle()
	if w := warnings(); len(w) != 0 {
		t.Fatalf("warnings 2h before = %v", w)
	}
	e.clk.Advance(time.Hour) // 60 minutes left
	e.settle()
	e.settle()
	if w := warnings(); len(w) != 1 || w[0].Slot != "alpha" || w[0].LeadSeconds != 3600 || !w[0].Deadline.Equal(deadline) || w[0].Occupant != "bob" {
		t.Fatalf("warnings at 60m = %+v", w)
	}
	if ws := e.wl.Warnings(); len(ws) != 1 || ws[0].Slot != "alpha" {
		t.Fatalf("banner warnings = %+v", ws)
	}
	e.clk.Advance(49 * time.Minute)
	e.settle()
	if w := warnings(); len(w) != 1 {
		t.Fatalf("warnings at 11m = %+v", w)
	}
	e.clk.Advance(time.Minute) // 10 minutes left
	e.settle()
	if w := warnings(); len(w) != 2 || w[1].LeadSeconds != 600 {
		t.Fatalf("warnings at 10m = %+v", w)
	}
	// Extending to 35 minutes away re-arms the 10-minute lead (the deadline
	// left its window by more than the lead: 35 > 2×10 minutes), not the
	// 60-minute one (still within 2×60 minutes: bob was told, and just
	// extended).
	if err := e.slots.Extend(e.ctx, bob, "alpha", slots.ExtendCmd{Until: e.clk.Now().Add(35 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	e.settle()
	if w := warnings(); len(w) != 2 {
		t.Fatalf("warnings after the extend = %+v", w)
	}
	if ws := e.wl.Warnings(); len(ws) != 1 || !ws[0].Deadline.Equal(e.clk.Now().Add(35*time.Minute)) {
		t.Fatalf("banner after the extend (the 60-minute warning still stands) = %+v", ws)
	}
	// 5 minutes before: one 10-minute warning for the new deadline.
	e.clk.Advance(30 * time.Minute)
	e.settle()
	if w := warnings(); len(w) != 3 || w[2].LeadSeconds != 600 || !w[2].Deadline.Equal(e.clk.Now().Add(5*time.Minute)) {
		t.Fatalf("warnings at 5m = %+v", w)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 3 {
		t.Fatalf("sender called %d times, want 3", len(sent))
	}
	// A second process finds nothing left to warn about.
	other := e.another(e.store)
	settle(t, e.ctx, e.store, other)
	if w := warnings(); len(w) != 3 {
		t.Fatalf("a second process warned again: %+v", w)
	}
}

// Issue 33 item 3: every extend inside the warning window used to post a
// new warning (12 extends → 12 posts; ~36k an hour at the command limit).
// A warning is sent once per lead while the deadline stays within twice
// the lead; an extend beyond that re-arms it, so at most one warning per
// lead per lead time, whatever the extends.
func TestExtendsInsideTheWindowWarnOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	e.register("alpha")
	e.occupy(bob, "alpha", t0.Add(2*time.Hour))
	warnings := func() int { return len(count(t, e.store, "DeadlineWarning")) }
	e.clk.Advance(90 * time.Minute) // 30 minutes left
	e.settle()
	e.settle()
	if n := warnings(); n != 1 {
		t.Fatalf("warnings at 30m = %d", n)
	}
	until := t0.Add(2 * time.Hour)
	for i := 0; i < 12; i++ {
		until = until.Add(time.Minute)
		if err := e.slots.Extend(e.ctx, bob, "alpha", slots.ExtendCmd{Until: until}); err != nil {
			t.Fatal(err)
		}
		e.settle()
	}
	e.settle()
	if n := warnings(); n != 1 {
		t.Fatalf("12 extends inside the window: %d warnings, want 1", n)
	}
	// Past twice the lead: re-armed, warned again when it comes near.
	if err := e.slots.Extend(e.ctx, bob, "alpha", slots.ExtendCmd{Until: e.clk.Now().Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if n := warnings(); n != 1 {
		t.Fatalf("right after a long extend: %d warnings", n)
	}
	e.clk.Advance(2 * time.Hour)
	e.settle()
	e.settle()
	if n := warnings(); n != 2 {
		t.Fatalf("60 minutes before the new deadline: %d warnings, want 2", n)
	}
}

// The webhook message is Slack-compatible and links to the dashboard's
// extend button.
func TestWarningMessage(t *testing.T) {
	t.Parallel()
	h := &waitlist.Webhook{BaseURL: "http://localhost:8080", ExtendBy: time.Hour}
	m := h.Message(events.DeadlineWarning{Slot: "alpha", Occupant: "bob", Deadline: t0, LeadSeconds: 600}, t0.Add(-10*time.Minute))
	if !strings.Contains(m.Text, "alpha resets in 10 min") || !strings.Contains(m.Text, "http://localhost:8080/?extend=alpha#/waitlist") || len(m.Blocks) != 2 {
		t.Fatalf("message = %+v", m)
	}
	// Issue 33 item 3: the text says the time really left, not the lead
	// ("1h0m0s" for a deadline 25 minutes away, occupied that late).
	for _, c := range []struct {
		left time.Duration
		want string
	}{{25 * time.Minute, "resets in 25 min"}, {84*time.Minute + 40*time.Second, "resets in 1 h 25 min"}, {2 * time.Hour, "resets in 2 h"}, {20 * time.Second, "resets in less than a minute"}} {
		m := h.Message(events.DeadlineWarning{Slot: "alpha", Occupant: "bob", Deadline: t0, LeadSeconds: 3600}, t0.Add(-c.left))
		if !strings.Contains(m.Text, c.want) || strings.Contains(m.Text, "1h0m0s") {
			t.Errorf("%v left: %q, want %q", c.left, m.Text, c.want)
		}
		if b, _ := json.Marshal(m.Blocks); !strings.Contains(string(b), strings.TrimPrefix(c.want, "resets in ")) {
			t.Errorf("%v left: blocks %s", c.left, b)
		}
	}
}

// waitlistReads counts the waitlist-stream events ReadStream hands out.
type waitlistReads struct {
	events.Store
	read int
}

func (w *waitlistReads) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	evs, err := w.Store.ReadStream(ctx, stream, from, max, dir)
	if stream == events.WaitlistStream {
		w.read += len(evs)
	}
	return evs, err
}

// A command reads only the waitlist events appended since the previous
// command of its process (issue 13: a command's cost does not grow with
// the stream's history), also when another process appended them, and
// decides as a fold of the whole stream would: one entry per person,
// the other process's entries known.
func TestCommandsReadOnlyNewWaitlistEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, waitlist.Config{})
	for range 200 { // a long history: joins and leaves
		id := e.join(bob, waitlist.JoinCmd{})
		if _, err := e.wl.Leave(e.ctx, bob, id, false); err != nil {
			t.Fatal(err)
		}
	}
	countA, countB := &waitlistReads{Store: e.store}, &waitlistReads{Store: e.store}
	a, b := e.another(countA), e.another(countB)
	if _, _, err := a.Join(e.ctx, carol, waitlist.JoinCmd{Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	if countA.read < 400 {
		t.Fatalf("the first command read %d events; it must fold the whole stream once", countA.read)
	}
	if _, _, err := b.Join(e.ctx, dave, waitlist.JoinCmd{Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	countA.read, countB.read = 0, 0
	// A knows dave's entry (appended by B) and refuses carol twice.
	_, _, err := a.Join(e.ctx, carol, waitlist.JoinCmd{Duration: "1h"})
	wantCode(t, err, apperr.Conflict)
	if _, _, err := a.Join(e.ctx, bob, waitlist.JoinCmd{Duration: "1h"}); err != nil {
		t.Fatal(err)
	}
	_, _, err = b.Join(e.ctx, bob, waitlist.JoinCmd{Duration: "1h"})
	wantCode(t, err, apperr.Conflict)
	if countA.read > 2 || countB.read > 2 {
		t.Fatalf("later commands read %d and %d waitlist events; want only the new ones", countA.read, countB.read)
	}
	e.settle()
	v := e.wl.View(e.ctx)
	var who []string
	for _, en := range v.Entries {
		who = append(who, en.Who)
	}
	if strings.Join(who, ",") != "carol,dave,bob" {
		t.Fatalf("queue %v", who)
	}
}
