package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/demo"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/backend/providercheck"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	gitpush "github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/frontend"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
)

// newLogger builds the process logger from the config.
func newLogger(c Config, out io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(out, opts))
	}
	return slog.New(slog.NewTextHandler(out, opts))
}

// openStore opens the event store the config names.
func openStore(ctx context.Context, c Config, log *slog.Logger) (events.Store, string, error) {
	if c.Events != "" {
		st, err := kurrent.Open(ctx, c.Events, kurrent.Options{Logger: log})
		if err != nil {
			if errors.Is(err, kurrent.ErrConfig) {
				return nil, "", &ConfigError{Setting: setting("events"), Problem: err.Error()}
			}
			return nil, "", fmt.Errorf("open KurrentDB: %w", err)
		}
		return st, "kurrentdb " + redact(c.Events), nil
	}
	if err := os.MkdirAll(c.Data, 0o700); err != nil {
		return nil, "", &ConfigError{Setting: setting("data"), Problem: err.Error()}
	}
	st, err := boltstore.Open(c.Data, boltstore.Options{})
	if err != nil {
		if errors.Is(err, events.ErrLocked) {
			return nil, "", &ConfigError{Setting: setting("data"), Problem: fmt.Sprintf("%s is in use by another slotkeeper process", c.Data)}
		}
		return nil, "", fmt.Errorf("open event store in %s: %w", c.Data, err)
	}
	return st, "embedded " + c.Data, nil
}

// openReadModel returns the read-model target the config names (replay
// and verify use it directly).
func openReadModel(ctx context.Context, c Config, store events.Store) (projections.Target, func(), error) {
	if c.ReadModel == "memory" {
		return memory.New(store), func() {}, nil
	}
	pg, err := postgres.Open(ctx, c.ReadModel, postgres.Options{Log: store})
	if err != nil {
		return nil, nil, fmt.Errorf("open the PostgreSQL read model %s: %w", redact(c.ReadModel), err)
	}
	return pg, pg.Close, nil
}

// readSide is what serve reads from and what feeds the live stream.
//
// With memory read models one runner does both. With PostgreSQL read
// models several processes share the database and only the holder of the
// projector lock applies events, so a process that does not hold it would
// see no change feed: every process therefore also keeps a memory read model
// of its own, only to feed its live stream (same reducers, same views), and
// answers REST queries from PostgreSQL, waiting for its checkpoint for
// read-your-writes.
type readSide struct {
	reads    projections.ReadModel
	waiter   httpapi.Waiter
	feed     *projections.Runner // drives the hub
	feedView projections.ReadModel
	runners  []*projections.Runner
	close    func()
}

func openReadSide(ctx context.Context, c Config, store events.Store, onErr func(error)) (readSide, error) {
	opt := projections.RunnerOptions{OnError: onErr}
	target, closeRM, err := openReadModel(ctx, c, store)
	if err != nil {
		return readSide{}, err
	}
	main := projections.NewRunner(store, target, opt)
	if c.ReadModel == "memory" {
		return readSide{reads: target, waiter: main, feed: main, feedView: target, runners: []*projections.Runner{main}, close: closeRM}, nil
	}
	live := memory.New(store)
	feed := projections.NewRunner(store, live, opt)
	return readSide{
		reads: target, waiter: checkpointWaiter{rm: target, local: main}, feed: feed, feedView: live,
		runners: []*projections.Runner{feed, main}, close: closeRM,
	}, nil
}

// checkpointWaiter waits until a shared read model's checkpoint reached a
// position. The local runner answers at once when this process projects;
// otherwise another process does and only the checkpoint tells.
type checkpointWaiter struct {
	rm    projections.ReadModel
	local *projections.Runner
}

