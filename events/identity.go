package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
)

// IdentityStream holds a store's identity: one StoreCreated event, written
// by the first process that finds none (on an empty store, or on a store
// written before identities existed). Every process reads it at start and
// again in each readiness round (docs/kurrent.md, "Store identity"): a
// store that was wiped, restored from an older backup or replaced by
// another one under running processes is then told from the one they
// started on, instead of being served as if nothing happened.
const IdentityStream = "slotkeeper-store"

// StoreCreated is a store's identity: a random id, never written twice.
type StoreCreated struct {
	StoreID string `json:"store_id"`
}

func (StoreCreated) EventType() string { return "StoreCreated" }

func init() {
	constructors["StoreCreated"] = decodeAs[StoreCreated]
}

// ErrStoreChanged is returned by a Guard once the store under a running
// process is not the one it started on (another identity, no identity, or
// a head behind what the process has seen): every write is refused, for
// good. Restarting the process on the store as it now is (after checking it
// is the right one) is the way out.
var ErrStoreChanged = errors.New("events: the event store changed under this process")

// ErrUnavailable is wrapped by errors of calls that could not reach the
// store (a remote store's adapter wraps its own "unavailable" error with
// it), so callers can tell "try again later" from a failure.
var ErrUnavailable = errors.New("events: event store unavailable")

// Identity is a store's identity as read back.
type Identity struct {
	ID       string
	Position Position // of the StoreCreated event
}

// ReadIdentity reads the store's identity; ok is false when it has none.
func ReadIdentity(ctx context.Context, st Store) (id Identity, ok bool, err error) {
	evs, err := st.ReadStream(ctx, IdentityStream, 0, 1, Forward)
	if errors.Is(err, ErrStreamNotFound) || (err == nil && len(evs) == 0) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, err
	}
	p, err := Decode(evs[0])
	if err != nil {
		return Identity{}, false, err
	}
	c, isID := p.(StoreCreated)
	if !isID || c.StoreID == "" {
		return Identity{}, false, fmt.Errorf("events: %s starts with %s, not a store identity", IdentityStream, evs[0].Type)
	}
	return Identity{ID: c.StoreID, Position: evs[0].Position}, true, nil
}

// EnsureIdentity returns the store's identity, writing one first when it
// has none. Several processes starting at once on an empty store agree:
// the write expects no stream, so one wins and the others read its event.
func EnsureIdentity(ctx context.Context, st Store) (id Identity, created bool, err error) {
	// A lost race means another process wrote it first: read theirs.
	wrote := false
	res, err := Decide(ctx, st, IdentityStream, func(ctx context.Context) (ExpectedRevision, []EventData, error) {
		var ok bool
		if id, ok, err = ReadIdentity(ctx, st); err != nil || ok {
			wrote = false
			return ExpectedRevision{}, nil, err
		}
		wrote = true
		return NoStream(), []EventData{New(StoreCreated{StoreID: uuid.NewString()}, Metadata{Actor: "system:identity"})}, nil
	})
	var ae *AppendError
	var ce *ContendedError
	switch {
	case errors.As(err, &ae):
		return Identity{}, false, fmt.Errorf("events: write the store's identity: %w", ae.Err)
	case errors.As(err, &ce):
		return Identity{}, false, errors.New("events: the store's identity stream changes under us")
	case err != nil || !wrote:
		return id, false, err // read, not written
	}
	id, ok, err := ReadIdentity(ctx, st)
	if err == nil && !ok {
		err = errors.New("events: the store's identity was written but does not read back")
	}
	return id, err == nil && id.Position == res.Position, err
}

// Guard is a Store that refuses every write once the store under it is not
// the one the process started on. Check (run in each readiness round)
// compares the store's identity with the one read at start and the head with
// the highest event position this process has seen (its subscriptions'
// events, earlier heads): a wiped or rewound log has a lower
// head even before anyone writes a new identity into it. Checkpoint appends
// (summaries of what this process read) check the identity first, so a
// consumer does not carry a summary of the old log into a new one in the
// moments before the next round.
type Guard struct {
	Store
	id       Identity
	seen     atomic.Uint64
	onChange func(error) // called once, when the guard closes

	closed atomic.Bool // fast path of err != nil, read for every delivered event
	mu     sync.Mutex
	err    error // set once, never cleared
}

