package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// wireHeldCreate is the GitHost of a worker killed while its create_repo
// request is on the wire: the worker gives up at once (its context ends),
// but the request reaches Bitbucket only when the test releases it, as a
// kill -9 mid-request leaves it in flight.
type wireHeldCreate struct {
	providers.GitHost
	sent, release, landed chan struct{}
	releaseOnce           sync.Once
}

func (h *wireHeldCreate) CreateRepo(ctx context.Context, project, name string) (providers.Repo, providers.CreateOutcome, error) {
	wire := context.WithoutCancel(ctx) // keeps the call tag: the request names attempt 1
	go func() {
		<-h.release
		h.GitHost.CreateRepo(wire, project, name)
		close(h.landed)
	}()
	close(h.sent)
	<-ctx.Done()
	return providers.Repo{}, 0, context.Cause(ctx)
}

func (h *wireHeldCreate) land() { h.releaseOnce.Do(func() { close(h.release) }) }

// afterFirstLookup is the resuming worker's GitHost: its first GetRepo of
// the promote target answers, then — before the attempt can act on that
// answer — between runs (the dead worker's create lands).
type afterFirstLookup struct {
	providers.GitHost
	once    sync.Once
	between func()
	// afterCreate, if set, runs once its CreateRepo has answered.
	afterCreate func()
}

func (g *afterFirstLookup) CreateRepo(ctx context.Context, project, name string) (providers.Repo, providers.CreateOutcome, error) {
	repo, out, err := g.GitHost.CreateRepo(ctx, project, name)
	if f := g.afterCreate; f != nil {
		g.afterCreate = nil
		f()
	}
	return repo, out, err
}

func (g *afterFirstLookup) GetRepo(ctx context.Context, project, slug string) (providers.Repo, providers.Lookup, error) {
	repo, l, err := g.GitHost.GetRepo(ctx, project, slug)
	if project == promoProject && slug == promoName {
		g.once.Do(g.between)
	}
	return repo, l, err
}

