package slots_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// countingStore counts the slot-stream events ReadStream hands out.
type countingStore struct {
	events.Store
	read atomic.Int64
}

func (c *countingStore) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	evs, err := c.Store.ReadStream(ctx, stream, from, max, dir)
	c.read.Add(int64(len(evs)))
	return evs, err
}

// longHistory registers and occupies slot name and appends n extends
// straight to its stream, in batches.
func longHistory(t testing.TB, st events.Store, name string, n int) {
	t.Helper()
	ctx := context.Background()
	svc := slots.NewService(st, slots.Config{})
	if err := svc.Register(ctx, alice, slots.RegisterCmd{
		Name: name, ProjectUUID: "p-" + name, AppUUID: "a-" + name, DBUUID: "d-" + name,
		Repo:         events.RepoRef{Project: "SLOT", Slug: "slot-" + name},
		TemplateRepo: events.RepoRef{Project: "TPL", Slug: "template"}, TemplateRef: "main",
	}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).UTC()
	if err := svc.Occupy(ctx, alice, name, slots.OccupyCmd{Until: until}); err != nil {
		t.Fatal(err)
	}
	meta := events.Metadata{Actor: "alice", Time: time.Now().UTC()}
	for done := 0; done < n; {
		k := min(5000, n-done)
		batch := make([]events.EventData, k)
		for i := range batch {
			batch[i] = events.New(events.OccupancyExtended{Slot: name, By: "alice", Until: until.Add(time.Duration(done+i) * time.Second)}, meta)
		}
		if _, err := st.Append(ctx, events.SlotStream(name), events.StreamExists(), batch...); err != nil {
			t.Fatal(err)
		}
		done += k
	}
}

// A command on a slot with a long history reads only the events written
// since the previous command (issue 13: aggregates load in constant time),
// also when another process (a second Service, its own cache) wrote them, and
// decides as a full load would.
func TestCommandReadsOnlyNewSlotEvents(t *testing.T) {
	t.Parallel()
	const history = 20_000
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	longHistory(t, mem, "alpha", history)
	st := &countingStore{Store: mem}
	svc := slots.NewService(st, slots.Config{})
	other := slots.NewService(mem, slots.Config{Grace: time.Hour})
	ctx := context.Background()
	// Past the history's last deadline (about 6.5 h away): an extend may
	// not move a deadline earlier.
	extend := func(d time.Duration) error {
		return svc.Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: time.Now().Add(24*time.Hour + d)})
	}

	if err := extend(2 * time.Hour); err != nil { // first load: the whole stream
		t.Fatal(err)
	}
	for i := range 5 {
		st.read.Store(0)
		if err := extend(time.Duration(3+i) * time.Hour); err != nil {
			t.Fatal(err)
		}
		if n := st.read.Load(); n > 1 {
			t.Fatalf("extend %d on a slot with %d events read %d events; want only the one written since (≤ 1)", i, history, n)
		}
	}

	// Another process takes the lock: the next command reads that one event
	// and is refused naming the blocking job, as a full load would decide.
	res, err := other.Release(ctx, alice, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	st.read.Store(0)
	err = extend(9 * time.Hour)
	var e *slots.Error
	if !errors.As(err, &e) || e.Code != slots.CodeConflict || e.Details["blocking_job"] != res.JobID {
		t.Fatalf("extend after another process's release: %v, want conflict naming %s", err, res.JobID)
	}
	if n := st.read.Load(); n > 2 {
		t.Fatalf("extend after another process's release read %d events, want ≤ 2", n)
	}
	full, err := slots.LoadSlot(ctx, mem, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if full.LockJob != res.JobID || full.Revision != history+8 { // register, occupy, history, 6 extends, the acceptance
		t.Fatalf("full fold: lock %q rev %d", full.LockJob, full.Revision)
	}
}

// fold(all) == fold(cached) + fold(tail): random slot histories, loaded
// through caches at random points (one cache big enough, one of size 1 that
// keeps evicting), always equal the full fold.
func TestSlotCacheEqualsFullFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 13))
		mem := memstore.New()
		big := slots.NewSlotCache(mem, 0)
		tiny := slots.NewSlotCache(mem, 1)
		names := []string{"a", "b", "c"}
		jobs := map[string]int{}
		for step := range 200 {
			name := names[rng.IntN(len(names))]
			if step == 0 || rng.IntN(4) != 0 {
				n := 1 + rng.IntN(4)
				var evs []events.EventData
				for range n {
					evs = append(evs, randomSlotEvent(rng, name, jobs))
				}
				if _, err := mem.Append(ctx, events.SlotStream(name), events.Any(), evs...); err != nil {
					t.Fatal(err)
				}
			}
			want, err := slots.LoadSlot(ctx, mem, name)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*slots.SlotCache{big, tiny} {
				got, err := c.Load(ctx, name)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d slot %s: cached fold\n%+v\nfull fold\n%+v", seed, step, name, got, want)
				}
				// The caller owns its copy: changing it changes no later load.
				if got.VacatedBy != nil {
					got.VacatedBy["mutated"] = true
				}
				got.Occupant = "mutated"
			}
		}
		if tiny.Len() != 1 {
			t.Fatalf("cache of size 1 holds %d slots", tiny.Len())
		}
		mem.Close()
	}
}