func (w checkpointWaiter) WaitFor(ctx context.Context, pos events.Position) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if w.local.Position() >= pos {
			return nil
		}
		p, err := w.rm.Position(ctx)
		switch {
		case err == nil && p >= pos:
			return nil
		case errors.Is(err, projections.ErrUnavailable):
			return err // waiting cannot help while the database is down
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// world is the outside systems jobs act on.
type world struct {
	deps   jobs.Deps
	sim    *sim.Sim   // nil with real providers
	remote *remoteSim // simulators in their own process (--sim-url), else nil
	close  func()
}

// simStateDir is where the simulators keep their state with the embedded
// store: beside the log that names their resources, so a restart on the same
// --data finds both. With KurrentDB the log is elsewhere and may be shared;
// the simulators then stay in memory ("").
func simStateDir(c Config) string {
	if c.Events != "" {
		return ""
	}
	return filepath.Join(c.Data, "sim")
}

// openWorld starts the simulators or connects the real providers. emptyLog
// says the log holds no event: simulator state left on disk then belongs to
// nothing (e.g. a demo seeding interrupted before its first event) and is
// removed, so the demo pool can be seeded again.
// demoBuild is how long a simulated deployment builds in the demo.
const demoBuild = 3 * time.Second

func openWorld(ctx context.Context, c Config, emptyLog bool) (world, error) {
	if c.useSim() {
		dir := simStateDir(c)
		if dir != "" && emptyLog {
			if err := os.RemoveAll(dir); err != nil {
				return world{}, fmt.Errorf("clear the simulators' state %s: %w", dir, err)
			}
		}
		// The demo's builds take 3 s (real ones take minutes; the control
		// API's POST /api/sim/coolify/builds sets others): long enough to
		// see a deployment wait, queued and building, on the job page.
		s, err := sim.Start(ctx, sim.Options{DeleteDelay: 300 * time.Millisecond, StateDir: dir, BuildDuration: demoBuild})
		if err != nil {
			return world{}, fmt.Errorf("start simulators: %w", err)
		}
		p, err := gitpush.New(gitpush.Options{Token: s.BitbucketToken()})
		if err != nil {
			s.Close()
			return world{}, err
		}
		return world{
			deps: jobs.Deps{
				PaaS:    coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken()}),
				GitHost: bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken()}),
				Pusher:  p,
				RepoURL: func(r events.RepoRef) string { return s.CloneURL(r.Project, r.Slug) },
			},
			sim:   s,
			close: func() { p.Close(); s.Close() },
		}, nil
	}
	p, err := gitpush.New(gitpush.Options{Token: c.BitbucketToken, Auth: gitpush.Auth(c.GitAuth), Username: c.GitUser})
	if err != nil {
		return world{}, err
	}
	root := strings.TrimRight(c.BitbucketURL, "/")
	var remote *remoteSim
	if c.SimURL != "" {
		remote = newRemoteSim(c.SimURL)
	}
	return world{
		remote: remote,
		deps: jobs.Deps{
			PaaS:    coolify.New(coolify.Options{BaseURL: c.CoolifyURL, Token: c.CoolifyToken}),
			GitHost: bitbucket.New(bitbucket.Options{BaseURL: c.BitbucketURL, Token: c.BitbucketToken}),
			Pusher:  p,
			RepoURL: func(r events.RepoRef) string {
				return root + "/scm/" + strings.ToLower(r.Project) + "/" + r.Slug + ".git"
			},
		},
		close: func() { p.Close() },
	}, nil
}

