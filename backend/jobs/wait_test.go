package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// Waiting on Coolify at its own time scales (issue 32), on a fake clock:
// builds of minutes, a queue of two per server, running:unknown, failed
// database starts, skipped deploys. No test sleeps: time moves only when
// every unfinished job waits between two polls (waitClock).

// pollMax is the longest sleep between two polls of a wait
// (jobs' waitPollMax): timers up to it are the waits' polls.
const pollMax = 15 * time.Second

// budgetMax is the longest wait for Coolify's API budget (a 60-second
// window and the budget's margin): with a rate limit on, a call waiting
// for the budget sleeps like a poll (waitClock.longest).
const budgetMax = 62 * time.Second

// waitClock is a fake clock that knows the short timers armed on it (the
// polls of the waits) and moves time to the earliest of them once every
// unfinished job sleeps between two polls: simulated time passes only
// while everybody waits on the simulated Coolify, never during real work
// (git pushes, HTTP calls), so no step deadline passes for want of wall time.
type waitClock struct {
	*clock.Fake
	mu      sync.Mutex
	small   map[*smallTimer]time.Time
	changed chan struct{}
	// longest is the longest timer that counts as a wait's sleep: pollMax,
	// or budgetMax when the simulated Coolify throttles.
	longest time.Duration
}

func newWaitClock() *waitClock {
	// A minute ahead of the wall clock, so jobs the service queues now
	// are due on it.
	return &waitClock{Fake: clock.NewFake(time.Now().Add(time.Minute)), small: map[*smallTimer]time.Time{}, changed: make(chan struct{}), longest: pollMax}
}

type smallTimer struct {
	clock.Timer
	c *waitClock
}

func (c *waitClock) note() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *waitClock) NewTimer(d time.Duration) clock.Timer {
	t := c.Fake.NewTimer(d)
	c.mu.Lock()
	longest := c.longest
	c.mu.Unlock()
	if d <= 0 || d > longest {
		return t
	}
	st := &smallTimer{Timer: t, c: c}
	c.mu.Lock()
	c.small[st] = c.Fake.Now().Add(d)
	c.note()
	c.mu.Unlock()
	return st
}

func (t *smallTimer) Stop() bool {
	t.c.mu.Lock()
	delete(t.c.small, t)
	t.c.note()
	t.c.mu.Unlock()
	return t.Timer.Stop()
}

func (t *smallTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	t.c.small[t] = t.c.Fake.Now().Add(d)
	t.c.note()
	t.c.mu.Unlock()
	return t.Timer.Reset(d)
}

// waitArmed blocks until at least n polls are armed.
func (c *waitClock) waitArmed(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c.mu.Lock()
		armed, ch := len(c.small), c.changed
		c.mu.Unlock()
		if armed >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%d polls armed, want %d", armed, n)
		}
	}
}

// nudge wakes drive (a job ended).
func (c *waitClock) nudge() {
	c.mu.Lock()
	c.note()
	c.mu.Unlock()
}