func randomSlotEvent(rng *rand.Rand, slot string, jobs map[string]int) events.EventData {
	meta := events.Metadata{Actor: "alice", Time: time.Date(2026, 1, 1, 0, rng.IntN(60), 0, 0, time.UTC)}
	if rng.IntN(10) == 0 {
		meta.Actor = slots.ActorDeadline
	}
	until := time.Date(2026, 2, 1, rng.IntN(24), 0, 0, 0, time.UTC)
	jobs[slot]++
	job := fmt.Sprintf("%s-job-%d", slot, rng.IntN(jobs[slot]))
	kinds := []string{events.KindReset, events.KindTeardown, events.KindPromote}
	var p events.Payload
	switch rng.IntN(9) {
	case 0:
		p = events.SlotRegistered{Slot: slot, ProjectUUID: "p", AppUUID: "a", DBUUID: "d", Repo: events.RepoRef{Project: "P", Slug: slot}}
	case 1:
		p = events.SlotOccupied{Slot: slot, By: "alice", Until: until}
	case 2:
		p = events.OccupancyExtended{Slot: slot, By: "bob", Until: until}
	case 3:
		p = events.JobAccepted{Slot: slot, JobID: job, Kind: kinds[rng.IntN(3)], Resumed: rng.IntN(2) == 0}
	case 4:
		p = events.JobReleased{Slot: slot, JobID: job, Outcome: events.StatusFailed}
	case 5:
		p = events.SlotVacated{Slot: slot, JobID: job}
	case 6:
		p = events.TeardownIncomplete{Slot: slot, JobID: job, Remaining: []events.Resource{{Kind: "db", ID: "d"}}}
	case 7:
		p = events.SlotRetired{Slot: slot, JobID: job}
	default:
		p = events.SlotPromoted{Slot: slot, JobID: job, NewRepo: events.RepoRef{Project: "N", Slug: job}}
	}
	return events.New(p, meta)
}

// Concurrent commands through one cache and through several processes'
// caches: the conditional append stays the guard, so every extend that
// succeeded is in the log exactly once and the caches agree with the log.
func TestSlotCacheUnderConcurrentCommands(t *testing.T) {
	t.Parallel()
	mem := memstore.New()
	t.Cleanup(func() { mem.Close() })
	longHistory(t, mem, "alpha", 100)
	ctx := context.Background()
	svcs := []*slots.Service{
		slots.NewService(mem, slots.Config{}),
		slots.NewService(mem, slots.Config{}),
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				err := svcs[g%2].Extend(ctx, alice, "alpha", slots.ExtendCmd{Until: time.Now().Add(48*time.Hour + time.Duration(2+g*100+i)*time.Minute)})
				var e *slots.Error
				if errors.As(err, &e) && e.Code == slots.CodeConflict && e.Details["blocking_job"] == nil {
					continue // another goroutine set a later deadline first: refused, not appended
				}
				if err != nil {
					t.Error(err)
					return
				}
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	full, err := slots.LoadSlot(ctx, mem, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(1 + 100 + ok.Load()); full.Revision != want {
		t.Fatalf("slot at revision %d after %d extends, want %d", full.Revision, ok.Load(), want)
	}
	c := slots.NewSlotCache(mem, 0)
	got, err := c.Load(ctx, "alpha")
	if err != nil || !reflect.DeepEqual(got, full) {
		t.Fatalf("cache after concurrent commands: %v\n%+v\nwant\n%+v", err, got, full)
	}
}

// A slot's fold keeps the per-job outcome records (VacatedBy, PromotedBy) of
// the lock holder and the last released job only: a slot that went through
// hundreds of resets and promotes folds to the same size as one that went
// through one (issue 13), and still answers what the releaser and the
// waitlist ask (the lock holder's, the last released job's).
func TestSlotFoldForgetsOldJobOutcomes(t *testing.T) {
	t.Parallel()
	var st slots.SlotState
	rev := events.Revision(0)
	apply := func(p events.Payload) {
		t.Helper()
		data := events.New(p, events.Metadata{Actor: "alice", Time: time.Now().UTC()})
		if err := st.Apply(events.RecordedEvent{Stream: events.SlotStream("a"), Revision: rev, Type: data.Type, Data: data.Data, Meta: data.Meta}); err != nil {
			t.Fatal(err)
		}
		rev++
	}
	apply(events.SlotRegistered{Slot: "a", ProjectUUID: "p", AppUUID: "x", DBUUID: "d", Repo: events.RepoRef{Project: "P", Slug: "a"}})
	for i := range 500 {
		job := fmt.Sprintf("job-%d", i)
		apply(events.SlotOccupied{Slot: "a", By: "alice", Until: time.Now().Add(time.Hour)})
		apply(events.JobAccepted{Slot: "a", JobID: job, Kind: events.KindReset, Run: 1})
		if i%2 == 0 {
			apply(events.SlotVacated{Slot: "a", JobID: job})
		} else {
			apply(events.SlotPromoted{Slot: "a", JobID: job, NewRepo: events.RepoRef{Project: "N", Slug: job}})
		}
		if !st.VacatedBy[job] && st.PromotedBy[job] == (events.RepoRef{}) {
			t.Fatalf("the lock holder %s's outcome is not recorded", job)
		}
		apply(events.JobReleased{Slot: "a", JobID: job, Outcome: events.StatusSucceeded})
		if !st.VacatedBy[job] && st.PromotedBy[job] == (events.RepoRef{}) {
			t.Fatalf("the last released job %s's outcome is not recorded", job)
		}
		if n := len(st.VacatedBy) + len(st.PromotedBy); n > 1 {
			t.Fatalf("after %d jobs the fold keeps %d per-job outcomes: %v %v", i+1, n, st.VacatedBy, st.PromotedBy)
		}
	}
}
