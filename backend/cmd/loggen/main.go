// Command loggen writes a generated history straight into an embedded event
// store, for benchmarks that need a big log fast (scripts/bench/history.sh):
// many generators append at once, each on its own slots and jobs, so every
// stream keeps its causal order while the store's group commit puts many
// appends in one fsync. The history is projtest's realistic mix: slots
// registered, occupied and extended; resets, teardowns and promotes with all
// their steps; failures, timeouts, abandoned and resumed attempts. Each
// generator keeps its pool's size (projtest.Gen.FixedPool): a torn-down
// slot is replaced by a new one, as a team's pool is, so a longer history
// has more finished jobs and retired slots, not a bigger pool.
//
//	loggen --data DIR --events N [--gens 128] [--slots 2]
//
// It appends to whatever DIR holds, so a 1M log can grow from a 100k one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func main() {
	data := flag.String("data", "", "directory of the embedded store (created if missing)")
	n := flag.Int("events", 100_000, "events to append in all")
	gens := flag.Int("gens", 128, "generators appending at once")
	slots := flag.Int("slots", 2, "slots of each generator")
	prefix := flag.String("prefix", "g", "prefix of slot names and job ids (a second run into one store needs another)")
	flag.Parse()
	if *data == "" {
		fmt.Fprintln(os.Stderr, "loggen: --data is required")
		os.Exit(2)
	}
	if err := run(context.Background(), *data, *prefix, *n, *gens, *slots); err != nil {
		fmt.Fprintln(os.Stderr, "loggen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dir, prefix string, n, gens, slots int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	s, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	if err := projtest.Many(ctx, s, prefix, n, gens, slots, true); err != nil {
		return err
	}
	head, err := s.Head(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("loggen: head %d after %s\n", head, time.Since(start).Round(time.Millisecond))
	return s.Close()
}
