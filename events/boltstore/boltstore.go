// Package boltstore is the embedded events.Store on go.etcd.io/bbolt: one file,
// one writer goroutine that group-commits concurrent appends (one write
// transaction, so one durable commit — bbolt's two fdatasyncs — for many
// appends), and subscriptions woken by an in-process notifier on every
// commit. See docs/events.md for the layout and the design.
package boltstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// Bucket and key names of the file layout (docs/events.md).
var (
	bucketMeta    = []byte("meta")    // format marker and version
	bucketLog     = []byte("log")     // position (8 bytes BE) -> record
	bucketStreams = []byte("streams") // stream name -> last revision (8 bytes BE)
	bucketIndex   = []byte("index")   // stream name, 0x00, revision (8 bytes BE) -> position (8 bytes BE)

	keyFormat  = []byte("format")
	keyVersion = []byte("version")
)

const (
	// formatMarker identifies a Slotkeeper event file.
	formatMarker = "slotkeeper-events"
	// formatVersion is the layout version; Open refuses any other.
	formatVersion = 1
	// FileName is the data file's name when Open is given a directory.
	FileName = "events.db"
)

// Options tune a Store. The zero value is the production setting.
type Options struct {
	// LockTimeout is how long Open waits for another process to release the
	// file before failing with events.ErrLocked. Default 100ms: a second
	// process should fail fast, not queue.
	LockTimeout time.Duration
	// MaxBatchBytes caps the encoded size of one group commit. Default 32 MiB.
	MaxBatchBytes int
	// ReadChunk is how many records a subscription reads per read
	// transaction during catch-up. Short transactions keep the writer from
	// waiting on a remap. Default 1024.
	ReadChunk int
	// MaxLinger caps how long the writer waits for more appends to join a
	// batch (see writer). Default 2ms; it never waits longer than half the
	// previous commit took.
	MaxLinger time.Duration
	// IndexFlushEvents is how many events the per-stream index may lag the
	// log before the writer folds them in (index.go). Default 8192.
	IndexFlushEvents int
	// InitialMmapSize is bbolt's initial mapping, in bytes. Readers block a
	// writer that must grow the mapping, so a generous mapping (address
	// space, not memory) keeps commits from waiting on long reads. Default 1 GiB.
	InitialMmapSize int
	// CheckMaxBytes: Open runs bbolt's full consistency check (every page
	// reachable or free, never both; see Check) before it returns when the
	// file is at most this big, so that a damaged free-page list is found at
	// start and not by a write that reuses a live page. The check reads
	// every page (about 0.3 s per 64 MiB on the 2-core machine), so a bigger
	// file is checked in the background instead: reads and subscriptions
	// start at once, and the writer takes no append until the check passed
	// (if it fails, every append gets its error and Damaged is closed).
	// Default 64 MiB; negative: no check at Open (Check still works).
	//
	// No check runs at all, whatever the size, when the file was closed
	// cleanly by a store that vouched for it: Close then leaves a marker
	// (events.db.clean, marker.go) holding bbolt's transaction id of the
	// last commit and a digest of the meta pages and the free-page list,
	// written only if this process's check passed (or it opened by a valid
	// marker itself) and no check or commit failed. Open skips the check if
	// the marker still matches the file; after a kill, a crash, any later
	// commit, damage to those pages or on a copy of the file it does not,
	// and the check runs as above. OpenCheck says which happened.
	CheckMaxBytes int64
}

func (o *Options) fill() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = 100 * time.Millisecond
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = 32 << 20
	}
	if o.ReadChunk <= 0 {
		o.ReadChunk = 1024
	}
	if o.MaxLinger <= 0 {
		o.MaxLinger = 2 * time.Millisecond
	}
	if o.IndexFlushEvents <= 0 {
		o.IndexFlushEvents = 8192
	}
	if o.InitialMmapSize <= 0 {
		o.InitialMmapSize = 1 << 30
	}
	if o.CheckMaxBytes == 0 {
		o.CheckMaxBytes = 64 << 20
	}
}

// damagedAdvice ends every error about a damaged file: what to do.
const damagedAdvice = "the event file is damaged; stop every slotkeeper using it, keep a copy, and restore it from the newest backup (slotkeeper verify checks a file without changing it)"

