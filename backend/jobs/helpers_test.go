package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	gitp "github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// testLogger is quiet unless SLOTKEEPER_TEST_LOG is set.
// cellSlots bounds how many fault-matrix and crash-point cells of this
// package run at once, across all the tests that run cells: each cell drives
// real git pushes through the simulator, and more than a few at once on two
// cores push healthy steps past their deadlines.
var cellSlots = make(chan struct{}, 4)

// runCells runs n cells as subtests named by name, each in its own
// goroutine, at most cap(cellSlots) at once across the package.
func runCells(t *testing.T, n int, name func(int) string, run func(*testing.T, int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		cellSlots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-cellSlots }()
			t.Run(name(i), func(t *testing.T) { run(t, i) })
		}()
	}
	wg.Wait()
}

// runStepCells runs runCell for each call of steps × each fault, as
// subtests named by name (the fault matrices of every job kind).
func runStepCells(t *testing.T, steps []stepCall, name func(stepCall, faultKind) string) {
	type cell struct {
		c stepCall
		f faultKind
	}
	var cells []cell
	for _, c := range steps {
		for _, f := range allFaults {
			cells = append(cells, cell{c, f})
		}
	}
	runCells(t, len(cells), func(i int) string { return name(cells[i].c, cells[i].f) },
		func(t *testing.T, i int) { runCell(t, cells[i].c, cells[i].f) })
}

// byEndpoint names a cell by its call's endpoint and the fault.
func byEndpoint(c stepCall, f faultKind) string { return c.endpoint + "/" + string(f) }

func testLogger() *slog.Logger {
	if os.Getenv("SLOTKEEPER_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// world is one test's simulator, store, command service and deps.
type world struct {
	t     testing.TB
	sim   *sim.Sim
	store events.Store
	svc   *slots.Service
	deps  jobs.Deps
	seen  map[string]slots.SlotState // folds from the last waitSlot per slot
	// inert are injected faults whose requests never reach the simulated
	// service (connection resets): the recorder notes their end a moment
	// after the client saw it, so they are left out of the overlap check.
	inert map[int]bool
	// patience bounds waitEnded and waitSlot (default 15 s). Tests whose
	// jobs push with git raise it, with the step deadline: on a loaded
	// machine a push through the simulator can take many seconds, and
	// those tests are not about timing.
	patience time.Duration
}

func (w *world) waitLimit() time.Duration {
	if w.patience > 0 {
		return w.patience
	}
	return 40 * time.Second
}

func newWorld(t testing.TB, store events.Store) *world {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Bitbucket creates repositories only in existing projects: the
	// promote target project is set up as a team would have it.
	s.AddBitbucketProject(promoProject)
	if store == nil {
		ms := memstore.New()
		t.Cleanup(func() { ms.Close() })
		store = ms
	}
	return &world{
		t: t, sim: s, store: store,
		svc:  slots.NewService(store, slots.Config{Logger: testLogger()}),
		deps: simDeps(t, s),
	}
}

// simDeps are the real clients pointed at the simulator.
func simDeps(t testing.TB, s *sim.Sim) jobs.Deps {
	fast := providers.Backoff{Initial: 2 * time.Millisecond, Max: 20 * time.Millisecond, Total: 5 * time.Second}
	pusher, err := gitp.New(gitp.Options{Token: s.BitbucketToken()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pusher.Close() })
	return jobs.Deps{
		PaaS:    coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken(), Confirm: fast, RateRetries: -1}),
		GitHost: bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), Confirm: fast, RateRetries: -1}),
		Pusher:  pusher,
		RepoURL: func(r events.RepoRef) string { return s.CloneURL(r.Project, r.Slug) },
	}
}

// engineConfig is the engines' setting in tests. The step deadline is
// generous: a git push through the simulator spawns several processes, and
// with -race on a loaded 2-core machine one push has taken 8 s; tests of
// deadlines set their own short ones.
func (w *world) engineConfig() jobs.Config {
	return jobs.Config{
		Workers: 2, WorkerID: "test", StepTimeout: 20 * time.Second, JobTimeout: 60 * time.Second,
		Lease: 10 * time.Second, RescueGrace: 50 * time.Millisecond, Logger: testLogger(),
	}
}

