package jobs_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// Random fault schedules (the outside testers' "0 lies in 140 fault
// schedules", in `make test`): the fault matrices put one fault in one
// step; a schedule puts one to four in one job — on random calls of it,
// across its runs — and checks, against the log and the simulators'
// recorded requests, that nothing was claimed that the providers disagree
// with. Every schedule is drawn from its seed alone; a failure prints the
// seed and the command that runs that one schedule again.
//
//	go test ./backend/jobs/ -run TestRandomFaultSchedules -seed 17
//	SLOTKEEPER_FAULT_SCHEDULES=300 go test ./backend/jobs/ -run TestRandomFaultSchedules   # soak
//	SLOTKEEPER_FAULT_SEED=17 (the same as -seed; with SCHEDULES, the first of a run)
var scheduleSeed = flag.Int64("seed", 0, "TestRandomFaultSchedules: run only the schedule of this seed")

// defaultSchedules is K in `make test`: the whole test stays well under a
// minute under -race on the shared 2-core machine.
const defaultSchedules = 40

// scheduleKinds are the kinds a schedule draws from: every kind of the
// step table (events.JobKinds), the reset twice — without a template (the
// five steps) and with one (the ready reset's ten).
var scheduleKinds = []string{events.KindReset, kindReadyReset, events.KindTeardown, events.KindPromote,
	events.KindAdopt, events.KindDeleteOrphan, events.KindPRDeploy}

const kindReadyReset = "reset+template"

// A schedule's fault actions. The first three hold the call open and let
// the driver act while it hangs: the fake clock passes the step deadline
// (hang), the worker's process dies and a fresh engine takes over on the
// same store (crash), a person cancels (cancel).
type action string

const (
	aHang  action = "hang"
	aCrash action = "crash"
	// crash-after: the call goes through; the worker's process dies right
	// after its answer came back, before (or just after) the step recorded
	// it — the window where the provider changed and the log may not know.
	aCrashAfter action = "crash-after"
	aCancel     action = "cancel"
	a500        action = "500"
	a401        action = "401"
	a429        action = "429"
	aForeign404 action = "foreign404"
	aReset      action = "reset"      // the connection reset, no answer
	aLost502    action = "lost-502"   // the call takes effect, its answer is lost (502)
	aLostReset  action = "lost-reset" // the call takes effect, the connection drops
)

var allActions = []action{aHang, aCrash, aCrashAfter, aCancel, a500, a401, a429, aForeign404, aReset, aLost502, aLostReset}

// holds: the driver acts when the call arrives (crash-after: when it was
// answered).
func (a action) holds() bool { return a == aHang || a == aCrash || a == aCancel || a == aCrashAfter }

// target is one outside call of a kind a fault may land on.
type target struct{ endpoint, resource string }

// plannedFault is one fault of a schedule: an action on the n-th matching
// request (Skip) of a call.
type plannedFault struct {
	call target
	act  action
	skip int
}

// schedule is what a seed draws.
type schedule struct {
	seed   int64
	kind   string
	race   bool          // two engines on the store from the start
	build  time.Duration // the deployments' build time (simulated)
	faults []plannedFault
}

func (s schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s, race=%v, build=%s, faults:", s.seed, s.kind, s.race, s.build)
	for _, f := range s.faults {
		fmt.Fprintf(&b, " [%s on %s %s skip %d]", f.act, f.call.endpoint, f.call.resource, f.skip)
	}
	return b.String()
}

// targets are the calls of kind a fault may hit, given the slot's
// fixture and the stray application (adopt, delete_orphan).
func targets(kind string, fx sim.SlotFixture, stray string) []target {
	repo := fx.Repo.Project + "/" + fx.Repo.Slug
	resetCalls := []target{
		{sim.EndpointGetDatabase, fx.DBUUID}, {sim.EndpointDeleteDatabase, fx.DBUUID},
		{sim.EndpointListEnvs, fx.AppUUID}, {sim.EndpointDeleteEnv, fx.EnvUUIDs[0]},
		{sim.EndpointListStorages, fx.AppUUID}, {sim.EndpointDeleteStorage, fx.StorageUUIDs[0]},
		{sim.EndpointGitInfoRefs, repo}, {sim.EndpointGitReceivePack, repo},
	}
	deployCalls := []target{{sim.EndpointDeploy, fx.AppUUID}, {sim.EndpointGetDeployment, ""}, {sim.EndpointActiveDeployments, ""}}
	switch kind {
	case events.KindReset:
		return resetCalls
	case kindReadyReset:
		return slices.Concat(resetCalls, []target{
			{sim.EndpointGetServer, sim.ServerUUID}, {sim.EndpointCreateDatabase, "postgresql"},
			{sim.EndpointCreateEnv, fx.AppUUID}, {sim.EndpointCreateStorage, fx.AppUUID},
		}, deployCalls)
	case events.KindTeardown:
		return []target{
			{sim.EndpointGetDatabase, fx.DBUUID}, {sim.EndpointDeleteDatabase, fx.DBUUID}, {sim.EndpointListServers, ""},
			{sim.EndpointGetApplication, fx.AppUUID}, {sim.EndpointDeleteApplication, fx.AppUUID},
			{sim.EndpointGetRepo, repo}, {sim.EndpointDeleteRepo, repo},
			{sim.EndpointGetProject, fx.ProjectUUID}, {sim.EndpointDeleteProject, fx.ProjectUUID},
		}
	case events.KindPromote:
		return []target{{sim.EndpointGetRepo, promoProject + "/" + promoName}, {sim.EndpointCreateRepo, promoProject},
			{sim.EndpointGitReceivePack, promoProject + "/" + promoName}, {sim.EndpointGitUploadPack, repo}}
	case events.KindPRDeploy:
		return slices.Concat([]target{{sim.EndpointGitInfoRefs, repo}, {sim.EndpointGitReceivePack, repo}}, deployCalls)
	case events.KindAdopt:
		return []target{{sim.EndpointGetApplication, stray}}
	case events.KindDeleteOrphan:
		return []target{{sim.EndpointGetApplication, stray}, {sim.EndpointDeleteApplication, stray}}
	}
	panic("no targets for " + kind)
}

