package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
)

// storeFlags are the flags replay and verify share with serve.
func storeFlags(name string, args []string, env func(string) string, out io.Writer) (Config, time.Duration, error) {
	var c Config
	var timeout time.Duration
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long (a store that stops answering, a log that never reaches the read model's position)")
	fs.SetOutput(out)
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://…")
	fs.StringVar(&c.ReadModel, "read-model", "memory", "read models: memory or postgres://…")
	fs.StringVar(&c.LogLevel, "log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, 0, err
	}
	if fs.NArg() > 0 {
		return c, 0, &usageError{fmt.Sprintf("%s takes no arguments, got %q", name, fs.Args())}
	}
	if err := applyEnv(fs, env); err != nil {
		return c, 0, err
	}
	if timeout <= 0 {
		return c, 0, cfgErr("timeout", "must be positive")
	}
	// Reuse serve's checks for the settings replay and verify have.
	full := offlineConfig(c.Data, c.Events, c.ReadModel, c.LogLevel)
	return full, timeout, full.validate()
}

// offlineConfig is a serve Config for the commands that only open the
// stores (replay, verify, admin): serve's own checks then apply to the
// settings they have, and the rest hold valid placeholders.
func offlineConfig(data, events, readModel, logLevel string) Config {
	return Config{Addr: "localhost:0", Data: data, Events: events, ReadModel: readModel, Sim: "auto",
		StepTimeout: time.Second, JobTimeout: time.Second, Lease: time.Second, Heartbeat: time.Second,
		SSEWriteTimeout: time.Second, SSEResumeWait: time.Second, ShutdownTimeout: time.Second, SSEMaxClients: 1, SSEHistory: 16,
		ReadyInterval: time.Second, LogLevel: logLevel, LogFormat: "text",
		WriteTimeout: httpapi.DefaultWriteTimeout, ClosedPRs: memory.DefaultClosedPRs, ClosedPRAge: memory.DefaultClosedPRAge,
		Auth:     AuthConfig{SessionIdle: time.Hour, SessionMax: time.Hour, OIDCRecheck: time.Hour},
		Waitlist: WaitlistConfig{OfferTTL: time.Minute, ExtendBy: time.Hour}}
}

// offline is what replay and verify work on: the event store and the read
// model their flags name, opened as serve opens them.
type offline struct {
	c       Config
	store   events.Store
	desc    string // the store, for messages
	rm      projections.Target
	closeRM func()
	timeout time.Duration // --timeout
}

// openOffline parses the store flags of command name and opens the store
// and the read model.
func openOffline(ctx context.Context, name string, args []string, env func(string) string, stderr io.Writer) (*offline, error) {
	c, timeout, err := storeFlags(name, args, env, stderr)
	if err != nil {
		return nil, err
	}
	store, desc, err := openStore(ctx, c, newLogger(c, stderr))
	if err != nil {
		return nil, err
	}
	rm, closeRM, err := openReadModel(ctx, c, store)
	if err != nil {
		store.Close()
		return nil, err
	}
	return &offline{c: c, store: store, desc: desc, rm: rm, closeRM: closeRM, timeout: timeout}, nil
}

// close releases the read model, then the store.
func (o *offline) close() {
	o.closeRM()
	o.store.Close()
}

// replayCmd rebuilds the read model from the whole log and reports the rate.
func replayCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	o, err := openOffline(ctx, "replay", args, env, stderr)
	if err != nil {
		return err
	}
	defer o.close()
	c, store, desc, target := o.c, o.store, o.desc, o.rm
	if pg, ok := target.(*postgres.Store); ok {
		// A rebuild starts from nothing; Reset refuses while a server projects.
		if err := pg.Reset(ctx); err != nil {
			if errors.Is(err, postgres.ErrBusy) {
				return fmt.Errorf("a running server projects into %s; stop it first: %w", redact(c.ReadModel), err)
			}
			return fmt.Errorf("reset the PostgreSQL read model: %w", err)
		}
	}
	head, err := store.Head(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	reached, err := projections.Replay(ctx, store, target, head, 0)
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	took := time.Since(t0)
	slots, err := target.ListSlots(ctx)
	if err != nil {
		return err
	}
	rate := 0.0
	if took > 0 {
		rate = float64(reached) / took.Seconds()
	}
	fmt.Fprintf(stdout, "replayed %s up to position %d into the %s read model in %s (%.0f positions/s): %d slots\n",
		desc, reached, c.ReadModel, took.Round(time.Millisecond), rate, len(slots))
	return nil
}

// diffError is verify's finding: the live read model differs from the log.
type diffError struct{ diffs []string }

func (e *diffError) Error() string {
	return fmt.Sprintf("the live read model differs from a rebuild in %d places:\n  %s", len(e.diffs), strings.Join(e.diffs, "\n  "))
}

// verifyCmd rebuilds a shadow read model from the log and compares every
// query answer with the live one. With memory read models the "live" one
// is built the way the server builds it at start (the runner's subscription
// path, batching whatever has arrived) and the shadow by projections.Replay:
// the check proves the two paths agree on this log; it cannot see inside a
// running server's memory. With PostgreSQL read models the live one
// is the shared database.
func verifyCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	o, err := openOffline(ctx, "verify", args, env, stderr)
	if err != nil {
		return err
	}
	defer o.close()
	c, store, desc, live := o.c, o.store, o.desc, o.rm
	// verify never hangs: it gives up after --timeout, and says every few
	// seconds what it is waiting for.
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var stage atomic.Value
	stage.Store("opening the store")
	stopProgress := progress(ctx, stderr, &stage)
	defer stopProgress()
	if chk, ok := store.(interface{ Check(context.Context) error }); ok {
		// The embedded store's page-level check (free-page list included),
		// which Open skips for big files.
		if err := chk.Check(ctx); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	stage.Store("reading the log's head")
	head, err := store.Head(ctx)
	if err != nil {
		return timedOut(ctx, err, o.timeout)
	}
	if c.ReadModel == "memory" {
		stage.Store(fmt.Sprintf("building the read model up to the log's head %d", head))
		if err := runUntil(ctx, store, live, head); err != nil {
			return timedOut(ctx, err, o.timeout)
		}
	}
	// A shared read model past the log's head was built from another log
	// (the store was wiped, replaced, or restored from an older backup): a
	// rebuild of this log would wait for that position for ever.
	if pos, err := live.Position(ctx); err != nil {
		return timedOut(ctx, err, o.timeout)
	} else if pos > head {
		return fmt.Errorf("verify: the %s read model is at position %d, past the log's head %d: it was built from another log (wiped, replaced or rewound store); rebuild it with `slotkeeper replay`", c.ReadModel, pos, head)
	}
	stage.Store("rebuilding a shadow read model from the log and comparing")
	shadow := memory.New(store)
	diffs, err := projections.Verify(ctx, store, live, shadow)
	if err != nil {
		return fmt.Errorf("verify: %w", timedOut(ctx, err, o.timeout))
	}
	if len(diffs) > 0 {
		return &diffError{diffs: diffs}
	}
	pos, _ := live.Position(ctx)
	fmt.Fprintf(stdout, "verified %s up to position %d: the %s read model equals a rebuild from the log\n", desc, pos, c.ReadModel)
	return nil
}

// progress prints the stage to w every 5 s until the returned stop is
// called, so a long wait always says what it waits for.
func progress(ctx context.Context, w io.Writer, stage *atomic.Value) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		clock.Every(ctx, clock.Real(), 5*time.Second, func(context.Context) { fmt.Fprintf(w, "verify: still %s\n", stage.Load()) })
	}()
	return func() { cancel(); <-done }
}

// timedOut names --timeout when ctx's deadline is why err happened.
func timedOut(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("gave up after --timeout %s: %w", timeout, err)
	}
	return err
}

// runUntil drives target with a projections.Runner until it reached head,
// or the runner stops for good (a damaged store: its error is returned).
func runUntil(ctx context.Context, store events.Store, target projections.Target, head events.Position) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := projections.NewRunner(store, target, projections.RunnerOptions{})
	done := make(chan error, 1)
	go func() {
		done <- r.Run(ctx)
		cancel() // the runner gave up: so does the wait
	}()
	err := r.WaitFor(ctx, head)
	cancel()
	if runErr := <-done; runErr != nil {
		return runErr
	}
	return err
}