// drive moves time to the earliest poll whenever at least unfinished()
// polls are armed, until ctx ends.
func (c *waitClock) drive(ctx context.Context, unfinished func() int) {
	for ctx.Err() == nil {
		c.mu.Lock()
		n, ch := len(c.small), c.changed
		var first time.Time
		for _, due := range c.small {
			if first.IsZero() || due.Before(first) {
				first = due
			}
		}
		c.mu.Unlock()
		if u := unfinished(); u > 0 && n >= u {
			c.mu.Lock()
			for t, due := range c.small {
				if !due.After(first) {
					delete(c.small, t)
				}
			}
			c.note()
			c.mu.Unlock()
			if first.After(c.Fake.Now()) {
				c.Fake.Set(first)
			}
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
}

// waitWorld is a world whose engine and simulated Coolify share a
// waitClock, with production-like deadlines: a 2-minute step deadline, a
// 15-minute job deadline.
type waitWorld struct {
	*world
	fc      *waitClock
	mu      sync.Mutex
	pending map[string]bool // jobs claimed and not ended yet
}

func newWaitWorld(t testing.TB) *waitWorld {
	t.Helper()
	fc := newWaitClock()
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: 5 * time.Millisecond, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	w := &world{t: t, sim: s, store: ms, svc: slots.NewService(ms, slots.Config{Logger: testLogger()}), deps: simDeps(t, s)}
	ww := &waitWorld{world: w, fc: fc, pending: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); fc.drive(ctx, ww.unfinished) }()
	t.Cleanup(func() { cancel(); <-done })
	return ww
}

func (w *waitWorld) unfinished() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// config: the production deadlines; a lease renewed every 3 simulated
// minutes (so several times during a build) but an hour long: simulated
// time runs as fast as the polls do, and a renewal starved of CPU on a
// loaded machine must not see the lease end before it lands.
func (w *waitWorld) config() jobs.Config {
	return jobs.Config{Workers: 8, WorkerID: "test", StepTimeout: 2 * time.Minute, JobTimeout: 15 * time.Minute,
		Lease: time.Hour, RenewEvery: 3 * time.Minute, RescueGrace: time.Minute, Clock: w.fc, Logger: testLogger()}
}

// start queues a ready reset of slot; it counts as unfinished (time waits
// for its polls) from its claim until it ends.
func (w *waitWorld) start(slot string) string {
	w.t.Helper()
	res, err := w.svc.Release(context.Background(), bob, slot)
	if err != nil {
		w.t.Fatal(err)
	}
	w.track(res.JobID, 1)
	return res.JobID
}

func (w *waitWorld) track(id string, n int) {
	running := func(on bool) {
		w.mu.Lock()
		if on {
			w.pending[id] = true
		} else {
			delete(w.pending, id)
		}
		w.mu.Unlock()
		w.fc.nudge()
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var j events.JobState
		stop := errors.New("ended")
		_ = w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(id)}}, func(_ context.Context, ev events.RecordedEvent) error {
			if ev.Stream != events.JobStream(id) {
				return nil
			}
			if err := j.Apply(ev); err != nil {
				return err
			}
			if j.Terminal() && j.Terminals >= n {
				return stop
			}
			// A claimed job runs (and soon polls); a queued one waits
			// for a worker and does not count.
			if ev.Type == "JobClaimed" && j.Terminals == n-1 {
				running(true)
			}
			return nil
		})
		running(false)
	}()
}

// seedWait is seedReady with the slot's build time.
func (w *waitWorld) seedWait(name string, build time.Duration, tmpl func(*events.SlotTemplate)) sim.SlotFixture {
	w.t.Helper()
	fx, err := w.sim.SeedSlot(name)
	if err != nil {
		w.t.Fatal(err)
	}
	if fx.TemplateApp, err = w.sim.EnsureTemplateApp(); err != nil {
		w.t.Fatal(err)
	}
	w.sim.SetBuildDuration(fx.AppUUID, build)
	t := &events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: fx.TemplateApp, Volumes: []string{"/var/lib/app"}}
	if tmpl != nil {
		tmpl(t)
	}
	err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
		Name: name, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
		Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
		TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
		Template: t,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.occupy(name)
	return fx
}

// deploys counts the POST /deploy requests for app the simulator saw.
func deploys(s *sim.Sim, app string) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Endpoint == sim.EndpointDeploy && strings.Contains(r.Query, app) {
			n++
		}
	}
	return n
}

// payloads decodes the job's events of type T.
func payloads[T events.Payload](w *world, id string) []T {
	var out []T
	for _, ev := range w.jobEvents(id) {
		if p, err := events.Decode(ev); err == nil {
			if e, ok := p.(T); ok {
				out = append(out, e)
			}
		}
	}
	return out
}

// waitFor blocks until the job's stream holds an event of type T that
// ok accepts.
func waitFor[T events.Payload](t *testing.T, w *world, id string, ok func(T) bool) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), w.waitLimit())
	defer cancel()
	var got T
	stop := errors.New("found")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStream(id)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream != events.JobStream(id) {
			return nil
		}
		if p, err := events.Decode(ev); err == nil {
			if e, is := p.(T); is && ok(e) {
				got = e
				return stop
			}
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("job %s: no %T as wanted: %v%s", id, got, err, history(w.jobEvents(id)))
	}
	return got
}