// serve runs the server until ctx is done, then shuts down gracefully.
// ready, if not nil, receives the listening address once the server
// answers (tests use it with --addr 127.0.0.1:0).
//
// Shutdown takes at most --drain-delay plus --shutdown-timeout from the
// signal on, whatever the dependencies do: the graceful steps are bounded
// by the timeout, and what is left behind after it (background work whose
// store calls still wait out a client's retries, a store that does not
// close) is abandoned with a log line, since the process is exiting.
func serve(ctx context.Context, c Config, stdout, stderr io.Writer, ready chan<- string) error {
	done := make(chan error, 1)
	go func() { done <- serveUntilDone(ctx, c, stdout, stderr, ready) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(c.DrainDelay + c.ShutdownTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		newLogger(c, stderr).Error("shutdown did not finish within --drain-delay + --shutdown-timeout; exiting anyway",
			slog.Duration("after", c.DrainDelay+c.ShutdownTimeout))
		return errShutdownTimeout
	}
}

// errShutdownTimeout is serve's error when the shutdown was cut short.
var errShutdownTimeout = errors.New("shutdown timed out")

// serveUntilDone wires the server in named steps and runs it until ctx
// ends (or background work meets a damaged store), then shuts it down.
// Each step only wires: the rules live in the packages it starts.
func serveUntilDone(ctx context.Context, c Config, stdout, stderr io.Writer, ready chan<- string) error {
	p := &wiring{c: c, stdout: stdout, log: newLogger(c, stderr)}
	defer p.closeAll()
	for _, step := range []func(context.Context) error{
		p.openStores, p.startSupervisor, p.openReads, p.openProviders, p.buildServices, p.startBackground, p.buildAPI,
	} {
		if err := step(ctx); err != nil {
			if errors.Is(err, errStopped) {
				return nil // interrupted during start
			}
			return err
		}
	}
	if err := p.listen(ready); err != nil {
		return err
	}
	failed, err := p.waitForStop()
	if err != nil {
		return err
	}
	if err := p.shutdown(ctx); err != nil {
		return err
	}
	return failed
}

// errStopped ends the start-up without an error: ctx ended during it.
var errStopped = errors.New("stopped during start")

// wiring is what serveUntilDone's steps hand on to the next ones.
type wiring struct {
	c      Config
	stdout io.Writer
	log    *slog.Logger
	// closers run in reverse order when serveUntilDone returns (as the
	// defers of one function would).
	closers []func()

	// openStores
	raw        events.Store
	storeDesc  string
	ident      events.Identity
	guard      *events.Guard
	store      events.Store
	startHead  events.Position
	endStreams *atomic.Pointer[func()]
	// startSupervisor
	wg       *sync.WaitGroup
	fatalCtx context.Context
	fatal    context.CancelCauseFunc
	damage   interface {
		Damaged() <-chan struct{}
		Err() error
	}
	health *consumer.Health
	goRun  func(name string, f func(context.Context) error)
	// openReads
	rs  readSide
	met *httpapi.Metrics
	hub *httpapi.Hub
	// openProviders
	w       world
	demoSim interface {
		demo.Simulator
		slots.SimulatedProjects
	}
	seedDemo  bool
	demoWorld []sim.SlotFixture
	scope     slots.Scope
	// buildServices
	svc *slots.Service
	eng *jobs.Engine
	// startBackground
	rd   *readiness
	rec  *reconcile.Reconciler
	as   authSide
	base string
	wl   *waitlist.Service
	prs  *pullrequests.Service
	ins  *insights.Service
	// buildAPI, listen
	api    http.Handler
	srv    *http.Server
	served chan error
}

func (p *wiring) onClose(f func()) { p.closers = append(p.closers, f) }

func (p *wiring) closeAll() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// fatalErr is the damaged store's error that stopped the process, if any.
func (p *wiring) fatalErr() error {
	if cause := context.Cause(p.fatalCtx); errors.Is(cause, events.ErrCorrupt) {
		return cause
	}
	return nil
}

// openStores opens the event store behind the identity guard and checks
// the shared settings.
func (p *wiring) openStores(ctx context.Context) error {
	c, log := p.c, p.log
	raw, storeDesc, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	p.onClose(func() { raw.Close() })
	// Every part of the server writes through the guard, which stops all
	// writes once the store is not the one this process started on
	// (events/identity.go, docs/kurrent.md "Store identity").
	ident, created, err := events.EnsureIdentity(ctx, raw)
	if err != nil {
		return fmt.Errorf("the event store's identity: %w", err)
	}
	if created {
		log.Info("event store identity written", slog.String("store_id", ident.ID))
	}
	// The live streams end when the store changes: what they show is the
	// old log's (set once the hub exists).
	var endStreams atomic.Pointer[func()]
	guard := events.NewGuard(raw, ident, func(err error) {
		log.Error("event store changed under this process: writes stopped, /readyz fails, live streams end; restart once the store is the right one",
			slog.String("error", err.Error()))
		if f := endStreams.Load(); f != nil {
			(*f)()
		}
	})
	var store events.Store = guard
	if err := checkSettings(ctx, c, store, log); err != nil {
		return err
	}
	startHead, err := store.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the log's head: %w", err)
	}
	p.raw, p.storeDesc, p.ident, p.guard, p.store, p.startHead, p.endStreams = raw, storeDesc, ident, guard, store, startHead, &endStreams
	return nil
}

