package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// More than DefaultListedRetired slots are torn down. GET /api/slots lists
// the live ones and the 100 most recently retired; GET /api/slots/{name}
// answers for every slot, archived ones included, byte for byte what a
// server whose read model keeps every view answers, and their jobs stay
// listed.
func TestArchivedSlotsAreServedAsBefore(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	g := projtest.NewGen(store, 77)
	n := projections.DefaultListedRetired + 15
	for i := range n {
		s, err := g.Register(ctx, fmt.Sprintf("r%03d", i))
		projtest.Must(t, err)
		_, err = g.Job(ctx, s, events.KindTeardown, projtest.Succeed)
		projtest.Must(t, err)
	}
	projtest.Must(t, g.Random(ctx, 3, g.Appended+400))

	archiving := &bundle{store: store} // memory.New: archives
	archiving.start(t, HubOptions{})
	keep := memory.New(nil)                                                                       // no log: keeps every view, lists the same
	full := &bundle{store: store, token: archiving.token, deps: func(d *Deps) { d.Reads = keep }} // one token: names are unique
	full.start(t, HubOptions{})
	_, err := projections.Replay(ctx, store, keep, 0, 0)
	projtest.Must(t, err)
	head, err := store.Head(ctx)
	projtest.Must(t, err)
	projtest.Must(t, archiving.runner.WaitFor(ctx, head))

	same := func(path string) []byte {
		t.Helper()
		a, b := full.do(t, "GET", path, nil), archiving.do(t, "GET", path, nil)
		if a.status != b.status || string(a.body) != string(b.body) {
			t.Fatalf("GET %s differs:\n  every view: %d %s\n  archiving:  %d %s", path, a.status, a.body, b.status, b.body)
		}
		return a.body
	}
	var list struct {
		Slots []projections.SlotView `json:"slots"`
	}
	projtest.Must(t, json.Unmarshal(same("/api/slots"), &list))
	retired := 0
	for _, v := range list.Slots {
		if v.Lifecycle == projections.LifecycleRetired {
			retired++
		}
	}
	if retired != projections.DefaultListedRetired {
		t.Errorf("GET /api/slots lists %d retired slots, want %d", retired, projections.DefaultListedRetired)
	}
	names, err := keep.SlotNames(ctx)
	projtest.Must(t, err)
	if len(names) <= len(list.Slots) {
		t.Fatalf("%d slots, %d listed: none archived", len(names), len(list.Slots))
	}
	for _, name := range names {
		var v projections.SlotView
		projtest.Must(t, json.Unmarshal(same("/api/slots/"+name), &v))
		if v.Name != name {
			t.Fatalf("GET /api/slots/%s = %s", name, v.Name)
		}
		same("/api/slots/" + name + "/jobs")
		same("/api/jobs?slot=" + name)
	}
	same("/api/slots/no-such-slot")
}

// The SSE snapshot frame lists what ListSlots lists: the hub, fed the read
// model's changes one by one, lets an idle retired slot go once more
// recently changed ones fill the listed number.
func TestHubSnapshotListsLikeTheReadModel(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	g := projtest.NewGen(store, 78)
	projtest.Must(t, g.Random(ctx, 4, 4000))
	lim := 3
	rm := memory.NewWithLimits(store, memory.Limits{ListedRetired: lim})
	hub := NewHub(HubOptions{ListedRetired: lim}, nil, nil)
	t.Cleanup(hub.Close)
	hub.Seed(0, nil)
	head, err := store.Head(ctx)
	projtest.Must(t, err)
	sub, cancel := context.WithCancel(ctx)
	defer cancel()
	err = store.SubscribeAll(sub, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		chs, err := rm.Apply(ctx, []projections.Event{projections.DecodeEvent(ev)})
		if err != nil {
			return err
		}
		for _, ch := range chs {
			hub.Publish(ch)
		}
		if ev.Position == head {
			cancel()
		}
		return nil
	})
	if sub.Err() == nil {
		t.Fatalf("the subscription ended before the head: %v", err)
	}
	listed, err := rm.ListSlots(ctx)
	projtest.Must(t, err)
	hub.mu.RLock()
	frame := string(hub.snapshotLocked(false))
	hub.mu.RUnlock()
	_, data, _ := strings.Cut(frame, "data: ")
	var snap struct {
		Slots []projections.SlotView `json:"slots"`
	}
	projtest.Must(t, json.Unmarshal([]byte(strings.TrimSpace(data)), &snap))
	a, _ := json.Marshal(snap.Slots)
	b, _ := json.Marshal(listed)
	if string(a) != string(b) {
		t.Errorf("the snapshot frame's slots differ from ListSlots:\n  frame:     %s\n  ListSlots: %s", a, b)
	}
	_, archived := rm.HeldSlots()
	if archived == 0 || !slices.ContainsFunc(listed, func(v projections.SlotView) bool { return projections.Idle(v) }) {
		t.Fatalf("%d slots archived; the history must archive some and list some idle ones", archived)
	}
}