// damaged wraps err (which wraps events.ErrCorrupt) with the file, the
// position of the damaged record and what to do about it.
func (s *Store) damaged(pos uint64, err error) error {
	return fmt.Errorf("boltstore: %s: record at position %d: %w; %s", s.path, pos, err, damagedAdvice)
}

// Store is the bbolt-backed events.Store.
type Store struct {
	db   *bolt.DB
	opts Options
	path string

	reqs       chan *appendReq // to the writer; unbuffered so a sent request is always taken
	done       chan struct{}   // closed by Close
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error

	head atomic.Uint64 // newest committed position

	mu      sync.Mutex
	changed chan struct{} // closed and replaced after every commit

	// idxMu guards tail, the index of events after the "indexed" mark
	// (index.go). Only the writer changes it.
	idxMu      sync.RWMutex
	tail       map[string]*tailStream
	tailEvents int

	stats struct {
		commits, appends, events, checks atomic.Uint64
	}

	// failCommit, when set (tests only), is called at the end of every
	// write transaction; an error fails the commit as an I/O error would.
	failCommit func() error

	// checked is closed when the consistency check of Open is over;
	// damagedCh, after damageErr is set, when it found damage.
	checked, damagedCh chan struct{}
	damageErr          error

	// openCheck is how Open vouched for the free-page list. verified is
	// set when a full check passed or a valid marker vouched for the file;
	// unsound when a check found damage or a commit failed: then Close
	// leaves no clean-close marker (marker.go).
	openCheck         OpenCheck
	verified, unsound atomic.Bool
}

// OpenCheck is how Open made sure the free-page list is sound before the
// first write.
type OpenCheck int

const (
	// OpenUnchecked: no check at Open (Options.CheckMaxBytes < 0) and no
	// valid clean-close marker.
	OpenUnchecked OpenCheck = iota
	// OpenFullCheck: bbolt's full check ran, before Open returned or (a big
	// file) in the background before the first write.
	OpenFullCheck
	// OpenMarker: the file was closed cleanly by a store that vouched for
	// it and nothing changed since; no check ran.
	OpenMarker
)

func (c OpenCheck) String() string {
	switch c {
	case OpenFullCheck:
		return "full check"
	case OpenMarker:
		return "clean-close marker"
	}
	return "unchecked"
}

var _ events.Store = (*Store)(nil)

// Open opens or creates the store at path: an existing file, an existing
// directory (holding events.db), or a new path — a file if it ends in ".db",
// else a directory created with events.db in it. Returns an error wrapping
// events.ErrLocked when another process holds the file, and events.ErrCorrupt
// when the file is not a Slotkeeper event store, is damaged, or has a layout
// version this binary cannot read; in both cases the file is left untouched.
func Open(path string, opts Options) (*Store, error) {
	opts.fill()
	path = dataFile(path)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("boltstore: %w", err)
	}
	db, err := openBolt(path, opts)
	switch {
	case errors.Is(err, bolt.ErrTimeout):
		return nil, fmt.Errorf("boltstore: %s: %w (another slotkeeper holds it)", path, events.ErrLocked)
	case errors.Is(err, bolt.ErrInvalid), errors.Is(err, bolt.ErrVersionMismatch), errors.Is(err, bolt.ErrChecksum):
		return nil, fmt.Errorf("boltstore: %s: %w: %v", path, events.ErrCorrupt, err)
	case errors.Is(err, events.ErrCorrupt):
		return nil, fmt.Errorf("boltstore: %s: %w; %s", path, err, damagedAdvice)
	case err != nil:
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	// Before prepare, which writes to a brand-new file.
	byMarker := takeMarker(db, path)
	head, tail, tailEvents, err := prepare(db)
	openCheck, inline, background := OpenUnchecked, false, false
	switch {
	case byMarker:
		openCheck = OpenMarker
	case err == nil && opts.CheckMaxBytes > 0:
		openCheck = OpenFullCheck
		if fi, serr := os.Stat(path); serr == nil && fi.Size() <= opts.CheckMaxBytes {
			err, inline = check(db), true
		} else {
			background = true
		}
	}
	if err != nil {
		db.Close()
		if errors.Is(err, events.ErrCorrupt) {
			return nil, fmt.Errorf("boltstore: %s: %w; %s", path, err, damagedAdvice)
		}
		return nil, fmt.Errorf("boltstore: %s: %w", path, err)
	}
	s := &Store{
		db:         db,
		opts:       opts,
		path:       path,
		reqs:       make(chan *appendReq),
		done:       make(chan struct{}),
		writerDone: make(chan struct{}),
		changed:    make(chan struct{}),
		tail:       tail,
		tailEvents: tailEvents,
		checked:    make(chan struct{}),
		damagedCh:  make(chan struct{}),
		openCheck:  openCheck,
	}
	s.head.Store(uint64(head))
	if inline {
		s.stats.checks.Add(1)
	}
	s.verified.Store(byMarker || inline)
	if background {
		go func() {
			if err := s.Check(context.Background()); err != nil && !errors.Is(err, events.ErrClosed) {
				s.damageErr = err
				close(s.damagedCh)
			}
			close(s.checked)
		}()
	} else {
		close(s.checked)
	}
	go s.writer()
	return s, nil
}