// startSupervisor sets up how background work runs (goRun), stops, and
// fails the process on a damaged store.
func (p *wiring) startSupervisor(ctx context.Context) error {
	log, raw := p.log, p.raw
	// Background work lives until bg is cancelled, after the graceful part
	// of the shutdown.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	p.onClose(func() { stopBG(); wg.Wait() })
	// A damaged store (events.ErrCorrupt) is permanent: no retry reads the
	// record differently. Background work that meets it fails the process
	// (during start-up too), with the store's message: file, position and
	// what to do.
	fatalCtx, fatal := context.WithCancelCause(ctx)
	p.onClose(func() { fatal(nil) })
	// The embedded store checks a big file's pages in the background and
	// takes no write until that passed; damage found there stops us too.
	damage, _ := raw.(interface {
		Damaged() <-chan struct{}
		Err() error
	})
	if damage != nil {
		go func() {
			select {
			case <-damage.Damaged():
				fatal(fmt.Errorf("event store: %w", damage.Err()))
			case <-fatalCtx.Done():
			}
		}()
	}
	// health: what the consumers could not do (backend/consumer): events
	// parked, and any background part that stopped, which fails /readyz.
	health := consumer.NewHealth(log)
	goRun := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(bg); err != nil && bg.Err() == nil {
				log.Error(name+" stopped", slog.String("error", err.Error()))
				health.Stop(name, err)
				if errors.Is(err, events.ErrCorrupt) {
					fatal(fmt.Errorf("%s: %w", name, err))
				}
			}
		}()
	}
	p.wg, p.fatalCtx, p.fatal, p.damage, p.health, p.goRun = &wg, fatalCtx, fatal, damage, health, goRun
	return nil
}

// openReads opens the read models and the live stream's hub, and waits
// until they caught up with the log's head at start.
func (p *wiring) openReads(ctx context.Context) error {
	c, log, store, ident, startHead, goRun := p.c, p.log, p.store, p.ident, p.startHead, p.goRun
	rs, err := openReadSide(ctx, c, store, func(err error) {
		log.Warn("read model: retrying after error", slog.String("error", err.Error()))
	})
	if err != nil {
		return err
	}
	p.onClose(rs.close)
	if pg, ok := rs.reads.(*postgres.Store); ok {
		// A shared read model built from another log must not take this
		// one's events, nor answer for it.
		bound, err := pg.BindStore(ctx, ident.ID)
		if err != nil {
			return err
		}
		if bound != ident.ID {
			return &ConfigError{Setting: setting("read-model"), Problem: fmt.Sprintf(
				"the PostgreSQL read model %s was built from event store %s, this event store is %s (wiped or replaced?): rebuild it with `slotkeeper replay` (every server stopped)",
				redact(c.ReadModel), bound, ident.ID)}
		}
	}
	// The memory read model (with PostgreSQL read models: the one that
	// feeds this process's live stream) starts from its snapshot beside
	// the embedded store, not from position 0 (issue 13).
	if m, ok := rs.feedView.(*memory.Store); ok && c.Events == "" {
		stop := keepSnapshot(ctx, m, filepath.Join(c.Data, snapshotFile), log, goRun)
		p.onClose(stop)
	}
	met := httpapi.NewMetrics()
	hub := httpapi.NewHub(httpapi.HubOptions{
		Heartbeat: c.Heartbeat, History: c.SSEHistory, WriteTimeout: c.SSEWriteTimeout,
		MaxClients: c.SSEMaxClients, MaxClientsPerIP: c.SSEMaxPerIP, LiveFrom: startHead,
		// A browser's watchdog gives up after two heartbeats; let it see
		// the 503 rather than time out first.
		ResumeWait: min(c.SSEResumeWait, c.Heartbeat),
		// Tells an id of another log (a wiped or replaced store) from one
		// this process has not projected yet.
		LogHead: store.Head,
	}, met, log)
	p.rs, p.met, p.hub = rs, met, hub
	closeHub := hub.Close
	p.endStreams.Store(&closeHub)
	followed := make(chan struct{})
	followFailed := make(chan error, 1)
	goRun("live stream feed", func(ctx context.Context) error {
		err := hub.Follow(ctx, rs.feed, rs.feedView, followed)
		followFailed <- err
		return err
	})
	select {
	case <-followed:
	case err := <-followFailed:
		return fmt.Errorf("start the live stream: %w", err)
	case <-ctx.Done():
		return errStopped
	}
	for _, r := range rs.runners {
		goRun("read model", r.Run)
	}
	t0 := time.Now()
	if err := rs.feed.WaitFor(p.fatalCtx, startHead); err != nil {
		if err := p.fatalErr(); err != nil {
			return err
		}
		return errStopped
	}
	log.Info("read model caught up", slog.Any("position", startHead), slog.Duration("took", time.Since(t0)), slog.String("events", p.storeDesc))
	return nil
}