// TestWaitLongBuildOneDeploy: a 10-minute build with a 2-minute step
// deadline converges in one attempt with exactly one POST /deploy; the
// lease is renewed while waiting, and the phases are recorded on change
// only.
func TestWaitLongBuildOneDeploy(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("long", 10*time.Minute, nil)
	w.startEngine(w.config())
	t0 := w.fc.Now()
	id := w.start("long")
	j := w.waitEnded(id)
	if j.Status != events.StatusSucceeded || j.Resumes != 0 {
		t.Fatalf("reset %s after %d resumes: %s%s", j.Status, j.Resumes, j.LastError, history(w.jobEvents(id)))
	}
	if n := deploys(w.sim, fx.AppUUID); n != 1 {
		t.Errorf("%d POST /deploy, want 1", n)
	}
	if took := w.fc.Now().Sub(t0); took < 10*time.Minute {
		t.Errorf("the reset took %s of simulated time, less than the build", took)
	}
	evs := w.jobEvents(id)
	started, renewed, ended := -1, 0, -1
	for i, ev := range evs {
		switch ev.Type {
		case "DeploymentStarted":
			started = i
		case "LeaseRenewed":
			if started >= 0 && ended < 0 {
				renewed++
			}
		case "AppDeployed":
			ended = i
		}
	}
	if started < 0 || ended < 0 || renewed < 2 {
		t.Errorf("DeploymentStarted at %d, AppDeployed at %d, %d lease renewals between: want the lease renewed while waiting%s", started, ended, renewed, history(evs))
	}
	phases := payloads[events.WaitPhase](w.world, id)
	building := 0
	for _, p := range phases {
		if p.Phase == events.WaitBuilding {
			building++
			if !strings.Contains(p.URL, "/deployment/") {
				t.Errorf("building phase without the deployment's page: %+v", p)
			}
		}
	}
	if building != 1 || len(phases) > 4 {
		t.Errorf("phases %+v: want one building phase, recorded on change only", phases)
	}
	ad := payloads[events.AppDeployed](w.world, id)
	if len(ad) != 1 || ad[0].Status != "running:unknown" || !ad[0].NoHealthCheck || ad[0].DBStatus == "" {
		t.Errorf("AppDeployed %+v: want running:unknown, no health check, the database running", ad)
	}
}

// TestWaitResumeFollowsDeployment: the worker stops mid-build (a
// shutdown, the step uncertain); a resume on another engine follows the
// recorded deployment instead of deploying again.
func TestWaitResumeFollowsDeployment(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("resume", 10*time.Minute, nil)
	_, stop := w.startEngine(w.config())
	id := w.start("resume")
	dep := waitFor(t, w.world, id, func(p events.WaitPhase) bool { return p.Phase == events.WaitBuilding })
	stop()
	j := w.waitEnded(id)
	if j.Status == events.StatusSucceeded {
		t.Fatalf("the reset ended %s before the build did", j.Status)
	}
	w.startEngine(w.config())
	w.track(id, 2)
	if _, err := w.svc.Resume(context.Background(), bob, id); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(id, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed reset %s: %s%s", j.Status, j.LastError, history(w.jobEvents(id)))
	}
	if n := deploys(w.sim, fx.AppUUID); n != 1 {
		t.Errorf("%d POST /deploy, want 1: the resume must follow deployment %s", n, dep.DeploymentUUID)
	}
	ad := payloads[events.AppDeployed](w.world, id)
	if len(ad) != 1 || ad[0].DeploymentUUID != dep.DeploymentUUID {
		t.Errorf("AppDeployed %+v, want deployment %s", ad, dep.DeploymentUUID)
	}
}

// TestWaitFollowsSkippedDeploy: a deployment of the app is already queued
// (behind a long build, concurrent_builds 1); the reset's POST /deploy is
// skipped and answers a uuid Coolify never created; the reset follows the
// queued one, and says so.
func TestWaitFollowsSkippedDeploy(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("skip", time.Minute, nil)
	other := w.seedWait("other", 5*time.Minute, nil)
	w.sim.SetConcurrentBuilds(1)
	cl := coolify.New(coolify.Options{BaseURL: w.sim.CoolifyURL(), Token: w.sim.CoolifyToken()})
	ctx := context.Background()
	if _, err := cl.Deploy(ctx, other.AppUUID); err != nil {
		t.Fatal(err)
	}
	queued, err := cl.Deploy(ctx, fx.AppUUID)
	if err != nil || queued.Skipped {
		t.Fatalf("queue a deployment: %+v %v", queued, err)
	}
	w.startEngine(w.config())
	id := w.start("skip")
	j := w.waitEnded(id)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("reset %s: %s%s", j.Status, j.LastError, history(w.jobEvents(id)))
	}
	ds := payloads[events.DeploymentStarted](w.world, id)
	if len(ds) != 1 || ds[0].How != events.DeployFollowedSkipped || ds[0].DeploymentUUID != queued.UUID || ds[0].SkippedUUID == "" {
		t.Fatalf("DeploymentStarted %+v: want the queued %s followed after a skipped deploy", ds, queued.UUID)
	}
	if _, l, _ := cl.GetDeployment(ctx, ds[0].SkippedUUID); l != providers.Absent {
		t.Errorf("the skipped deploy's uuid %s is %v, want never created (404)", ds[0].SkippedUUID, l)
	}
	if n := deploys(w.sim, fx.AppUUID); n != 2 {
		t.Errorf("%d POST /deploy of the app, want 2 (the earlier one and the skipped one)", n)
	}
	queuedPhase := false
	for _, p := range payloads[events.WaitPhase](w.world, id) {
		queuedPhase = queuedPhase || p.Phase == events.WaitQueued && p.Building == 1
	}
	if !queuedPhase {
		t.Errorf("no queued phase behind the other app's build: %+v", payloads[events.WaitPhase](w.world, id))
	}
}

