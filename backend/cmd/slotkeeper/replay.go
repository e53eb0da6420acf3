package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
)

// storeFlags are the flags replay and verify share with serve.
func storeFlags(name string, args []string, env func(string) string, out io.Writer) (Config, error) {
	var c Config
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://…")
	fs.StringVar(&c.ReadModel, "read-model", "memory", "read models: memory or postgres://…")
	fs.StringVar(&c.LogLevel, "log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, &usageError{fmt.Sprintf("%s takes no arguments, got %q", name, fs.Args())}
	}
	if err := applyEnv(fs, env); err != nil {
		return c, err
	}
	// Reuse serve's checks for the settings replay and verify have.
	full := offlineConfig(c.Data, c.Events, c.ReadModel, c.LogLevel)
	return full, full.validate()
}

// offlineConfig is a serve Config for the commands that only open the
// stores (replay, verify, admin): serve's own checks then apply to the
// settings they have, and the rest hold valid placeholders.
func offlineConfig(data, events, readModel, logLevel string) Config {
	return Config{Addr: "localhost:0", Data: data, Events: events, ReadModel: readModel, Sim: "auto",
		StepTimeout: time.Second, JobTimeout: time.Second, Lease: time.Second, Heartbeat: time.Second,
		SSEWriteTimeout: time.Second, SSEResumeWait: time.Second, ShutdownTimeout: time.Second, SSEMaxClients: 1, SSEHistory: 16,
		ReadyInterval: time.Second, LogLevel: logLevel, LogFormat: "text",
		Auth:     AuthConfig{SessionIdle: time.Hour, SessionMax: time.Hour},
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
}

// openOffline parses the store flags of command name and opens the store
// and the read model.
func openOffline(ctx context.Context, name string, args []string, env func(string) string, stderr io.Writer) (*offline, error) {
	c, err := storeFlags(name, args, env, stderr)
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
	return &offline{c: c, store: store, desc: desc, rm: rm, closeRM: closeRM}, nil
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
	if chk, ok := store.(interface{ Check(context.Context) error }); ok {
		// The embedded store's page-level check (free-page list included),
		// which Open skips for big files.
		if err := chk.Check(ctx); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	head, err := store.Head(ctx)
	if err != nil {
		return err
	}
	if c.ReadModel == "memory" {
		if err := runUntil(ctx, store, live, head); err != nil {
			return err
		}
	}
	shadow := memory.New(store)
	diffs, err := projections.Verify(ctx, store, live, shadow)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if len(diffs) > 0 {
		return &diffError{diffs: diffs}
	}
	pos, _ := live.Position(ctx)
	fmt.Fprintf(stdout, "verified %s up to position %d: the %s read model equals a rebuild from the log\n", desc, pos, c.ReadModel)
	return nil
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
