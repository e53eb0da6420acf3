package memory_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// sparseLog is a store whose positions are not contiguous, like
// KurrentDB's log offsets: memstore's positions times gap. Like KurrentDB it
// refuses to subscribe from a position that is not an event's
// (InvalidArgument "Trying to read from an invalid position."), so a
// caller that computes one (Position-1) fails here as it would there.
type sparseLog struct{ *memstore.Store }

const gap = 100

func (l sparseLog) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	res, err := l.Store.Append(ctx, stream, exp, evs...)
	res.Position *= gap
	return res, err
}

func (l sparseLog) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	evs, err := l.Store.ReadStream(ctx, stream, from, max, dir)
	for i := range evs {
		evs[i].Position *= gap
	}
	return evs, err
}

func (l sparseLog) SubscribeAll(ctx context.Context, after events.Position, f events.Filter, h events.Handler) error {
	if after%gap != 0 {
		return events.InvalidPosition(after, "not an event's position")
	}
	return l.Store.SubscribeAll(ctx, after/gap, f, func(ctx context.Context, ev events.RecordedEvent) error {
		ev.Position *= gap
		return h(ctx, ev)
	})
}

func (l sparseLog) Head(ctx context.Context) (events.Position, error) {
	h, err := l.Store.Head(ctx)
	return h * gap, err
}

// sparseViews fills a sparse log with n random events (generator seed),
// and folds it into a read model that keeps everything and one that keeps
// only 5 jobs and 40 audit entries.
func sparseViews(t *testing.T, seed uint64, n int) (sparseLog, *memory.Store, *memory.Store) {
	t.Helper()
	ctx := projtest.Ctx(t)
	log := sparseLog{memstore.New()}
	projtest.Must(t, projtest.NewGen(log, seed).Random(ctx, 4, n))
	ref := memory.NewWithLimits(log, everything)
	projtest.Catchup(t, log, ref, 1)
	bounded := memory.NewWithLimits(log, memory.Limits{RecentJobs: 5, RecentAudit: 40})
	projtest.Catchup(t, log, bounded, 100)
	return log, ref, bounded
}

// Issue 24, item 1: audit pages older than memory's window, in both
// directions, and a snapshot's check against the log, used to subscribe
// from computed positions (first-1, upTo-10_000, pos-1), which a log with
// gaps between positions refuses. They now start only from event positions
// and answer like a read model that keeps everything.
func TestOldAuditPagesOnSparsePositions(t *testing.T) {
	ctx := projtest.Ctx(t)
	_, ref, bounded := sparseViews(t, 5, 1500)

	all, err := ref.Audit(ctx, projections.AuditFilter{Limit: projections.MaxLimit})
	projtest.Must(t, err)
	if len(all) < 1000 {
		t.Fatalf("only %d audit entries", len(all))
	}
	newest := slices.Clone(all)
	slices.Reverse(newest)
	for _, c := range []struct {
		name string
		f    projections.AuditFilter
		want []projections.AuditEntry
	}{
		{"oldest first", projections.AuditFilter{Limit: 100}, all[:100]},
		{"oldest first after a cursor", projections.AuditFilter{After: all[300].Position, Limit: 100}, all[301:401]},
		{"oldest first, before", projections.AuditFilter{After: all[10].Position, Before: all[50].Position, Limit: 100}, all[11:50]},
		{"newest first, before", projections.AuditFilter{Newest: true, Before: all[len(all)-100].Position, Limit: 100}, newest[100:200]},
		{"newest first, deep", projections.AuditFilter{Newest: true, Before: all[120].Position, Limit: 100}, newest[len(all)-120 : len(all)-20]},
		{"newest first down to a cursor", projections.AuditFilter{Newest: true, After: all[5].Position, Before: all[30].Position, Limit: 100}, newest[len(all)-30 : len(all)-6]},
	} {
		got, err := bounded.Audit(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%s: %d entries, want %d", c.name, len(got), len(c.want))
		}
		for i := range got {
			if got[i].Position != c.want[i].Position {
				t.Fatalf("%s: entry %d at %d, want %d", c.name, i, got[i].Position, c.want[i].Position)
			}
		}
	}

	// A cursor that is not an event's position is bad input, not a failure.
	for _, f := range []projections.AuditFilter{{After: all[300].Position + 1}, {Newest: true, After: all[3].Position + 1, Before: all[30].Position}} {
		if _, err := bounded.Audit(ctx, f); !errors.Is(err, projections.ErrInvalid) {
			t.Fatalf("audit after %d (newest %v): %v, want ErrInvalid", f.After, f.Newest, err)
		}
	}
}

// The snapshot loader used to find the event at a snapshot's position by
// subscribing from pos-1.
func TestSnapshotOnSparsePositions(t *testing.T) {
	ctx := projtest.Ctx(t)
	log, ref, bounded := sparseViews(t, 6, 600)
	path := filepath.Join(t.TempDir(), "rm.snap")
	pos, err := bounded.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	loaded := memory.NewWithLimits(log, memory.Limits{RecentJobs: 5, RecentAudit: 40})
	got, why, err := loaded.LoadSnapshot(ctx, path)
	projtest.Must(t, err)
	if got != pos {
		t.Fatalf("snapshot at %d not loaded: %s", pos, why)
	}
	diffs, err := projections.Compare(ctx, ref, loaded)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Errorf("loaded snapshot: %s", d)
	}
}
