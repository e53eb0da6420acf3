package backup_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/backup"
	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openBolt(t *testing.T, dir string) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func source(s *boltstore.Store, simDir string) backup.Source {
	return backup.Source{
		Snapshot: func(ctx context.Context, w io.Writer, size func(int64) error) (events.Position, error) {
			info, err := s.Snapshot(ctx, w, size)
			return info.Head, err
		},
		SimDir: simDir,
	}
}

func appendN(ctx context.Context, s events.Store, stream string, n int) error {
	for i := 0; i < n; i++ {
		exp := events.NoStream()
		if i > 0 {
			exp = events.Exact(events.Revision(i - 1))
		}
		if _, err := s.Append(ctx, stream, exp, events.EventData{Type: "TestEvent", Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			return err
		}
	}
	return nil
}

func readAll(t *testing.T, s events.Store, to events.Position) []events.RecordedEvent {
	t.Helper()
	var out []events.RecordedEvent
	if to == 0 {
		return nil
	}
	stop := errors.New("stop")
	err := s.SubscribeAll(ctxT(t), 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= to {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
	return out
}

// TestBackupUnderLoadRestoresAPrefix takes a backup while appenders run:
// the restored store opens, holds exactly the events up to the manifest's
// head, and they equal the live log's first events (no torn record).
func TestBackupUnderLoadRestoresAPrefix(t *testing.T) {
	ctx := ctxT(t)
	live := openBolt(t, t.TempDir())
	if err := appendN(ctx, live, "seed", 200); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stopping atomic.Bool
	var appended atomic.Int64
	loaded := make(chan struct{})
	var once sync.Once
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stopping.Load(); i++ {
				if err := appendN(ctx, live, fmt.Sprintf("load-%d-%d", w, i), 3); err != nil {
					t.Error(err)
					return
				}
				if appended.Add(3) >= 30 {
					once.Do(func() { close(loaded) })
				}
			}
		}()
	}
	// The copy starts once the load is really running.
	select {
	case <-loaded:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	var buf bytes.Buffer
	m, err := backup.Write(ctx, &buf, source(live, ""), time.Now())
	stopping.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	liveHead, _ := live.Head(ctx)
	if m.Head < 200 || m.Head >= liveHead {
		t.Fatalf("manifest head %d: want a point inside the load (live head now %d)", m.Head, liveHead)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := backup.Restore(ctx, bytes.NewReader(buf.Bytes()), dir); err != nil {
		t.Fatal(err)
	}
	restored := openBolt(t, dir)
	if h, _ := restored.Head(ctx); h != m.Head {
		t.Fatalf("restored head %d, manifest %d", h, m.Head)
	}
	got, want := readAll(t, restored, m.Head), readAll(t, live, m.Head)
	if len(got) != len(want) {
		t.Fatalf("restored %d events, live prefix %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Position != want[i].Position || got[i].Revision != want[i].Revision || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Fatalf("event %d differs: %+v vs %+v", i, got[i], want[i])
		}
	}
	// The restored store takes appends where the backup ended.
	if _, err := restored.Append(ctx, "after", events.NoStream(), events.EventData{Type: "TestEvent", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
}

func goodArchive(t *testing.T) ([]byte, *boltstore.Store) {
	t.Helper()
	s := openBolt(t, t.TempDir())
	if err := appendN(ctxT(t), s, "a", 50); err != nil {
		t.Fatal(err)
	}
	sim := t.TempDir()
	os.MkdirAll(filepath.Join(sim, "git", "SLOT", "r.git"), 0o755)
	os.WriteFile(filepath.Join(sim, "state.json"), []byte(`{"v":1}`), 0o600)
	os.WriteFile(filepath.Join(sim, "git", "SLOT", "r.git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(sim, "state.json.123.tmp"), []byte(`torn`), 0o600)
	var buf bytes.Buffer
	if _, err := backup.Write(ctxT(t), &buf, source(s, sim), time.Now()); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), s
}

func TestRestoreCarriesTheSimulatorsState(t *testing.T) {
	b, _ := goodArchive(t)
	dir := filepath.Join(t.TempDir(), "data")
	m, err := backup.Restore(ctxT(t), bytes.NewReader(b), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "sim", "git", "SLOT", "r.git", "HEAD")); string(got) != "ref: refs/heads/main\n" {
		t.Fatalf("sim git file: %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "sim", "state.json.123.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a half-written *.tmp file was backed up")
	}
	if m.Head != 50 || len(m.Files) != 3 {
		t.Fatalf("manifest %+v", m)
	}
}

// TestRestoreRefusesBadArchives: truncated, another version, a flipped
// byte, an unsafe name, a non-empty target — each a clear error, and
// nothing written.
func TestRestoreRefusesBadArchives(t *testing.T) {
	good, _ := goodArchive(t)
	flip := bytes.Clone(good)
	i := bytes.Index(flip, []byte(`{"i":20}`))
	flip[i+5] = '7'
	other := bytes.Replace(bytes.Clone(good), []byte(`"version":1`), []byte(`"version":9`), 1)
	cases := map[string][]byte{
		"truncated in the data":  good[:len(good)/2],
		"truncated at the end":   good[:len(good)-1500],
		"another version":        other,
		"a byte flipped":         flip,
		"not an archive":         []byte("hello"),
		"empty":                  nil,
		"path traversal entries": traversal(t),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "data")
			_, err := backup.Restore(ctxT(t), bytes.NewReader(b), dir)
			if !errors.Is(err, backup.ErrBadArchive) {
				t.Fatalf("want ErrBadArchive, got %v", err)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 0 {
				t.Fatalf("restore left %d entries behind (first %s)", len(ents), ents[0].Name())
			}
		})
	}
	t.Run("non-empty target", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "keep"), []byte("x"), 0o600)
		if _, err := backup.Restore(ctxT(t), bytes.NewReader(good), dir); err == nil || !strings.Contains(err.Error(), "not empty") {
			t.Fatalf("want a refusal naming the non-empty target: %v", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Fatal("restore wrote into a non-empty target")
		}
	})
}

func traversal(t *testing.T) []byte {
	var buf bytes.Buffer
	a, err := backup.NewWriter(&buf, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	a.Begin("../escape", 1)
	a.Write([]byte("x"))
	a.Close(0)
	return buf.Bytes()
}

// TestScheduledBackupKilledLeavesPreviousIntact kills (SIGKILL) a process in
// the middle of a scheduled backup: the earlier backups are untouched and
// restorable, the torn one exists only as a *.tmp file, and the next
// scheduler removes it.
func TestScheduledBackupKilledLeavesPreviousIntact(t *testing.T) {
	if os.Getenv("BACKUP_CHILD") != "" {
		child()
		return
	}
	dir := t.TempDir()
	data := t.TempDir()
	s := openBolt(t, data)
	if err := appendN(ctxT(t), s, "a", 100); err != nil {
		t.Fatal(err)
	}
	sch := backup.Scheduler{Dir: dir, Keep: 5, Source: source(s, "")}
	for i := 0; i < 2; i++ {
		if r := sch.Once(ctxT(t)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	s.Close()
	before := finished(t, dir)
	if len(before) != 2 {
		t.Fatalf("%d backups before the kill", len(before))
	}
	sums := map[string][]byte{}
	for _, n := range before {
		sums[n], _ = os.ReadFile(filepath.Join(dir, n))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestScheduledBackupKilledLeavesPreviousIntact$")
	cmd.Env = append(os.Environ(), "BACKUP_CHILD=1", "BACKUP_DIR="+dir, "BACKUP_DATA="+data)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The child says when its backup is half written, then blocks.
	sc := bufio.NewScanner(out)
	var said []string
	for sc.Scan() && sc.Text() != "MID" {
		said = append(said, sc.Text())
	}
	if sc.Text() != "MID" {
		cmd.Process.Kill()
		t.Fatalf("the child never reached the middle of its backup: %q", said)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmps) != 1 {
		t.Fatalf("want the killed backup's one .tmp file, got %v", tmps)
	}
	after := finished(t, dir)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("finished backups changed: %v → %v", before, after)
	}
	for _, n := range after {
		b, _ := os.ReadFile(filepath.Join(dir, n))
		if !bytes.Equal(b, sums[n]) {
			t.Fatalf("%s changed", n)
		}
		if _, err := backup.Restore(ctxT(t), bytes.NewReader(b), filepath.Join(t.TempDir(), "r")); err != nil {
			t.Fatalf("%s no longer restores: %v", n, err)
		}
	}
	// A new scheduler cleans the torn leftover before its first run.
	// Its schedule's first timer is armed once the cleaning is done: that
	// is the event to wait for (before: a 5 ms poll of the directory).
	ctx, cancel := context.WithCancel(ctxT(t))
	clk := clock.NewFake(time.Now())
	done := make(chan error, 1)
	go func() {
		done <- (&backup.Scheduler{Dir: dir, Every: time.Hour, Source: sch.Source, Clock: clk}).Run(ctx)
	}()
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatalf("the scheduler never armed its schedule: %v", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(tmps) != 0 {
		t.Fatalf("the torn leftover is still there: %v", tmps)
	}
	cancel()
	<-done
}

func finished(t *testing.T, dir string) []string {
	t.Helper()
	ms, _ := filepath.Glob(filepath.Join(dir, "slotkeeper-*"+backup.Suffix))
	for i := range ms {
		ms[i] = filepath.Base(ms[i])
	}
	return ms
}

// child runs a scheduled backup whose snapshot stops half way (after
// telling the parent) until the parent kills it.
func child() {
	s, err := boltstore.Open(os.Getenv("BACKUP_DATA"), boltstore.Options{})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	src := backup.Source{Snapshot: func(ctx context.Context, w io.Writer, size func(int64) error) (events.Position, error) {
		info, err := s.Snapshot(ctx, &stallWriter{w: w}, size)
		return info.Head, err
	}}
	sch := backup.Scheduler{Dir: os.Getenv("BACKUP_DIR"), Keep: 5, Source: src}
	sch.Once(context.Background())
	os.Exit(3) // not reached: the parent kills us mid-write
}

type stallWriter struct {
	w io.Writer
	n int
}

func (s *stallWriter) Write(p []byte) (int, error) {
	s.n += len(p)
	if s.n > 4096 {
		n, err := s.w.Write(p[:len(p)/2])
		if err != nil {
			return n, err
		}
		if f, ok := s.w.(interface{ Flush() error }); ok {
			f.Flush()
		}
		os.Stdout.WriteString("MID\n")
		time.Sleep(time.Hour) // until the parent's SIGKILL
	}
	return s.w.Write(p)
}

// TestSchedulerRunsOnItsClock: a backup is taken every Every on the
// scheduler's clock (a fake: an hour's schedule costs no wall time), the
// first one an interval after the start, and only the Keep newest stay.
func TestSchedulerRunsOnItsClock(t *testing.T) {
	dir := t.TempDir()
	s := openBolt(t, t.TempDir())
	if err := appendN(ctxT(t), s, "a", 10); err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	results := make(chan backup.Result, 10)
	sch := &backup.Scheduler{Dir: dir, Every: time.Hour, Keep: 2, Source: source(s, ""), Clock: fc, Done: func(r backup.Result) { results <- r }}
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- sch.Run(ctx) }()
	for i := 1; i <= 3; i++ {
		if err := fc.BlockUntil(ctxT(t), 1); err != nil {
			t.Fatal(err)
		}
		if len(results) != 0 {
			t.Fatalf("a backup before its time (round %d)", i)
		}
		fc.Advance(time.Hour)
		if r := <-results; r.Err != nil || !strings.Contains(r.Path, fc.Now().Format("20060102T15")) {
			t.Fatalf("round %d: %+v", i, r)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := finished(t, dir); len(got) != 2 {
		t.Fatalf("kept %v, want the 2 newest", got)
	}
}