// draw makes the schedule of seed. The fault targets are drawn as indexes
// into targets(kind) (the resources are known only once the slot exists).
func draw(seed int64) (schedule, []int) {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5107))
	// The kind goes round with the seed, so any run of len(scheduleKinds)
	// consecutive seeds has every kind; the rest is random.
	s := schedule{seed: seed, kind: scheduleKinds[uint64(seed)%uint64(len(scheduleKinds))], race: r.IntN(2) == 0}
	if s.kind == kindReadyReset || s.kind == events.KindPRDeploy {
		// Minutes of building: the fake clock passes the 2-minute step
		// deadline many times while Coolify still works.
		s.build = []time.Duration{0, 3 * time.Minute, 10 * time.Minute}[r.IntN(3)]
	}
	n := 1 + r.IntN(4)
	ncalls := len(targets(s.kind, fakeFixture, "stray"))
	var idx []int
	for range n {
		idx = append(idx, r.IntN(ncalls))
		s.faults = append(s.faults, plannedFault{act: allActions[r.IntN(len(allActions))], skip: r.IntN(2)})
	}
	return s, idx
}

// fakeFixture has the shape of a seeded slot, for counting targets.
var fakeFixture = sim.SlotFixture{EnvUUIDs: []string{"e"}, StorageUUIDs: []string{"s"}}

// TestScheduleKindsAreEveryKind: a kind added to the step table must be
// added to the schedules too.
func TestScheduleKindsAreEveryKind(t *testing.T) {
	for _, k := range events.JobKinds() {
		if !slices.Contains(scheduleKinds, k) {
			t.Errorf("job kind %s is in no fault schedule (scheduleKinds, targets)", k)
		}
	}
}

// TestRandomFaultSchedules runs K seeded schedules. For each: a job of the
// drawn kind on a fresh simulator and store, one to four faults on random
// calls, one or two engines; the job is driven to an end as a person would
// (resumed after each failure, at most 1 + faults runs); then the checks of
// checkSchedule.
func TestRandomFaultSchedules(t *testing.T) {
	t.Parallel()
	k := defaultSchedules
	if v, err := strconv.Atoi(os.Getenv("SLOTKEEPER_FAULT_SCHEDULES")); err == nil && v > 0 {
		k = v
	}
	base := int64(1)
	if v, err := strconv.ParseInt(os.Getenv("SLOTKEEPER_FAULT_SEED"), 10, 64); err == nil {
		base = v
		if os.Getenv("SLOTKEEPER_FAULT_SCHEDULES") == "" {
			k = 1
		}
	}
	if *scheduleSeed != 0 {
		base, k = *scheduleSeed, 1
	}
	runCells(t, k, func(i int) string { return "seed-" + strconv.FormatInt(base+int64(i), 10) }, func(t *testing.T, i int) {
		seed := base + int64(i)
		s, idx := draw(seed)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s\nrun it again: go test -race ./backend/jobs/ -run 'TestRandomFaultSchedules' -seed %d", s, seed)
			}
		})
		runSchedule(t, s, idx)
	})
}

// stampStore notes the wall-clock time around each append (the engine's
// events carry the fake clock's time), so the log's order can be compared
// with the simulators' request times: an event appended "before" a
// request must have returned before the request arrived.
type stampStore struct {
	events.Store
	mu sync.Mutex
	at map[string][2]time.Time // event id → before the append, after it
}

func (s *stampStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	before := time.Now()
	res, err := s.Store.Append(ctx, stream, exp, evs...)
	after := time.Now()
	if err == nil {
		s.mu.Lock()
		for _, e := range evs {
			s.at[e.ID] = [2]time.Time{before, after}
		}
		s.mu.Unlock()
	}
	return res, err
}

func (s *stampStore) stamp(id string) ([2]time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.at[id]
	return v, ok
}

// mortalStore is one engine's view of the store: killed, every append
// fails from then on (a dead process writes nothing).
type mortalStore struct {
	events.Store
	dead atomic.Bool
}

func (m *mortalStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if m.dead.Load() {
		return events.AppendResult{}, errDead
	}
	return m.Store.Append(ctx, stream, exp, evs...)
}

// engineProc is one engine, as a process: kill makes its store dead and
// cancels everything it runs (its connections drop, its git dies).
type engineProc struct {
	id    string
	store *mortalStore
	eng   *jobs.Engine
	kill  func()
}

// run is one schedule in progress.
type run struct {
	t      *testing.T
	s      schedule
	w      *world
	stamps *stampStore
	fc     *waitClock
	cfg    jobs.Config
	mu     sync.Mutex
	procs  []*engineProc
	nproc  int
	// pending is 1 while a claimed run of the job has not ended: time moves
	// (waitClock.drive) only while it sleeps between polls.
	pending atomic.Int32
	faults  map[int]plannedFault // by the simulator's fault id
	handled map[int]action       // request seqs of held calls already acted on
	inert   map[int]bool
	gitRoot string // the simulator's bare repositories
}