// OpenCheck is how Open made sure the free-page list is sound (see
// Options.CheckMaxBytes).
func (s *Store) OpenCheck() OpenCheck { return s.openCheck }

// Damaged is closed when the background consistency check of a big file
// (see Options.CheckMaxBytes) found damage; Err then returns it. A server
// watches it to stop instead of serving a file it must not write to.
func (s *Store) Damaged() <-chan struct{} { return s.damagedCh }

// Err is the damage the background consistency check found (wrapping
// events.ErrCorrupt), or nil: none found, or the check is still running.
func (s *Store) Err() error {
	select {
	case <-s.damagedCh:
		return s.damageErr
	default:
		return nil
	}
}

// prepare checks the format marker (writing it into a brand-new file) and
// returns the newest position and the index tail.
func prepare(db *bolt.DB) (head events.Position, tail map[string]*tailStream, tailEvents int, err error) {
	defer guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	fresh := false
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("%w: a bbolt file without the slotkeeper marker", events.ErrCorrupt)
			}
			fresh = true
			return nil
		}
		if f := meta.Get(keyFormat); string(f) != formatMarker {
			return fmt.Errorf("%w: format marker %q", events.ErrCorrupt, f[:min(len(f), 40)])
		}
		if v := meta.Get(keyVersion); len(v) != 8 || binary.BigEndian.Uint64(v) != formatVersion {
			return fmt.Errorf("%w: layout version %x, this binary reads %d", events.ErrCorrupt, v[:min(len(v), 16)], formatVersion)
		}
		for _, b := range [][]byte{bucketLog, bucketStreams, bucketIndex} {
			if tx.Bucket(b) == nil {
				return fmt.Errorf("%w: bucket %q missing", events.ErrCorrupt, b)
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, 0, err
	}
	if fresh {
		err = db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucket(bucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(keyFormat, []byte(formatMarker)); err != nil {
				return err
			}
			if err := meta.Put(keyVersion, u64(formatVersion)); err != nil {
				return err
			}
			for _, b := range [][]byte{bucketLog, bucketStreams, bucketIndex} {
				if _, err := tx.CreateBucket(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, nil, 0, fmt.Errorf("initialise: %w", err)
		}
	}
	err = db.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLog).Cursor().Last(); k != nil {
			if len(k) != 8 {
				return fmt.Errorf("%w: log key of %d bytes", events.ErrCorrupt, len(k))
			}
			head = events.Position(binary.BigEndian.Uint64(k))
			// The newest record is the one a crash or a bad write most
			// likely hit, and reading it costs nothing: a damaged one stops
			// the start here, naming it, not at the first read.
			if _, err := decodeRecord(tx.Bucket(bucketLog).Get(k), head); err != nil {
				return fmt.Errorf("record at position %d (the newest): %w", head, err)
			}
		}
		tail, tailEvents, err = loadTail(tx)
		return err
	})
	return head, tail, tailEvents, err
}

