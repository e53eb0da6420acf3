package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/demo"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/backend/providercheck"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/frontend"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

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

// serveUntilDone wires the server in named steps, each starting its
// services (backend/lifecycle) in order, and runs it until ctx ends (or
// background work meets a damaged store); then it drains and stops the
// services in reverse. Each step only wires: the rules live in the
// packages it starts.
//
// The order is the shutdown's, read backwards: the job engine starts last
// and stops first (it stops claiming and fences its running attempts, each
// ending with an honest terminal event), then the API, whose live streams
// carry those last events before they end, then the read model's last
// snapshot, what follows the log (each consumer saves its checkpoint), the
// providers, the read models, and the store.
func serveUntilDone(ctx context.Context, c Config, stdout, stderr io.Writer, ready chan<- string) error {
	log := newLogger(c, stderr)
	// A damaged store (events.ErrCorrupt) is permanent: no retry reads the
	// record differently. Background work that meets it fails the process
	// (during start-up too), with the store's message: file, position and
	// what to do.
	fatalCtx, fatal := context.WithCancelCause(ctx)
	defer fatal(nil)
	p := &wiring{c: c, stdout: stdout, log: log, fatalCtx: fatalCtx, fatal: fatal, health: consumer.NewHealth(log)}
	p.svcs = &lifecycle.List{Log: log, OnExit: p.stoppedByItself}
	defer p.stop(ctx) // what a failed start (or a failed server) left started
	for _, step := range []func(context.Context) error{
		p.openLog, p.openReads, p.openProviders, p.startCommands, p.seedDemo, p.startFollowers, p.startConsumers, p.startAPI, p.startEngine,
	} {
		if err := step(ctx); err != nil {
			if errors.Is(err, errStopped) {
				return nil // interrupted during start
			}
			return err
		}
	}
	fmt.Fprintf(p.stdout, "slotkeeper: serving on %s (events: %s, read model: %s, providers: %s)\n",
		"http://"+p.addr, p.storeDesc, c.ReadModel, providersDesc(p.w))
	if ready != nil {
		ready <- p.addr
	}
	failed, err := p.waitForStop()
	if err != nil {
		return err
	}
	if err := p.drain(); err != nil {
		return err
	}
	p.stop(ctx)
	return failed
}

// errStopped ends the start-up without an error: ctx ended during it.
var errStopped = errors.New("stopped during start")

// wiring is what serveUntilDone's steps hand on to the next ones.
type wiring struct {
	c      Config
	stdout io.Writer
	log    *slog.Logger
	svcs   *lifecycle.List // started in order, stopped in reverse
	// fatalCtx ends with ctx (a signal), or with a damaged store (fatal).
	fatalCtx context.Context
	fatal    context.CancelCauseFunc
	health   *consumer.Health // the background parts that stopped, parked events
	deps     httpapi.Deps     // the API's parts, filled in by the steps

	// openLog
	raw        events.Store  // the store itself
	guard      *events.Guard // the store every part writes through
	ident      events.Identity
	storeDesc  string
	startHead  events.Position
	endStreams atomic.Pointer[func()] // ends the live streams when the store changes
	damage     storeDamage            // nil when the store checks nothing in the background
	// openReads, openProviders
	rs        readSide
	snapshots *lifecycle.Loop // the memory read model's snapshot writer; nil without one
	w         world
	scope     slots.Scope
	demo      demoSeed
	// startCommands
	svc *slots.Service
	eng *jobs.Engine // nil with --workers 0
	// startAPI
	api  *httpapi.Listener
	addr string
}

// storeDamage is the embedded store's background check of a big file's
// pages: it takes no write until that passed.
type storeDamage interface {
	Damaged() <-chan struct{}
	Err() error
}

// demoSeed is the demo pool to register on a fresh log.
type demoSeed struct {
	sim   demoSimulator
	seed  bool
	world []sim.SlotFixture
}

// start starts one service and appends it to the list.
func (p *wiring) start(ctx context.Context, name string, svc lifecycle.Service) error {
	return p.svcs.Start(ctx, name, svc)
}

// loop starts run as a service that runs until the shutdown stops it.
func (p *wiring) loop(ctx context.Context, name string, run func(context.Context) error) error {
	return p.start(ctx, name, &lifecycle.Loop{Run: run})
}