// TestWaitNoHealthCheck: an application without a health check (Coolify's
// default) runs as running:unknown: ready, recorded and shown as "no
// health check"; with one it is running:healthy.
func TestWaitNoHealthCheck(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	plain := w.seedWait("plain", 2*time.Minute, nil)
	checked := w.seedWait("checked", 2*time.Minute, nil)
	w.sim.EnableHealthCheck(checked.AppUUID, true)
	w.startEngine(w.config())
	a, b := w.start("plain"), w.start("checked")
	for _, c := range []struct {
		id, app, status string
		none            bool
	}{{a, plain.AppUUID, "running:unknown", true}, {b, checked.AppUUID, "running:healthy", false}} {
		if j := w.waitEnded(c.id); j.Status != events.StatusSucceeded {
			t.Fatalf("reset %s: %s", j.Status, j.LastError)
		}
		ad := payloads[events.AppDeployed](w.world, c.id)
		if len(ad) != 1 || ad[0].Status != c.status || ad[0].NoHealthCheck != c.none {
			t.Errorf("AppDeployed %+v: want %s (no health check %v)", ad, c.status, c.none)
		}
	}
	if st := w.final("plain"); st.Occupied {
		t.Error("the slot without a health check was not vacated")
	}
}

// TestWaitDatabaseStaysExited: the new database's start fails (it stays
// exited); the reset fails honestly at deploy, in Coolify's words, and the
// slot is not vacated: never ready with its database down.
func TestWaitDatabaseStaysExited(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("dbdown", time.Minute, nil)
	w.sim.FailDatabaseStart(fx.ProjectUUID, true)
	w.startEngine(w.config())
	id := w.start("dbdown")
	j := w.waitEnded(id)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "exited") || j.Done[events.StepDeploy] {
		t.Fatalf("reset %s (deploy done %v): %q, want a failed deploy naming the exited database", j.Status, j.Done[events.StepDeploy], j.LastError)
	}
	sf := payloads[events.StepFailed](w.world, id)
	if len(sf) != 1 || sf[0].Step != events.StepDeploy || !sf[0].Retryable {
		t.Errorf("StepFailed %+v: want deploy, retryable", sf)
	} else if sf[0].ErrorCode != events.FailureDBStartFailed || sf[0].ErrorArgs["db"] == "" || !strings.HasPrefix(sf[0].ErrorArgs["provider_status"], "exited") {
		// The dashboard words the failure from its code and parts (any language).
		t.Errorf("StepFailed code %q args %v: want db_start_failed naming the database and its exited status", sf[0].ErrorCode, sf[0].ErrorArgs)
	}
	if jf := payloads[events.JobFailed](w.world, id); len(jf) != 1 || jf[0].ReasonCode != events.FailureDBStartFailed {
		t.Errorf("JobFailed %+v: want the step's failure code as its reason code", jf)
	}
	if st := w.final("dbdown"); !st.Occupied || st.VacatedBy[id] {
		t.Error("the slot was vacated with its database down")
	}
	if len(payloads[events.AppDeployed](w.world, id)) != 0 {
		t.Error("AppDeployed recorded with the database down")
	}
}

