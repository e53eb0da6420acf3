package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// cpFaultStore is an engine's view of the store with a fault armed on the
// index's next checkpoint append: it fails (the append is lost, the
// process lives on), or the process dies right before it or right after
// it (from then on every append fails).
type cpFaultStore struct {
	events.Store
	mode  string // "fails", "dies before", "dies after"
	armed atomic.Bool
	dead  atomic.Bool
	once  sync.Once
	fired chan struct{}

	mu     sync.Mutex
	lastOK events.Position // position of the last checkpoint that went through
	faulty events.Position // position of the one the fault hit
}

func cpPosition(evs []events.EventData) events.Position {
	var c events.ConsumerCheckpointed
	_ = json.Unmarshal(evs[0].Data, &c)
	return c.Position
}

var errCheckpointLost = errors.New("test: checkpoint append lost")

func (s *cpFaultStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if s.dead.Load() {
		return events.AppendResult{}, errDead
	}
	if stream != events.CheckpointStream("jobs-index") {
		return s.Store.Append(ctx, stream, exp, evs...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed.Load() {
		res, err := s.Store.Append(ctx, stream, exp, evs...)
		if err == nil {
			s.lastOK = cpPosition(evs)
		}
		return res, err
	}
	defer s.once.Do(func() {
		s.faulty = cpPosition(evs)
		close(s.fired)
	})
	switch s.mode {
	case "fails":
		return events.AppendResult{}, errCheckpointLost
	case "dies before":
		s.dead.Store(true)
		return events.AppendResult{}, errDead
	}
	res, err := s.Store.Append(ctx, stream, exp, evs...)
	s.dead.Store(true)
	if err == nil {
		s.lastOK = cpPosition(evs)
	}
	return res, err
}

// TestIndexCheckpointCrash: an engine whose index writes checkpoints loses
// one (the append fails), or its process dies right before or right after
// writing one; while no engine runs, a teardown is queued and a failed job
// the index had forgotten is resumed. The next engine starts from the
// newest checkpoint in the log (the older one when the write was lost) and
// runs both, each claimed once, to their end.
func TestIndexCheckpointCrash(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"fails", "dies before", "dies after"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			bob := slots.Actor{Name: "bob"}
			w := newWorld(t, nil)
			for _, s := range []string{"c1", "c2", "c3"} {
				w.seed(s)
			}
			w.occupy("c3")
			fault := w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Status: http.StatusForbidden})
			fs := &cpFaultStore{Store: w.store, mode: mode, fired: make(chan struct{})}
			first := jobs.NewEngine(fs, w.deps, w.engineConfig())
			jobs.SetIndexCheckpoints(first, 3, 0)
			rctx, kill := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- first.Run(rctx) }()

			// A teardown that fails (and is forgotten once released), with
			// checkpoints written meanwhile.
			res, err := w.svc.Teardown(ctx, bob, "c1")
			if err != nil {
				t.Fatal(err)
			}
			failed := res.JobID
			if j := w.waitEnded(failed); j.Status != events.StatusFailed {
				t.Fatalf("teardown: %s, want failed", j.Status)
			}
			w.waitSlot("c1", func(s *slots.SlotState) bool { return !s.Locked() })
			// The fault on the next checkpoint, which the occupant's
			// extensions call for.
			fs.armed.Store(true)
			for i := 0; ; i++ {
				if err := w.svc.Extend(ctx, slots.Actor{Name: "alice"}, "c3", slots.ExtendCmd{Until: time.Now().Add(time.Duration(2+i) * time.Hour)}); err != nil {
					t.Fatal(err)
				}
				if i < 3 {
					continue
				}
				select {
				case <-fs.fired:
				case <-time.After(w.waitLimit()):
					t.Fatal("no checkpoint append after the fault was armed")
				}
				break
			}
			kill() // the process ends without Stop: no last checkpoint
			<-done

			// While no engine runs: a new teardown, and the resume of the
			// failed one.
			w.sim.RemoveFault(fault)
			res2, err := w.svc.Teardown(ctx, bob, "c2")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.svc.Resume(ctx, bob, failed); err != nil {
				t.Fatal(err)
			}
			cps := checkpoints(t, w)
			fs.mu.Lock()
			lastOK, faulty := fs.lastOK, fs.faulty
			fs.mu.Unlock()
			if len(cps) == 0 || lastOK == 0 {
				t.Fatal("no index checkpoint written before the fault")
			}
			newest := cps[len(cps)-1]
			switch {
			case newest != lastOK:
				t.Fatalf("the newest checkpoint in the log is at %d, the last written at %d", newest, lastOK)
			case mode == "dies after" && newest != faulty:
				t.Fatalf("the checkpoint written right before dying (at %d) is not the newest (%d)", faulty, newest)
			case mode != "dies after" && newest >= faulty:
				t.Fatalf("the lost checkpoint (at %d) is not newer than the last written (%d)", faulty, newest)
			}

			second, stop := w.startEngine(w.engineConfig())
			if j := w.waitEndedN(failed, 2); j.Status != events.StatusSucceeded {
				t.Fatalf("resumed teardown: %s (%s), want succeeded", j.Status, j.LastError)
			}
			if j := w.waitEnded(res2.JobID); j.Status != events.StatusSucceeded {
				t.Fatalf("new teardown: %s (%s), want succeeded", j.Status, j.LastError)
			}
			for _, s := range []string{"c1", "c2"} {
				w.waitSlot(s, func(s *slots.SlotState) bool { return s.Retired && !s.Locked() })
			}
			if got := jobs.IndexStartedFrom(second); got != newest {
				t.Fatalf("the next engine started from position %d, want the newest checkpoint's %d", got, newest)
			}
			for id, want := range map[string]int{failed: 2, res2.JobID: 1} {
				if n := strings.Count(types(w.jobEvents(id)), "JobClaimed"); n != want {
					t.Fatalf("job %s claimed %d times, want %d:%s", id, n, want, history(w.jobEvents(id)))
				}
			}
			head, err := w.store.Head(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, w.waitLimit())
			defer cancel()
			if err := second.WaitApplied(wctx, head); err != nil {
				t.Fatal(err)
			}
			stop() // every attempt and maintenance task has exited
			if n := second.IndexedJobs(); n != 0 {
				t.Fatalf("the index holds %d jobs after every job finished, want 0", n)
			}
		})
	}
}

// checkpoints returns the positions of the index's checkpoints in the log,
// oldest first.
func checkpoints(t *testing.T, w *world) []events.Position {
	t.Helper()
	var out []events.Position
	evs, err := w.store.ReadStream(context.Background(), events.CheckpointStream("jobs-index"), 0, 0, events.Forward)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatal(err)
	}
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.(events.ConsumerCheckpointed).Position)
	}
	return out
}
