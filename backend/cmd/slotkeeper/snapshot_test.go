package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// A process killed while writing the read model's snapshot leaves the
// previous snapshot (the new one only replaces it by a rename) and a torn
// temporary file. The next start loads the previous snapshot, catches up
// from it, answers like a rebuild, and removes the leftover.
func TestSnapshotWriteInterruptedByACrash(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	log := memstore.New()
	defer log.Close()
	projtest.Must(t, projtest.NewGen(log, 5).Random(ctx, 4, 1200))
	before := memory.New(log)
	projtest.Catchup(t, log, before, 500)
	path := filepath.Join(t.TempDir(), snapshotFile)
	at, err := before.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	// The crash: the next write got half its bytes into its temporary file.
	full, err := os.ReadFile(path)
	projtest.Must(t, err)
	torn := path + ".tmp4242"
	projtest.Must(t, os.WriteFile(torn, full[:len(full)/2], 0o600))

	restarted := memory.New(log)
	kept := memory.NewSnapshots(restarted, path, slog.New(slog.NewTextHandler(io.Discard, nil)))
	kept.Load(ctx)
	snapshots := snapshotService(kept)
	projtest.Must(t, snapshots.Start(ctx))
	if p, _ := restarted.Position(ctx); p != at {
		t.Fatalf("the restart loaded position %d, want the previous snapshot's %d", p, at)
	}
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Fatalf("the torn temporary file is still there (%v)", err)
	}
	projtest.Catchup(t, log, restarted, 500)
	rebuilt := memory.New(log)
	projtest.Catchup(t, log, rebuilt, 500)
	diffs, err := projections.Compare(ctx, rebuilt, restarted)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
	projtest.Must(t, snapshots.Stop(ctx))
	cancel()
}