// openProviders starts the simulators or connects (and checks) the real
// providers, seeds the demo pool's resources on a fresh log, and settles
// the scope slots may name.
func (p *wiring) openProviders(ctx context.Context) error {
	c, log, rs, startHead := p.c, p.log, p.rs, p.startHead
	// The demo pool is seeded, and the simulators' state cleared, when the
	// log holds no slot yet: account and token events (e.g. from
	// `slotkeeper admin create-token` before the first start) do not count.
	noSlots := startHead == 0
	if list, err := rs.reads.ListSlots(ctx); err == nil {
		noSlots = len(list) == 0
	}
	w, err := openWorld(ctx, c, noSlots)
	if err != nil {
		return err
	}
	p.w = w
	p.onClose(w.close)
	if w.sim == nil {
		// Real providers: the doctor's checks first (doctor.go).
		if err := startupChecks(ctx, c, w, slotTemplates(ctx, rs.reads), log); err != nil {
			return err
		}
	}

	// The demo runs on simulators, embedded or in their own process.
	switch {
	case w.sim != nil:
		p.demoSim = w.sim
	case w.remote != nil:
		p.demoSim = w.remote
	}
	demoSim := p.demoSim
	seedDemo := demoSim != nil && c.Demo && noSlots
	var demoWorld []sim.SlotFixture
	if seedDemo {
		// The pool's resources first: the scope is made of them.
		if demoWorld, err = demo.SeedWorld(demoSim, demo.Pool); err != nil {
			return fmt.Errorf("seed the demo pool: %w", err)
		}
	}
	scope := slots.Scope{CoolifyProjects: scopeList(c.CoolifyProjects), BitbucketProjects: scopeList(c.BitbucketProjects)}
	if demoSim != nil && c.Demo {
		// The demo's scope follows its simulators (issue 38): every project
		// they hold at the moment of a check — the pool's, and a world
		// seeded through /api/sim/slots later — plus whatever the flags add.
		scope.Simulated = demoSim
	}
	coolRestricted, bbRestricted := scope.Restricted()
	if !coolRestricted {
		log.Warn("no --coolify-projects: slots may name any Coolify project the token can reach")
	}
	if !bbRestricted {
		log.Warn("no --bitbucket-projects: slots and promotes may name any Bitbucket project the token can reach")
	}
	p.seedDemo, p.demoWorld, p.scope = seedDemo, demoWorld, scope
	return nil
}

// buildServices starts the command side: the slot service and its deadline
// scheduler, backups, the job engine, the webhook notifier; then registers
// the demo pool on a fresh log.
func (p *wiring) buildServices(ctx context.Context) error {
	c, log, store, raw, w, rs, met, health, goRun, scope := p.c, p.log, p.store, p.raw, p.w, p.rs, p.met, p.health, p.goRun, p.scope
	// Commands and the engine share one cache of folded slots (issue 13).
	slotCache := slots.NewSlotCache(store, 0)
	svc := slots.NewService(store, slots.Config{
		Grace: c.Grace, DeadlineReset: c.Deadlines, Logger: log, Scope: scope, SlotCache: slotCache, Health: health,
		Resources: providercheck.Checker{PaaS: w.deps.PaaS, GitHost: w.deps.GitHost},
	})
	p.svc = svc
	goRun("deadline scheduler", svc.RunDeadlines)
	startBackups(c, raw, met.Registry, log, goRun)
	var eng *jobs.Engine
	if c.Workers > 0 {
		eng = jobs.NewEngine(store, w.deps, jobs.Config{
			Workers: c.Workers, StepTimeout: c.StepTimeout, JobTimeout: c.JobTimeout, Lease: c.Lease, Logger: log,
			SlotCache: slotCache,
		})
		goRun("job engine", eng.Run)
	}
	p.eng = eng

	if c.WebhookURL != "" {
		base := c.BaseURL
		if base == "" {
			base = "http://" + c.Addr
		}
		if c.WebhookSecret == "" {
			log.Warn("no --webhook-secret: webhook bodies are not signed")
		}
		n := notify.New(store, notify.Config{WebhookURL: c.WebhookURL, Secret: c.WebhookSecret, BaseURL: base, Logger: log})
		goRun("webhook notifier", n.Run)
	}

	if p.seedDemo {
		if err := demo.Register(ctx, svc, p.demoWorld, demo.Pool, time.Now()); err != nil {
			return fmt.Errorf("seed the demo pool: %w", err)
		}
		log.Info("demo pool seeded", slog.Int("slots", len(demo.Pool)))
		// Answer the first request with the pool in place.
		if head, err := store.Head(ctx); err == nil {
			if err := rs.waiter.WaitFor(ctx, head); err != nil {
				return errStopped
			}
			if err := rs.feed.WaitFor(ctx, head); err != nil {
				return errStopped
			}
		}
	}
	return nil
}