// check runs bbolt's consistency check (tx.Check): every page is reachable
// from the root or on the free list, never both, never twice, never past
// the end. A damaged free-page list shows here as "reachable freed"; left
// alone it would make the next write reuse a page that holds data.
func check(db *bolt.DB) (err error) {
	defer guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var found []string
	err = db.View(func(tx *bolt.Tx) error {
		for e := range tx.Check() {
			if len(found) < 5 {
				found = append(found, e.Error())
			} else if len(found) == 5 {
				found = append(found, "…")
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: bbolt consistency check: %s", events.ErrCorrupt, strings.Join(found, "; "))
	}
	return nil
}

// Check runs bbolt's full consistency check of the file (pages, free-page
// list) in a read transaction, whatever its size, and returns an error
// wrapping events.ErrCorrupt that names the file and what to do if it
// finds damage. `slotkeeper verify` calls it; appends go on meanwhile.
func (s *Store) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := check(s.db)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return events.ErrClosed
	}
	s.stats.checks.Add(1)
	if err != nil {
		if errors.Is(err, events.ErrCorrupt) {
			s.unsound.Store(true)
			return fmt.Errorf("boltstore: %s: %w; %s", s.path, err, damagedAdvice)
		}
		return fmt.Errorf("boltstore: %s: %w", s.path, err)
	}
	s.verified.Store(true)
	return nil
}

func dataFile(path string) string {
	if fi, err := os.Stat(path); err == nil {
		if fi.IsDir() {
			return filepath.Join(path, FileName)
		}
		return path
	}
	if strings.HasSuffix(path, ".db") {
		return path
	}
	return filepath.Join(path, FileName)
}

// openBolt is bolt.Open with its panics on a damaged file (invalid pages;
// memory faults on a truncated one) turned into ErrCorrupt. bbolt's file is
// captured so that a panic mid-open can still release its lock.
func openBolt(path string, opts Options) (db *bolt.DB, err error) {
	var file *os.File
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				// Unlock explicitly: bbolt's mapping keeps the open file
				// alive, and with it the flock, after Close. (The mapping
				// itself is lost; a refused damaged file is rare.)
				syscall.Flock(int(file.Fd()), syscall.LOCK_UN)
				file.Close()
			}
			db, err = nil, fmt.Errorf("%w: damaged or truncated file (%v)", events.ErrCorrupt, r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return bolt.Open(path, 0o600, &bolt.Options{
		Timeout:         opts.LockTimeout,
		FreelistType:    bolt.FreelistMapType,
		InitialMmapSize: opts.InitialMmapSize,
		NoSync:          false, // acknowledged means fsynced
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
}

// guard turns a panic of bbolt reading damaged pages, or a memory fault on
// the mapping (with SetPanicOnFault), into an error wrapping ErrCorrupt.
// Callers defer it first and turn SetPanicOnFault on for their goroutine.
func guard(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: damaged or truncated file (%v)", events.ErrCorrupt, r)
	}
}

// update and view run bbolt transactions under guard.
func (s *Store) update(fn func(tx *bolt.Tx) error) (err error) {
	defer guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return s.db.Update(fn)
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

// indexKey is stream, 0x00, revision. Stream names never contain 0x00
// (control characters are invalid), so one stream's keys are never a prefix
// range of another's.
func indexKey(stream string, rev events.Revision) []byte {
	k := make([]byte, 0, len(stream)+9)
	k = append(k, stream...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, rev)
}

// Path is the data file's path.
func (s *Store) Path() string { return s.path }

// Stats counts group commits since Open.
type Stats struct {
	Commits uint64 // durable write transactions (two fdatasyncs each)
	Appends uint64 // Append calls that committed
	Events  uint64 // events committed
	Checks  uint64 // bbolt full consistency checks completed (at Open and by Check)
}

// Stats reports the group-commit counters; Events/Commits is the number of
// events per fsync'd commit.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.stats.commits.Load(), Appends: s.stats.appends.Load(), Events: s.stats.events.Load(), Checks: s.stats.checks.Load()}
}

// appendReq is one Append waiting for the writer.
type appendReq struct {
	stream   string
	expected events.ExpectedRevision
	evs      []events.EventData
	size     int
	res      events.AppendResult
	err      error
	done     chan struct{}
	// batchOnly is set when the condition failed only because of requests
	// earlier in the same batch: against the committed log it holds. If
	// that batch then fails to commit, the conflict never happened, and the
	// request gets the commit's error, not ErrWrongRevision (which an
	// attempt would take as being fenced).
	batchOnly bool
}

// Append implements events.Store. The events are fsynced before it returns.
// Once the request reaches the writer, Append waits for the commit even if
// ctx ends meanwhile, so that a nil error always means durable and an error
// always means the request's fate is known (ctx errors are only returned
// before the request was handed over).
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if err := events.ValidateAppend(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	req := &appendReq{stream: stream, expected: expected, evs: make([]events.EventData, len(evs)), done: make(chan struct{})}
	now := time.Now().UTC()
	for i, e := range evs {
		if e.ID == "" {
			e.ID = uuid.NewString()
		}
		if e.Meta.Time.IsZero() {
			e.Meta.Time = now
		}
		req.evs[i] = e
		req.size += recordSize(stream, &e) + len(stream) + 32
	}
	select {
	case <-s.done:
		return events.AppendResult{}, events.ErrClosed
	default:
	}
	// Checked first because select picks at random among ready cases.
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, err
	}
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return events.AppendResult{}, ctx.Err()
	case <-s.done:
		return events.AppendResult{}, events.ErrClosed
	}
	<-req.done
	return req.res, req.err
}

