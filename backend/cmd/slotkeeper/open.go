package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/demo"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	gitpush "github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
)

// What serve opens from its configuration: the logger, the event store,
// the read models, the providers (serve.go wires them).

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
		return memory.NewWithLimits(store, memoryLimits(c)), func() {}, nil
	}
	pg, err := postgres.Open(ctx, c.ReadModel, postgres.Options{Log: store})
	if err != nil {
		return nil, nil, fmt.Errorf("open the PostgreSQL read model %s: %w", redact(c.ReadModel), err)
	}
	return pg, pg.Close, nil
}

// memoryLimits are the memory read model's limits the config sets (0,
// in a Config built in code, is the default).
func memoryLimits(c Config) memory.Limits {
	return memory.Limits{ClosedPRs: c.ClosedPRs, ClosedPRAge: c.ClosedPRAge}
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
	live := memory.NewWithLimits(store, memoryLimits(c))
	feed := projections.NewRunner(store, live, opt)
	return readSide{
		reads: target, waiter: projections.CheckpointWaiter{RM: target, Local: main}, feed: feed, feedView: live,
		runners: []*projections.Runner{feed, main}, close: closeRM,
	}, nil
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

// demoBuild is how long a simulated deployment builds in the demo.
const demoBuild = 3 * time.Second

// openWorld starts the simulators or connects the real providers. emptyLog
// says the log holds no event: simulator state left on disk then belongs to
// nothing (e.g. a demo seeding interrupted before its first event) and is
// removed, so the demo pool can be seeded again.
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

// demoSimulator is what the demo seeds its pool on and takes its scope from.
type demoSimulator interface {
	demo.Simulator
	slots.SimulatedProjects
}

// demoSim is the simulators the demo runs on, embedded or in their own
// process; nil with real providers.
func (w world) demoSim() demoSimulator {
	switch {
	case w.sim != nil:
		return w.sim
	case w.remote != nil:
		return w.remote
	}
	return nil
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

// checkBinding refuses a shared read model built from another log: it
// must not take this one's events, nor answer for it.
func checkBinding(ctx context.Context, c Config, rs readSide, storeID string) error {
	pg, ok := rs.reads.(*postgres.Store)
	if !ok {
		return nil
	}
	bound, err := pg.BindStore(ctx, storeID)
	if err != nil {
		return err
	}
	if bound != storeID {
		return &ConfigError{Setting: setting("read-model"), Problem: fmt.Sprintf(
			"the PostgreSQL read model %s was built from event store %s, this event store is %s (wiped or replaced?): rebuild it with `slotkeeper replay` (every server stopped)",
			redact(c.ReadModel), bound, storeID)}
	}
	return nil
}

// newHub is the live stream's hub as the config sets it.
func newHub(c Config, store events.Store, startHead events.Position, met *httpapi.Metrics, log *slog.Logger) *httpapi.Hub {
	return httpapi.NewHub(httpapi.HubOptions{
		Heartbeat: c.Heartbeat, History: c.SSEHistory, WriteTimeout: c.SSEWriteTimeout,
		MaxClients: c.SSEMaxClients, MaxClientsPerIP: c.SSEMaxPerIP, LiveFrom: startHead,
		// A browser's watchdog gives up after two heartbeats; let it see
		// the 503 rather than time out first.
		ResumeWait: min(c.SSEResumeWait, c.Heartbeat),
		// Tells an id of another log (a wiped or replaced store) from one
		// this process has not projected yet.
		LogHead: store.Head,
	}, met, log)
}

// baseURL is where people reach the dashboard (links in webhooks and pull
// requests).
func baseURL(c Config) string {
	if c.BaseURL != "" {
		return c.BaseURL
	}
	return "http://" + c.Addr
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

// snapshotService writes a new snapshot of the read model now and then,
// and the last one when it stops (memory.Snapshots; the snapshot is loaded
// before the read model starts, so that a restart replays only the log
// after it).
func snapshotService(s *memory.Snapshots) *lifecycle.Loop {
	return &lifecycle.Loop{
		Run: func(ctx context.Context) error {
			clock.Every(ctx, clock.Real(), snapshotEvery, func(ctx context.Context) { s.Write(ctx, snapshotMinEvents) })
			return nil
		},
		Final: func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			s.Write(ctx, 1)
		},
	}
}
