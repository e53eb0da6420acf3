package slots_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// sharedStores are the stores two "processes" (two slots.Service, each
// with its own index) share in the registry tests.
var sharedStores = map[string]func(t *testing.T) events.Store{
	"memstore": func(t *testing.T) events.Store {
		st := memstore.New()
		t.Cleanup(func() { st.Close() })
		return st
	},
	"boltstore": func(t *testing.T) events.Store {
		st, err := boltstore.Open(filepath.Join(t.TempDir(), "events.db"), boltstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	},
}

// conflicting returns two registrations that may not both hold: round i
// shares a different resource each time (project, app, database,
// repository, a repository that is the other's template).
func conflicting(i int) (a, b slots.RegisterCmd) {
	a, b = worldCmd(fmt.Sprintf("a%d", i)), worldCmd(fmt.Sprintf("b%d", i))
	switch i % 5 {
	case 0:
		b.ProjectUUID = a.ProjectUUID
	case 1:
		b.AppUUID = a.AppUUID
	case 2:
		b.DBUUID = a.DBUUID
	case 3:
		b.Repo = a.Repo
	case 4:
		b.TemplateRepo = a.Repo
	}
	return a, b
}

// TestRegisterAcrossProcesses: two services on one store register
// conflicting slots at the same moment, many times. Each time exactly one
// wins and the other gets 409 naming the winner; the log holds exactly the
// winner's registration.
func TestRegisterAcrossProcesses(t *testing.T) {
	for name, open := range sharedStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			procs := []*slots.Service{slots.NewService(st, slots.Config{}), slots.NewService(st, slots.Config{})}
			ctx := context.Background()
			for i := 0; i < 40; i++ {
				ca, cb := conflicting(i)
				cmds := []slots.RegisterCmd{ca, cb}
				if i%2 == 1 { // either process may go first
					cmds[0], cmds[1] = cmds[1], cmds[0]
				}
				var errs [2]error
				var wg sync.WaitGroup
				start := make(chan struct{})
				for p := range procs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						errs[p] = procs[p].Register(ctx, alice, cmds[p])
					}()
				}
				close(start)
				wg.Wait()
				var winner, loser int
				switch {
				case errs[0] == nil && errs[1] == nil:
					t.Fatalf("round %d: both %s and %s were registered although they share a resource", i, cmds[0].Name, cmds[1].Name)
				case errs[0] == nil:
					winner, loser = 0, 1
				case errs[1] == nil:
					winner, loser = 1, 0
				default:
					t.Fatalf("round %d: neither won: %v / %v", i, errs[0], errs[1])
				}
				e := wantCode(t, errs[loser], slots.CodeConflict)
				if e.Details["owner"] != cmds[winner].Name {
					t.Fatalf("round %d: the 409 names %v, want the winner %s: %v", i, e.Details["owner"], cmds[winner].Name, e)
				}
				for p, c := range cmds {
					s, err := slots.LoadSlot(ctx, st, c.Name)
					if err != nil {
						t.Fatal(err)
					}
					if s.Exists != (p == winner) {
						t.Fatalf("round %d: slot %s exists=%v, want %v", i, c.Name, s.Exists, p == winner)
					}
				}
			}
		})
	}
}

// faultyStore fails (or interrupts) the append to a slot's stream, as a
// registrant that crashes between its claim and its registration would.
type faultyStore struct {
	events.Store
	onSlotAppend func() error
}

func (f *faultyStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if f.onSlotAppend != nil && strings.HasPrefix(stream, events.SlotStreamPrefix) {
		if err := f.onSlotAppend(); err != nil {
			return events.AppendResult{}, err
		}
	}
	return f.Store.Append(ctx, stream, exp, evs...)
}

