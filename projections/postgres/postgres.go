// Package postgres is the PostgreSQL read model, for several slotkeeper
// processes sharing one database. Views are rows (JSONB plus the indexed
// columns the queries use); every batch of events is written in one
// transaction together with the checkpoint, so a crash neither skips nor
// double-applies an event. Exactly one process projects at a time: it holds
// a session advisory lock on a dedicated connection and writes through that
// connection; the others wait and take over when the holder's connection
// dies. Queries use a pgx pool and work in every process.
package postgres

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

//go:embed migrations/*.sql
var migrations embed.FS

// DefaultLockKey is the advisory lock key of the projector ("slotkeep" in
// ASCII); processes sharing a database must use the same one.
const DefaultLockKey int64 = 0x736c6f746b656570

// notifyChannel is the LISTEN/NOTIFY channel a commit announces itself on.
const notifyChannel = "slotkeeper_projections"

// ErrNotHolder is returned by Apply when this process does not hold the
// projector lock (see Acquire).
var ErrNotHolder = errors.New("postgres: this process does not hold the projector lock")

// ErrBusy is returned by Reset while another process projects.
var ErrBusy = errors.New("postgres: another process holds the projector lock")

// Options tune a Store; the zero value is good.
type Options struct {
	// Log answers JobEvents (a job's raw events); pass the event store.
	Log projections.StreamReader
	// LockKey is the projector's advisory lock key (default DefaultLockKey).
	LockKey int64
	// LockPoll is how often a waiting process retries the lock and how often
	// the holder checks its lock connection (default 500 ms).
	LockPoll time.Duration
	// MaxConns caps the query pool (default pgxpool's).
	MaxConns int32
	// BeforeCommit, when set, runs after a batch's rows are written and
	// before its transaction commits. Tests use it to kill the projector at
	// the worst moment.
	BeforeCommit func(last events.Position)
	// ListedRetired is how many idle retired slots (projections.Idle)
	// ListSlots lists, the most recently changed ones; older ones are
	// archived: only Slot answers for them (0:
	// projections.DefaultListedRetired; negative: list every slot). It must
	// equal the memory read model's (memory.Limits.ListedRetired), so both
	// answer the same.
	ListedRetired int
}

// Store is the PostgreSQL read model.
type Store struct {
	url  string
	pool *pgxpool.Pool
	opt  Options

	mu   sync.Mutex // guards lock and the cache; held for a whole batch
	lock *pgx.Conn  // the projector lock's connection, nil when not held
	// The views the last batch touched, kept for the next one (events of a
	// job come in runs). Valid only while the lock is held.
	cacheSlots map[string]*projections.SlotView
	cacheJobs  map[string]*projections.JobView
}

var (
	_ projections.Snapshotter = (*Store)(nil)
	_ projections.Target      = (*Store)(nil)
	_ projections.Exclusive   = (*Store)(nil)
	_ projections.Follower    = (*Store)(nil)
	_ projections.ReadModel   = (*Store)(nil)
	_ projections.SlotNamer   = (*Store)(nil)
	_ projections.PRLister    = (*Store)(nil)
)

// Open connects to the database at url and applies pending migrations.
func Open(ctx context.Context, url string, opt Options) (*Store, error) {
	if opt.LockKey == 0 {
		opt.LockKey = DefaultLockKey
	}
	if opt.LockPoll <= 0 {
		opt.LockPoll = 500 * time.Millisecond
	}
	if opt.ListedRetired == 0 {
		opt.ListedRetired = projections.DefaultListedRetired
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{url: url, pool: pool, opt: opt}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close releases the pool (and the projector lock, if held).
func (s *Store) Close() {
	s.mu.Lock()
	if s.lock != nil {
		_ = s.lock.Close(context.Background())
		s.lock = nil
	}
	s.mu.Unlock()
	s.pool.Close()
}

// migrate applies the embedded migrations not yet in schema_migrations, in
// one transaction, serialised across processes by a transaction lock.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.opt.LockKey+1); err != nil {
		return fmt.Errorf("postgres: migrate lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: migrate: %w", err)
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("postgres: migration %s has no version number", base)
		}
		var done bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, v).Scan(&done); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
		if done {
			continue
		}
		sql, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(sql)); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", base, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, v, base); err != nil {
			return fmt.Errorf("postgres: migrate: %w", err)
		}
	}
	return tx.Commit(ctx)
}