// stoppedByItself: a background part that stopped fails /readyz (health),
// and on a damaged store the process.
func (p *wiring) stoppedByItself(name string, err error) {
	p.log.Error(name+" stopped", slog.String("error", err.Error()))
	p.health.Stop(name, err)
	if errors.Is(err, events.ErrCorrupt) {
		p.fatal(fmt.Errorf("%s: %w", name, err))
	}
}

// fatalErr is the damaged store's error that stopped the process, if any.
func (p *wiring) fatalErr() error {
	if cause := context.Cause(p.fatalCtx); errors.Is(cause, events.ErrCorrupt) {
		return cause
	}
	return nil
}

// openLog opens the event store behind the identity guard and checks the
// shared settings.
func (p *wiring) openLog(ctx context.Context) error {
	c, log := p.c, p.log
	raw, storeDesc, err := openStore(ctx, c, log)
	if err != nil {
		return err
	}
	if err := p.start(ctx, "event store", lifecycle.OnClose(func() { raw.Close() })); err != nil {
		return err
	}
	// The embedded store checks a big file's pages in the background and
	// takes no write until that passed; damage found there stops us too.
	if damage, ok := raw.(storeDamage); ok {
		p.damage = damage
		if err := p.loop(ctx, "store check", func(ctx context.Context) error {
			select {
			case <-damage.Damaged():
				p.fatal(fmt.Errorf("event store: %w", damage.Err()))
			case <-ctx.Done():
			}
			return nil
		}); err != nil {
			return err
		}
	}
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
	guard := events.NewGuard(raw, ident, func(err error) {
		log.Error("event store changed under this process: writes stopped, /readyz fails, live streams end; restart once the store is the right one",
			slog.String("error", err.Error()))
		if f := p.endStreams.Load(); f != nil {
			(*f)()
		}
	})
	if err := checkSettings(ctx, c, guard, log); err != nil {
		return err
	}
	startHead, err := guard.Head(ctx)
	if err != nil {
		return fmt.Errorf("read the log's head: %w", err)
	}
	p.raw, p.storeDesc, p.ident, p.guard, p.startHead = raw, storeDesc, ident, guard, startHead
	return nil
}

// openReads opens the read models and the live stream's hub, and waits
// until they caught up with the log's head at start.
func (p *wiring) openReads(ctx context.Context) error {
	c, log, store := p.c, p.log, p.guard
	rs, err := openReadSide(ctx, c, store, func(err error) {
		log.Warn("read model: retrying after error", slog.String("error", err.Error()))
	})
	if err != nil {
		return err
	}
	p.rs = rs
	if err := p.start(ctx, "read models", lifecycle.OnClose(rs.close)); err != nil {
		return err
	}
	if err := checkBinding(ctx, c, rs, p.ident.ID); err != nil {
		return err
	}
	// The memory read model (with PostgreSQL read models: the one that
	// feeds this process's live stream) starts from its snapshot beside
	// the embedded store, not from position 0 (issue 13).
	if m, ok := rs.feedView.(*memory.Store); ok && c.Events == "" {
		snapshots := memory.NewSnapshots(m, filepath.Join(c.Data, snapshotFile), log)
		snapshots.Load(ctx)
		p.snapshots = snapshotService(snapshots)
	}
	met := httpapi.NewMetrics()
	hub := newHub(c, store, p.startHead, met, log)
	p.deps.Reads, p.deps.Waiter, p.deps.Metrics, p.deps.Hub = rs.reads, rs.waiter, met, hub
	closeHub := hub.Close
	p.endStreams.Store(&closeHub)
	followed := make(chan struct{})
	if err := p.start(ctx, "live stream feed", &lifecycle.Loop{
		Run:   func(ctx context.Context) error { return hub.Follow(ctx, rs.feed, rs.feedView, followed) },
		Ready: followed,
	}); err != nil {
		if ctx.Err() != nil {
			return errStopped
		}
		return fmt.Errorf("start the live stream: %w", err)
	}
	for _, r := range rs.runners {
		if err := p.loop(ctx, "read model", r.Run); err != nil {
			return err
		}
	}
	t0 := time.Now()
	if err := rs.feed.WaitFor(p.fatalCtx, p.startHead); err != nil {
		if err := p.fatalErr(); err != nil {
			return err
		}
		return errStopped
	}
	log.Info("read model caught up", slog.Any("position", p.startHead), slog.Duration("took", time.Since(t0)), slog.String("events", p.storeDesc))
	return nil
}

