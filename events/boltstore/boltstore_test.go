package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/storetest"
	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"
)

// childEnv selects a helper-process role when the test binary re-executes
// itself (see TestMain).
const childEnv = "BOLTSTORE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "crash-appender":
		crashAppender(os.Getenv("BOLTSTORE_TEST_PATH"))
		os.Exit(0)
	case "lock-probe":
		lockProbe(os.Getenv("BOLTSTORE_TEST_PATH"))
		os.Exit(0)
	}
	code := m.Run()
	cleanupBench()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// child runs this test binary again in a helper role.
func child(t *testing.T, role, path string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// GORACE: a race-enabled child otherwise sleeps 1s at exit.
	cmd.Env = append(os.Environ(), childEnv+"="+role, "BOLTSTORE_TEST_PATH="+path, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	return cmd
}

func openT(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ev(typ string, n int) events.EventData {
	return events.EventData{Type: typ, Data: []byte(fmt.Sprintf(`{"n":%d}`, n)), Meta: events.Metadata{Actor: "test"}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return openT(t, t.TempDir())
	})
}

// The same suite with tiny read chunks, so catch-up crosses many read
// transactions and the chunk boundary meets concurrent commits, and with the
// index folded in every few events, so reads meet every mix of indexed and
// tail revisions.
func TestConformanceSmallChunksAndFlushes(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		s, err := Open(t.TempDir(), Options{ReadChunk: 3, IndexFlushEvents: 5})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The index folded in on every commit.
func TestConformanceFlushEveryCommit(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		s, err := Open(t.TempDir(), Options{IndexFlushEvents: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{IndexFlushEvents: 8})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	var last events.AppendResult
	for i := range 20 {
		if last, err = s.Append(ctx, fmt.Sprintf("slot-%d", i%3), events.Any(), ev("A", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openT(t, filepath.Join(dir, FileName))
	if h, _ := s.Head(ctx); h != last.Position || h != 20 {
		t.Fatalf("head after reopen %d, want %d", h, last.Position)
	}
	got, err := s.ReadStream(ctx, "slot-1", 0, 0, events.Forward)
	if err != nil || len(got) != 7 {
		t.Fatalf("slot-1 after reopen: %d events, %v", len(got), err)
	}
	res, err := s.Append(ctx, "slot-1", events.Exact(6), ev("A", 99))
	if err != nil || res.Position != 21 || res.NextExpected != 7 {
		t.Fatalf("append after reopen: %+v %v", res, err)
	}
}

// One batch, mixed outcomes: each request is checked against its own
// condition, seeing the requests before it in the same transaction, and the
// whole batch costs one commit.
func TestGroupCommitMixedBatch(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := ctxT(t)
	if _, err := s.Append(ctx, "slot-x", events.NoStream(), ev("A", 0), ev("A", 1)); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	mk := func(stream string, exp events.ExpectedRevision, evs ...events.EventData) *appendReq {
		for i := range evs {
			evs[i].ID = fmt.Sprintf("%s-%d", stream, i)
			evs[i].Meta.Time = time.Now()
		}
		return &appendReq{stream: stream, expected: exp, evs: evs, done: make(chan struct{})}
	}
	batch := []*appendReq{
		mk("slot-a", events.NoStream(), ev("A", 0)),           // ok: rev 0, pos 3
		mk("slot-x", events.Exact(5), ev("A", 0)),             // wrong
		mk("slot-a", events.Exact(0), ev("A", 1), ev("A", 2)), // ok: sees the first request
		mk("slot-b", events.StreamExists(), ev("A", 0)),       // wrong
		mk("slot-a", events.NoStream(), ev("A", 3)),           // wrong: created earlier in this batch
		mk("slot-x", events.Exact(1)),                         // ok, zero events
		mk("slot-x", events.Exact(1), ev("A", 2)),             // ok: rev 2, pos 6
	}
	// The writer goroutine is idle (no Append is running), so calling
	// commit here is what the writer would do with this batch.
	s.commit(batch, nil)
	want := []struct {
		ok  bool
		rev uint64
		pos events.Position
	}{{true, 0, 3}, {false, 0, 0}, {true, 2, 5}, {false, 0, 0}, {false, 0, 0}, {true, 1, 5}, {true, 2, 6}}
	for i, w := range want {
		r := batch[i]
		if w.ok != (r.err == nil) {
			t.Fatalf("request %d: err %v, want ok=%v", i, r.err, w.ok)
		}
		if !w.ok && !errors.Is(r.err, events.ErrWrongRevision) {
			t.Fatalf("request %d: %v, want ErrWrongRevision", i, r.err)
		}
		if w.ok && (r.res.NextExpected != w.rev || r.res.Position != w.pos) {
			t.Fatalf("request %d: %+v, want rev %d pos %d", i, r.res, w.rev, w.pos)
		}
	}
	after := s.Stats()
	if after.Commits-before.Commits != 1 || after.Events-before.Events != 4 || after.Appends-before.Appends != 3 {
		t.Fatalf("stats moved by %+v -> %+v, want 1 commit, 3 appends, 4 events", before, after)
	}
	a, err := s.ReadStream(ctx, "slot-a", 0, 0, events.Forward)
	if err != nil || len(a) != 3 || a[2].ID != "slot-a-1" {
		t.Fatalf("slot-a: %+v %v", a, err)
	}
	if h, _ := s.Head(ctx); h != 6 {
		t.Fatalf("head %d, want 6", h)
	}
}

// A batch whose every request fails writes nothing and costs no commit.
func TestGroupCommitAllFail(t *testing.T) {
	s := openT(t, t.TempDir())
	before := s.Stats()
	r := &appendReq{stream: "slot-a", expected: events.StreamExists(), evs: []events.EventData{ev("A", 0)}, done: make(chan struct{})}
	s.commit([]*appendReq{r}, nil)
	if !errors.Is(r.err, events.ErrWrongRevision) || s.Stats() != before {
		t.Fatalf("err %v, stats %+v -> %+v", r.err, before, s.Stats())
	}
}

// A batch whose commit fails (an I/O error, injected here) answers that
// error to every request whose condition failed only because of a request
// earlier in the same batch: that request was never written, so "wrong
// revision" (which a job attempt takes as being fenced) would be a lie. A
// request that conflicts with the committed log keeps ErrWrongRevision.
// Then the same appends succeed on their own once commits work again.
func TestFailedGroupCommitIsNotWrongRevision(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx := ctxT(t)
	if _, err := s.Append(ctx, "job-x", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	ioErr := errors.New("injected: fdatasync: input/output error")
	s.failCommit = func() error { return ioErr }
	mk := func(stream string, exp events.ExpectedRevision, evs ...events.EventData) *appendReq {
		for i := range evs {
			evs[i].Meta.Time = time.Now()
		}
		return &appendReq{stream: stream, expected: exp, evs: evs, done: make(chan struct{})}
	}
	batch := []*appendReq{
		mk("job-x", events.Exact(0), ev("A", 1)),   // would be written: rev 1
		mk("job-x", events.Exact(0), ev("A", 2)),   // conflicts only with request 0
		mk("job-y", events.NoStream(), ev("A", 0)), // would be written
		mk("job-y", events.NoStream(), ev("A", 1)), // conflicts only with request 2
		mk("job-x", events.Exact(7), ev("A", 3)),   // conflicts with the committed log
		mk("job-z", events.StreamExists()),         // conflicts with the committed log
	}
	s.commit(batch, nil)
	for i, wantIO := range []bool{true, true, true, true, false, false} {
		err := batch[i].err
		if wantIO && (!errors.Is(err, ioErr) || errors.Is(err, events.ErrWrongRevision)) {
			t.Errorf("request %d: %v, want the commit's I/O error", i, err)
		}
		if !wantIO && !errors.Is(err, events.ErrWrongRevision) {
			t.Errorf("request %d: %v, want ErrWrongRevision", i, err)
		}
	}
	if h, _ := s.Head(ctx); h != 1 {
		t.Fatalf("head %d after a failed commit, want 1", h)
	}
	// The log is as before the batch: request 1, retried alone, commits.
	s.failCommit = nil
	if res, err := s.Append(ctx, "job-x", events.Exact(0), ev("A", 2)); err != nil || res.NextExpected != 1 {
		t.Fatalf("retry of request 1: %+v %v", res, err)
	}
}

// Concurrent appenders share commits (fewer commits than appends).
func TestConcurrentAppendsShareCommits(t *testing.T) {
	s := openT(t, t.TempDir())
	const appenders, each = 16, 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range each {
				if _, err := s.Append(ctxT(t), fmt.Sprintf("job-%d", g), events.Any(), ev("A", i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	st := s.Stats()
	if st.Appends != appenders*each || st.Events != appenders*each {
		t.Fatalf("stats %+v, want %d appends", st, appenders*each)
	}
	if st.Commits >= st.Appends {
		t.Fatalf("%d commits for %d concurrent appends: no group commit", st.Commits, st.Appends)
	}
	t.Logf("%d appends in %d commits", st.Appends, st.Commits)
}

// An append cancelled before the writer takes it returns ctx.Err and
// writes nothing.
func TestAppendCancelledContext(t *testing.T) {
	s := openT(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, "slot-a", events.Any(), ev("A", 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled context: %v", err)
	}
	if h, _ := s.Head(context.Background()); h != 0 {
		t.Fatalf("head %d", h)
	}
}

func TestLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.Append(ctxT(t), "slot-a", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := Open(dir, Options{})
	if !errors.Is(err, events.ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second open took %s to fail", d)
	}
	if !strings.Contains(err.Error(), s.Path()) {
		t.Fatalf("error %q does not name the file", err)
	}
	// The holder is unaffected.
	if _, err := s.Append(ctxT(t), "slot-a", events.Exact(0), ev("A", 1)); err != nil {
		t.Fatalf("append by the holder after a refused open: %v", err)
	}
}

// lockProbe is the child side of TestLockedOtherProcess.
func lockProbe(path string) {
	s, err := Open(path, Options{})
	switch {
	case errors.Is(err, events.ErrLocked):
		fmt.Printf("LOCKED %v\n", err)
	case err == nil:
		s.Close()
		fmt.Println("OPENED")
	default:
		fmt.Printf("ERROR %v\n", err)
	}
}

func TestLockedOtherProcess(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	if _, err := s.Append(ctxT(t), "slot-a", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	out, err := child(t, "lock-probe", dir).Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if !strings.HasPrefix(string(out), "LOCKED ") || !strings.Contains(string(out), "in use by another process") {
		t.Fatalf("second process: %q, want a clear ErrLocked", out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Released on close: the other process may open it now.
	out, err = child(t, "lock-probe", dir).Output()
	if err != nil || string(out) != "OPENED\n" {
		t.Fatalf("probe after close: %q %v", out, err)
	}
}

func TestCorruptOrForeignFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	foreignBolt := func(name string, fill func(tx *bolt.Tx) error) string {
		p := filepath.Join(dir, name)
		db, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(fill); err != nil {
			t.Fatal(err)
		}
		db.Close()
		return p
	}
	// A real store whose first page (bbolt's meta pages) is overwritten.
	smashed := filepath.Join(dir, "smashed.db")
	s, err := Open(smashed, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), "slot-a", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	b, _ := os.ReadFile(smashed)
	for i := 0; i < 8192 && i < len(b); i++ {
		b[i] ^= 0x5a
	}
	write("smashed.db", b)

	files := map[string]string{
		"text file":  write("notes.txt", bytes.Repeat([]byte("not a database\n"), 1000)),
		"short file": write("short.db", []byte("x")),
		"smashed":    smashed,
		"foreign bolt": foreignBolt("foreign.db", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket([]byte("users"))
			if err != nil {
				return err
			}
			return b.Put([]byte("alice"), []byte("admin"))
		}),
		"other format marker": foreignBolt("marker.db", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			return b.Put(keyFormat, []byte("something-else"))
		}),
		"future version": foreignBolt("future.db", func(tx *bolt.Tx) error {
			b, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := b.Put(keyFormat, []byte(formatMarker)); err != nil {
				return err
			}
			return b.Put(keyVersion, u64(formatVersion+1))
		}),
	}
	for name, p := range files {
		before, _ := os.ReadFile(p)
		s, err := Open(p, Options{})
		if err == nil {
			s.Close()
			t.Fatalf("%s: opened without error", name)
		}
		if !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
		after, _ := os.ReadFile(p)
		if !bytes.Equal(before, after) {
			t.Fatalf("%s: refused open changed the file", name)
		}
	}
}

// A store whose file was cut short or whose pages were damaged fails to open
// with ErrCorrupt instead of crashing the process (bbolt panics on invalid
// pages and faults on a short mapping), releases the lock, and leaves the
// file as it was.
func TestDamagedFile(t *testing.T) {
	for _, mode := range []string{"truncated to half its pages", "truncated to 6 pages", "page headers"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{IndexFlushEvents: 100})
			if err != nil {
				t.Fatal(err)
			}
			big := events.EventData{Type: "Big", Data: []byte(`"` + strings.Repeat("x", 20000) + `"`)}
			for i := range 30 { // about 6 MB in 30 commits
				batch := []events.EventData{ev("A", i), big, big, big, big, big, big, big, big, big, big}
				if _, err := s.Append(ctxT(t), fmt.Sprintf("s-%d", i%7), events.Any(), batch...); err != nil {
					t.Fatal(err)
				}
			}
			var used int64 // bbolt's high-water mark; the file is longer (it grows in steps)
			if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
				t.Fatal(err)
			}
			s.Close()
			p := filepath.Join(dir, FileName)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case "truncated to half its pages":
				b = b[:used/2]
			case "truncated to 6 pages":
				b = b[:6*4096]
			case "page headers":
				for pg := 2; pg*4096+16 < len(b); pg++ {
					b[pg*4096+8] ^= 0xff // flags
					b[pg*4096+10] ^= 0x33
				}
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			for range 2 { // the second time proves the lock was released
				s, err := Open(dir, Options{})
				if err == nil {
					// The damage missed what Open reads; reading everything
					// must find it.
					err = readAll(t, s)
					s.Close()
				}
				if !errors.Is(err, events.ErrCorrupt) {
					t.Fatalf("open and full read of a damaged file: %v, want ErrCorrupt", err)
				}
			}
			after, _ := os.ReadFile(p)
			if !bytes.Equal(after, b) {
				t.Fatal("refused open changed the file")
			}
		})
	}
}

// readAll reads every event through SubscribeAll and every stream of
// TestDamagedFile through ReadStream, returning the first error.
func readAll(t *testing.T, s *Store) error {
	head, err := s.Head(ctxT(t))
	if err != nil {
		return err
	}
	err = s.SubscribeAll(ctxT(t), 0, events.Filter{}, func(_ context.Context, e events.RecordedEvent) error {
		if e.Position == head {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) {
		return err
	}
	for i := range 7 {
		if _, err := s.ReadStream(ctxT(t), fmt.Sprintf("s-%d", i), 0, 0, events.Forward); err != nil {
			return err
		}
	}
	return nil
}

// If the index and the log disagree about where a stream continues, Open
// says so instead of serving a stream with a hole or a repeat.
func TestIndexLogDisagreement(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir)
	for i := range 5 {
		if _, err := s.Append(ctxT(t), "slot-a", events.Any(), ev("A", i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // folds the tail in: indexed = 5
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Pretend the index was only complete up to position 2 while the streams
	// bucket already says revision 4: the log after 2 starts at revision 2.
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyIndexed, u64(2)) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "slot-a@2") {
		t.Fatalf("open with an index ahead of the log: %v, want ErrCorrupt naming slot-a@2", err)
	}
}

// A record the writer never wrote (bit rot, a foreign writer) is reported
// as ErrCorrupt by reads, not decoded into garbage.
func TestCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), "slot-a", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLog).Put(u64(1), []byte{recordVersion, 200})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadStream(ctxT(t), "slot-a", 0, 0, events.Forward); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("read of a damaged record: %v", err)
	}
	err = s.SubscribeAll(ctxT(t), 0, events.Filter{}, func(context.Context, events.RecordedEvent) error { return nil })
	if !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("subscription over a damaged record: %v", err)
	}
	s.Close()
}

func TestRecordRoundTrip(t *testing.T) {
	tm := time.Date(1969, 7, 20, 20, 17, 40, 123456789, time.UTC) // before the epoch
	in := events.EventData{ID: "id-1", Type: "T", Data: []byte(`{"x":"ü"}`),
		Meta: events.Metadata{Actor: "a", CorrelationID: "c", CausationID: "z", Time: tm, Schema: 3}}
	b := encodeRecord(nil, "slot-ü/x", 42, &in)
	if len(b) > recordSize("slot-ü/x", &in) {
		t.Fatalf("record is %d bytes, recordSize said at most %d", len(b), recordSize("slot-ü/x", &in))
	}
	got, err := decodeRecord(b, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "id-1" || got.Stream != "slot-ü/x" || got.Revision != 42 || got.Position != 7 || got.Type != "T" ||
		string(got.Data) != `{"x":"ü"}` || got.Meta.Actor != "a" || got.Meta.CorrelationID != "c" ||
		got.Meta.CausationID != "z" || !got.Meta.Time.Equal(tm) || got.Meta.Schema != 3 {
		t.Fatalf("round trip: %+v", got)
	}
	for n := range len(b) {
		if _, err := decodeRecord(b[:n], 1); !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCorrupt", n, err)
		}
	}
	if _, err := decodeRecord(append([]byte{9}, b[1:]...), 1); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("unknown record version: %v", err)
	}
	for i := 1; i < len(b); i++ { // any flipped byte is caught
		d := append([]byte(nil), b...)
		d[i] ^= 0x01
		if _, err := decodeRecord(d, 1); !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v, want ErrCorrupt", i, err)
		}
	}
}

// Close in the middle of concurrent appends: each append is either
// acknowledged (and then durable) or refused with ErrClosed (and then
// absent); nothing else.
func TestCloseDuringAppends(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		id  string
		err error
	}
	out := make(chan outcome, 100_000)
	started := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				e := ev("A", i)
				e.ID = fmt.Sprintf("g%d-%d", g, i)
				_, err := s.Append(context.Background(), fmt.Sprintf("job-%d", g), events.Any(), e)
				out <- outcome{e.ID, err}
				if i == 3 {
					started <- struct{}{}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	for range 8 {
		<-started // every appender is in full swing
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(out)
	acked, refused := map[string]bool{}, map[string]bool{}
	for o := range out {
		switch {
		case o.err == nil:
			acked[o.id] = true
		case errors.Is(o.err, events.ErrClosed):
			refused[o.id] = true
		default:
			t.Fatalf("append during close: %v", o.err)
		}
	}
	if len(refused) != 8 {
		t.Fatalf("%d appenders were refused, want all 8", len(refused))
	}
	s = openT(t, dir)
	stored := map[string]bool{}
	for g := range 8 {
		evs, err := s.ReadStream(ctxT(t), fmt.Sprintf("job-%d", g), 0, 0, events.Forward)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			stored[e.ID] = true
		}
	}
	for id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged %s is gone after close", id)
		}
	}
	for id := range refused {
		if stored[id] {
			t.Fatalf("refused %s was written", id)
		}
	}
	if len(stored) != len(acked) {
		t.Fatalf("%d events stored, %d acknowledged", len(stored), len(acked))
	}
}