// slotRepo is the bare repository of the slot's branch.
func (r *run) slotRepo(fx sim.SlotFixture) string {
	return filepath.Join(r.gitRoot, fx.Repo.Project, fx.Repo.Slug+".git")
}

// logRefUpdates makes the slot repository keep a reflog from now on: each
// push that moved a branch is one line of it (a push refused in-band — a
// lease that no longer holds — answers HTTP 200 and moves nothing, so the
// recorded requests cannot count them).
func (r *run) logRefUpdates(fx sim.SlotFixture) {
	r.t.Helper()
	if out, err := exec.Command("git", "-C", r.slotRepo(fx), "config", "core.logAllRefUpdates", "always").CombinedOutput(); err != nil {
		r.t.Fatalf("git config: %v: %s", err, out)
	}
}

// refUpdates counts the moves of the slot branch since logRefUpdates.
func (r *run) refUpdates(fx sim.SlotFixture) int {
	b, err := os.ReadFile(filepath.Join(r.slotRepo(fx), "logs", "refs", "heads", "main"))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func (r *run) startProc() *engineProc {
	r.mu.Lock()
	r.nproc++
	id := fmt.Sprintf("w%d", r.nproc)
	r.mu.Unlock()
	cfg := r.cfg
	cfg.WorkerID = id
	ms := &mortalStore{Store: r.stamps}
	eng := jobs.NewEngine(ms, r.w.deps, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	var once sync.Once
	p := &engineProc{id: id, store: ms, eng: eng}
	p.kill = func() {
		once.Do(func() {
			ms.dead.Store(true)
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				r.t.Errorf("engine %s did not end after its kill", id)
			}
		})
	}
	r.t.Cleanup(p.kill)
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p
}

// holder is the engine whose attempt claimed the job last.
func (r *run) holder(jobID string) *engineProc {
	actor := ""
	for _, ev := range r.w.jobEvents(jobID) {
		if ev.Type == "JobClaimed" {
			actor = ev.Meta.Actor
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		if strings.HasPrefix(actor, "worker:"+p.id+"/") {
			return p
		}
	}
	r.t.Fatalf("no engine holds the claim of %s (actor %q)", jobID, actor)
	return nil
}

func newScheduleWorld(t *testing.T, s schedule) *run {
	fc := newWaitClock()
	gitRoot := t.TempDir()
	sm, err := sim.Start(context.Background(), sim.Options{DeleteDelay: 5 * time.Millisecond, Clock: fc, GitRoot: gitRoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	sm.AddBitbucketProject(promoProject)
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	st := &stampStore{Store: ms, at: map[string][2]time.Time{}}
	w := &world{t: t, sim: sm, store: st, svc: slots.NewService(st, slots.Config{Logger: testLogger()}), deps: simDeps(t, sm),
		patience: 90 * time.Second}
	r := &run{t: t, s: s, w: w, stamps: st, gitRoot: gitRoot, fc: fc, faults: map[int]plannedFault{}, handled: map[int]action{}, inert: map[int]bool{},
		// The production deadlines; an hour's lease renewed every 3
		// simulated minutes (waitWorld.config says why).
		cfg: jobs.Config{Workers: 2, StepTimeout: 2 * time.Minute, JobTimeout: 15 * time.Minute,
			Lease: time.Hour, RenewEvery: 3 * time.Minute, RescueGrace: time.Minute, Clock: fc, Logger: testLogger()}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fc.drive(ctx, func() int { return int(r.pending.Load()) }) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// track keeps pending: 1 from a claim to the run's terminal event.
func (r *run) track(ctx context.Context, jobID string) {
	go func() {
		_ = r.w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(jobID)}}, func(_ context.Context, ev events.RecordedEvent) error {
			if ev.Stream != events.JobStream(jobID) {
				return nil
			}
			switch {
			case ev.Type == "JobClaimed":
				r.pending.Store(1)
			case events.IsTerminal(ev.Type):
				r.pending.Store(0)
			default:
				return nil
			}
			r.fc.nudge()
			return nil
		})
	}()
}

func runSchedule(t *testing.T, s schedule, idx []int) {
	r := newScheduleWorld(t, s)
	w := r.w
	// The slot.
	var fx sim.SlotFixture
	switch s.kind {
	case kindReadyReset, events.KindPRDeploy:
		fx = w.seedReady("cell", "postgresql")
		w.sim.SetBuildDuration(fx.AppUUID, s.build)
	default:
		fx = w.seed("cell")
	}
	if s.kind == events.KindReset || s.kind == kindReadyReset || s.kind == events.KindPRDeploy {
		w.occupy("cell")
	}
	stray := ""
	if s.kind == events.KindAdopt || s.kind == events.KindDeleteOrphan {
		var err error
		if stray, err = w.sim.AddApp(fx.ProjectUUID, "stray"); err != nil {
			t.Fatal(err)
		}
	}
	r.logRefUpdates(fx)
	calls := targets(s.kind, fx, stray)
	for i := range s.faults {
		s.faults[i].call = calls[idx[i]] // (the drawn schedule shares the slice: a failure prints them)
	}
	for _, pf := range s.faults {
		f := sim.Fault{Endpoint: pf.call.endpoint, Resource: pf.call.resource, Times: 1, Skip: pf.skip}
		switch pf.act {
		case aHang, aCrash, aCancel:
			f.Hang = true
		case a500:
			f.Status = http.StatusInternalServerError
		case a401:
			f.Status = http.StatusUnauthorized
		case a429:
			f.Status, f.Header = http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}
		case aForeign404:
			f.Foreign404 = true
		case aReset:
			f.Reset = true
		case aLost502:
			f.AfterHandler, f.Status = true, http.StatusBadGateway
		case aLostReset:
			f.AfterHandler, f.Reset = true, true
		}
		id := w.sim.AddFault(f)
		r.faults[id] = pf
		if f.Reset {
			r.inert[id] = true
		}
	}
	w.inert = r.inert

	r.startProc()
	if s.race {
		r.startProc()
	}
	from := time.Now()
	res := r.start(s.kind, fx, stray)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.track(ctx, res.JobID)

	// Drive it to an end as a person would: act on each held call, resume
	// each run that did not succeed, within a bound.
	maxRuns := 1 + len(s.faults)
	runNo := 1
	var j events.JobState
	for {
		hung, err := r.next(res.JobID, runNo)
		if err != nil {
			t.Fatalf("run %d: %v%s", runNo, err, history(w.jobEvents(res.JobID)))
		}
		if hung != nil {
			r.act(res.JobID, *hung)
			continue
		}
		j = w.waitEndedN(res.JobID, runNo) // and its lock released
		t.Logf("run %d: %s %q", runNo, j.Status, j.LastError)
		r.checkHeldAborted()
		if j.Status == events.StatusSucceeded || !j.Resumable() {
			break
		}
		if runNo >= maxRuns {
			t.Fatalf("not succeeded after %d runs (%d faults): %s %q%s", runNo, len(s.faults), j.Status, j.LastError, history(w.jobEvents(res.JobID)))
		}
		n := r.resume(res.JobID, runNo, j.Status)
		runNo += n
		maxRuns += n - 1
	}
	checkSchedule(t, r, fx, stray, res.JobID, j, from)
}

// resume resumes the job as a person and returns how many runs that
// started. In a racing schedule two people press resume at once: one is
// accepted; the other is refused with a conflict — or, when the first's
// run ended (not succeeded) before the second decided, accepted as the
// next run, each run's number once (the claims check counts them).
func (r *run) resume(jobID string, runNo int, status string) int {
	r.t.Helper()
	n := 1
	if r.s.race {
		n = 2
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.w.svc.Resume(context.Background(), slots.Actor{Name: fmt.Sprintf("person-%d", i)}, jobID)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case slots.ErrorCode(err) != slots.CodeConflict:
			r.t.Fatalf("resume after run %d (%s): %v", runNo, status, err)
		}
	}
	if ok == 0 {
		r.t.Fatalf("no resume after run %d accepted (%v)", runNo, errs)
	}
	runs := map[int]bool{}
	slotLog, err := r.w.store.ReadStream(context.Background(), events.SlotStream("cell"), 0, 0, events.Forward)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ev := range slotLog {
		if p, err := events.Decode(ev); err == nil {
			if acc, ok := p.(events.JobAccepted); ok && acc.JobID == jobID {
				if runs[acc.Run] {
					r.t.Errorf("run %d of %s accepted twice", acc.Run, jobID)
				}
				runs[acc.Run] = true
			}
		}
	}
	if len(runs) != runNo+ok {
		r.t.Fatalf("%d runs accepted on the slot stream after %d resumes of run %d", len(runs), ok, runNo)
	}
	return ok
}

func (r *run) start(kind string, fx sim.SlotFixture, stray string) slots.JobAcceptedResult {
	r.t.Helper()
	switch kind {
	case kindReadyReset:
		return startJob(r.t, r.w, events.KindReset, fx.Name)
	case events.KindAdopt, events.KindDeleteOrphan:
		cmd := slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: stray}
		var res slots.JobAcceptedResult
		var err error
		if kind == events.KindAdopt {
			res, err = r.w.svc.Adopt(context.Background(), bob, fx.Name, cmd, nil)
		} else {
			res, err = r.w.svc.DeleteOrphan(context.Background(), bob, fx.Name, cmd, nil)
		}
		if err != nil {
			r.t.Fatal(err)
		}
		return res
	}
	return startJob(r.t, r.w, kind, fx.Name)
}

