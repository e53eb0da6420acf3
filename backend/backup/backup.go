package backup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
)

// SnapshotFunc writes a consistent copy of the event store to w, calling
// size with its exact length first, and returns the copy's head position.
// boltstore.(*Store).Snapshot is one (adapted in backend/cmd).
type SnapshotFunc func(ctx context.Context, w io.Writer, size func(int64) error) (events.Position, error)

// Source is what one backup copies.
type Source struct {
	Snapshot SnapshotFunc
	// SimDir, if set, is the simulators' state directory (demo mode); its
	// files go along under sim/.
	SimDir string
}

// Write writes a complete archive of src to w.
func Write(ctx context.Context, w io.Writer, src Source, now time.Time) (Manifest, error) {
	a, err := NewWriter(w, now)
	if err != nil {
		return Manifest{}, err
	}
	head, err := src.Snapshot(ctx, a, func(n int64) error { return a.Begin(EventsFile, n) })
	if err != nil {
		return Manifest{}, err
	}
	if src.SimDir != "" {
		if _, err := os.Stat(src.SimDir); err == nil {
			if err := a.AddDir(ctx, src.SimDir, SimDir); err != nil {
				return Manifest{}, fmt.Errorf("backup: simulators' state: %w", err)
			}
		}
	}
	return a.Close(head)
}

// Suffix is the file name suffix of scheduled backups.
const Suffix = ".skbak"

// WriteFile writes an archive to path atomically: into a temporary file in
// the same directory, fsynced, then renamed over path. A crash (even
// SIGKILL) mid-way leaves at most a *.tmp file, never a torn path.
func WriteFile(ctx context.Context, path string, src Source, now time.Time) (Manifest, int64, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return Manifest{}, 0, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	m, err := Write(ctx, f, src, now)
	if err == nil {
		err = f.Sync()
	}
	var size int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			size = fi.Size()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Manifest{}, 0, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return Manifest{}, 0, err
	}
	return m, size, syncDir(dir)
}

// Result is one scheduled backup's outcome, for metrics.
type Result struct {
	Path     string
	Size     int64
	Duration time.Duration
	Head     events.Position
	Err      error
}

// Scheduler takes a backup into Dir every Every and keeps the Keep newest.
type Scheduler struct {
	Dir    string
	Every  time.Duration
	Keep   int
	Source Source
	Log    *slog.Logger
	// Done, if set, is told every outcome (metrics).
	Done func(Result)
	// Clock times the schedule and names the files (tests pass a
	// clock.Fake); nil is the wall clock.
	Clock clock.Clock
}

// Run takes backups until ctx ends. Leftover *.tmp files of a killed run
// are removed first; finished backups are never touched but by pruning.
func (s *Scheduler) Run(ctx context.Context) error {
	if s.Clock == nil {
		s.Clock = clock.Real()
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("backup dir: %w", err)
	}
	if olds, _ := filepath.Glob(filepath.Join(s.Dir, ".*"+Suffix+".*.tmp")); len(olds) > 0 {
		for _, o := range olds {
			os.Remove(o)
		}
	}
	clock.Every(ctx, s.Clock, s.Every, func(ctx context.Context) { s.Once(ctx) })
	return nil
}

// Once takes one backup now and prunes old ones.
func (s *Scheduler) Once(ctx context.Context) Result {
	if s.Clock == nil {
		s.Clock = clock.Real()
	}
	start := s.Clock.Now()
	path := filepath.Join(s.Dir, "slotkeeper-"+start.UTC().Format("20060102T150405.000000000Z")+Suffix)
	m, size, err := WriteFile(ctx, path, s.Source, start)
	r := Result{Path: path, Size: size, Duration: s.Clock.Since(start), Head: m.Head, Err: err}
	if s.Log != nil {
		if err != nil {
			if ctx.Err() == nil {
				s.Log.Error("scheduled backup failed", slog.String("dir", s.Dir), slog.Any("err", err))
			}
		} else {
			s.Log.Info("backup written", slog.String("path", path), slog.Int64("bytes", size), slog.Uint64("head", uint64(m.Head)), slog.Duration("took", r.Duration))
		}
	}
	if err == nil {
		s.prune()
	}
	if s.Done != nil {
		s.Done(r)
	}
	return r
}

// prune removes all but the Keep newest finished backups (names sort by time).
func (s *Scheduler) prune() {
	if s.Keep <= 0 {
		return
	}
	ents, err := os.ReadDir(s.Dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "slotkeeper-") && strings.HasSuffix(n, Suffix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for len(names) > s.Keep {
		os.Remove(filepath.Join(s.Dir, names[0]))
		names = names[1:]
	}
}