// FuzzRecord: any envelope fields round-trip, and decoding arbitrary bytes
// never panics — it yields a record or ErrCorrupt. (go test runs the seeds;
// go test -fuzz=FuzzRecord explores.)
func FuzzRecord(f *testing.F) {
	f.Add("slot-a", "id", "T", "actor", []byte(`{"a":1}`), int64(0), uint32(0), 1, uint64(0), []byte{recordVersion})
	f.Add("ü/\"x", "", "Type.v2", "", []byte{}, int64(-1e10), uint32(999_999_999), -3, uint64(1<<63), []byte{1, 2, 3, 4, 5, 6, 7})
	f.Fuzz(func(t *testing.T, stream, id, typ, actor string, data []byte, sec int64, nsec uint32, schema int, rev uint64, junk []byte) {
		in := events.EventData{ID: id, Type: typ, Data: data,
			Meta: events.Metadata{Actor: actor, Time: time.Unix(sec, int64(nsec%1e9)).UTC(), Schema: schema}}
		b := encodeRecord(nil, stream, rev, &in)
		got, err := decodeRecord(b, 9)
		if err != nil {
			t.Fatalf("decode of an encoded record: %v", err)
		}
		if got.Stream != stream || got.ID != id || got.Type != typ || got.Meta.Actor != actor || got.Revision != rev ||
			!bytes.Equal(got.Data, data) || !got.Meta.Time.Equal(in.Meta.Time) || got.Meta.Schema != schema || got.Position != 9 {
			t.Fatalf("round trip: %+v", got)
		}
		if _, err := decodeRecord(junk, 1); err != nil && !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("junk: %v, want ErrCorrupt", err)
		}
	})
}