// TestClaimLostInACrashIsCompleted: a registrant whose claim is in the
// registry but whose registration never reached the slot's stream does
// not lock the resources away: the next Register of another process
// completes the registration (the claim's own data and metadata, caused
// by the claim), then judges its own request against it.
func TestClaimLostInACrashIsCompleted(t *testing.T) {
	for name, open := range sharedStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := context.Background()
			crashed := slots.NewService(&faultyStore{Store: st, onSlotAppend: func() error { return fmt.Errorf("process killed") }}, slots.Config{})
			if err := crashed.Register(ctx, alice, worldCmd("lost")); err == nil {
				t.Fatal("the registration survived its crash")
			}
			if s, _ := slots.LoadSlot(ctx, st, "lost"); s.Exists {
				t.Fatal("the crash happened after the registration, not between the appends")
			}
			claims, err := st.ReadStream(ctx, events.SlotRegistryStream, 0, 0, events.Forward)
			if err != nil || len(claims) != 1 || claims[0].Type != "SlotClaimed" {
				t.Fatalf("registry: %v %v", claims, err)
			}

			other := slots.NewService(st, slots.Config{})
			c := worldCmd("other")
			c.AppUUID = "app-lost"
			e := wantCode(t, other.Register(ctx, alice, c), slots.CodeConflict)
			if e.Details["owner"] != "lost" {
				t.Fatalf("409 names %v, want lost", e.Details["owner"])
			}
			s, err := slots.LoadSlot(ctx, st, "lost")
			if err != nil || !s.Exists || s.Reg.AppUUID != "app-lost" {
				t.Fatalf("the claimed slot was not completed: %+v %v", s, err)
			}
			first, err := st.ReadStream(ctx, events.SlotStream("lost"), 0, 1, events.Forward)
			if err != nil || first[0].Meta.CausationID != claims[0].ID || first[0].Meta.Actor != alice.Name || first[0].Meta.CorrelationID != alice.CorrelationID {
				t.Fatalf("completed registration's metadata %+v, want the claim's, caused by claim %s", first[0].Meta, claims[0].ID)
			}
			wantCode(t, other.Register(ctx, alice, worldCmd("lost")), slots.CodeConflict)
			if err := other.Register(ctx, alice, worldCmd("fresh")); err != nil {
				t.Fatalf("an unrelated registration after the repair: %v", err)
			}
		})
	}
}

// TestClaimCompletedByAnotherProcessIsSuccess: while the registrant is
// between its two appends, another process completes its claim; the
// registrant's own append then finds the same registration and succeeds.
func TestClaimCompletedByAnotherProcessIsSuccess(t *testing.T) {
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	other := slots.NewService(st, slots.Config{})
	var otherErr error
	once := sync.Once{}
	slow := slots.NewService(&faultyStore{Store: st, onSlotAppend: func() error {
		once.Do(func() {
			c := worldCmd("other")
			c.DBUUID = "db-slow"
			otherErr = other.Register(ctx, alice, c)
		})
		return nil
	}}, slots.Config{})
	if err := slow.Register(ctx, alice, worldCmd("slow")); err != nil {
		t.Fatalf("the registrant whose claim was completed by another process: %v", err)
	}
	if e := wantCode(t, otherErr, slots.CodeConflict); e.Details["owner"] != "slow" {
		t.Fatalf("409 names %v, want slow", e.Details["owner"])
	}
	evs, err := st.ReadStream(ctx, events.SlotStream("slow"), 0, 0, events.Forward)
	if err != nil || len(evs) != 1 {
		t.Fatalf("slot stream: %d events (%v), want one registration", len(evs), err)
	}
}

// TestRetiringFreesTheResources: a retired slot's resources may be
// registered again, also by another process.
func TestRetiringFreesTheResources(t *testing.T) {
	for name, open := range sharedStores {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := context.Background()
			a, b := slots.NewService(st, slots.Config{}), slots.NewService(st, slots.Config{})
			if err := a.Register(ctx, alice, worldCmd("old")); err != nil {
				t.Fatal(err)
			}
			c := worldCmd("new")
			c.ProjectUUID, c.AppUUID, c.DBUUID, c.Repo = "proj-old", "app-old", "db-old", events.RepoRef{Project: "SLOT", Slug: "slot-old"}
			wantCode(t, b.Register(ctx, alice, c), slots.CodeConflict)
			s, err := slots.LoadSlot(ctx, st, "old")
			if err != nil {
				t.Fatal(err)
			}
			// The teardown's last step, as backend/jobs records it.
			if _, err := st.Append(ctx, events.SlotStream("old"), events.Exact(s.Revision), events.New(events.SlotRetired{Slot: "old", JobID: "job-1"}, events.Metadata{Actor: "worker:test"})); err != nil {
				t.Fatal(err)
			}
			if err := b.Register(ctx, alice, c); err != nil {
				t.Fatalf("register the retired slot's resources: %v", err)
			}
			c2 := worldCmd("newer")
			c2.AppUUID = "app-old"
			if e := wantCode(t, a.Register(ctx, alice, c2), slots.CodeConflict); e.Details["owner"] != "new" {
				t.Fatalf("409 names %v, want new", e.Details["owner"])
			}
		})
	}
}