// startEngine runs an engine until the test ends or stop is called (Stop,
// then checks Run's result).
func (w *world) startEngine(cfg jobs.Config) (eng *jobs.Engine, stop func()) {
	w.t.Helper()
	eng = jobs.NewEngine(w.store, w.deps, cfg)
	done := make(chan error, 1)
	go func() { done <- eng.Run(context.Background()) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := eng.Stop(ctx); err != nil {
				w.t.Errorf("engine stop: %v", err)
			}
			if err := <-done; err != nil {
				w.t.Errorf("engine run: %v", err)
			}
		})
	}
	w.t.Cleanup(stop)
	return eng, stop
}

// seed creates a slot in the simulator and registers it.
func (w *world) seed(name string) sim.SlotFixture {
	w.t.Helper()
	fx, err := w.sim.SeedSlot(name)
	if err != nil {
		w.t.Fatal(err)
	}
	err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
		Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	return fx
}

func (w *world) occupy(name string) {
	w.t.Helper()
	if err := w.svc.Occupy(context.Background(), slots.Actor{Name: "alice"}, name, slots.OccupyCmd{Until: time.Now().Add(time.Hour)}); err != nil {
		w.t.Fatal(err)
	}
}

// waitJob blocks until the job's state satisfies cond (checked on every
// event of its stream), or fails the test after timeout.
func (w *world) waitJob(id string, timeout time.Duration, cond func(*events.JobState) bool) events.JobState {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var j events.JobState
	errDone := errors.New("done")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(id)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream != events.JobStream(id) {
			return nil
		}
		if err := j.Apply(ev); err != nil {
			return err
		}
		if cond(&j) {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		w.t.Fatalf("job %s: waited %s, state %s step %q (%v)", id, timeout, j.Status, j.InFlight, err)
	}
	return j
}

// waitEnded waits for the job's first terminal state and for its slot lock
// to be released.
func (w *world) waitEnded(id string) events.JobState { return w.waitEndedN(id, 1) }

// waitEndedN waits for the job's n-th terminal event (a resumed job has one
// per run) and for the release of the n-th lock it took.
func (w *world) waitEndedN(id string, n int) events.JobState {
	w.t.Helper()
	j := w.waitJob(id, w.waitLimit(), func(j *events.JobState) bool { return j.Terminal() && j.Terminals >= n })
	w.waitSlotN(j.Queued.Slot, func(s *slots.SlotState, released map[string]int) bool { return s.LockJob != id && released[id] >= n })
	return j
}

func (w *world) waitSlot(name string, cond func(*slots.SlotState) bool) slots.SlotState {
	w.t.Helper()
	return w.waitSlotN(name, func(s *slots.SlotState, _ map[string]int) bool { return cond(s) })
}

// waitSlotN is waitSlot whose condition also sees how many JobReleased
// each job has on the slot stream so far.
func (w *world) waitSlotN(name string, cond func(*slots.SlotState, map[string]int) bool) slots.SlotState {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), w.waitLimit())
	defer cancel()
	s := slots.SlotState{Name: name}
	released := map[string]int{}
	errDone := errors.New("done")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.SlotStream(name)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream != events.SlotStream(name) {
			return nil
		}
		if err := s.Apply(ev); err != nil {
			return err
		}
		if ev.Type == "JobReleased" {
			p, err := events.Decode(ev)
			if err != nil {
				return err
			}
			released[p.(events.JobReleased).JobID]++
		}
		if cond(&s, released) {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		w.t.Fatalf("slot %s: condition not met (lock %s, lifecycle %s): %v", name, s.LockJob, s.Lifecycle(), err)
	}
	if w.seen == nil {
		w.seen = map[string]slots.SlotState{}
	}
	w.seen[name] = s
	return s
}

// final is the slot's state as the log showed it when the last waitSlot
// returned (after a job's release). Checks use it rather than ReadStream:
// boltstore's subscriptions may deliver a committed event a moment before
// its ReadStream and Head reflect it (reported in docs/jobs.md), and the
// log is the truth.
func (w *world) final(name string) slots.SlotState {
	w.t.Helper()
	s, ok := w.seen[name]
	if !ok {
		w.t.Fatalf("no waitSlot for %s before the check", name)
	}
	return s
}