// flipRecord flips 4 bytes in the middle of the record at pos in the closed
// store file path, the way bit rot or a stray write would: bbolt's pages stay
// valid (bbolt checksums only its meta pages), only the record's CRC tells.
func flipRecord(t *testing.T, path string, pos uint64) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rec []byte
	err = db.View(func(tx *bolt.Tx) error {
		rec = bytes.Clone(tx.Bucket(bucketLog).Get(u64(pos)))
		return nil
	})
	db.Close()
	if err != nil || len(rec) < 16 {
		t.Fatalf("record at %d: %d bytes, %v", pos, len(rec), err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Copy-on-write leaves older copies of a page in free pages; damage
	// every copy, so the live one is damaged too.
	n := 0
	for at := bytes.Index(b, rec); at >= 0; at = bytes.Index(b, rec) {
		for i := range 4 {
			b[at+len(rec)/2+i] ^= 0xff
		}
		n++
	}
	if n == 0 {
		t.Fatalf("record at %d not found in the file", pos)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A damaged record is a permanent error that names the file, the position
// and what to do: the newest record is checked at Open (a restart after the
// damage stops at once), an older one fails reads and subscriptions with
// ErrCorrupt instead of an error worth retrying.
func TestDamagedRecordNamesFileAndPosition(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append(ctxT(t), "slot-a", events.Any(), ev("A", i)); err != nil {
			t.Fatal(err)
		}
	}
	path := s.Path()
	s.Close()
	wantMsg := func(err error, pos int) {
		t.Helper()
		if !errors.Is(err, events.ErrCorrupt) {
			t.Fatalf("got %v, want ErrCorrupt", err)
		}
		for _, w := range []string{path, fmt.Sprintf("position %d", pos), "checksum mismatch", "restore it from the newest backup"} {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("error %q does not say %q", err, w)
			}
		}
	}

	flipRecord(t, path, 5)
	_, err = Open(dir, Options{})
	wantMsg(err, 5)

	// An older record: Open does not read it; every read of it says so.
	dir2 := t.TempDir()
	s, err = Open(dir2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append(ctxT(t), "slot-a", events.Any(), ev("A", i)); err != nil {
			t.Fatal(err)
		}
	}
	path = s.Path()
	s.Close()
	flipRecord(t, path, 2)
	s = openT(t, dir2)
	err = s.SubscribeAll(ctxT(t), 0, events.Filter{}, func(context.Context, events.RecordedEvent) error { return nil })
	wantMsg(err, 2)
	_, err = s.ReadStream(ctxT(t), "slot-a", 0, 0, events.Forward)
	wantMsg(err, 2)
}

// damageFreelist puts a page that holds data (the root bucket's page) on the
// free-page list of the closed bbolt file at path, in the meta page bbolt
// uses (the one with the higher transaction id). Left alone, the next write
// would reuse that page and overwrite live data. Offsets follow bbolt's
// on-disk layout: a 16-byte page header; meta: magic, version, page size,
// flags (4 bytes each), root bucket {root pgid, sequence}, freelist pgid,
// high-water pgid, txid, checksum (8 bytes each, txid at 48); a freelist page's header
// count (uint16 at 10) and then its page ids.
func damageFreelist(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := func(off int) uint64 {
		var v uint64
		for i := 7; i >= 0; i-- {
			v = v<<8 | uint64(b[off+i])
		}
		return v
	}
	psize := int(b[16+8]) | int(b[16+9])<<8 | int(b[16+10])<<16 | int(b[16+11])<<24
	meta := 16
	if le(psize+16+48) > le(16+48) { // txid of meta page 1 > meta page 0
		meta = psize + 16
	}
	root, freelist := le(meta+16), le(meta+32)
	fl := int(freelist) * psize
	count := int(b[fl+10]) | int(b[fl+11])<<8
	if count == 0 || count == 0xffff {
		t.Fatalf("free list holds %d pages: nothing to damage", count)
	}
	for i := range 8 {
		b[fl+16+i] = byte(root >> (8 * i))
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A damaged free-page list is found by Open (bbolt's consistency check, for
// files up to Options.CheckMaxBytes; in the background, before any write,
// for bigger ones) and by Check, not by a write that reuses a live page
// while everything looks ready.
func TestDamagedFreelistFoundAtOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{IndexFlushEvents: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.Append(ctxT(t), fmt.Sprintf("slot-%d", i%4), events.Any(), ev("A", i)); err != nil {
			t.Fatal(err)
		}
	}
	path := s.Path()
	if err := s.Check(ctxT(t)); err != nil {
		t.Fatalf("check of a sound file: %v", err)
	}
	s.Close()
	// A sound file checked in the background (as a big one is) takes
	// appends once the check passed.
	s, err = Open(dir, Options{CheckMaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctxT(t), "slot-0", events.Any(), ev("A", 20)); err != nil || s.Err() != nil {
		t.Fatalf("append after a background check of a sound file: %v (store: %v)", err, s.Err())
	}
	s.Close()
	damageFreelist(t, path)

	_, err = Open(dir, Options{})
	if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "consistency check") ||
		!strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "backup") {
		t.Fatalf("open with a damaged free list: %v", err)
	}
	// Too big to check before Open returns (here: anything over 1 byte):
	// the background check refuses every append, and says so.
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{CheckMaxBytes: 1})
	if err != nil {
		t.Fatalf("open of a big file (checked in the background): %v", err)
	}
	if _, err := s.Append(ctxT(t), "slot-0", events.Any(), ev("A", 21)); !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "reachable freed") {
		t.Fatalf("append to a file whose free list is damaged: %v", err)
	}
	select {
	case <-s.Damaged():
	default:
		t.Fatal("Damaged not closed after the check failed")
	}
	if err := s.Err(); !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Err() = %v", err)
	}
	s.Close()
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("the damaged file was written to (%v)", err)
	}
	// Not checked at Open at all: Check finds it.
	s, err = Open(dir, Options{CheckMaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Check(ctxT(t)); !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "reachable freed") {
		t.Fatalf("Check with a damaged free list: %v", err)
	}
}