// TestWaitCancelEndsAtOnce: a cancel mid-build ends the wait at once: the
// job is cancelled and the simulated Coolify sees no request after it,
// however long time runs on.
func TestWaitCancelEndsAtOnce(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("cancel", 30*time.Minute, nil)
	w.startEngine(w.config())
	id := w.start("cancel")
	waitFor(t, w.world, id, func(p events.WaitPhase) bool { return p.Phase == events.WaitBuilding })
	// Freeze time (the job no longer counts as waiting) once its poll
	// sleeps, then cancel.
	w.mu.Lock()
	delete(w.pending, id)
	w.mu.Unlock()
	w.fc.waitArmed(t, 1)
	seen := len(w.sim.Requests())
	if err := w.svc.Cancel(context.Background(), slots.Actor{Name: "carol"}, id); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEnded(id); j.Status != events.StatusCancelled {
		t.Fatalf("cancelled reset ended %s", j.Status)
	}
	w.fc.Advance(time.Hour)
	for _, r := range w.sim.Requests()[seen:] {
		if r.Server == "coolify" {
			t.Errorf("request after the cancel: %s %s", r.Method, r.Path)
		}
	}
	if n := deploys(w.sim, fx.AppUUID); n != 1 {
		t.Errorf("%d POST /deploy, want 1", n)
	}
}

// TestWaitOwnBound: the template's deploy_timeout (10 minutes here, 3,600
// s by default) bounds the wait: a 15-minute build fails the step
// honestly (retryable, the slot not vacated), and a resume goes on
// waiting for the same deployment.
func TestWaitOwnBound(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("bound", 15*time.Minute, func(t *events.SlotTemplate) { t.DeployTimeout = 600 })
	w.startEngine(w.config())
	id := w.start("bound")
	j := w.waitEnded(id)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "not ready after 10m0s") {
		t.Fatalf("reset %s: %q, want the wait's own bound", j.Status, j.LastError)
	}
	if sf := payloads[events.StepFailed](w.world, id); len(sf) != 1 || !sf[0].Retryable || sf[0].Step != events.StepDeploy {
		t.Errorf("StepFailed %+v: want deploy, retryable", sf)
	} else if sf[0].ErrorCode != events.FailureNotReady || sf[0].ErrorArgs["bound"] != "600" {
		t.Errorf("StepFailed code %q args %v: want not_ready, bound 600 (seconds)", sf[0].ErrorCode, sf[0].ErrorArgs)
	}
	if st := w.final("bound"); !st.Occupied {
		t.Error("slot vacated although its deployment is still building")
	}
	w.track(id, 2)
	if _, err := w.svc.Resume(context.Background(), bob, id); err != nil {
		t.Fatal(err)
	}
	if j := w.waitEndedN(id, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("resumed reset %s: %s", j.Status, j.LastError)
	}
	if n := deploys(w.sim, fx.AppUUID); n != 1 {
		t.Errorf("%d POST /deploy, want 1", n)
	}
}

// TestQueuedDeleteOutlastsStepDeadline: a queued delete whose confirmation
// takes longer than the step deadline (Coolify stops the application with
// its grace period first) is a wait with the provider client's own bound:
// the teardown succeeds; before, the step deadline cut it.
func TestQueuedDeleteOutlastsStepDeadline(t *testing.T) {
	t.Parallel()
	// The step deadline must be above any quick step's time on a loaded
	// machine (500 ms was not: a quick step timed out first, issue 36
	// item 7) and below the queued deletes' delay; the clients' own bound
	// on a confirmation is far above both.
	const stepTimeout, deleteDelay = 3 * time.Second, 4500 * time.Millisecond
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: deleteDelay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	deps := simDeps(t, s)
	confirm := providers.Backoff{Initial: 2 * time.Millisecond, Max: 20 * time.Millisecond, Total: time.Minute}
	deps.PaaS = coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken(), Confirm: confirm, RateRetries: -1})
	deps.GitHost = bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), Confirm: confirm, RateRetries: -1})
	w := &world{t: t, sim: s, store: ms, svc: slots.NewService(ms, slots.Config{Logger: testLogger()}), deps: deps}
	w.seed("slowdel")
	cfg := w.engineConfig()
	cfg.StepTimeout = stepTimeout
	w.startEngine(cfg)
	res, err := w.svc.Teardown(context.Background(), bob, "slowdel")
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("teardown %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	if n := len(payloads[events.DeleteAccepted](w, res.JobID)); n < 2 {
		t.Errorf("%d queued deletes accepted, want the database's and the application's", n)
	}
}