func (w *world) jobEvents(id string) []events.RecordedEvent {
	w.t.Helper()
	evs, err := w.store.ReadStream(context.Background(), events.JobStream(id), 0, 0, events.Forward)
	if err != nil {
		w.t.Fatal(err)
	}
	return evs
}

func types(evs []events.RecordedEvent) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Type)
	}
	return strings.Join(s, ",")
}

// history prints a job's events with actors and times, for failure messages.
func history(evs []events.RecordedEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "\n  %s %-16s %-22s %s", e.Meta.Time.Format("15:04:05.000"), e.Type, e.Meta.Actor, e.Data)
	}
	return b.String()
}

// checkFence asserts invariants 1–3 on the log and the recorder for the
// given jobs (of one slot): every provider request since from arrived inside
// an attempt's fenced span — from its JobClaimed to the first event another
// actor wrote or its own terminal event — and attempts never overlap: every
// request of an attempt had finished (answered or aborted) before the next
// attempt's first request arrived.
func (w *world) checkFence(from time.Time, ids ...string) {
	w.t.Helper()
	type span struct {
		job               string
		start, end        time.Time
		firstIn, lastDone time.Time
		requests, undone  int
	}
	var spans []*span
	var all []events.RecordedEvent
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		evs := w.jobEvents(id)
		all = append(all, evs...)
		var cur *span
		worker := ""
		for _, ev := range evs {
			switch {
			case ev.Type == "JobClaimed":
				worker = ev.Meta.Actor
				cur = &span{job: id, start: ev.Meta.Time}
				spans = append(spans, cur)
			case cur != nil && (ev.Meta.Actor != worker || events.IsTerminal(ev.Type)):
				cur.end = ev.Meta.Time
				cur = nil
			}
		}
	}
	for _, r := range w.sim.Requests() {
		if r.Arrived.Before(from) {
			continue
		}
		var in *span
		for _, s := range spans {
			if !r.Arrived.Before(s.start) && (s.end.IsZero() || !r.Arrived.After(s.end)) {
				in = s
			}
		}
		if in == nil {
			w.t.Errorf("request %s %s (%s) arrived at %s outside every attempt of %v:%s", r.Method, r.Path, r.Endpoint,
				r.Arrived.Format("15:04:05.000000"), ids, history(all))
			continue
		}
		if w.inert[r.Fault] {
			continue
		}
		in.requests++
		if in.firstIn.IsZero() || r.Arrived.Before(in.firstIn) {
			in.firstIn = r.Arrived
		}
		done := r.Completed
		if r.WasAborted() {
			done = r.Aborted
		}
		if !r.Done() {
			in.undone++
		} else if done.After(in.lastDone) {
			in.lastDone = done
		}
	}
	slices.SortFunc(spans, func(a, b *span) int { return a.start.Compare(b.start) })
	for k := 0; k+1 < len(spans); k++ {
		a, b := spans[k], spans[k+1]
		if b.requests == 0 {
			continue
		}
		if a.undone > 0 || a.lastDone.After(b.firstIn) {
			w.t.Errorf("attempts overlap: an attempt of %s had a request running until %s (%d unfinished) when the next attempt (%s) started calling at %s",
				a.job, a.lastDone.Format("15:04:05.000000"), a.undone, b.job, b.firstIn.Format("15:04:05.000000"))
		}
	}
}

func assertEq[T comparable](t testing.TB, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// slot loads a slot's state from the store, failing the test on a read error.
func (w *world) slot(name string) slots.SlotState {
	w.t.Helper()
	st, err := slots.LoadSlot(context.Background(), w.store, name)
	if err != nil {
		w.t.Fatalf("load slot %s: %v", name, err)
	}
	return st
}

// logEvents reads a stream's events through SubscribeAll (the log itself),
// to tell a stale ReadStream from a missing event in failure messages.
func (w *world) logEvents(stream string) []events.RecordedEvent {
	head, err := w.store.Head(context.Background())
	if err != nil {
		return nil
	}
	var out []events.RecordedEvent
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{stream}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream == stream {
			out = append(out, ev)
		}
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
	return out
}
