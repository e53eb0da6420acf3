package boltstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// Benchmarks print their figures as metrics (scripts/bench/events.sh turns
// them into ratios). They measure; they assert nothing.

// BenchmarkRawFsync is the baseline: write 64 bytes and fdatasync, as a
// bbolt commit does (twice), in the directory the stores live in.
func BenchmarkRawFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync.probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		buf[0] = byte(i)
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "fsyncs/s")
}

// BenchmarkAppend appends b.N single-event appends, each fenced with Exact
// on the appender's own stream, from 1 or 32 goroutines.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("appenders=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			data := events.New(events.StepStarted{JobID: uuid.NewString(), Step: events.StepDeleteDB, Attempt: 1}, events.Metadata{Actor: "bench"})
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for g := range n {
				count := b.N / n
				if g < b.N%n {
					count++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					stream := fmt.Sprintf("job-%d", g)
					exp := events.NoStream()
					for range count {
						e := data
						e.ID = ""
						res, err := s.Append(context.Background(), stream, exp, e)
						if err != nil {
							b.Error(err)
							return
						}
						exp = events.Exact(res.NextExpected)
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			st := s.Stats()
			b.ReportMetric(float64(st.Events)/el.Seconds(), "events/s")
			b.ReportMetric(float64(st.Events)/float64(max(st.Commits, 1)), "events/commit")
			b.ReportMetric(float64(st.Commits)/el.Seconds(), "commits/s")
		})
	}
}

// millionEvents is the size of the replay benchmarks' store.
const millionEvents = 1_000_000

var million struct {
	once sync.Once
	dir  string
	err  error
	took time.Duration
}

// millionStore returns a store file holding millionEvents events, made once
// per test binary with big batched appends (removed by TestMain).
func millionStore(b *testing.B) string {
	b.Helper()
	million.once.Do(func() {
		million.dir, million.err = os.MkdirTemp("", "boltstore-bench-")
		if million.err != nil {
			return
		}
		start := time.Now()
		million.err = fillStore(million.dir, millionEvents)
		million.took = time.Since(start)
	})
	if million.err != nil {
		b.Fatal(million.err)
	}
	return filepath.Join(million.dir, FileName)
}

func cleanupBench() {
	if million.dir != "" {
		os.RemoveAll(million.dir)
	}
}

