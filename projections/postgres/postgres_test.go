package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/postgres"
	"github.com/slotkeeper/slotkeeper/projections/postgres/pgtest"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open returns a postgres read model on a fresh database.
func open(t *testing.T, log events.Store) *postgres.Store {
	t.Helper()
	return openURL(t, pgtest.Start(t), log)
}

func openURL(t *testing.T, url string, log events.Store) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(projtest.Ctx(t), url, postgres.Options{Log: log, LockPoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestConformance(t *testing.T) {
	projtest.Run(t,
		func(t *testing.T, log events.Store) projections.Target { return open(t, log) },
		func(log events.Store) projections.Target { return memory.New(log) })
}

func TestMigrationsAreIdempotent(t *testing.T) {
	url := pgtest.Start(t)
	openURL(t, url, nil)
	openURL(t, url, nil) // a second process on the same database
	conn, err := pgx.Connect(projtest.Ctx(t), url)
	projtest.Must(t, err)
	defer conn.Close(context.Background())
	var n int
	projtest.Must(t, conn.QueryRow(projtest.Ctx(t), `SELECT count(*) FROM schema_migrations`).Scan(&n))
	files, err := filepath.Glob("migrations/*.sql")
	projtest.Must(t, err)
	if n != len(files) {
		t.Fatalf("schema_migrations has %d rows, want one per migration (%d)", n, len(files))
	}
}

func TestApplyWithoutTheLockIsRefused(t *testing.T) {
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 3).Random(projtest.Ctx(t), 2, 30))
	s := open(t, log)
	evs, err := log.ReadStream(projtest.Ctx(t), "slot-s000", 0, 1, events.Forward)
	projtest.Must(t, err)
	if _, err := s.Apply(projtest.Ctx(t), []projections.Event{projections.DecodeEvent(evs[0])}); !errors.Is(err, postgres.ErrNotHolder) {
		t.Fatalf("Apply without the lock: err = %v, want ErrNotHolder", err)
	}
	if pos, _ := s.Position(projtest.Ctx(t)); pos != 0 {
		t.Fatalf("a refused Apply moved the checkpoint to %d", pos)
	}
}