// next waits until the job's run ends (its runNo-th terminal event) or a
// held call of the schedule arrives at the simulator, whichever is first.
func (r *run) next(jobID string, runNo int) (*sim.Request, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.w.waitLimit())
	defer cancel()
	type out struct {
		hung *sim.Request
		j    events.JobState
		err  error
	}
	ch := make(chan out, 2)
	go func() {
		var j events.JobState
		errDone := errors.New("done")
		err := r.w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(jobID)}}, func(_ context.Context, ev events.RecordedEvent) error {
			if ev.Stream != events.JobStream(jobID) {
				return nil
			}
			if err := j.Apply(ev); err != nil {
				return err
			}
			if j.Terminal() && j.Terminals >= runNo {
				return errDone
			}
			return nil
		})
		if errors.Is(err, errDone) {
			err = nil
		} else if err == nil {
			err = ctx.Err()
		}
		ch <- out{j: j, err: err}
	}()
	go func() {
		req, err := r.w.sim.WaitFor(ctx, func(q sim.Request) bool {
			pf, ok := r.faults[q.Fault]
			return ok && pf.act.holds() && r.handled[q.Seq] == "" && (pf.act != aCrashAfter || q.Done())
		})
		if err != nil {
			ch <- out{err: err}
			return
		}
		ch <- out{hung: &req}
	}()
	first := <-ch
	cancel()
	second := <-ch
	if first.err != nil && second.err == nil {
		first = second
	}
	if first.err != nil {
		return nil, fmt.Errorf("neither an end nor a held call within %s: %w", r.w.waitLimit(), first.err)
	}
	return first.hung, nil
}