// fillStore writes n catalogue events: job streams of 500 events, appended
// whole by 8 concurrent appenders (so commits are group commits of big appends).
func fillStore(dir string, n int) error {
	s, err := Open(dir, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	const perStream, appenders = 500, 8
	jobs := make(chan int)
	errs := make(chan error, appenders)
	var wg sync.WaitGroup
	for range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([]events.EventData, perStream)
			for j := range jobs {
				id := uuid.NewString()
				meta := events.Metadata{Actor: "worker:bench:1", CorrelationID: id}
				for i := range batch {
					var p events.Payload
					switch i % 4 {
					case 0:
						p = events.StepStarted{JobID: id, Step: events.StepDeleteDB, Attempt: 1 + i/100}
					case 1:
						p = events.DBDeleted{StepResult: events.StepResult{JobID: id, Step: events.StepDeleteDB, Attempt: 1}, DBUUID: "db-" + id[:8]}
					case 2:
						p = events.LeaseRenewed{JobID: id, Attempt: 1, LeaseUntil: time.Now().UTC()}
					default:
						p = events.StepFailed{JobID: id, Step: events.StepDeleteApp, Attempt: 1, Error: "503 Service Unavailable", HTTPStatus: 503, Retryable: true}
					}
					batch[i] = events.New(p, meta)
				}
				if _, err := s.Append(context.Background(), events.JobStream(fmt.Sprintf("%06d-%s", j, id)), events.NoStream(), batch...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for j := 0; j < n/perStream; j++ {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// BenchmarkCatchUp replays the million-event store through SubscribeAll and
// decodes every payload with events.Decode, as a projection rebuild does.
func BenchmarkCatchUp(b *testing.B) {
	path := millionStore(b)
	// The catch-up alone: the background page check of a big file
	// (BenchmarkOpen reports its duration) would share the cores with it.
	s, err := Open(path, Options{CheckMaxBytes: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	head, _ := s.Head(context.Background())
	b.ResetTimer()
	start := time.Now()
	total := 0
	for range b.N {
		n := 0
		err := s.SubscribeAll(context.Background(), 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
			p, err := events.Decode(ev)
			if err != nil {
				return err
			}
			if _, ok := p.(events.Unknown); ok {
				return fmt.Errorf("unknown type %s", ev.Type)
			}
			n++
			if ev.Position == head {
				return errDone
			}
			return nil
		})
		// BenchmarkOpen adds one event per round; the log is never shorter.
		if !errors.Is(err, errDone) || n != int(head) || n < millionEvents {
			b.Fatalf("catch-up ended after %d events: %v", n, err)
		}
		total += n
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(million.took.Seconds(), "fill-s")
}

// BenchmarkOpen opens the million-event store (or the store in
// $BOLTSTORE_OPEN_BENCH, e.g. one made by backend/cmd/loggen) and appends
// one event, in alternating rounds: after a clean close (its marker spares
// Open the page check) and after a kill (no marker: what a SIGKILL leaves,
// since the killed process took the marker at Open and never wrote one),
// so Open runs bbolt's full check, in the background for a file this big,
// and the first append waits for it. The file is in the OS cache (a warm
// start). ms/open is Open + Head (ready to read), ms/first-append is Open
// until the first append committed; -clean and -killed per round kind.
// ms/bolt-open and ms/prepare split Open after a clean close: bbolt's open
// (with its 1 GiB initial mapping) and the format check plus index tail.
func BenchmarkOpen(b *testing.B) {
	path := os.Getenv("BOLTSTORE_OPEN_BENCH")
	if path == "" {
		path = millionStore(b)
	}
	path = dataFile(path)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	// A clean close leaves the marker the first clean round opens by.
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	ctx := context.Background()
	e := events.New(events.LeaseRenewed{JobID: "bench-open", Attempt: 1, LeaseUntil: time.Now().UTC()}, events.Metadata{Actor: "bench"})
	type round struct{ ready, first, boltOpen, prepare time.Duration }
	var clean, killed round
	b.ResetTimer()
	for range b.N {
		for _, kill := range []bool{false, true} {
			r, want := &clean, OpenMarker
			if kill {
				r, want = &killed, OpenFullCheck
				if err := os.Remove(path + markerSuffix); err != nil {
					b.Fatal(err)
				}
			} else {
				start := time.Now()
				db, err := openBolt(path, Options{LockTimeout: time.Second, InitialMmapSize: 1 << 30})
				if err != nil {
					b.Fatal(err)
				}
				opened := time.Now()
				_, _, _, err = prepare(db)
				r.boltOpen += opened.Sub(start)
				r.prepare += time.Since(opened)
				if cerr := db.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			s, err := Open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Head(ctx); err != nil {
				b.Fatal(err)
			}
			r.ready += time.Since(start)
			if _, err := s.Append(ctx, "bench-open", events.Any(), e); err != nil {
				b.Fatal(err)
			}
			r.first += time.Since(start)
			if got := s.OpenCheck(); got != want {
				b.Fatalf("opened by %v, want %v", got, want)
			}
			s.Close()
		}
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(b.N) }
	b.ReportMetric(ms(clean.ready), "ms/open-clean")
	b.ReportMetric(ms(clean.first), "ms/first-append-clean")
	b.ReportMetric(ms(killed.ready), "ms/open-killed")
	b.ReportMetric(ms(killed.first), "ms/first-append-killed")
	b.ReportMetric(killed.first.Seconds()/clean.first.Seconds(), "x-killed/clean")
	b.ReportMetric(ms(clean.boltOpen), "ms/bolt-open")
	b.ReportMetric(ms(clean.prepare), "ms/prepare")
	b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
}

// BenchmarkOpenAfterCrash opens a store whose last IndexFlushEvents-1
// events were never folded into the index (the image a SIGKILL leaves just
// before a flush), so Open rebuilds the longest possible tail from the log.
func BenchmarkOpenAfterCrash(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]events.EventData, s.opts.IndexFlushEvents-1)
	for i := range batch {
		batch[i] = events.New(events.JobClaimed{JobID: "j", Worker: "w", Attempt: i}, events.Metadata{Actor: "bench"})
	}
	// Small appends to many streams, as a real tail has.
	for i := 0; i < len(batch); i += 10 {
		if _, err := s.Append(context.Background(), events.JobStream(fmt.Sprint(i)), events.NoStream(), batch[i:min(i+10, len(batch))]...); err != nil {
			b.Fatal(err)
		}
	}
	image := filepath.Join(dir, "crashed.img")
	if err := s.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(image, 0o600) }); err != nil {
		b.Fatal(err)
	}
	s.Close()
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		b.StopTimer()
		p := filepath.Join(dir, fmt.Sprintf("open-%d.db", i))
		img, err := os.ReadFile(image)
		if err == nil {
			err = os.WriteFile(p, img, 0o600)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		s, err := Open(p, Options{})
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		if s.tailEvents != len(batch) {
			b.Fatalf("tail of %d events, want %d", s.tailEvents, len(batch))
		}
		b.StopTimer()
		s.Close()
		os.Remove(p)
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms/open")
	b.ReportMetric(float64(len(batch)), "tail-events")
}

// BenchmarkAppendVsFsync is the figure scripts/bench/events.sh prints: on a
// shared disk the fsync rate swings several-fold within a minute, so it
// interleaves short slices — raw fsync, 1 appender, 32 appenders — over
// several rounds and reports medians, and the median of each round's ratio.
func BenchmarkAppendVsFsync(b *testing.B) {
	const rounds, slice = 7, 300 * time.Millisecond
	dir := b.TempDir()
	one, err := Open(filepath.Join(dir, "one"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer one.Close()
	many, err := Open(filepath.Join(dir, "many"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer many.Close()
	var fs, a1, a32, perCommit, ratio []float64
	for range b.N {
		for range rounds {
			f := rawFsyncRate(b, dir, slice)
			e1, _ := appendRate(b, one, 1, slice)
			e32, c32 := appendRate(b, many, 32, slice)
			fs, a1, a32, perCommit = append(fs, f), append(a1, e1), append(a32, e32), append(perCommit, c32)
			ratio = append(ratio, e32/f)
		}
	}
	b.ReportMetric(median(fs), "fsyncs/s")
	b.ReportMetric(median(a1), "events/s-1")
	b.ReportMetric(median(a32), "events/s-32")
	b.ReportMetric(median(perCommit), "events/commit-32")
	b.ReportMetric(median(ratio), "x-raw-fsync-32")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// rawFsyncRate writes 64 bytes and fdatasyncs in a loop for d.
func rawFsyncRate(b *testing.B, dir string, d time.Duration) float64 {
	f, err := os.Create(filepath.Join(dir, "fsync.probe"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, start := 0, time.Now()
	for time.Since(start) < d {
		buf[0] = byte(n)
		if _, err := f.WriteAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds()
}

// appendRate runs n appenders (single-event appends, own streams, Any) for
// d and returns events/s and events per commit.
func appendRate(b *testing.B, s *Store, n int, d time.Duration) (perSec, perCommit float64) {
	data := events.New(events.StepStarted{JobID: uuid.NewString(), Step: events.StepDeleteDB, Attempt: 1}, events.Metadata{Actor: "bench"})
	before := s.Stats()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("job-%d", g)
			for time.Since(start) < d {
				e := data
				e.ID = ""
				if _, err := s.Append(context.Background(), stream, events.Any(), e); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	after := s.Stats()
	ev, commits := float64(after.Events-before.Events), float64(after.Commits-before.Commits)
	return ev / el.Seconds(), ev / max(commits, 1)
}
