package memory_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// A read model that lists three idle retired slots archives the others:
// their views leave memory, live (the runner's Apply) and by replay
// (ApplyQuiet), and every answer, archived slots' views included, equals a
// read model's that keeps every view. Its snapshot holds only the listed
// views and names the archived ones; loaded again it answers the same
// (slots, jobs across slots with every filter) and catches up.
func TestArchivedSlotsSurviveTheSnapshot(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	g := projtest.NewGen(log, 23)
	projtest.Must(t, g.Random(ctx, 6, 6000))
	lim := memory.Limits{RecentJobs: 5, RecentAudit: 100, ListedRetired: 3}
	keep := memory.NewWithLimits(nil, memory.Limits{ListedRetired: 3}) // keeps every view (no log)
	projtest.Catchup(t, log, keep, 1)
	live := memory.NewWithLimits(log, lim)
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	runLive(t, log, live, head)
	replayed := memory.NewWithLimits(log, lim)
	projtest.Catchup(t, log, replayed, 300)
	for name, rm := range map[string]*memory.Store{"live": live, "replayed": replayed} {
		held, archived := rm.HeldSlots()
		names, err := rm.SlotNames(ctx)
		projtest.Must(t, err)
		if archived < 5 || held+archived != len(names) {
			t.Fatalf("%s: %d slot views held, %d archived of %d slots: want most archived", name, held, archived, len(names))
		}
		sameAnswers(t, name, keep, rm)
	}

	path := filepath.Join(t.TempDir(), "readmodel.snapshot")
	at, err := replayed.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	loaded := memory.NewWithLimits(log, lim)
	if pos, why, err := loaded.LoadSnapshot(ctx, path); err != nil || pos != at {
		t.Fatalf("LoadSnapshot = %d %q %v, want %d", pos, why, err, at)
	}
	h, a := loaded.HeldSlots()
	if h0, a0 := replayed.HeldSlots(); h != h0 || a != a0 {
		t.Errorf("loaded holds %d slot views and %d archived, the writer %d and %d", h, a, h0, a0)
	}
	sameAnswers(t, "loaded", keep, loaded)

	// More history, caught up after the load: still the same answers.
	projtest.Must(t, g.Random(ctx, 0, g.Appended+1500))
	projtest.Catchup(t, log, keep, 1)
	projtest.Catchup(t, log, loaded, 100)
	sameAnswers(t, "loaded and caught up", keep, loaded)
}

// sameAnswers compares every query answer of rm with want's (Compare), and
// GET /api/jobs' filters, which Compare does not cover.
func sameAnswers(t *testing.T, name string, want, rm projections.ReadModel) {
	t.Helper()
	ctx := projtest.Ctx(t)
	diffs, err := projections.Compare(ctx, want, rm)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Errorf("%s: %s", name, d)
	}
	for _, f := range []projections.JobFilter{{}, {State: projections.JobFailed}, {State: projections.JobStateUncertain}, {Actor: "alice"}, {Kind: "teardown"}} {
		var a, b []string
		for _, p := range []struct {
			rm  projections.ReadModel
			out *[]string
		}{{want, &a}, {rm, &b}} {
			f := f
			f.Limit = projections.MaxLimit
			for {
				page, err := p.rm.Jobs(ctx, f)
				projtest.Must(t, err)
				for _, j := range page.Jobs {
					*p.out = append(*p.out, j.ID+"/"+j.State)
				}
				if page.NextCursor == "" {
					break
				}
				f.Cursor = page.NextCursor
			}
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("%s: Jobs(%+v) = %d jobs, want %d:\n%v\n%v", name, f, len(b), len(a), b, a)
		}
	}
}

// A snapshot of the previous version (1: every slot, refs without their
// filter fields) is ignored with the reason, even with a good checksum, and
// the read model rebuilt from the log answers like one that never had it.
func TestOldVersionSnapshotIsIgnored(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 9).Random(ctx, 4, 1500))
	rm := memory.New(log)
	projtest.Catchup(t, log, rm, 500)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	_, err := rm.WriteSnapshot(ctx, good)
	projtest.Must(t, err)
	raw, err := os.ReadFile(good)
	projtest.Must(t, err)
	_, body, _ := strings.Cut(string(raw), "\n")
	var v1 map[string]any
	projtest.Must(t, json.Unmarshal([]byte(body), &v1))
	delete(v1, "archived")
	v1["refs"] = []map[string]any{{"id": "j1", "slot": "s000", "kind": "reset", "queued": 3}}
	old, err := json.Marshal(v1)
	projtest.Must(t, err)
	sum := sha256.Sum256(old)
	path := filepath.Join(dir, "v1")
	projtest.Must(t, os.WriteFile(path, append([]byte("slotkeeper-readmodel 1 sha256="+hex.EncodeToString(sum[:])+"\n"), old...), 0o600))

	fresh := memory.New(log)
	pos, why, err := fresh.LoadSnapshot(ctx, path)
	projtest.Must(t, err)
	if pos != 0 || !strings.Contains(why, "version 1") {
		t.Fatalf("a version 1 snapshot: loaded at %d (%q), want it ignored for its version", pos, why)
	}
	projtest.Catchup(t, log, fresh, 500)
	sameAnswers(t, "rebuilt", rm, fresh)
}

// runLive projects log into rm with a Runner (Apply, in the batches it
// finds) up to head, then stops it.
func runLive(t *testing.T, log *memstore.Store, rm *memory.Store, head events.Position) {
	t.Helper()
	ctx := projtest.Ctx(t)
	r := projections.NewRunner(log, rm, projections.RunnerOptions{MaxBatch: 40})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = r.Run(runCtx)
	}()
	defer func() {
		stop()
		<-done
	}()
	projtest.Must(t, r.WaitFor(ctx, head))
}