// startBackground starts what follows the log beside the commands:
// readiness probes, the reconciler, the account directory, the waitlist,
// insights, and the memory release after catch-up.
func (p *wiring) startBackground(ctx context.Context) error {
	c, log, store, raw, guard, ident, w, rs, met, health, goRun, scope := p.c, p.log, p.store, p.raw, p.guard, p.ident, p.w, p.rs, p.met, p.health, p.goRun, p.scope
	svc, eng, startHead, stdout := p.svc, p.eng, p.startHead, p.stdout
	// Readiness: the store takes writes and every provider answers an
	// authenticated probe; the first round runs now, so start-up logs what
	// was reached, then in the background.
	rd := &readiness{
		store: store, interval: c.ReadyInterval, log: log,
		probes: append([]probe{storeProbe(raw), identityProbe(guard), settingsProbe(c, store)}, providerProbes(w.deps.PaaS, w.deps.GitHost, scope, registeredTemplates(rs.reads, slots.NewSlotCache(store, 0)))...),
	}
	if c.ReadModel != "memory" {
		rd.probes = append(rd.probes, sharedReadModelProbe(rs.reads, store, ident.ID))
	}
	rd.round(ctx)
	goRun("readiness probes", rd.run)
	p.rd = rd

	// After the demo seed: the demo's scope is its own slots'.
	p.rec = startReconciler(ctx, c, store, rs.reads, w, scope, met.Registry, log, goRun)

	as, err := openAuth(ctx, c, store, w.sim != nil && c.Demo, stdout, log)
	if err != nil {
		return err
	}
	p.as = as
	goRun("account directory", as.svc.Follow)
	base := c.BaseURL
	if base == "" {
		base = "http://" + c.Addr
	}
	p.base = base

	wl := startWaitlist(c, store, svc, base, met.Registry, log, health, goRun)
	p.prs = startPullRequests(ctx, c, store, svc, w.deps.GitHost, base, p.demoSim != nil && c.Demo, p.seedDemo, log, goRun)
	ins := startInsights(store, log, goRun)
	p.wl, p.ins = wl, ins
	caughtUp := []func(context.Context) error{chanDone(wl.CaughtUp()), chanDone(ins.CaughtUp())}
	if eng != nil {
		caughtUp = append(caughtUp, func(ctx context.Context) error { return eng.WaitApplied(ctx, startHead) })
	}
	goRun("memory release", func(ctx context.Context) error { return releaseAfterCatchUp(ctx, caughtUp, log) })
	return nil
}