// NewGuard guards st, whose identity is id. onChange (may be nil) is called
// once, with the reason, when the guard stops writes.
func NewGuard(st Store, id Identity, onChange func(error)) *Guard {
	g := &Guard{Store: st, id: id, onChange: onChange}
	g.see(id.Position)
	return g
}

// Identity is the identity the process started on.
func (g *Guard) Identity() Identity { return g.id }

// Err is why writes are refused, nil while the store is the one started on.
func (g *Guard) Err() error {
	if !g.closed.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *Guard) see(p Position) {
	for {
		cur := g.seen.Load()
		if uint64(p) <= cur || g.seen.CompareAndSwap(cur, uint64(p)) {
			return
		}
	}
}

func (g *Guard) fail(reason string) error {
	g.mu.Lock()
	first := g.err == nil
	if first {
		g.err = fmt.Errorf("%w: %s", ErrStoreChanged, reason)
		g.closed.Store(true)
	}
	err := g.err
	g.mu.Unlock()
	if first && g.onChange != nil {
		g.onChange(err)
	}
	return err
}

// Check reads the store's identity and head and compares them with what the
// process knows. A store that cannot be read is an error but closes
// nothing (it may come back); a store that is another one closes the guard.
func (g *Guard) Check(ctx context.Context) error {
	if err := g.Err(); err != nil {
		return err
	}
	// What was seen before the head is read: an event delivered or appended
	// meanwhile must not look like a head gone backwards.
	seen := Position(g.seen.Load())
	head, err := g.Store.Head(ctx)
	if err != nil {
		return err
	}
	id, ok, err := ReadIdentity(ctx, g.Store)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return g.fail(fmt.Sprintf("it has no identity any more (this process started on store %s): wiped or replaced", g.id.ID))
	case id.ID != g.id.ID:
		return g.fail(fmt.Sprintf("its identity is %s, this process started on %s: replaced", id.ID, g.id.ID))
	case head < seen:
		return g.fail(fmt.Sprintf("its head is at %d, behind %d that this process has seen: rewound (restored from an older backup?)", head, seen))
	}
	g.see(head)
	return nil
}

// Append implements Store: refused once the guard is closed.
func (g *Guard) Append(ctx context.Context, stream string, expected ExpectedRevision, evs ...EventData) (AppendResult, error) {
	if err := g.Err(); err != nil {
		return AppendResult{}, err
	}
	if strings.HasPrefix(stream, CheckpointStreamPrefix) {
		if err := g.checkID(ctx); err != nil {
			return AppendResult{}, err
		}
	}
	// An append's position is not noted: a store may answer it with a
	// transaction's commit position, past its last event's own, and only
	// event positions compare with Head.
	return g.Store.Append(ctx, stream, expected, evs...)
}

// checkID is Check's identity half, without the head.
func (g *Guard) checkID(ctx context.Context) error {
	id, ok, err := ReadIdentity(ctx, g.Store)
	switch {
	case err != nil:
		return err
	case !ok:
		return g.fail(fmt.Sprintf("it has no identity any more (this process started on store %s): wiped or replaced", g.id.ID))
	case id.ID != g.id.ID:
		return g.fail(fmt.Sprintf("its identity is %s, this process started on %s: replaced", id.ID, g.id.ID))
	}
	return nil
}

// SubscribeAll implements Store, noting the positions it delivers. Once
// the guard is closed it delivers nothing more: the events of another log
// must not reach consumers (a shared read model, the job engine's index)
// that hold the old one's state.
func (g *Guard) SubscribeAll(ctx context.Context, after Position, filter Filter, h Handler) error {
	if err := g.Err(); err != nil {
		return err
	}
	return g.Store.SubscribeAll(ctx, after, filter, func(ctx context.Context, ev RecordedEvent) error {
		if err := g.Err(); err != nil {
			return err
		}
		g.see(ev.Position)
		return h(ctx, ev)
	})
}

// Unwrap returns the guarded store (for type assertions on the concrete
// store, e.g. the embedded one's online backup).
func (g *Guard) Unwrap() Store { return g.Store }