// Acquire implements projections.Exclusive: it blocks until this process
// holds the projector lock, retrying every LockPoll. The returned context is
// cancelled when the lock's connection fails (the lock is then gone, and the
// next Apply fails too, because it writes through that connection).
func (s *Store) Acquire(ctx context.Context) (context.Context, func(), error) {
	tick := time.NewTicker(s.opt.LockPoll)
	defer tick.Stop()
	var conn *pgx.Conn
	for {
		var err error
		if conn == nil {
			conn, err = pgx.Connect(ctx, s.url)
		}
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, s.opt.LockKey).Scan(&ok)
			if err == nil && ok {
				break
			}
		}
		if err != nil && conn != nil {
			_ = conn.Close(context.Background())
			conn = nil
		}
		select {
		case <-ctx.Done():
			if conn != nil {
				_ = conn.Close(context.Background())
			}
			return nil, nil, ctx.Err()
		case <-tick.C:
		}
	}
	s.mu.Lock()
	s.lock = conn
	s.cacheSlots, s.cacheJobs = nil, nil
	s.mu.Unlock()

	lockCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { // watch the lock's connection
		defer close(stopped)
		t := time.NewTicker(s.opt.LockPoll)
		defer t.Stop()
		for {
			select {
			case <-lockCtx.Done():
				return
			case <-t.C:
			}
			s.mu.Lock()
			err := errors.New("lock released")
			if s.lock == conn {
				pctx, pcancel := context.WithTimeout(lockCtx, 5*s.opt.LockPoll)
				err = conn.Ping(pctx)
				pcancel()
			}
			s.mu.Unlock()
			if err != nil {
				cancel()
				return
			}
		}
	}()
	var once sync.Once
	release := func() {
		once.Do(func() {
			cancel()
			<-stopped
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.lock == conn {
				s.lock = nil
				s.cacheSlots, s.cacheJobs = nil, nil
			}
			ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			_, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, s.opt.LockKey)
			_ = conn.Close(ctx)
		})
	}
	return lockCtx, release, nil
}

// HoldsLock reports whether this process is the projector right now (for
// readiness pages and tests).
func (s *Store) HoldsLock() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock != nil
}