// countingLog counts the events SubscribeAll hands out.
type countingLog struct {
	events.Store
	delivered atomic.Int64
}

func (c *countingLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	return c.Store.SubscribeAll(ctx, after, f, func(ctx context.Context, ev events.RecordedEvent) error {
		c.delivered.Add(1)
		return h(ctx, ev)
	})
}

// TestOwnersStartFromTheirCheckpoint: the ownership index a Register
// consults is checkpointed, so the first Register of a new process folds
// only the log after the newest checkpoint (issue 13: a command's cost
// does not grow with history), and decides exactly as a fold from the
// start: a registered slot and a claim lost in a crash both still own
// their resources. An unusable checkpoint is ignored.
func TestOwnersStartFromTheirCheckpoint(t *testing.T) {
	st := memstore.New()
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	longHistory(t, st, "pad", 10_100) // registers pad (project p-pad, app a-pad, database d-pad)
	crashed := slots.NewService(&faultyStore{Store: st, onSlotAppend: func() error { return fmt.Errorf("process killed") }}, slots.Config{})
	if err := crashed.Register(ctx, alice, worldCmd("lost")); err == nil {
		t.Fatal("the registration survived its crash")
	}
	// Folds the whole log (more than a checkpoint's worth), writes a
	// checkpoint, completes the lost claim, registers.
	if err := slots.NewService(st, slots.Config{}).Register(ctx, alice, worldCmd("first")); err != nil {
		t.Fatal(err)
	}
	cps, err := st.ReadStream(ctx, events.CheckpointStream("slot-owners"), 0, 0, events.Forward)
	if err != nil || len(cps) != 1 {
		t.Fatalf("checkpoints of the owners index: %d (%v), want 1", len(cps), err)
	}

	conflicts := func(t *testing.T, svc *slots.Service) {
		t.Helper()
		for owner, c := range map[string]slots.RegisterCmd{
			"pad":   func() slots.RegisterCmd { c := worldCmd("x1"); c.AppUUID = "a-pad"; return c }(),
			"lost":  func() slots.RegisterCmd { c := worldCmd("x2"); c.DBUUID = "db-lost"; return c }(),
			"first": func() slots.RegisterCmd { c := worldCmd("x3"); c.Repo = worldCmd("first").Repo; return c }(),
		} {
			if e := wantCode(t, svc.Register(ctx, alice, c), slots.CodeConflict); e.Details["owner"] != owner {
				t.Fatalf("409 names %v, want %s", e.Details["owner"], owner)
			}
		}
	}
	fresh := &countingLog{Store: st}
	conflicts(t, slots.NewService(fresh, slots.Config{}))
	if n := fresh.delivered.Load(); n > 100 {
		t.Fatalf("a new process folded %d events before its first Register; the checkpoint should leave a handful", n)
	}

	// A checkpoint of another version is ignored: the fold starts from 0
	// and answers the same.
	if _, err := st.Append(ctx, events.CheckpointStream("slot-owners"), events.Any(), events.New(events.ConsumerCheckpointed{
		Consumer: "slot-owners", Position: 1, Version: 99, State: `{"regs":{}}`,
	}, events.Metadata{Actor: "system:test"})); err != nil {
		t.Fatal(err)
	}
	refold := &countingLog{Store: st}
	conflicts(t, slots.NewService(refold, slots.Config{}))
	if n := refold.delivered.Load(); n < 10_000 {
		t.Fatalf("with an unusable checkpoint the index folded only %d events", n)
	}
}