func lockHolders(t *testing.T, url string) []int {
	conn, err := pgx.Connect(projtest.Ctx(t), url)
	projtest.Must(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(projtest.Ctx(t), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	projtest.Must(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	projtest.Must(t, err)
	return pids
}

// Two "processes" (stores with their own connections) share a database: one
// projects while the other follows its commits (its feed and WaitFor work
// too), and when the projector's connection dies the other takes over
// without skipping or doubling an event, in the read model or in its feed.
func TestTwoRunnersOneProjectorAndTakeover(t *testing.T) {
	ctx := projtest.Ctx(t)
	url := pgtest.Start(t)
	log := memstore.New()
	g := projtest.NewGen(log, 11)
	projtest.Must(t, g.Random(ctx, 4, 300))

	var (
		stores  []*postgres.Store
		runners []*projections.Runner
		feeds   []*projections.Subscription
		stops   []context.CancelFunc
		dones   []chan struct{}
	)
	for i := 0; i < 2; i++ {
		s := openURL(t, url, log)
		r := projections.NewRunner(log, s, projections.RunnerOptions{MaxBatch: 50, RetryDelay: 20 * time.Millisecond})
		feeds = append(feeds, r.Subscribe(1<<16))
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = r.Run(rctx)
		}()
		stores, runners, stops, dones = append(stores, s), append(runners, r), append(stops, stop), append(dones, done)
	}
	t.Cleanup(func() {
		for i := range stops {
			stops[i]()
			<-dones[i]
		}
	})
	head, _ := log.Head(ctx)
	for _, r := range runners {
		projtest.Must(t, r.WaitFor(ctx, head)) // the follower too
	}
	if h := lockHolders(t, url); len(h) != 1 {
		t.Fatalf("%d processes hold the projector lock, want 1", len(h))
	}
	first := 0
	if stores[1].HoldsLock() {
		first = 1
	}
	other := 1 - first
	if !stores[first].HoldsLock() || stores[other].HoldsLock() {
		t.Fatalf("lock held by store 0: %v, store 1: %v", stores[0].HoldsLock(), stores[1].HoldsLock())
	}

	// The projector's process dies: its session ends without an unlock.
	conn, err := pgx.Connect(ctx, url)
	projtest.Must(t, err)
	defer conn.Close(context.Background())
	pid := lockHolders(t, url)[0]
	projtest.Must(t, conn.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(new(bool)))
	stops[first]()
	<-dones[first]

	projtest.Must(t, g.Random(ctx, 0, 900))
	head, _ = log.Head(ctx)
	projtest.Must(t, runners[other].WaitFor(ctx, head))
	if !stores[other].HoldsLock() {
		t.Fatal("the survivor reached the head without holding the lock")
	}

	// The survivor's feed (following, catching up at takeover, projecting)
	// is gapless and has no duplicate.
	var next events.Position
	for next < head {
		select {
		case c, ok := <-feeds[other].C:
			if !ok {
				t.Fatalf("survivor's feed closed at %d (dropped=%v)", next, feeds[other].Dropped())
			}
			if next != 0 && c.Position != next+1 {
				t.Fatalf("survivor's feed jumped from %d to %d", next, c.Position)
			}
			if c.Audit == nil || c.Audit.Position != c.Position {
				t.Fatalf("change %d without its audit entry", c.Position)
			}
			next = c.Position
		case <-ctx.Done():
			t.Fatalf("survivor's feed stalled at %d of %d", next, head)
		}
	}

	ref := memory.New(log)
	projtest.Catchup(t, log, ref, 0)
	diffs, err := projections.Compare(ctx, openURL(t, url, log), ref)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
}

const (
	envChildURL  = "PROJECTIONS_CRASH_URL"
	envChildLog  = "PROJECTIONS_CRASH_LOG"
	envChildKill = "PROJECTIONS_CRASH_KILL_AT"
	crashEvents  = 3000
)

// TestCrashChildProjector is the child of TestKilledProjectorNeitherSkipsNorDoubles:
// it opens the parent's bbolt log, projects until its kill-at-th batch has
// written its rows, says so, and waits for SIGKILL before committing.
func TestCrashChildProjector(t *testing.T) {
	url := os.Getenv(envChildURL)
	if url == "" {
		return // only meaningful as a child process
	}
	killAt, _ := strconv.Atoi(os.Getenv(envChildKill))
	log, err := boltstore.Open(os.Getenv(envChildLog), boltstore.Options{LockTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	batches := 0
	s, err := postgres.Open(context.Background(), url, postgres.Options{Log: log, LockPoll: 20 * time.Millisecond,
		BeforeCommit: func(last events.Position) {
			batches++
			if batches == killAt {
				fmt.Printf("WRITTEN %d\n", last)
				select {} // rows written, not committed: the parent kills us here
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := projections.NewRunner(log, s, projections.RunnerOptions{MaxBatch: 97})
	_ = r.Run(context.Background())
}

func TestKilledProjectorNeitherSkipsNorDoubles(t *testing.T) {
	ctx := projtest.Ctx(t)
	url := pgtest.Start(t)
	// The log is an embedded bbolt store the parent fills and closes; each
	// child opens it (the file lock passes on when a child dies).
	logPath := filepath.Join(t.TempDir(), "events.db")
	func() {
		log, err := boltstore.Open(logPath, boltstore.Options{})
		projtest.Must(t, err)
		defer log.Close()
		projtest.Must(t, projtest.NewGen(log, 77).Random(ctx, 6, crashEvents))
	}()
	conn, err := pgx.Connect(ctx, url)
	projtest.Must(t, err)
	defer conn.Close(context.Background())

	prev := int64(0)
	for _, killAt := range []int{1, 3, 2, 5} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChildProjector$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildURL+"="+url, envChildLog+"="+logPath, envChildKill+"="+strconv.Itoa(killAt))
		out, err := cmd.StdoutPipe()
		projtest.Must(t, err)
		cmd.Stderr = os.Stderr
		projtest.Must(t, cmd.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "WRITTEN ") {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child said %q, %v", line, err)
		}
		written, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(line, "WRITTEN ")), 10, 64)
		projtest.Must(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		// The killed batch is invisible: the checkpoint is where the last
		// committed batch ended, and the audit has exactly the positions
		// 1..checkpoint, each once.
		var cp, n, maxPos int64
		projtest.Must(t, conn.QueryRow(ctx, `SELECT position FROM checkpoint`).Scan(&cp))
		projtest.Must(t, conn.QueryRow(ctx, `SELECT count(*), coalesce(max(position), 0) FROM audit`).Scan(&n, &maxPos))
		if cp >= written || cp < prev || n != cp || maxPos != cp {
			t.Fatalf("kill at batch %d (rows up to %d written): checkpoint %d (before: %d), audit rows %d, max %d",
				killAt, written, cp, prev, n, maxPos)
		}
		if killAt > 1 && cp == prev {
			t.Fatalf("the child committed nothing before batch %d", killAt)
		}
		prev = cp
	}
	if prev == 0 {
		t.Fatal("no batch was ever committed")
	}

	// Then kill a free-running child at whatever it is doing when the
	// parent has seen its k-th commit notification (it goes on applying
	// while the parent reacts).
	listen, err := pgx.Connect(ctx, url)
	projtest.Must(t, err)
	defer listen.Close(context.Background())
	_, err = listen.Exec(ctx, `LISTEN slotkeeper_projections`)
	projtest.Must(t, err)
	for _, k := range []int{2, 1, 3} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestCrashChildProjector$", "-test.count=1")
		cmd.Env = append(os.Environ(), envChildURL+"="+url, envChildLog+"="+logPath, envChildKill+"=0")
		cmd.Stderr = os.Stderr
		projtest.Must(t, cmd.Start())
		for i := 0; i < k; {
			nt, err := listen.WaitForNotification(ctx)
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("waiting for commit %d of the child: %v", i+1, err)
			}
			// Notifications of the previous child's last commits may
			// still be queued: count only this child's.
			if pos, _ := strconv.ParseInt(nt.Payload, 10, 64); pos > prev {
				i++
			}
		}
		projtest.Must(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		var cp, n, maxPos int64
		projtest.Must(t, conn.QueryRow(ctx, `SELECT position FROM checkpoint`).Scan(&cp))
		projtest.Must(t, conn.QueryRow(ctx, `SELECT count(*), coalesce(max(position), 0) FROM audit`).Scan(&n, &maxPos))
		if cp <= prev || n != cp || maxPos != cp {
			t.Fatalf("killed after %d commits: checkpoint %d (before: %d), audit rows %d, max %d", k, cp, prev, n, maxPos)
		}
		prev = cp
	}

	// A new projector finishes from the checkpoint; the result equals a
	// rebuild from scratch.
	log, err := boltstore.Open(logPath, boltstore.Options{LockTimeout: 10 * time.Second})
	projtest.Must(t, err)
	defer log.Close()
	s := openURL(t, url, log)
	reached, err := projections.Replay(ctx, log, s, 0, 0)
	projtest.Must(t, err)
	head, _ := log.Head(ctx)
	if reached != head {
		t.Fatalf("replay reached %d, head %d", reached, head)
	}
	ref := memory.New(log)
	projtest.Catchup(t, log, ref, 0)
	diffs, err := projections.Compare(ctx, s, ref)
	projtest.Must(t, err)
	for _, d := range diffs {
		t.Error(d)
	}
	// And verify, as `slotkeeper verify` runs it, finds nothing.
	diffs, err = memory.Verify(ctx, log, s)
	projtest.Must(t, err)
	if len(diffs) != 0 {
		t.Fatalf("verify found %d differences", len(diffs))
	}
}

func TestVerifyReportsADifference(t *testing.T) {
	ctx := projtest.Ctx(t)
	url := pgtest.Start(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 5).Random(ctx, 3, 400))
	s := openURL(t, url, log)
	projtest.Catchup(t, log, s, 0)
	diffs, err := memory.Verify(ctx, log, s)
	projtest.Must(t, err)
	if len(diffs) != 0 {
		t.Fatalf("a fresh rebuild differs: %v", diffs)
	}
	// Someone edits the read model behind the projector's back.
	conn, err := pgx.Connect(ctx, url)
	projtest.Must(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `UPDATE slots SET view = jsonb_set(view, '{occupant}', '"mallory"') WHERE name = 's001'`)
	projtest.Must(t, err)
	diffs, err = memory.Verify(ctx, log, s)
	projtest.Must(t, err)
	if len(diffs) == 0 || !strings.Contains(strings.Join(diffs, "\n"), "slot s001") {
		t.Fatalf("verify missed the edited slot: %v", diffs)
	}
	// Reset and replay repair it.
	projtest.Must(t, s.Reset(ctx))
	projtest.Catchup(t, log, s, 0)
	diffs, err = memory.Verify(ctx, log, s)
	projtest.Must(t, err)
	if len(diffs) != 0 {
		t.Fatalf("after reset and replay: %v", diffs)
	}
}
