package events_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

func slot(name string) events.EventData {
	return events.New(events.SlotRegistered{Slot: name}, events.Metadata{Actor: "test"})
}

// The identity is written once: a second process (or a restart) reads the
// first one's, on the embedded store as on any other.
func TestIdentityWrittenOnce(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(t.TempDir(), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, created, err := events.EnsureIdentity(ctx, st)
	if err != nil || !created || a.ID == "" {
		t.Fatalf("first: %+v %v %v", a, created, err)
	}
	b, created, err := events.EnsureIdentity(ctx, st)
	if err != nil || created || b != a {
		t.Fatalf("second: %+v %v %v, want %+v", b, created, err, a)
	}
	evs, err := st.ReadStream(ctx, events.IdentityStream, 0, 0, events.Forward)
	if err != nil || len(evs) != 1 {
		t.Fatalf("identity stream: %d events, %v", len(evs), err)
	}
}

// A guard stops writes, for good and with one notice, when the store
// under it is rewound, and refuses checkpoints of the old log at once.
func TestGuardStopsWritesOnARewoundStore(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	id, _, err := events.EnsureIdentity(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	var notices []error
	g := events.NewGuard(st, id, func(err error) { notices = append(notices, err) })
	for _, n := range []string{"a", "b", "c"} {
		if _, err := g.Append(ctx, events.SlotStream(n), events.NoStream(), slot(n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Check(ctx); err != nil {
		t.Fatalf("check of the same store: %v", err)
	}
	// The same identity on a store whose head is behind what the guard
	// saw: a copy restored from an older backup.
	older := memstore.New()
	if _, err := older.Append(ctx, events.IdentityStream, events.NoStream(),
		events.New(events.StoreCreated{StoreID: id.ID}, events.Metadata{})); err != nil {
		t.Fatal(err)
	}
	g.Store = older
	if err := g.Check(ctx); !errors.Is(err, events.ErrStoreChanged) {
		t.Fatalf("check of a rewound store: %v", err)
	}
	if _, err := g.Append(ctx, events.SlotStream("d"), events.Any(), slot("d")); !errors.Is(err, events.ErrStoreChanged) {
		t.Fatalf("append after the change: %v", err)
	}
	_ = g.Check(ctx)
	if len(notices) != 1 {
		t.Fatalf("notices: %v (want exactly one)", notices)
	}
	if n, _ := older.Head(ctx); n != 1 {
		t.Fatalf("the rewound store's head is %d, want 1 (only its identity)", n)
	}
}

// On KurrentDB (the fake node, through the adapter): a node replaced by an
// empty one on the same address is told from the one the guard started
// on, and a checkpoint append is refused before the next check.
func TestGuardOnAReplacedKurrentNode(t *testing.T) {
	ctx := context.Background()
	node, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	addr := node.Addr()
	st, err := kurrent.Open(ctx, node.ConnString(), kurrent.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RetryTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, _, err := events.EnsureIdentity(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	g := events.NewGuard(st, id, nil)
	if _, err := g.Append(ctx, events.SlotStream("a"), events.NoStream(), slot("a")); err != nil {
		t.Fatal(err)
	}
	node.Close()
	fresh, err := kurrentfake.StartOn(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	cp := events.New(events.ConsumerCheckpointed{Consumer: "x", Position: 99, Version: 1}, events.Metadata{})
	if _, err := g.Append(ctx, events.CheckpointStream("x"), events.Any(), cp); !errors.Is(err, events.ErrStoreChanged) {
		t.Fatalf("checkpoint append on the new node: %v", err)
	}
	if err := g.Check(ctx); !errors.Is(err, events.ErrStoreChanged) {
		t.Fatalf("check: %v", err)
	}
	if n := fresh.Len(); n != 0 {
		t.Fatalf("the new node holds %d events, want none", n)
	}
}