// Reset empties the read model (checkpoint 0) so a Replay rebuilds it;
// `slotkeeper replay` uses it. It returns ErrBusy while a process projects:
// stop the servers first.
func (s *Store) Reset(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	var ok bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, s.opt.LockKey).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return ErrBusy
	}
	if _, err := tx.Exec(ctx, `TRUNCATE slots, jobs, audit, pull_requests`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE checkpoint SET position = 0, store_id = '' WHERE id = 1`); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// BindStore records that the read model is built from the event store
// whose identity is id, unless it is bound already, and returns the
// identity it is bound to: another one means it was built from another
// log (a wiped or replaced store) and must be rebuilt (Reset unbinds).
func (s *Store) BindStore(ctx context.Context, id string) (string, error) {
	if _, err := s.pool.Exec(ctx, `UPDATE checkpoint SET store_id = $1 WHERE id = 1 AND store_id = ''`, id); err != nil {
		return "", fmt.Errorf("postgres: bind the event store: %w", translate(err))
	}
	return s.StoreID(ctx)
}

// StoreID is the identity of the event store the read model is bound to
// ("" when not bound).
func (s *Store) StoreID(ctx context.Context) (string, error) {
	var id string
	if err := s.pool.QueryRow(ctx, `SELECT store_id FROM checkpoint WHERE id = 1`).Scan(&id); err != nil {
		return "", fmt.Errorf("postgres: read the bound event store: %w", translate(err))
	}
	return id, nil
}

// batchState is projections.State over the views a batch loaded; it records
// which ones changed.
type batchState struct {
	slots      map[string]*projections.SlotView
	jobs       map[string]*projections.JobView
	dirtySlots map[string]bool
	dirtyJobs  map[string]bool
	// prs are the pull requests of the batch's PR streams (a row each,
	// loaded whether or not one exists yet), dirtyPRs those it changed.
	prs      map[string]*projections.PRView
	dirtyPRs map[string]bool
}

// GetSlot, GetJob, PutSlot and PutJob implement projections.State.
func (b *batchState) GetSlot(n string) *projections.SlotView { return b.slots[n] }
func (b *batchState) GetJob(id string) *projections.JobView  { return b.jobs[id] }
func (b *batchState) PutSlot(v *projections.SlotView) {
	b.slots[v.Name] = v
	b.dirtySlots[v.Name] = true
}
func (b *batchState) PutJob(v *projections.JobView) {
	b.jobs[v.ID] = v
	b.dirtyJobs[v.ID] = true
}

// GetPR and PutPR implement projections.PRState.
func (b *batchState) GetPR(stream string) *projections.PRView { return b.prs[stream] }
func (b *batchState) PutPR(v *projections.PRView) {
	b.prs[v.Stream] = v
	b.dirtyPRs[v.Stream] = true
}

// Apply implements projections.Target: the batch's rows and the checkpoint
// are written in one transaction on the lock's connection. Returns
// ErrNotHolder without the lock, and an error (changing nothing) if evs do
// not follow the checkpoint.
func (s *Store) Apply(ctx context.Context, evs []projections.Event) (changes []projections.Change, err error) {
	if len(evs) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return nil, ErrNotHolder
	}
	defer func() {
		if err != nil { // the cache may hold views of the rolled-back batch
			s.cacheSlots, s.cacheJobs = nil, nil
		}
	}()
	tx, err := s.lock.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var cp int64
	if err := tx.QueryRow(ctx, `SELECT position FROM checkpoint WHERE id = 1 FOR UPDATE`).Scan(&cp); err != nil {
		return nil, fmt.Errorf("postgres: read checkpoint: %w", err)
	}
	if int64(evs[0].Position) <= cp {
		return nil, fmt.Errorf("postgres: event at %d is not after the checkpoint %d", evs[0].Position, cp)
	}
	b, err := s.load(ctx, tx, evs)
	if err != nil {
		return nil, err
	}
	changes = make([]projections.Change, 0, len(evs))
	audit := make([][]any, 0, len(evs))
	for _, ev := range evs {
		ch := projections.Project(b, ev)
		a := ch.Audit
		entry, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		audit = append(audit, []any{int64(a.Position), a.Slot, a.JobID, a.Actor, a.Type, a.Time.UnixNano(), entry})
		changes = append(changes, ch)
	}
	if err := s.write(ctx, tx, b, audit, evs[len(evs)-1].Position); err != nil {
		return nil, err
	}
	if s.opt.BeforeCommit != nil {
		s.opt.BeforeCommit(evs[len(evs)-1].Position)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: commit: %w", err)
	}
	s.cacheSlots, s.cacheJobs = b.slots, b.jobs
	return changes, nil
}

// load fetches the views a batch touches: its jobs, then the slots of its
// slot streams and of those jobs (a job event updates its slot's view).
func (s *Store) load(ctx context.Context, tx pgx.Tx, evs []projections.Event) (*batchState, error) {
	b := &batchState{
		slots: map[string]*projections.SlotView{}, jobs: map[string]*projections.JobView{},
		dirtySlots: map[string]bool{}, dirtyJobs: map[string]bool{},
		prs: map[string]*projections.PRView{}, dirtyPRs: map[string]bool{},
	}
	wantJobs, wantSlots := map[string]bool{}, map[string]bool{}
	var wantPRs []string
	for _, ev := range evs {
		switch {
		case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
			wantSlots[ev.Stream[len(events.SlotStreamPrefix):]] = true
			// JobAccepted, JobReleased, … copy the named job's progress
			// into the slot (Project reads it): without it a batch that
			// does not also hold one of the job's events shows "step 0 of
			// 0" and an empty recovery until the job's next event.
			if ev.Payload != nil {
				if id := projections.PayloadJobID(ev.Payload); id != "" {
					wantJobs[id] = true
				}
			}
		case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
			wantJobs[ev.Stream[len(events.JobStreamPrefix):]] = true
			if ev.Payload != nil {
				wantSlots[projections.PayloadSlot(ev.Payload)] = true
			}
		case strings.HasPrefix(ev.Stream, events.NotifyStreamPrefix):
			wantJobs[ev.Stream[len(events.NotifyStreamPrefix):]] = true
		case strings.HasPrefix(ev.Stream, events.PRStreamPrefix):
			if n := projections.PRSlot(ev.Payload); n != "" {
				wantSlots[n] = true // the PR shown on its slot
			}
			if ev.Stream != events.PRReposStream {
				wantPRs = append(wantPRs, ev.Stream)
			}
		}
	}
	if len(wantPRs) > 0 {
		rows, err := tx.Query(ctx, `SELECT view FROM pull_requests WHERE stream = ANY($1)`, wantPRs)
		if err != nil {
			return nil, fmt.Errorf("postgres: load pull requests: %w", err)
		}
		for rows.Next() {
			v := &projections.PRView{}
			if err := scanJSON(rows, v); err != nil {
				return nil, err
			}
			b.prs[v.Stream] = v
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: load pull requests: %w", err)
		}
	}
	var missing []string
	for id := range wantJobs {
		if v, ok := s.cacheJobs[id]; ok {
			b.jobs[id] = v
		} else {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, `SELECT view FROM jobs WHERE id = ANY($1)`, missing)
		if err != nil {
			return nil, fmt.Errorf("postgres: load jobs: %w", err)
		}
		for rows.Next() {
			v := &projections.JobView{}
			if err := scanJSON(rows, v); err != nil {
				return nil, err
			}
			b.jobs[v.ID] = v
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: load jobs: %w", err)
		}
	}
	for _, j := range b.jobs {
		wantSlots[j.Slot] = true
	}
	missing = missing[:0]
	for n := range wantSlots {
		if v, ok := s.cacheSlots[n]; ok {
			b.slots[n] = v
		} else {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		rows, err := tx.Query(ctx, `SELECT view FROM slots WHERE name = ANY($1)`, missing)
		if err != nil {
			return nil, fmt.Errorf("postgres: load slots: %w", err)
		}
		for rows.Next() {
			v := &projections.SlotView{}
			if err := scanJSON(rows, v); err != nil {
				return nil, err
			}
			b.slots[v.Name] = v
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: load slots: %w", err)
		}
	}
	return b, nil
}

// write upserts the changed views, copies the audit rows in and moves the
// checkpoint, all inside tx.
func (s *Store) write(ctx context.Context, tx pgx.Tx, b *batchState, audit [][]any, last events.Position) error {
	batch := &pgx.Batch{}
	for n := range b.dirtySlots {
		v := b.slots[n]
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO slots (name, position, view) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, view = EXCLUDED.view`,
			v.Name, int64(v.Position), data)
	}
	for id := range b.dirtyJobs {
		v := b.jobs[id]
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO jobs (id, slot, kind, queued_position, position, view) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (id) DO UPDATE SET slot = EXCLUDED.slot, kind = EXCLUDED.kind,
			queued_position = EXCLUDED.queued_position, position = EXCLUDED.position, view = EXCLUDED.view`,
			v.ID, v.Slot, v.Kind, int64(v.QueuedPosition), int64(v.Position), data)
	}
	for stream := range b.dirtyPRs {
		v := b.prs[stream]
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO pull_requests (stream, state, position, view) VALUES ($1, $2, $3, $4)
			ON CONFLICT (stream) DO UPDATE SET state = EXCLUDED.state, position = EXCLUDED.position, view = EXCLUDED.view`,
			v.Stream, v.State, int64(v.Position), data)
	}
	batch.Queue(`UPDATE checkpoint SET position = $1 WHERE id = 1`, int64(last))
	// Followers (processes waiting for the lock) wake up at commit.
	batch.Queue(`SELECT pg_notify('`+notifyChannel+`', $1)`, strconv.FormatUint(uint64(last), 10))
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("postgres: write views: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"audit"},
		[]string{"position", "slot", "job_id", "actor", "type", "time_ns", "entry"}, pgx.CopyFromRows(audit)); err != nil {
		return fmt.Errorf("postgres: write audit: %w", err)
	}
	return nil
}