// buildAPI builds the HTTP API over everything started so far.
func (p *wiring) buildAPI(ctx context.Context) error {
	c, log, store, raw, guard, w, rs, met, health, hub := p.c, p.log, p.store, p.raw, p.guard, p.w, p.rs, p.met, p.health, p.hub
	svc, rec, wl, ins, as, base, rd, damage, startHead := p.svc, p.rec, p.wl, p.ins, p.as, p.base, p.rd, p.damage, p.startHead
	var spa fs.FS
	if sub, err := fs.Sub(frontend.Dist, "dist"); err == nil {
		spa = sub
	}
	deps := httpapi.Deps{
		Commands: svc, Reads: rs.reads, Log: store, Waiter: rs.waiter, Hub: hub, Metrics: met, Logger: log, SPA: spa,
		Reconcile: reconcileAPI{r: rec, links: linksOf(c, w)}, ReconcileActions: reconcile.Actions{Slots: svc, Orphans: rec}, Backup: onlineBackup(c, raw), Waitlist: wl,
		Insights: ins, PullRequests: p.prs,
		Auth: as.svc, AutoLogin: as.autoLogin,
		Security:          httpapi.Security{BaseURL: base, ListenAddr: c.Addr, TrustedProxies: c.Auth.proxies},
		Links:             linksOf(c, w),
		Limits:            httpapi.JobLimits{StepTimeoutMS: c.StepTimeout.Milliseconds(), JobTimeoutMS: c.JobTimeout.Milliseconds()},
		CommandsPerSecond: orNone(c.Auth.CommandsPerSec), CommandBurst: int(3*c.Auth.CommandsPerSec) + 1,
		MaxStreamsPerSubject: int(orNone(float64(c.Auth.StreamsPerSubj))),
		Consumers:            health.Report,
		StoreChanged:         guard.Err,
		Writable: func() error {
			if err := guard.Err(); err != nil {
				return err
			}
			if why := rd.failingReason(storeProbeName); why != "" {
				return fmt.Errorf("%w: %s", events.ErrUnavailable, why)
			}
			return nil
		},
		Ready: func(ctx context.Context) error {
			if err := guard.Err(); err != nil {
				return err
			}
			if err := rd.err(); err != nil {
				return err
			}
			if err := health.Err(); err != nil {
				return err
			}
			if damage != nil && damage.Err() != nil {
				return damage.Err()
			}
			p, err := rs.reads.Position(ctx)
			if err != nil {
				return err
			}
			if p < startHead {
				return fmt.Errorf("read model at %d of %d", p, startHead)
			}
			return nil
		},
	}
	switch {
	case w.sim != nil:
		deps.Sim = w.sim.ControlHandler()
	case w.remote != nil:
		deps.Sim = w.remote.controlProxy()
	}
	if o, err := c.Auth.oidc(base, as.svc.Dir); err != nil {
		return err
	} else if o != nil {
		deps.OIDC = o
	}
	api, err := httpapi.New(deps)
	if err != nil {
		return err
	}
	p.api = api
	return nil
}

// listen serves the API on --addr and tells ready the address.
func (p *wiring) listen(ready chan<- string) error {
	c, log := p.c, p.log
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return &ConfigError{Setting: setting("addr"), Problem: err.Error()}
	}
	srv := &http.Server{
		Handler:           p.api,
		ConnContext:       httpapi.ConnContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(httpapi.JSONErrors(ln)) }()
	p.srv, p.served = srv, served
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(p.stdout, "slotkeeper: serving on %s (events: %s, read model: %s, providers: %s)\n", url, p.storeDesc, c.ReadModel, providersDesc(p.w))
	if ready != nil {
		ready <- ln.Addr().String()
	}
	return nil
}

// waitForStop waits for the end: ctx ended (a signal), or background work
// met a damaged store (failed); err if the HTTP server stopped by itself.
func (p *wiring) waitForStop() (failed, err error) {
	select {
	case <-p.fatalCtx.Done():
		// ctx ended (a signal), or background work met a damaged store.
		return p.fatalErr(), nil
	case err := <-p.served:
		return nil, fmt.Errorf("http server: %w", err)
	}
}