// TestWaitRestartingFailsHonestly: an application that keeps restarting
// after its deployment finished is not ready: the step waits a while
// (Coolify's status check may still show the old container), then fails
// in Coolify's words, retryable, and the slot is not vacated.
func TestWaitRestartingFailsHonestly(t *testing.T) {
	t.Parallel()
	w := newWaitWorld(t)
	fx := w.seedWait("crashy", time.Minute, nil)
	w.sim.SetRunStatus(fx.AppUUID, "restarting:unhealthy")
	w.startEngine(w.config())
	id := w.start("crashy")
	j := w.waitEnded(id)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "restarting:unhealthy") {
		t.Fatalf("reset %s: %q, want a failure in Coolify's words", j.Status, j.LastError)
	}
	if sf := payloads[events.StepFailed](w.world, id); len(sf) != 1 || !sf[0].Retryable {
		t.Errorf("StepFailed %+v, want retryable", sf)
	}
	if st := w.final("crashy"); !st.Occupied {
		t.Error("slot vacated while its application restarts")
	}
	health := false
	for _, p := range payloads[events.WaitPhase](w.world, id) {
		health = health || p.Phase == events.WaitHealth && p.Status == "restarting:unhealthy"
	}
	if !health {
		t.Errorf("no health phase in Coolify's words: %+v", payloads[events.WaitPhase](w.world, id))
	}
}

// TestWaitFaultMatrix: the waits' reads × faults mid-wait, on a fake clock
// with a 5-minute build: transient failures (500, a reset connection,
// three times) are waited out; a definite refusal (401) fails the step,
// and the resume follows the same deployment — except the queue's, which
// is read around. Every cell ends ready with exactly one POST /deploy.
func TestWaitFaultMatrix(t *testing.T) {
	t.Parallel()
	type cell struct {
		endpoint string
		skip     int
		fault    string
	}
	var cells []cell
	// skip: the reads a cell's fault lets through first — the deployment's
	// first two, and the application's one look of the preflight (issue
	// 32's checks), so the fault lands mid-wait.
	for _, e := range []struct {
		endpoint string
		skip     int
	}{{sim.EndpointGetDeployment, 2}, {sim.EndpointActiveDeployments, 0}, {sim.EndpointGetApplication, 1}} {
		for _, f := range []string{"500", "reset", "401"} {
			cells = append(cells, cell{e.endpoint, e.skip, f})
		}
	}
	for _, c := range cells {
		t.Run(c.endpoint+"/"+c.fault, func(t *testing.T) {
			t.Parallel()
			w := newWaitWorld(t)
			fx := w.seedWait("cell", 5*time.Minute, nil)
			flt := sim.Fault{Endpoint: c.endpoint, Skip: c.skip}
			if c.endpoint == sim.EndpointGetApplication {
				flt.Resource = fx.AppUUID
			}
			switch c.fault {
			case "500":
				flt.Status, flt.Times = 500, 3
			case "reset":
				flt.Reset, flt.Times = true, 3
			case "401":
				flt.Status, flt.Times = 401, 1
			}
			w.sim.AddFault(flt)
			w.startEngine(w.config())
			id := w.start("cell")
			j := w.waitEnded(id)
			// A refused read of the queue is read around (the
			// deployment itself says how it stands).
			if c.fault == "401" && c.endpoint != sim.EndpointActiveDeployments {
				if j.Status != events.StatusFailed || j.Done[events.StepDeploy] {
					t.Fatalf("reset %s (deploy done %v): %q, want the refusal to fail the step", j.Status, j.Done[events.StepDeploy], j.LastError)
				}
				w.track(id, 2)
				if _, err := w.svc.Resume(context.Background(), bob, id); err != nil {
					t.Fatal(err)
				}
				j = w.waitEndedN(id, 2)
			}
			if j.Status != events.StatusSucceeded {
				t.Fatalf("reset %s: %q%s", j.Status, j.LastError, history(w.jobEvents(id)))
			}
			if n := deploys(w.sim, fx.AppUUID); n != 1 {
				t.Errorf("%d POST /deploy, want 1", n)
			}
			faulted := 0
			for _, r := range w.sim.Requests() {
				if r.Fault != 0 {
					faulted++
				}
			}
			want := map[string]int{"500": 3, "reset": 3, "401": 1}[c.fault]
			if c.endpoint == sim.EndpointActiveDeployments && faulted > 0 {
				want = faulted // read around at once (the deployment says it builds), after the client's own retries
			}
			if faulted != want {
				t.Errorf("%d faulted requests, want %d: the fault never met the wait", faulted, want)
			}
		})
	}
}