// TestCrashCreateRepoLandsAfterResumeLookup: a worker is killed with its
// create_repo request on the wire; the resuming attempt verifies (GET: 404)
// and the dead worker's create lands right after that lookup, before the
// resume's own create. Bitbucket answers that create 409. The resume looks
// again, finds the repository it asked for (same project and name, empty)
// and adopts it, saying so in the event; the promote succeeds. Old code
// failed the job permanently ("already exists").
//
// git-lags: the REST lookup after the 409 finds the repository while its
// git side still answers 404 (a repository still initialising; the
// simulator's AddRepo shows it before its git init): the step fails
// retryable and uncertain, and a further resume adopts it.
//
// deleted-between: someone deletes the repository between the 409 and the
// second look (404): the step fails retryable and uncertain, and the next
// resume verifies, finds nothing and creates it (a real 201).
//
// not-ours: what lands in between is someone else's "Copy" (same slug,
// another name): it is not adopted, the job fails and the repository is
// left untouched.
func TestCrashCreateRepoLandsAfterResumeLookup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"late-create", "git-lags", "deleted-between", "not-ours"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			gitLags := mode == "git-lags" || mode == "deleted-between" // attempt 2 fails, attempt 3 ends it
			w := newWorld(t, nil)
			w.patience = 2 * time.Minute
			fx := w.seed("cell")
			held := &wireHeldCreate{GitHost: w.deps.GitHost, sent: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
			t.Cleanup(held.land)
			depsA := w.deps
			depsA.GitHost = held
			// The worker dies right after recording create_repo's StepStarted.
			dying := &dyingStore{Store: w.store, after: func(_ string, evs []events.EventData) bool {
				return evs[0].Type == "StepStarted" && strings.Contains(string(evs[0].Data), `"step":"`+events.StepCreateRepo+`"`)
			}}
			// Both engines share a fake clock a minute ahead (the job queued
			// now is due on it): A's lease ends when the test moves it.
			fc := clock.NewFake(time.Now().Add(time.Minute))
			cfgA := doomedConfig(w)
			cfgA.Clock = fc
			a := jobs.NewEngine(dying, depsA, cfgA)
			done := make(chan error, 1)
			go func() { done <- a.Run(context.Background()) }()
			res := startJob(t, w, events.KindPromote, "cell")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			select {
			case <-held.sent:
			case <-ctx.Done():
				t.Fatal("the worker never sent its create")
			}
			if !dying.dead.Load() {
				t.Fatal("the create was sent before create_repo's StepStarted was the last append")
			}
			if err := a.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if w.sim.HasRepo(promoProject, promoName) {
				t.Fatal("the held create landed before the resume")
			}
			inner := w.deps.GitHost
			b := &afterFirstLookup{GitHost: inner}
			if mode == "deleted-between" {
				b.afterCreate = func() {
					if _, err := inner.DeleteRepo(context.Background(), promoProject, promoName); err != nil {
						t.Error(err)
					}
				}
			}
			w.deps.GitHost = b
			b.between = func() {
				if mode == "not-ours" {
					if _, err := w.sim.AddRepo(promoProject, "Copy"); err != nil {
						t.Error(err)
					}
					return
				}
				held.land()
				select {
				case <-held.landed:
				case <-ctx.Done():
					t.Error("the held create never landed")
				}
				if gitLags {
					if mode == "git-lags" {
						w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitInfoRefs, Resource: promoProject + "/" + promoName, Status: 404, Times: 1})
					}
				}
			}
			cfgB := w.engineConfig()
			cfgB.Clock = fc
			w.startEngine(cfgB)
			fc.Advance(cfgA.Lease + cfgB.RescueGrace)
			j := w.waitEnded(res.JobID) // A's attempt abandoned
			for n := 1; j.Status != events.StatusSucceeded && n <= 2 && (mode != "not-ours" || n == 1); n++ {
				if !j.Resumable() {
					t.Fatalf("after terminal %d the job is %s (%s), not resumable%s", n, j.Status, j.LastError, history(w.jobEvents(res.JobID)))
				}
				// Attempt 2 meeting git's lag may fail, retryable and
				// uncertain (so attempt 3 verifies); nothing else may.
				if n == 2 && (!gitLags || !strings.Contains(lastStepFailed(w, res.JobID), `"retryable":true,"uncertain":true`)) {
					t.Fatalf("attempt 2 ended %s (%s)%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
				}
				if _, err := w.svc.Resume(ctx, bob, res.JobID); err != nil {
					t.Fatalf("resume: %v", err)
				}
				j = w.waitEndedN(res.JobID, j.Terminals+1)
			}
			if mode == "not-ours" {
				checkNotOurs(t, w, res.JobID, j)
				return
			}
			if j.Status != events.StatusSucceeded {
				t.Fatalf("the promote ended %s (%s)%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
			}
			checkPromote(t, w, fx, promoProject, promoName)

			// The provider saw: the lookup (1), the resume's verify (2),
			// the dead worker's create landing (1), the resume's create
			// refused (2), the resume's second look (2).
			adopter := 2
			if mode == "git-lags" {
				adopter = 3 // attempt 2 met the lagging git side
			}
			var got []string
			for _, r := range w.sim.Requests() {
				// The job's own calls (the deleter's are untagged).
				if (r.Endpoint == sim.EndpointGetRepo || r.Endpoint == sim.EndpointCreateRepo) && r.Job != "" {
					got = append(got, fmt.Sprintf("%s %d %s", r.Endpoint, r.Status, strings.TrimPrefix(r.Job, res.JobID)))
				}
			}
			want := []string{
				"bitbucket.GetRepo 404 /1", "bitbucket.GetRepo 404 /2",
				"bitbucket.CreateRepo 201 /1", "bitbucket.CreateRepo 409 /2",
			}
			switch mode {
			case "late-create":
				want = append(want, "bitbucket.GetRepo 200 /2")
			case "git-lags":
				want = append(want, "bitbucket.GetRepo 200 /2", "bitbucket.GetRepo 200 /3")
			case "deleted-between":
				want = append(want, "bitbucket.GetRepo 404 /2", "bitbucket.GetRepo 404 /3", "bitbucket.CreateRepo 201 /3")
			}
			if strings.Join(got, ", ") != strings.Join(want, ", ") {
				t.Fatalf("repository requests:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
			}
			if mode == "deleted-between" {
				// Attempt 3's own 201 is the step's result.
				evs := w.jobEvents(res.JobID)
				if !strings.Contains(history(evs), "RepoCreated") || !strings.Contains(lastStepFailed(w, res.JobID), "answered 409 but it could not be looked up") {
					t.Errorf("want attempt 2's 409-then-404 failure and attempt 3's RepoCreated:%s", history(evs))
				}
				return
			}
			// The event log: no RepoCreated (no 201 of this job was
			// recorded), and the adopting attempt says what it decided.
			var adopted string
			for _, ev := range w.jobEvents(res.JobID) {
				if ev.Type == "RepoCreated" {
					t.Errorf("RepoCreated recorded although no attempt recorded a 201")
				}
				if ev.Type == "StepSucceeded" && strings.Contains(string(ev.Data), `"step":"create_repo"`) {
					adopted = string(ev.Data)
				}
			}
			if !strings.Contains(adopted, fmt.Sprintf(`"attempt":%d`, adopter)) || !strings.Contains(adopted, "adopted PROMO/copy (same project and name, empty)") {
				t.Errorf("create_repo's result: %s", adopted)
			}
			if mode == "git-lags" && !strings.Contains(adopted, "exists after this job's uncertain create") {
				t.Errorf("attempt 3 adopted on its first look: %s", adopted)
			}
		})
	}
}