// shutdown stops gracefully: stop claiming and fence running attempts
// first, so each ends with an honest terminal event that the streams still
// carry; then end the streams and the requests; then the background work
// (closeAll). /readyz answers 503 at once and for --drain-delay while
// everything still works, so load balancers notice and stop sending before
// the listeners close.
func (p *wiring) shutdown(ctx context.Context) error {
	c, log, eng, rs, hub, srv, store := p.c, p.log, p.eng, p.rs, p.hub, p.srv, p.store
	log.Info("shutting down: draining", slog.Duration("drain_delay", c.DrainDelay))
	p.rd.draining.Store(true)
	if eng != nil {
		eng.Drain() // no new claim from here on: the other processes take them
	}
	if c.DrainDelay > 0 {
		t := time.NewTimer(c.DrainDelay)
		select {
		case <-t.C:
		case err := <-p.served:
			t.Stop()
			return fmt.Errorf("http server: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.ShutdownTimeout)
	defer cancel()
	if eng != nil {
		if err := eng.Stop(sctx); err != nil {
			log.Warn("job engine did not stop cleanly", slog.String("error", err.Error()))
		}
	}
	if head, err := store.Head(sctx); err == nil {
		_ = rs.feed.WaitFor(sctx, head) // let the streams carry the last events
		waitHub(sctx, hub, head)
	}
	hub.Close()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", slog.String("error", err.Error()))
		srv.Close()
	}
	return nil
}

// releaseAfterCatchUp waits until every consumer of the log caught up with
// the head it started at, then hands the pages of their catch-up garbage
// back to the system. The Go runtime returns freed memory only slowly; a
// restart after a long stop (or a first start on a big log) would otherwise
// keep the high-water mark of folding it all at once as its private memory
// for minutes (issue 13: RssAnon).
func releaseAfterCatchUp(ctx context.Context, waits []func(context.Context) error, log *slog.Logger) error {
	t0 := time.Now()
	for _, w := range waits {
		if err := w(ctx); err != nil {
			return nil // shutting down
		}
	}
	debug.FreeOSMemory()
	log.Info("consumers caught up; catch-up memory returned", slog.Duration("took", time.Since(t0)))
	return nil
}

// chanDone waits for ch to close, or for ctx.
func chanDone(ch <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitHub waits (bounded by ctx) until the hub has published pos.
func waitHub(ctx context.Context, hub *httpapi.Hub, pos events.Position) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for hub.Head() < pos {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func providersDesc(w world) string {
	if w.sim != nil {
		return "simulators " + w.sim.CoolifyURL() + " " + w.sim.BitbucketURL()
	}
	if w.remote != nil {
		return "simulators at " + w.remote.base
	}
	return "real Coolify and Bitbucket"
}

// orNone maps a flag's 0 ("no limit") to the API's negative "none".
func orNone(v float64) float64 {
	if v == 0 {
		return -1
	}
	return v
}

// snapshotFile is the memory read model's snapshot beside the embedded
// store's file (docs/projections.md).
const snapshotFile = "readmodel.snapshot"

// Snapshot cadence: every snapshotEvery, when the read model moved at
// least snapshotMinEvents positions; and once more at shutdown.
const (
	snapshotEvery     = time.Minute
	snapshotMinEvents = 10_000
)

// keepSnapshot loads the read model's snapshot (a restart then replays
// only the log after it), writes a new one now and then in the background,
// and returns the function that writes the last one at shutdown. A
// snapshot that is damaged or not of this log is ignored with a warning.
func keepSnapshot(ctx context.Context, m *memory.Store, path string, log *slog.Logger, goRun func(string, func(context.Context) error)) func() {
	// A process killed while writing one leaves its temporary file (the
	// snapshot itself is replaced by a rename, so it is the old one or the
	// new one, whole); nothing else writes beside this store's file.
	if left, _ := filepath.Glob(path + ".tmp*"); len(left) > 0 {
		for _, f := range left {
			_ = os.Remove(f)
		}
		log.Info("read model snapshot: removed what an interrupted write left", slog.Int("files", len(left)))
	}
	// Decoding the snapshot allocates its whole size several times over
	// while the heap is still tiny, so the collector would run many times
	// for nothing; it gets room for the load (the memory is handed back
	// once every consumer caught up: releaseAfterCatchUp).
	gc := debug.SetGCPercent(800)
	pos, why, err := m.LoadSnapshot(ctx, path)
	debug.SetGCPercent(gc)
	switch {
	case err != nil:
		log.Warn("read model snapshot not loaded", slog.String("error", err.Error()))
	case pos > 0:
		log.Info("read model snapshot loaded", slog.Any("position", pos))
	case why != "no snapshot":
		log.Warn("read model snapshot ignored; replaying the log", slog.String("why", why))
	}
	var mu sync.Mutex
	written := pos
	write := func(ctx context.Context, minEvents events.Position) {
		mu.Lock()
		defer mu.Unlock()
		cur, _ := m.Position(ctx)
		if cur < written+minEvents || cur == written {
			return
		}
		at, err := m.WriteSnapshot(ctx, path)
		if err != nil {
			log.Warn("read model snapshot not written", slog.String("error", err.Error()))
			return
		}
		written = at
	}
	goRun("read model snapshots", func(ctx context.Context) error {
		clock.Every(ctx, clock.Real(), snapshotEvery, func(ctx context.Context) { write(ctx, snapshotMinEvents) })
		return nil
	})
	return func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		write(c, 1)
	}
}