// checkHeldAborted: every held call was aborted by the client (a
// deadline, a cancel, a dead process), and is over at the simulator before
// a person resumes (so the next attempt's calls cannot meet it there).
func (r *run) checkHeldAborted() {
	r.t.Helper()
	for seq, act := range r.handled {
		if act == aCrashAfter {
			continue // answered before the process died
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		q, err := r.w.sim.WaitFor(ctx, func(q sim.Request) bool { return q.Seq == seq && q.Done() })
		cancel()
		if err != nil || !q.WasAborted() {
			r.t.Errorf("held call %s %s was not aborted (%v)", q.Method, q.Path, err)
		}
	}
}

// act does what the held call's fault stands for.
func (r *run) act(jobID string, q sim.Request) {
	r.t.Helper()
	r.handled[q.Seq] = r.faults[q.Fault].act
	r.t.Logf("%s: %s %s (%s) held at the simulator", r.faults[q.Fault].act, q.Method, q.Path, q.Endpoint)
	switch r.faults[q.Fault].act {
	case aHang:
		// The provider never answers: the step deadline passes on the
		// fake clock, the call is aborted, the run ends timed out.
		r.fc.Advance(r.cfg.StepTimeout + time.Second)
	case aCancel:
		if err := r.w.svc.Cancel(context.Background(), slots.Actor{Name: "carol"}, jobID); err != nil {
			r.t.Fatalf("cancel while %s hangs: %v", q.Endpoint, err)
		}
	case aCrash, aCrashAfter:
		// The worker's process dies mid-call (or right after the answer);
		// a fresh engine starts on the same store and, once the lease (and
		// the grace) ran out, its rescuer abandons the attempt — unless the
		// dead attempt had ended it already (crash-after).
		r.holder(jobID).kill()
		r.startProc()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := r.w.sim.WaitFor(ctx, func(x sim.Request) bool { return x.Seq == q.Seq && x.Done() }); err != nil {
			r.t.Fatalf("the dead worker's call %s is still open: %v", q.Endpoint, err)
		}
		r.fc.Advance(r.cfg.Lease + r.cfg.RescueGrace + time.Second)
	}
}

// checkSchedule: the invariants every schedule must keep, on the log and
// the simulators' records.
func checkSchedule(t *testing.T, r *run, fx sim.SlotFixture, stray, jobID string, j events.JobState, from time.Time) {
	t.Helper()
	w := r.w
	evs := w.jobEvents(jobID)
	kind := r.s.kind
	if kind == kindReadyReset {
		kind = events.KindReset
	}

	// 1. Each run claimed once (two engines raced for each).
	claims, runs := 0, 0
	for _, ev := range evs {
		switch ev.Type {
		case "JobQueued", "JobResumed":
			runs++
			claims = 0
		case "JobClaimed":
			if claims++; claims > 1 {
				t.Errorf("run %d claimed twice:%s", runs, history(evs))
			}
		}
	}

	// 2. No provider call outside an attempt's fenced span — none after the
	// job was told it failed, timed out, was cancelled or abandoned — and
	// attempts never overlap.
	r.checkFenceOrder(from, jobID, evs)

	// 3. Nothing left untracked: what the simulator holds of the job's
	// resources is gone or listed as remaining (the log's fold and the
	// read model alike).
	if j.Status != events.StatusSucceeded {
		switch kind {
		case events.KindReset, events.KindTeardown, events.KindPromote:
			checkTracked(t, w, kind, fx, &j)
		}
	}
	if r.s.kind == kindReadyReset || kind == events.KindPRDeploy {
		checkReadyTracked(t, w, fx)
	}
	rm := w.readModel()
	jv, err := rm.Job(context.Background(), jobID)
	if err != nil {
		t.Fatal(err)
	}
	if jv.State != j.Status {
		t.Errorf("read model says the job is %s, the log %s", jv.State, j.Status)
	}
	sv, err := rm.Slot(context.Background(), fx.Name)
	if err != nil {
		t.Fatal(err)
	}
	listed := func(kind, id string) bool {
		return slices.ContainsFunc(sv.Resources, func(x events.Resource) bool { return x.Kind == kind && x.ID == id }) ||
			slices.ContainsFunc(jv.Remaining, func(x events.Resource) bool { return x.Kind == kind && x.ID == id })
	}
	held := []struct {
		kind, id string
		has      bool
	}{
		{events.ResDatabase, fx.DBUUID, w.sim.HasDatabase(fx.DBUUID)},
		{events.ResApplication, fx.AppUUID, w.sim.HasApp(fx.AppUUID)},
		{events.ResRepository, fx.Repo.Project + "/" + fx.Repo.Slug, w.sim.HasRepo(fx.Repo.Project, fx.Repo.Slug)},
		{events.ResProject, fx.ProjectUUID, w.sim.HasProject(fx.ProjectUUID)},
	}
	if kind == events.KindDeleteOrphan {
		held = append(held, struct {
			kind, id string
			has      bool
		}{events.ResApplication, stray, w.sim.HasApp(stray)})
	}
	for _, h := range held {
		if h.has && !listed(h.kind, h.id) && !(kind == events.KindReset && h.kind == events.ResDatabase && j.Status == events.StatusSucceeded) {
			t.Errorf("the simulator holds %s %s but the read model neither tracks it on the slot nor lists it remaining (slot %+v, remaining %+v)", h.kind, h.id, sv.Resources, jv.Remaining)
		}
	}

	// 4. No success the providers disagree with; every "already absent" is
	// true of the provider (a failed lookup is never "not found").
	if j.Status == events.StatusSucceeded {
		switch kind {
		case events.KindAdopt:
			if !w.sim.HasApp(stray) || !listed(events.ResApplication, stray) {
				t.Errorf("adopted %s: the simulator holds it %v, the slot tracks it %v", stray, w.sim.HasApp(stray), listed(events.ResApplication, stray))
			}
		case events.KindDeleteOrphan:
			if w.sim.HasApp(stray) {
				t.Errorf("delete_orphan succeeded but the simulator still holds %s", stray)
			}
		case events.KindPRDeploy:
			// checkPRDeployed without its count of 200s: a push whose
			// answer was lost took effect too (counted below).
			head, _ := w.sim.RepoHeadSHA("APPS", "shop", prCellBranch)
			if got, _ := w.sim.RepoHeadSHA(fx.Repo.Project, fx.Repo.Slug, "main"); got != head {
				t.Errorf("pr_deploy succeeded, the slot branch is at %s, the PR head %s", got, head)
			}
			deployed := payloads[events.AppDeployed](w, jobID)
			if len(deployed) == 0 || deployed[len(deployed)-1].Commit != head || !strings.HasPrefix(w.sim.AppStatus(fx.AppUUID), "running:") {
				t.Errorf("pr_deploy succeeded, deployed %+v, the application %s; want the PR head %s running", deployed, w.sim.AppStatus(fx.AppUUID), head)
			}
		default:
			checkFinal(t, w, kind, fx, jobID)
		}
		if kind == events.KindTeardown && sv.Lifecycle != projections.LifecycleRetired {
			t.Errorf("teardown succeeded, the read model's slot is %s", sv.Lifecycle)
		}
	}
	// What the read model shows of the slot is what the job did: vacant
	// (and, with a template, ready) only after a reset that succeeded,
	// retired only after a teardown that did.
	switch {
	case kind == events.KindReset && j.Status == events.StatusSucceeded:
		if sv.Lifecycle != projections.LifecycleVacant || r.s.kind == kindReadyReset && !sv.Ready {
			t.Errorf("reset succeeded, the read model's slot is %s (ready %v, missing %v)", sv.Lifecycle, sv.Ready, sv.Missing)
		}
	case kind == events.KindReset || kind == events.KindPRDeploy:
		if sv.Lifecycle != projections.LifecycleOccupied {
			t.Errorf("%s ended %s, the read model's slot is %s, want still occupied", kind, j.Status, sv.Lifecycle)
		}
	case kind == events.KindTeardown && j.Status != events.StatusSucceeded:
		if want := projections.LifecycleIncomplete; j.Touched() && sv.Lifecycle != want {
			t.Errorf("teardown ended %s, the read model's slot is %s, want %s", j.Status, sv.Lifecycle, want)
		}
	}
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		absent := func(what string, gone bool) {
			if !gone {
				t.Errorf("%s recorded already absent, but the simulator holds it (%s)", what, ev.Data)
			}
		}
		switch e := p.(type) {
		case events.DBDeleted:
			if e.AlreadyAbsent {
				absent("database "+e.DBUUID, !w.sim.HasDatabase(e.DBUUID))
			}
		case events.AppDeleted:
			if e.AlreadyAbsent {
				absent("application "+e.AppUUID, !w.sim.HasApp(e.AppUUID))
			}
		case events.ProjectDeleted:
			if e.AlreadyAbsent {
				absent("project "+e.ProjectUUID, !w.sim.HasProject(e.ProjectUUID))
			}
		case events.RepoDeleted:
			if e.AlreadyAbsent {
				absent("repository "+e.Repo.String(), !w.sim.HasRepo(e.Repo.Project, e.Repo.Slug))
			}
		}
	}

	// A lookup's result (found, or the provider's own "absent") stands on
	// an answer: the step recorded it only after a request of the lookup
	// that no fault shaped.
	lookup := map[string][2]string{
		events.KindPromote:      {events.StepLookupRepo, sim.EndpointGetRepo},
		events.KindAdopt:        {events.StepLookupResource, sim.EndpointGetApplication},
		events.KindDeleteOrphan: {events.StepLookupResource, sim.EndpointGetApplication},
	}
	if lk, ok := lookup[kind]; ok {
		var js events.JobState
		var started time.Time
		for _, ev := range evs {
			was := js.Done[lk[0]]
			if err := js.Apply(ev); err != nil {
				t.Fatal(err)
			}
			at, _ := r.stamps.stamp(ev.ID)
			if p, err := events.Decode(ev); err == nil {
				if ss, ok := p.(events.StepStarted); ok && ss.Step == lk[0] {
					started = at[0]
				}
			}
			if was || !js.Done[lk[0]] {
				continue
			}
			answered := slices.ContainsFunc(w.sim.Requests(), func(q sim.Request) bool {
				unshaped := q.Fault == 0 || r.faults[q.Fault].act == aCrashAfter // crash-after lets the call through
				return q.Endpoint == lk[1] && unshaped && q.Done() && !q.WasAborted() && q.Arrived.After(started) && q.Arrived.Before(at[1])
			})
			if !answered {
				t.Errorf("%s recorded (%s) without an answer of the provider that no fault shaped:%s", lk[0], ev.Type, history(evs))
			}
		}
	}

	// 5. Single side effects: the slot branch moved at most once per job
	// (its reflog: curl retries a POST whose connection dropped, and the
	// retried push is refused by its lease, so the requests overcount),
	// one deployment per attempt, one slot event per job. (A promote's
	// push is never forced: a second one cannot land anything else.)
	if kind == events.KindReset || kind == events.KindPRDeploy {
		if n := r.refUpdates(fx); n > 1 || j.Status == events.StatusSucceeded && n != 1 {
			t.Errorf("the slot branch moved %d times, want at most once (once for a success)", n)
		}
	}
	if n := len(w.sim.Deployments(fx.AppUUID)); n > j.Attempt {
		t.Errorf("%d deployments for %d attempts", n, j.Attempt)
	}
	// (ReadStream: logEvents waits for the head on the slot stream; the
	// memory store's reads do not lag.)
	slotEvs, err := w.store.ReadStream(context.Background(), events.SlotStream(fx.Name), 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"SlotVacated", "SlotRetired", "SlotPromoted"} {
		n := 0
		for _, ev := range slotEvs {
			if ev.Type == typ {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%s written %d times:%s", typ, n, history(slotEvs))
		}
	}
}

// checkFenceOrder is checkFence on wall-clock stamps of the appends (the
// engine's events carry the fake clock's time): every request arrived after
// its attempt's claim was appended and before an event of another actor (a
// cancel, the rescuer) or the attempt's terminal event was appended; every
// request of an attempt finished before the next attempt's first arrived.
func (r *run) checkFenceOrder(from time.Time, jobID string, evs []events.RecordedEvent) {
	t := r.t
	type span struct {
		start, end        time.Time
		firstIn, lastDone time.Time
		requests, undone  int
	}
	var spans []*span
	var cur *span
	worker := ""
	for _, ev := range evs {
		at, ok := r.stamps.stamp(ev.ID)
		if !ok {
			t.Fatalf("event %s %s has no append stamp", ev.Type, ev.ID)
		}
		switch {
		case ev.Type == "JobClaimed":
			worker = ev.Meta.Actor
			cur = &span{start: at[0]}
			spans = append(spans, cur)
		case cur != nil && (ev.Meta.Actor != worker || events.IsTerminal(ev.Type)):
			cur.end = at[1]
			cur = nil
		}
	}
	for _, q := range r.w.sim.Requests() {
		if q.Arrived.Before(from) {
			continue
		}
		var in *span
		for _, s := range spans {
			if !q.Arrived.Before(s.start) && (s.end.IsZero() || !q.Arrived.After(s.end)) {
				in = s
			}
		}
		if in == nil {
			t.Errorf("request %s %s (%s) arrived at %s outside every attempt:%s", q.Method, q.Path, q.Endpoint, q.Arrived.Format("15:04:05.000000"), history(evs))
			continue
		}
		if r.inert[q.Fault] {
			continue
		}
		in.requests++
		if in.firstIn.IsZero() || q.Arrived.Before(in.firstIn) {
			in.firstIn = q.Arrived
		}
		done := q.Completed
		if q.WasAborted() {
			done = q.Aborted
		}
		if !q.Done() {
			in.undone++
		} else if done.After(in.lastDone) {
			in.lastDone = done
		}
	}
	for k := 0; k+1 < len(spans); k++ {
		a, b := spans[k], spans[k+1]
		if b.requests == 0 {
			continue
		}
		if a.undone > 0 || a.lastDone.After(b.firstIn) {
			t.Errorf("attempts overlap: attempt %d had a request running until %s (%d unfinished) when attempt %d started calling at %s",
				k+1, a.lastDone.Format("15:04:05.000000"), a.undone, k+2, b.firstIn.Format("15:04:05.000000"))
		}
	}
}

// TestHungDeleteConfirmationEndsAtTheStepDeadline (found by
// TestRandomFaultSchedules, seed 8): Coolify accepted a teardown's
// database delete (queued), and the first GET confirming it hangs. The
// queued delete's wait sets the step deadline aside, but not for a request
// that hangs: at the step deadline (on the fake clock) the GET is aborted
// and the attempt ends timed out with delete_db uncertain — before, it
// hung until the wait's own bound (an hour). A resume finishes the
// teardown.
func TestHungDeleteConfirmationEndsAtTheStepDeadline(t *testing.T) {
	t.Parallel()
	r := newScheduleWorld(t, schedule{})
	w := r.w
	w.patience = 30 * time.Second
	fx := w.seed("cell")
	id := w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Resource: fx.DBUUID, Hang: true, Times: 1})
	r.startProc()
	res := startJob(t, w, events.KindTeardown, "cell")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.track(ctx, res.JobID)
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	hung, err := w.sim.WaitFor(wctx, func(q sim.Request) bool { return q.Fault == id })
	if err != nil {
		t.Fatalf("the confirmation GET never arrived: %v", err)
	}
	if !slices.ContainsFunc(w.jobEvents(res.JobID), func(ev events.RecordedEvent) bool { return ev.Type == "DeleteAccepted" }) {
		t.Fatalf("the hung GET is not the confirmation of an accepted delete:%s", history(w.jobEvents(res.JobID)))
	}
	r.fc.Advance(r.cfg.StepTimeout + time.Second)
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusTimedOut || j.InFlight != events.StepDeleteDB {
		t.Fatalf("ended %s with %q uncertain, want timed_out with delete_db uncertain:%s", j.Status, j.InFlight, history(w.jobEvents(res.JobID)))
	}
	if q, err := w.sim.WaitFor(wctx, func(q sim.Request) bool { return q.Seq == hung.Seq && q.Done() }); err != nil || !q.WasAborted() {
		t.Fatalf("the hung GET was not aborted (%v)", err)
	}
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(res.JobID, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resume: %s %q", j.Status, j.LastError)
	}
	checkFinal(t, w, events.KindTeardown, fx, res.JobID)
}