// checkNotOurs: the resume refused to adopt someone else's repository: the
// step failed, not retryable, and "Copy" got nothing pushed.
func checkNotOurs(t *testing.T, w *world, jobID string, j events.JobState) {
	t.Helper()
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, `named "Copy", not the "copy" this job asked for`) || !strings.Contains(lastStepFailed(w, jobID), `"retryable":false`) {
		t.Fatalf("the promote ended %s (%s)%s", j.Status, j.LastError, history(w.jobEvents(jobID)))
	}
	var got []string
	for _, r := range w.sim.Requests() {
		switch {
		case r.Endpoint == sim.EndpointGetRepo || r.Endpoint == sim.EndpointCreateRepo:
			got = append(got, fmt.Sprintf("%s %d %s", r.Endpoint, r.Status, strings.TrimPrefix(r.Job, jobID)))
		case r.Resource == promoProject+"/"+promoName:
			t.Errorf("a git request reached the repository that is not this job's: %s %s", r.Method, r.Path)
		}
	}
	want := "bitbucket.GetRepo 404 /1, bitbucket.GetRepo 404 /2, bitbucket.CreateRepo 409 /2, bitbucket.GetRepo 200 /2"
	if strings.Join(got, ", ") != want {
		t.Fatalf("repository requests:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
}

// lastStepFailed is the data of the job's last StepFailed, "" if none.
func lastStepFailed(w *world, jobID string) string {
	out := ""
	for _, ev := range w.jobEvents(jobID) {
		if ev.Type == "StepFailed" {
			out = string(ev.Data)
		}
	}
	return out
}

// wireHeldDB is wireHeldCreate's twin for Coolify's create database.
type wireHeldDB struct {
	providers.PaaS
	sent, release, landed chan struct{}
	releaseOnce           sync.Once
}

func (h *wireHeldDB) CreateDatabase(ctx context.Context, spec providers.DatabaseSpec) (providers.Database, error) {
	wire := context.WithoutCancel(ctx)
	go func() {
		<-h.release
		h.PaaS.CreateDatabase(wire, spec)
		close(h.landed)
	}()
	close(h.sent)
	<-ctx.Done()
	return providers.Database{}, context.Cause(ctx)
}

func (h *wireHeldDB) land() { h.releaseOnce.Do(func() { close(h.release) }) }

// afterFirstList is the resuming worker's PaaS: after its first listing of
// the databases answers, between runs.
type afterFirstList struct {
	providers.PaaS
	once    sync.Once
	between func()
}

func (g *afterFirstList) ListDatabases(ctx context.Context) ([]providers.Database, error) {
	dbs, err := g.PaaS.ListDatabases(ctx)
	g.once.Do(g.between)
	return dbs, err
}

// TestCrashCreateDBLandsAfterResumeLookup: create_db's twin of the
// create_repo race. The dead worker's create lands right after the resume
// listed the databases (none of this job's name); Coolify accepts the
// resume's create of the same name too, so nothing refuses either. The
// resume lists again after its create and deletes the twin (this job's
// name, not the slot's): one database remains, the slot's. Old code left
// the dead worker's database running, tracked by nobody.
func TestCrashCreateDBLandsAfterResumeLookup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.patience = 2 * time.Minute
	fx := w.seedReady("cell", "postgresql")
	w.occupy("cell")
	held := &wireHeldDB{PaaS: w.deps.PaaS, sent: make(chan struct{}), release: make(chan struct{}), landed: make(chan struct{})}
	t.Cleanup(held.land)
	depsA := w.deps
	depsA.PaaS = held
	dying := &dyingStore{Store: w.store, after: func(_ string, evs []events.EventData) bool {
		return evs[0].Type == "StepStarted" && strings.Contains(string(evs[0].Data), `"step":"`+events.StepCreateDB+`"`) && !strings.Contains(string(evs[0].Data), `"verify":true`)
	}}
	fc := clock.NewFake(time.Now().Add(time.Minute))
	cfgA := doomedConfig(w)
	cfgA.Clock = fc
	a := jobs.NewEngine(dying, depsA, cfgA)
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	res := startJob(t, w, events.KindReset, "cell")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case <-held.sent:
	case <-ctx.Done():
		t.Fatal("the worker never sent its create")
	}
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.deps.PaaS = &afterFirstList{PaaS: w.deps.PaaS, between: func() {
		held.land()
		select {
		case <-held.landed:
		case <-ctx.Done():
			t.Error("the held create never landed")
		}
	}}
	cfgB := w.engineConfig()
	cfgB.Clock = fc
	w.startEngine(cfgB)
	fc.Advance(cfgA.Lease + cfgB.RescueGrace)
	j := w.waitEnded(res.JobID)
	if !j.Resumable() {
		t.Fatalf("after the crash: %s%s", j.Status, history(w.jobEvents(res.JobID)))
	}
	if _, err := w.svc.Resume(ctx, bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	if j = w.waitEndedN(res.JobID, 2); j.Status != events.StatusSucceeded {
		t.Fatalf("the resumed reset ended %s (%s)%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	checkReady(t, w, fx, res.JobID)
	var names []string
	for _, n := range w.sim.DatabaseNames(fx.ProjectUUID) {
		if strings.HasPrefix(n, "db-cell-") {
			names = append(names, n)
		}
	}
	if len(names) != 1 {
		t.Fatalf("databases of this reset: %v, want only the slot's", names)
	}
	// The provider saw the dead worker's create land after the resume's
	// listing, the resume's own create, its second listing and the
	// twin's delete.
	var got []string
	for _, r := range w.sim.Requests() {
		switch r.Endpoint {
		case sim.EndpointCreateDatabase, sim.EndpointListDatabases, sim.EndpointDeleteDatabase:
			if r.Job != "" {
				got = append(got, fmt.Sprintf("%s %d %s", r.Endpoint, r.Status, strings.TrimPrefix(r.Job, res.JobID)))
			}
		}
	}
	want := "coolify.DeleteDatabase 200 /1, coolify.ListDatabases 200 /2, coolify.CreateDatabase 201 /1, coolify.CreateDatabase 201 /2, coolify.ListDatabases 200 /2, coolify.DeleteDatabase 200 /2"
	if strings.Join(got, ", ") != want {
		t.Fatalf("database requests:\n got %s\nwant %s", strings.Join(got, ", "), want)
	}
}
