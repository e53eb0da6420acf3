package memory_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// countingLog counts the events its subscriptions deliver.
type countingLog struct {
	events.Store
	delivered atomic.Int64
}

func (c *countingLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	return c.Store.SubscribeAll(ctx, after, f, func(ctx context.Context, ev events.RecordedEvent) error {
		c.delivered.Add(1)
		return h(ctx, ev)
	})
}

// A read model loaded from its snapshot and caught up reads only the events
// after the snapshot and answers exactly like a rebuild from the whole log.
func TestSnapshotLoadsAndCatchesUp(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	g := projtest.NewGen(log, 31)
	projtest.Must(t, g.Random(ctx, 8, 5000))
	lim := memory.Limits{RecentJobs: 5, RecentAudit: 100}
	first := memory.NewWithLimits(log, lim)
	projtest.Catchup(t, log, first, 500)
	path := filepath.Join(t.TempDir(), "readmodel.snapshot")
	at, err := first.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	projtest.Must(t, g.Random(ctx, 0, g.Appended+800))
	head, err := log.Head(ctx)
	projtest.Must(t, err)

	counted := &countingLog{Store: log}
	restarted := memory.NewWithLimits(counted, lim)
	pos, why, err := restarted.LoadSnapshot(ctx, path)
	projtest.Must(t, err)
	if pos != at || why != "" {
		t.Fatalf("loaded at %d (%s), want %d", pos, why, at)
	}
	counted.delivered.Store(0)
	_, err = projections.Replay(ctx, counted, restarted, 0, 100)
	projtest.Must(t, err)
	if n := counted.delivered.Load(); n != int64(head-at) {
		t.Errorf("the catch-up read %d events, want the %d after the snapshot", n, head-at)
	}
	ref := memory.NewWithLimits(log, everything)
	projtest.Catchup(t, log, ref, 1000)
	diffs, err := projections.Compare(ctx, ref, restarted)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
}

// A damaged, foreign or stale snapshot is not loaded: the read model stays
// empty (and is rebuilt from the log), with the reason.
func TestSnapshotIsCheckedAgainstTheLog(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 7).Random(ctx, 4, 1500))
	rm := memory.New(log)
	projtest.Catchup(t, log, rm, 500)
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	_, err := rm.WriteSnapshot(ctx, good)
	projtest.Must(t, err)
	raw, err := os.ReadFile(good)
	projtest.Must(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		projtest.Must(t, os.WriteFile(p, b, 0o600))
		return p
	}
	flipped := append([]byte(nil), raw...)
	flipped[len(flipped)/2] ^= 0x20
	// The same history written into another store: same positions and
	// payloads, other event ids.
	other := memstore.New()
	projtest.Must(t, projtest.NewGen(other, 7).Random(ctx, 4, 1500))
	short := memstore.New()
	projtest.Must(t, projtest.NewGen(short, 7).Random(ctx, 4, 300))

	for _, c := range []struct {
		name string
		log  events.Store
		path string
		why  string
	}{
		{"missing", log, filepath.Join(dir, "none"), "no snapshot"},
		{"flipped byte", log, write("flipped", flipped), "checksum"},
		{"truncated", log, write("truncated", raw[:len(raw)-10]), "checksum"},
		{"not a snapshot", log, write("junk", []byte("hello\n{}")), "bad header"},
		{"other log", other, good, "not of this log"},
		{"log behind the snapshot", short, good, "stale"},
	} {
		fresh := memory.New(c.log)
		pos, why, err := fresh.LoadSnapshot(ctx, c.path)
		projtest.Must(t, err)
		if pos != 0 || !strings.Contains(why, c.why) {
			t.Errorf("%s: loaded at %d (%q), want nothing because %q", c.name, pos, why, c.why)
		}
		if p, _ := fresh.Position(ctx); p != 0 {
			t.Errorf("%s: the read model is at %d after a refused snapshot", c.name, p)
		}
	}
	// The good one loads.
	fresh := memory.New(log)
	if pos, why, err := fresh.LoadSnapshot(ctx, good); err != nil || pos == 0 {
		t.Fatalf("good snapshot: %d %q %v", pos, why, err)
	}
}

// The header's counts only size the decoder's slices: they are outside the
// checksum, so wrong ones (huge, negative, zero) change nothing a load
// answers and allocate no more than the body could hold.
func TestSnapshotCountsAreOnlyHints(t *testing.T) {
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
	nl := strings.IndexByte(string(raw), '\n')
	header, body := string(raw[:nl]), raw[nl:]
	cut := strings.Index(header, " audit=")
	for _, counts := range []string{" audit=0 jobs=0", " audit=999999999999 jobs=888888888888", " audit=-5 jobs=-1"} {
		p := filepath.Join(dir, "hint")
		projtest.Must(t, os.WriteFile(p, append([]byte(header[:cut]+counts), body...), 0o600))
		loaded := memory.New(log)
		pos, why, err := loaded.LoadSnapshot(ctx, p)
		projtest.Must(t, err)
		if pos == 0 {
			t.Fatalf("%s: not loaded: %s", counts, why)
		}
		diffs, err := projections.Compare(ctx, rm, loaded)
		projtest.Must(t, err)
		for _, d := range diffs {
			t.Errorf("%s: %s", counts, d)
		}
	}
}