// TestFailedVerifyKeepsTheStepUncertain (found by TestRandomFaultSchedules,
// seed 15 of its third version): a promote's create lands but its answer
// is lost (502); the resume verifies the create, and its lookup meets a
// proxy's 404. That failure resolves nothing, so create_repo stays
// uncertain and the next resume verifies again and adopts the job's own,
// empty repository — before, the second failure was recorded as definite,
// the third run created again and failed "repository … already exists"
// on every resume, the job's own repository never recorded.
func TestFailedVerifyKeepsTheStepUncertain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.patience = 2 * time.Minute
	fx := w.seed("cell")
	target := promoProject + "/" + promoName
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointCreateRepo, Resource: promoProject, AfterHandler: true, Status: http.StatusBadGateway, Times: 1})
	// The first GET is lookup_repo's (404: go on); the second the verify's.
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetRepo, Resource: target, Foreign404: true, Skip: 1, Times: 1})
	w.startEngine(patientConfig(w))
	res := startJob(t, w, events.KindPromote, "cell")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || j.InFlight != events.StepCreateRepo || !w.sim.HasRepo(promoProject, promoName) {
		t.Fatalf("run 1: %s, uncertain %q, repo created %v: want failed with the create uncertain and the repo made", j.Status, j.InFlight, w.sim.HasRepo(promoProject, promoName))
	}
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	j = w.waitEndedN(res.JobID, 2)
	if j.Status != events.StatusFailed || j.InFlight != events.StepCreateRepo {
		t.Fatalf("run 2 (the verify's lookup refused): %s, uncertain %q; want failed with create_repo still uncertain:%s", j.Status, j.InFlight, history(w.jobEvents(res.JobID)))
	}
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	j = w.waitEndedN(res.JobID, 3)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("run 3: %s %q; want the job's own repository adopted:%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	checkPromote(t, w, fx, promoProject, promoName)
}