// openProviders starts the simulators or connects (and checks) the real
// providers, seeds the demo pool's resources on a fresh log, and settles
// the scope slots may name.
func (p *wiring) openProviders(ctx context.Context) error {
	c, log, rs := p.c, p.log, p.rs
	// The demo pool is seeded, and the simulators' state cleared, when the
	// log holds no slot yet: account and token events (e.g. from
	// `slotkeeper admin create-token` before the first start) do not count.
	noSlots := p.startHead == 0
	if list, err := rs.reads.ListSlots(ctx); err == nil {
		noSlots = len(list) == 0
	}
	w, err := openWorld(ctx, c, noSlots)
	if err != nil {
		return err
	}
	p.w = w
	if err := p.start(ctx, "providers", lifecycle.OnClose(w.close)); err != nil {
		return err
	}
	if w.sim == nil {
		// Real providers: the doctor's checks first (doctor.go).
		if err := startupChecks(ctx, c, w, slotTemplates(ctx, rs.reads), log); err != nil {
			return err
		}
	}

	p.demo.sim = w.demoSim()
	p.demo.seed = p.demo.sim != nil && c.Demo && noSlots
	if p.demo.seed {
		// The pool's resources first: the scope is made of them.
		if p.demo.world, err = demo.SeedWorld(p.demo.sim, demo.Pool); err != nil {
			return fmt.Errorf("seed the demo pool: %w", err)
		}
	}
	p.scope = slots.Scope{CoolifyProjects: scopeList(c.CoolifyProjects), BitbucketProjects: scopeList(c.BitbucketProjects)}
	if p.demo.sim != nil && c.Demo {
		// The demo's scope follows its simulators (issue 38): every project
		// they hold at the moment of a check — the pool's, and a world
		// seeded through /api/sim/slots later — plus whatever the flags add.
		p.scope.Simulated = p.demo.sim
	}
	coolRestricted, bbRestricted := p.scope.Restricted()
	if !coolRestricted {
		log.Warn("no --coolify-projects: slots may name any Coolify project the token can reach")
	}
	if !bbRestricted {
		log.Warn("no --bitbucket-projects: slots and promotes may name any Bitbucket project the token can reach")
	}
	return nil
}

// startCommands starts the command side: the slot service and its deadline
// scheduler, backups, the webhook notifier; it builds the job engine,
// started last (startEngine).
func (p *wiring) startCommands(ctx context.Context) error {
	c, log, store, w := p.c, p.log, p.guard, p.w
	// Commands and the engine share one cache of folded slots (issue 13).
	slotCache := slots.NewSlotCache(store, 0)
	svc := slots.NewService(store, slots.Config{
		Grace: c.Grace, DeadlineReset: c.Deadlines, Logger: log, Scope: p.scope, SlotCache: slotCache, Health: p.health,
		Resources: providercheck.Checker{PaaS: w.deps.PaaS, GitHost: w.deps.GitHost},
	})
	p.svc, p.deps.Commands = svc, svc
	if err := p.loop(ctx, "deadline scheduler", svc.RunDeadlines); err != nil {
		return err
	}
	if b := backupService(c, p.raw, p.deps.Metrics.Registry, log); b != nil {
		if err := p.start(ctx, "scheduled backups", b); err != nil {
			return err
		}
	}
	if c.Workers > 0 {
		p.eng = jobs.NewEngine(store, w.deps, jobs.Config{
			Workers: c.Workers, StepTimeout: c.StepTimeout, JobTimeout: c.JobTimeout, Lease: c.Lease, Logger: log,
			SlotCache: slotCache,
		})
	}
	if c.WebhookURL != "" {
		if c.WebhookSecret == "" {
			log.Warn("no --webhook-secret: webhook bodies are not signed")
		}
		n := notify.New(store, notify.Config{WebhookURL: c.WebhookURL, Secret: c.WebhookSecret, BaseURL: baseURL(c), Logger: log})
		if err := p.loop(ctx, "webhook notifier", n.Run); err != nil {
			return err
		}
	}
	return nil
}

