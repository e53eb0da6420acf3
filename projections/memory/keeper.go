package memory

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"

	"github.com/slotkeeper/slotkeeper/events"
)

// Snapshots keeps a read model's snapshot at a path (docs/projections.md):
// Load at start (a restart then replays only the log after it), Write now
// and then, and once more at shutdown. A snapshot that is damaged or not of
// this log is ignored with a warning.
type Snapshots struct {
	m    *Store
	path string
	log  *slog.Logger

	mu      sync.Mutex
	written events.Position
}

// NewSnapshots keeps m's snapshot at path.
func NewSnapshots(m *Store, path string, log *slog.Logger) *Snapshots {
	return &Snapshots{m: m, path: path, log: log}
}

// Load removes what an interrupted write left and loads the snapshot.
func (s *Snapshots) Load(ctx context.Context) {
	// A process killed while writing one leaves its temporary file (the
	// snapshot itself is replaced by a rename, so it is the old one or the
	// new one, whole); nothing else writes beside this store's file.
	if left, _ := filepath.Glob(s.path + ".tmp*"); len(left) > 0 {
		for _, f := range left {
			_ = os.Remove(f)
		}
		s.log.Info("read model snapshot: removed what an interrupted write left", slog.Int("files", len(left)))
	}
	// Decoding the snapshot allocates its whole size several times over
	// while the heap is still tiny, so the collector would run many times
	// for nothing; it gets room for the load (the memory is handed back
	// once every consumer caught up: consumer.ReleaseAfterCatchUp).
	gc := debug.SetGCPercent(800)
	pos, why, err := s.m.LoadSnapshot(ctx, s.path)
	debug.SetGCPercent(gc)
	switch {
	case err != nil:
		s.log.Warn("read model snapshot not loaded", slog.String("error", err.Error()))
	case pos > 0:
		s.log.Info("read model snapshot loaded", slog.Any("position", pos))
	case why != "no snapshot":
		s.log.Warn("read model snapshot ignored; replaying the log", slog.String("why", why))
	}
	s.mu.Lock()
	s.written = pos
	s.mu.Unlock()
}

// Write writes a snapshot when the read model moved at least minEvents
// positions since the last one (and moved at all).
func (s *Snapshots) Write(ctx context.Context, minEvents events.Position) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, _ := s.m.Position(ctx)
	if cur < s.written+minEvents || cur == s.written {
		return
	}
	at, err := s.m.WriteSnapshot(ctx, s.path)
	if err != nil {
		s.log.Warn("read model snapshot not written", slog.String("error", err.Error()))
		return
	}
	s.written = at
}