// writer is the only goroutine that writes. It takes every waiting append
// into one transaction, so the batch costs one commit (bbolt fdatasyncs the
// pages, then the meta page) however many appends it holds.
//
// Appenders whose previous append was just acknowledged come back a few
// microseconds later, after the writer has already taken what was waiting.
// So when the batch is smaller than recent batches were, the writer lingers
// for them (like PostgreSQL's commit_delay), at most half the last commit's
// duration and never when one appender is alone: its latency is unchanged.
func (s *Store) writer() {
	defer close(s.writerDone)
	// No write before the file passed its consistency check: a damaged
	// free-page list would make bbolt overwrite pages that hold data.
	select {
	case <-s.checked:
	case <-s.done:
		return
	}
	if err := s.Err(); err != nil {
		for {
			select {
			case r := <-s.reqs:
				r.err = err
				close(r.done)
			case <-s.done:
				return
			}
		}
	}
	var (
		batch   []*appendReq
		buf     []byte
		expect  = 1 // decaying maximum of recent batch sizes
		lastDur time.Duration
		linger  = time.NewTimer(time.Hour)
	)
	linger.Stop()
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.done:
			return
		}
		size := batch[0].size
	drain:
		for size < s.opts.MaxBatchBytes {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
				size += r.size
			default:
				break drain
			}
		}
		if len(batch) < expect && size < s.opts.MaxBatchBytes {
			linger.Reset(min(lastDur/2, s.opts.MaxLinger))
		wait:
			for len(batch) < expect && size < s.opts.MaxBatchBytes {
				select {
				case r := <-s.reqs:
					batch = append(batch, r)
					size += r.size
				case <-linger.C:
					break wait
				}
			}
			linger.Stop()
		}
		start := time.Now()
		buf = s.commit(batch, buf)
		lastDur = time.Since(start)
		expect = max(len(batch), expect*3/4) // decays to 1 when load drops
		for i, r := range batch {
			close(r.done)
			batch[i] = nil
		}
	}
}