func scanJSON(row pgx.Row, v any) error {
	var data []byte
	if err := row.Scan(&data); err != nil {
		return translate(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("postgres: decode view: %w", err)
	}
	return nil
}

// translate maps driver errors to the read model's: no row is ErrNotFound,
// and a database that cannot be reached wraps ErrUnavailable (the API's
// 503 with Retry-After instead of 500).
func translate(err error) error {
	switch {
	case err == nil || errors.Is(err, projections.ErrUnavailable):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return projections.ErrNotFound
	case unreachable(err):
		return fmt.Errorf("%w: %w", projections.ErrUnavailable, err)
	}
	return err
}

// unreachable reports whether err says the database could not be reached
// or went away: connecting failed, the connection broke, or the server answered with a connection-exception (class 08) or
// shutdown (57P01–57P03) SQLSTATE (PostgreSQL docs, Appendix A "Error
// Codes").
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Position implements projections.ReadModel: the checkpoint.
func (s *Store) Position(ctx context.Context) (events.Position, error) {
	var p int64
	if err := s.pool.QueryRow(ctx, `SELECT position FROM checkpoint WHERE id = 1`).Scan(&p); err != nil {
		return 0, fmt.Errorf("postgres: read checkpoint: %w", translate(err))
	}
	return events.Position(p), nil
}

// ListSlots implements projections.ReadModel, ordered by name: every slot
// but the archived ones (see Options.ListedRetired).
func (s *Store) ListSlots(ctx context.Context) ([]projections.SlotView, error) {
	return queryViews[projections.SlotView](ctx, s.pool, listedSlots, s.opt.ListedRetired)
}

// listedSlots selects the listed slots' views by name: all but the idle
// ones (projections.Idle: retired, no resources) past the
// $1 with the highest position; a negative $1 lists every slot.
const listedSlots = `SELECT view FROM slots WHERE $1::int < 0 OR name NOT IN (
	SELECT name FROM slots
	WHERE view->>'lifecycle' = 'retired'
	  AND COALESCE(view->'resources', '[]') IN ('[]'::jsonb, 'null'::jsonb)
	ORDER BY position DESC OFFSET GREATEST($1::int, 0))
ORDER BY name`

// SlotNames implements projections.SlotNamer: every slot, archived ones
// included.
func (s *Store) SlotNames(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM slots ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: slot names: %w", translate(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: slot names: %w", translate(err))
	}
	return names, nil
}