// seedDemo registers the demo pool on a fresh log and waits until the read
// models show it, so the first request is answered with the pool in place.
func (p *wiring) seedDemo(ctx context.Context) error {
	if !p.demo.seed {
		return nil
	}
	svc, log, store := p.svc, p.log, p.guard
	if err := demo.Register(ctx, svc, p.demo.world, demo.Pool, time.Now()); err != nil {
		return fmt.Errorf("seed the demo pool: %w", err)
	}
	log.Info("demo pool seeded", slog.Int("slots", len(demo.Pool)))
	if head, err := store.Head(ctx); err == nil {
		if err := p.rs.waiter.WaitFor(ctx, head); err != nil {
			return errStopped
		}
		if err := p.rs.feed.WaitFor(ctx, head); err != nil {
			return errStopped
		}
	}
	return nil
}

// startFollowers starts what follows the log beside the commands:
// readiness probes, the reconciler, the account directory.
func (p *wiring) startFollowers(ctx context.Context) error {
	c, log, store, w, rs, reg := p.c, p.log, p.guard, p.w, p.rs, p.deps.Metrics.Registry
	// Readiness: the store takes writes and every provider answers an
	// authenticated probe; the first round runs at its start, so start-up
	// logs what was reached, then in the background.
	rd := &readiness{
		store: store, interval: c.ReadyInterval, log: log,
		probes: append([]probe{storeProbe(p.raw), identityProbe(p.guard), settingsProbe(c, store)}, providerProbes(w.deps.PaaS, w.deps.GitHost, p.scope, registeredTemplates(rs.reads, slots.NewSlotCache(store, 0)))...),
	}
	if c.ReadModel != "memory" {
		rd.probes = append(rd.probes, sharedReadModelProbe(rs.reads, store, p.ident.ID))
	}
	if err := p.start(ctx, "readiness probes", rd.service()); err != nil {
		return err
	}
	p.deps.Writable, p.deps.Ready = readyChecks(rd, p.guard, p.health, p.damage, rs.reads, p.startHead)

	// After the demo seed: the demo's scope is its own slots'.
	rec, recSvc := newReconciler(ctx, c, store, rs.reads, w, p.scope, reg, log)
	if err := p.start(ctx, "reconciler", recSvc); err != nil {
		return err
	}
	p.deps.Reconcile = reconcileAPI{r: rec, links: linksOf(c, w)}
	p.deps.ReconcileActions = reconcile.Actions{Slots: p.svc, Orphans: rec}

	as, err := openAuth(ctx, c, store, w.sim != nil && c.Demo, p.stdout, log)
	if err != nil {
		return err
	}
	p.deps.Auth, p.deps.AutoLogin = as.svc, as.autoLogin
	return p.loop(ctx, "account directory", as.svc.Follow)
}

// startConsumers starts the log's other consumers: the waitlist, the
// pull-request driver, insights; then the memory release after their
// catch-up and the read model's snapshot writer.
func (p *wiring) startConsumers(ctx context.Context) error {
	c, log, store, reg := p.c, p.log, p.guard, p.deps.Metrics.Registry
	wl, wlSvc := newWaitlist(c, store, p.svc, baseURL(c), reg, log, p.health)
	if err := p.start(ctx, "waitlist", wlSvc); err != nil {
		return err
	}
	prs, prsSvc := newPullRequests(c, store, p.svc, p.w.deps.GitHost, baseURL(c), p.demo.sim != nil && c.Demo, p.demo.seed, log, p.health)
	if err := p.start(ctx, "pull requests", prsSvc); err != nil {
		return err
	}
	ins := insights.New(store, nil, insights.Config{Logger: log})
	if err := p.loop(ctx, "insights", ins.Run); err != nil {
		return err
	}
	p.deps.Waitlist, p.deps.PullRequests, p.deps.Insights = wl, prs, ins
	// Once every consumer caught up with the head at start, the memory
	// their catch-up took goes back to the system.
	caughtUp := []func(context.Context) error{consumer.Closed(wl.CaughtUp()), consumer.Closed(ins.CaughtUp())}
	if eng := p.eng; eng != nil {
		caughtUp = append(caughtUp, func(ctx context.Context) error { return eng.WaitApplied(ctx, p.startHead) })
	}
	if err := p.loop(ctx, "memory release", func(ctx context.Context) error { return consumer.ReleaseAfterCatchUp(ctx, caughtUp, log) }); err != nil {
		return err
	}
	// The last snapshot is written when the API has stopped, before what
	// follows the log stops and checkpoints: a client that resumes its
	// live stream on the next start is then replayed those checkpoints,
	// as changes, from the log.
	if p.snapshots != nil {
		return p.start(ctx, "read model snapshots", p.snapshots)
	}
	return nil
}