// commit writes a batch in one transaction. Each request is checked against
// its own expected revision, seeing the requests before it in the batch; a
// failing one is answered with ErrWrongRevision and writes nothing. A
// failed commit fails every request of the batch, including those whose
// condition failed only because of (now unwritten) requests before them.
func (s *Store) commit(batch []*appendReq, buf []byte) []byte {
	head := s.head.Load()
	committed, nevents := 0, 0
	buf = buf[:0] // the previous transaction is over; its arena is free
	changes := map[string]*pending{}
	flushed := false
	err := s.update(func(tx *bolt.Tx) error {
		logB, streams := tx.Bucket(bucketLog), tx.Bucket(bucketStreams)
		logB.FillPercent = 1.0 // keys only ever grow: pack pages full
		pos := head
		for _, r := range batch {
			r.err, r.batchOnly = nil, false
			st := s.lastRevision(streams, changes, r.stream)
			if !r.expected.Satisfied(st.last, st.exists) {
				r.err = &events.WrongRevisionError{Stream: r.stream, Expected: r.expected, Actual: st.last, Exists: st.exists}
				// The stream as committed before this batch: st.first is
				// the revision its first added event took.
				r.batchOnly = len(st.added) > 0 && r.expected.Satisfied(st.first-1, st.first > 0)
				continue
			}
			if len(r.evs) == 0 {
				r.res = events.AppendResult{NextExpected: st.last, Position: events.Position(pos)}
				continue
			}
			rev := st.last
			if st.exists {
				rev++
			}
			if len(st.added) == 0 {
				st.first = rev
			}
			for i := range r.evs {
				pos++
				// bbolt keeps the value until commit, so records go into an
				// arena that only grows during the transaction.
				start := len(buf)
				buf = encodeRecord(buf, r.stream, rev, &r.evs[i])
				if err := logB.Put(u64(pos), buf[start:len(buf):len(buf)]); err != nil {
					return err
				}
				st.added = append(st.added, pos)
				rev++
			}
			st.last, st.exists = rev-1, true
			r.res = events.AppendResult{NextExpected: rev - 1, Position: events.Position(pos)}
			committed++
			nevents += len(r.evs)
		}
		if pos == head {
			// Nothing to write (all conditions failed or zero-event appends):
			// roll back rather than pay for an fsync.
			return errNothingWritten
		}
		if s.failCommit != nil {
			if err := s.failCommit(); err != nil {
				return err
			}
		}
		if s.tailEvents+nevents >= s.opts.IndexFlushEvents {
			if err := flushIndex(tx, s.tail, changes, pos); err != nil {
				return err
			}
			flushed = true
		}
		head = pos
		return nil
	})
	if errors.Is(err, errNothingWritten) {
		return buf
	}
	if err != nil {
		// The file may hold pages of a commit that failed midway: vouch
		// for it no more (see Close).
		s.unsound.Store(true)
		for _, r := range batch {
			if r.err == nil || r.batchOnly {
				r.err = fmt.Errorf("boltstore: commit: %w", err)
				r.res = events.AppendResult{}
			}
		}
		return buf
	}
	s.applyTail(changes, flushed)
	s.stats.commits.Add(1)
	s.stats.appends.Add(uint64(committed))
	s.stats.events.Add(uint64(nevents))
	s.head.Store(head)
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return buf
}

var errNothingWritten = errors.New("nothing written")

// Close implements events.Store: it waits for the append in progress, ends
// subscriptions with ErrClosed and closes the file. Appends waiting to be
// taken get ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		<-s.writerDone
		// Fold the tail into the index so the next Open has nothing to
		// rebuild. Best effort: the log is the truth either way. Never into
		// a file whose check failed, nor before the check is over.
		<-s.checked
		if s.tailEvents > 0 && s.Err() == nil {
			err := s.update(func(tx *bolt.Tx) error {
				return flushIndex(tx, s.tail, nil, s.head.Load())
			})
			if err != nil {
				s.unsound.Store(true)
			}
		}
		// The last commit is done and the lock still held: leave the
		// marker that spares the next Open its check (marker.go). Best
		// effort: without it the next Open checks.
		if s.verified.Load() && !s.unsound.Load() && s.Err() == nil {
			_ = writeMarker(s.db, s.path)
		}
		// bbolt's Close waits for open read transactions, which are short.
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Head implements events.Store.
func (s *Store) Head(ctx context.Context) (events.Position, error) {
	select {
	case <-s.done:
		return 0, events.ErrClosed
	default:
	}
	return events.Position(s.head.Load()), ctx.Err()
}

// view runs a read transaction, translating a closed database to ErrClosed.
func (s *Store) view(fn func(tx *bolt.Tx) error) (err error) {
	defer guard(&err)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	err = s.db.View(fn)
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return events.ErrClosed
	}
	return err
}