// TestConcurrentResumesDecideOnTheJobAsItIsNow (found by
// TestRandomFaultSchedules, seed 48 with two people resuming at once): an
// adopt fails; two people press resume. The second read the failed job,
// then its slot append lost the race to the first resume, whose run ran
// and succeeded before the second's retry. The retry must decide on the
// job as it is now — succeeded, final — and refuse; before, it accepted
// run 2 a second time on a succeeded job (the person told "resumed", the
// slot locked for a job that could not run).
func TestConcurrentResumesDecideOnTheJobAsItIsNow(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seed("cell")
	app, err := w.sim.AddApp(fx.ProjectUUID, "stray")
	if err != nil {
		t.Fatal(err)
	}
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetApplication, Resource: app, Status: http.StatusInternalServerError, Times: 1})
	w.startEngine(w.engineConfig())
	res, err := w.svc.Adopt(context.Background(), bob, "cell", slots.AdoptCmd{Provider: "coolify", Kind: events.ResApplication, ID: app}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if j := w.waitEnded(res.JobID); j.Status != events.StatusFailed {
		t.Fatalf("run 1: %s, want failed", j.Status)
	}
	// The second person's service: just before its JobAccepted reaches
	// the store, the first person's resume lands and its run succeeds.
	hook := &hookStore{Store: w.store, done: make(chan struct{}),
		match: func(stream string, evs []events.EventData) bool {
			return stream == events.SlotStream("cell") && hasType(evs, "JobAccepted")
		},
		before: func() {
			if _, err := w.svc.Resume(context.Background(), slots.Actor{Name: "first"}, res.JobID); err != nil {
				t.Errorf("first resume: %v", err)
				return
			}
			if j := w.waitEndedN(res.JobID, 2); j.Status != events.StatusSucceeded {
				t.Errorf("run 2: %s, want succeeded", j.Status)
			}
		}}
	second := slots.NewService(hook, slots.Config{Logger: testLogger()})
	_, err = second.Resume(context.Background(), slots.Actor{Name: "second"}, res.JobID)
	if slots.ErrorCode(err) != slots.CodeConflict {
		t.Errorf("second resume of a job that succeeded meanwhile: %v, want refused (conflict)", err)
	}
	accepted := 0
	for _, ev := range w.logEvents(events.SlotStream("cell")) {
		if ev.Type == "JobAccepted" && strings.Contains(string(ev.Data), res.JobID) {
			accepted++
		}
	}
	if accepted != 2 {
		t.Errorf("%d acceptances of the job on the slot stream, want 2 (run 1, one resume):%s", accepted, history(w.logEvents(events.SlotStream("cell"))))
	}
}