// startAPI builds the HTTP API over everything started so far and serves
// it on --addr.
func (p *wiring) startAPI(ctx context.Context) error {
	c, w, d := p.c, p.w, &p.deps
	if sub, err := fs.Sub(frontend.Dist, "dist"); err == nil {
		d.SPA = sub
	}
	d.Log, d.Logger, d.Backup = p.guard, p.log, onlineBackup(c, p.raw)
	d.Security = httpapi.Security{BaseURL: baseURL(c), ListenAddr: c.Addr, TrustedProxies: c.Auth.proxies}
	d.Links = linksOf(c, w)
	d.Limits = httpapi.JobLimits{StepTimeoutMS: c.StepTimeout.Milliseconds(), JobTimeoutMS: c.JobTimeout.Milliseconds()}
	d.CommandsPerSecond, d.CommandBurst = orNone(c.Auth.CommandsPerSec), int(3*c.Auth.CommandsPerSec)+1
	d.MaxStreamsPerSubject = int(orNone(float64(c.Auth.StreamsPerSubj)))
	d.Consumers, d.StoreChanged = p.health.Report, p.guard.Err
	d.WriteTimeout = c.WriteTimeout // the backup download's per-write deadline
	switch {
	case w.sim != nil:
		d.Sim = w.sim.ControlHandler()
	case w.remote != nil:
		d.Sim = w.remote.controlProxy()
	}
	if o, err := c.Auth.oidc(baseURL(c), d.Auth.Dir); err != nil {
		return err
	} else if o != nil {
		d.OIDC = o
	}
	api, err := httpapi.New(*d)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return &ConfigError{Setting: setting("addr"), Problem: err.Error()}
	}
	p.api = httpapi.NewListener(ln, httpapi.ListenerOptions{Handler: api, Logger: p.log, Hub: d.Hub, Feed: p.rs.feed, Head: p.guard.Head, WriteTimeout: c.WriteTimeout})
	if c.serving != nil {
		c.serving(p.api, *d)
	}
	p.addr = ln.Addr().String()
	return p.start(ctx, "HTTP server", p.api)
}

// startEngine starts the job engine, last: it stops first.
func (p *wiring) startEngine(ctx context.Context) error {
	if p.eng == nil {
		return nil
	}
	eng := p.eng
	return p.start(ctx, "job engine", &lifecycle.Loop{
		Run: eng.Run,
		// No new claim from the drain on: the other processes take them.
		OnDrain: eng.Drain,
		Halt:    eng.Stop,
	})
}

// waitForStop waits for the end: ctx ended (a signal), or background work
// met a damaged store (failed); err if the HTTP server stopped by itself.
func (p *wiring) waitForStop() (failed, err error) {
	select {
	case <-p.fatalCtx.Done():
		return p.fatalErr(), nil
	case <-p.api.Stopped():
		return nil, fmt.Errorf("http server: %w", p.api.ServeErr())
	}
}

// drain is the shutdown's first phase: /readyz answers 503 at once and the
// engine stops claiming, for --drain-delay while everything still works,
// so load balancers notice and stop sending before the listeners close.
func (p *wiring) drain() error {
	p.log.Info("shutting down: draining", slog.Duration("drain_delay", p.c.DrainDelay))
	p.svcs.Drain()
	if p.c.DrainDelay <= 0 {
		return nil
	}
	t := time.NewTimer(p.c.DrainDelay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-p.api.Stopped():
		return fmt.Errorf("http server: %w", p.api.ServeErr())
	}
}

// stop stops every started service in reverse order; --shutdown-timeout
// bounds the graceful parts.
func (p *wiring) stop(ctx context.Context) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.c.ShutdownTimeout)
	defer cancel()
	p.svcs.Stop(sctx)
}