// SlotJobIDs implements projections.SlotJobLister (index jobs_by_slot).
func (s *Store) SlotJobIDs(ctx context.Context, slot string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM jobs WHERE slot = $1 ORDER BY queued_position`, slot)
	if err != nil {
		return nil, fmt.Errorf("postgres: jobs of slot %q: %w", slot, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: jobs of slot %q: %w", slot, err)
	}
	return ids, nil
}

// SnapshotSlots implements projections.Snapshotter: slots and checkpoint
// from one REPEATABLE READ snapshot.
func (s *Store) SnapshotSlots(ctx context.Context) ([]projections.SlotView, events.Position, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: snapshot: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var pos int64
	if err := tx.QueryRow(ctx, `SELECT position FROM checkpoint WHERE id = 1`).Scan(&pos); err != nil {
		return nil, 0, fmt.Errorf("postgres: snapshot: %w", translate(err))
	}
	out := []projections.SlotView{}
	if err := loadAll(ctx, tx, listedSlots, func(v projections.SlotView) { out = append(out, v) }, s.opt.ListedRetired); err != nil {
		return nil, 0, fmt.Errorf("postgres: snapshot: %w", translate(err))
	}
	return out, events.Position(pos), nil
}

// ListPullRequests implements projections.PRLister: every open PR and
// the most recently changed closed ones, with the position they are exact
// at (one repeatable-read transaction).
func (s *Store) ListPullRequests(ctx context.Context) ([]projections.PRView, events.Position, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: pull requests: %w", translate(err))
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	var pos int64
	if err := tx.QueryRow(ctx, `SELECT position FROM checkpoint WHERE id = 1`).Scan(&pos); err != nil {
		return nil, 0, fmt.Errorf("postgres: pull requests: %w", translate(err))
	}
	rows, err := tx.Query(ctx, `SELECT view FROM pull_requests WHERE state = $1
		UNION ALL (SELECT view FROM pull_requests WHERE state <> $1 ORDER BY position DESC LIMIT $2)`,
		events.PRStateOpen, projections.ClosedPRsListed)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: pull requests: %w", translate(err))
	}
	out := []projections.PRView{}
	for rows.Next() {
		var v projections.PRView
		if err := scanJSON(rows, &v); err != nil {
			return nil, 0, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("postgres: pull requests: %w", translate(err))
	}
	return projections.SortPRs(out), events.Position(pos), nil
}

// Slot implements projections.ReadModel.
func (s *Store) Slot(ctx context.Context, name string) (projections.SlotView, error) {
	var v projections.SlotView
	if err := scanJSON(s.pool.QueryRow(ctx, `SELECT view FROM slots WHERE name = $1`, name), &v); err != nil {
		return v, fmt.Errorf("slot %q: %w", name, err)
	}
	return v, nil
}

// Job implements projections.ReadModel.
func (s *Store) Job(ctx context.Context, id string) (projections.JobView, error) {
	var v projections.JobView
	if err := scanJSON(s.pool.QueryRow(ctx, `SELECT view FROM jobs WHERE id = $1`, id), &v); err != nil {
		return v, fmt.Errorf("job %q: %w", id, err)
	}
	return v, nil
}

// LatestJob implements projections.ReadModel (index jobs_by_slot_kind).
func (s *Store) LatestJob(ctx context.Context, slot, kind string) (projections.JobView, error) {
	var v projections.JobView
	err := scanJSON(s.pool.QueryRow(ctx,
		`SELECT view FROM jobs WHERE slot = $1 AND kind = $2 ORDER BY queued_position DESC LIMIT 1`, slot, kind), &v)
	if err != nil {
		return v, fmt.Errorf("%s job of slot %q: %w", kind, slot, err)
	}
	return v, nil
}

// JobsBySlot implements projections.ReadModel (indexes jobs_by_slot and
// jobs_by_slot_kind). The cursor is the QueuedPosition of the previous
// page's last job.
func (s *Store) JobsBySlot(ctx context.Context, slot, kind string, limit int, cursor string) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(limit, cursor)
	if err != nil {
		return projections.Page{}, err
	}
	b := int64(min(uint64(before), math.MaxInt64))
	var jobs []projections.JobView
	if kind == "" {
		jobs, err = queryViews[projections.JobView](ctx, s.pool,
			`SELECT view FROM jobs WHERE slot = $1 AND queued_position < $2 ORDER BY queued_position DESC LIMIT $3`, slot, b, limit+1)
	} else {
		jobs, err = queryViews[projections.JobView](ctx, s.pool,
			`SELECT view FROM jobs WHERE slot = $1 AND kind = $2 AND queued_position < $3 ORDER BY queued_position DESC LIMIT $4`, slot, kind, b, limit+1)
	}
	if err != nil {
		return projections.Page{}, err
	}
	page := projections.Page{Jobs: jobs}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		page.NextCursor = strconv.FormatUint(uint64(jobs[limit-1].QueuedPosition), 10)
	}
	return page, nil
}

// Jobs implements projections.ReadModel (indexes of migration 002, and
// jobs_by_slot for a slot). The filter's Match is the reference: the
// conditions here say the same in SQL.
func (s *Store) Jobs(ctx context.Context, f projections.JobFilter) (projections.Page, error) {
	limit, before, err := projections.ParsePaging(f.Limit, f.Cursor)
	if err != nil {
		return projections.Page{}, err
	}
	where := []string{"queued_position < $1"}
	args := []any{int64(min(uint64(before), math.MaxInt64))}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	switch f.State {
	case "":
	case projections.JobStateUncertain:
		where = append(where, "view->>'uncertain_step' <> ''")
	default:
		add("view->>'state' = $%d", f.State)
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if f.Slot != "" {
		add("slot = $%d", f.Slot)
	}
	if f.Actor != "" {
		add("view->>'requested_by' = $%d", f.Actor)
	}
	args = append(args, limit+1)
	q := fmt.Sprintf(`SELECT view FROM jobs WHERE %s ORDER BY queued_position DESC LIMIT $%d`, strings.Join(where, " AND "), len(args))
	jobs, err := queryViews[projections.JobView](ctx, s.pool, q, args...)
	if err != nil {
		return projections.Page{}, err
	}
	page := projections.Page{Jobs: jobs}
	if page.Jobs == nil {
		page.Jobs = []projections.JobView{}
	}
	if len(jobs) > limit {
		page.Jobs = jobs[:limit]
		page.NextCursor = strconv.FormatUint(uint64(jobs[limit-1].QueuedPosition), 10)
	}
	return page, nil
}

// JobEvents implements projections.ReadModel: the job's stream from the
// log, up to the checkpoint.
func (s *Store) JobEvents(ctx context.Context, id string) ([]events.RecordedEvent, error) {
	var pos int64
	err := s.pool.QueryRow(ctx, `SELECT c.position FROM jobs j, checkpoint c WHERE j.id = $1 AND c.id = 1`, id).Scan(&pos)
	if err != nil {
		return nil, fmt.Errorf("job %q: %w", id, translate(err))
	}
	return projections.ReadJobEvents(ctx, s.opt.Log, id, events.Position(pos))
}

// Audit implements projections.ReadModel, in position order; each filter
// field has an index.
func (s *Store) Audit(ctx context.Context, f projections.AuditFilter) ([]projections.AuditEntry, error) {
	limit, err := projections.AuditLimit(f.Limit)
	if err != nil {
		return nil, err
	}
	where := []string{"position > $1"}
	args := []any{int64(f.After)}
	add := func(col string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf("%s $%d", col, len(args)))
	}
	if f.Slot != "" {
		add("slot =", f.Slot)
	}
	if f.JobID != "" {
		add("job_id =", f.JobID)
	}
	if f.Actor != "" {
		add("actor =", f.Actor)
	}
	if f.ActorID != "" {
		add("entry->>'actor_id' =", f.ActorID)
	}
	if !f.Plumbing {
		// The flag is in the entry only when true (omitempty); rows from
		// before it are marked by migration 003.
		where = append(where, "entry->>'plumbing' IS NULL")
	}
	if f.Type != "" {
		add("type =", f.Type)
	}
	if !f.Since.IsZero() {
		add("time_ns >=", f.Since.UnixNano())
	}
	if f.Before > 0 {
		add("position <", int64(f.Before))
	}
	order := "position"
	if f.Newest {
		order = "position DESC"
	}
	args = append(args, limit)
	q := fmt.Sprintf(`SELECT entry FROM audit WHERE %s ORDER BY %s LIMIT $%d`, strings.Join(where, " AND "), order, len(args))
	return queryViews[projections.AuditEntry](ctx, s.pool, q, args...)
}

// RemainingResources implements projections.ReadModel.
func (s *Store) RemainingResources(ctx context.Context) ([]projections.RemainingResource, error) {
	slots, err := s.ListSlots(ctx)
	if err != nil {
		return nil, err
	}
	out := []projections.RemainingResource{}
	for _, v := range slots {
		out = append(out, projections.RemainingOf(v)...)
	}
	projections.SortRemaining(out)
	return out, nil
}

// queryViews runs a query whose one column is a JSON view.
func queryViews[T any](ctx context.Context, pool *pgxpool.Pool, q string, args ...any) ([]T, error) {
	rows, err := pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: query: %w", translate(err))
	}
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		if err := scanJSON(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: query: %w", translate(err))
	}
	return out, nil
}

// Follow implements projections.Follower for processes that do not project:
// it LISTENs for the projector's commits (polling every 4 LockPoll as a
// backstop) and turns the audit rows after `after` into changes, each with
// the slot and job views it names. The views are read in the same snapshot
// as the audit rows, so they are at least as new as the change (clients keep
// the view with the highest position). Returns when ctx ends or the
// connection fails.
func (s *Store) Follow(ctx context.Context, after events.Position, h func([]projections.Change)) error {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+notifyChannel); err != nil {
		return err
	}
	for {
		for {
			chs, err := s.changesAfter(ctx, conn, after, 1000)
			if err != nil {
				return err
			}
			if len(chs) == 0 {
				break
			}
			h(chs)
			after = chs[len(chs)-1].Position
		}
		wctx, cancel := context.WithTimeout(ctx, 4*s.opt.LockPoll)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case conn.IsClosed():
			return fmt.Errorf("postgres: follow: connection lost: %w", err)
		}
	}
}

// changesAfter reads up to limit changes after `after`, in one snapshot.
func (s *Store) changesAfter(ctx context.Context, conn *pgx.Conn, after events.Position, limit int) ([]projections.Change, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	rows, err := tx.Query(ctx, `SELECT entry FROM audit WHERE position > $1 ORDER BY position LIMIT $2`, int64(after), limit)
	if err != nil {
		return nil, err
	}
	var entries []projections.AuditEntry
	for rows.Next() {
		var a projections.AuditEntry
		if err := scanJSON(rows, &a); err != nil {
			rows.Close()
			return nil, err
		}
		entries = append(entries, a)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, nil
	}
	var slotNames, jobIDs []string
	for _, a := range entries {
		if a.Slot != "" {
			slotNames = append(slotNames, a.Slot)
		}
		if a.JobID != "" && strings.HasPrefix(a.Stream, events.JobStreamPrefix) {
			jobIDs = append(jobIDs, a.JobID)
		}
	}
	slots := map[string]projections.SlotView{}
	jobs := map[string]projections.JobView{}
	if err := loadInto(ctx, tx, `SELECT view FROM slots WHERE name = ANY($1)`, slotNames, func(v projections.SlotView) { slots[v.Name] = v }); err != nil {
		return nil, err
	}
	if err := loadInto(ctx, tx, `SELECT view FROM jobs WHERE id = ANY($1)`, jobIDs, func(v projections.JobView) { jobs[v.ID] = v }); err != nil {
		return nil, err
	}
	out := make([]projections.Change, len(entries))
	for i := range entries {
		a := entries[i]
		out[i] = projections.Change{Position: a.Position, Audit: &a}
		if v, ok := slots[a.Slot]; ok {
			out[i].Slot = &v
		}
		if v, ok := jobs[a.JobID]; ok && strings.HasPrefix(a.Stream, events.JobStreamPrefix) {
			out[i].Job = &v
		}
	}
	return out, nil
}

func loadInto[T any](ctx context.Context, tx pgx.Tx, q string, keys []string, put func(T)) error {
	if len(keys) == 0 {
		return nil
	}
	return loadAll(ctx, tx, q, put, keys)
}

// loadAll runs a query of JSON views inside tx and hands each to put.
func loadAll[T any](ctx context.Context, tx pgx.Tx, q string, put func(T), args ...any) error {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var v T
		if err := scanJSON(rows, &v); err != nil {
			return err
		}
		put(v)
	}
	return rows.Err()
}
