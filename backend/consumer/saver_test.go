package consumer_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

type state struct {
	N     int      `json:"n"`
	Names []string `json:"names"`
}

// Saver writes after Every events (checkpoint events not counted), a last
// one only when something was folded since, and what it writes loads back
// through Pack/Unpack.
func TestSaverCountsAndPacks(t *testing.T) {
	ctx := context.Background()
	store := memstore.New()
	defer store.Close()
	st := state{}
	var pos events.Position
	sv := &consumer.Saver{Log: store, Consumer: "test", Version: 3, Every: 3, After: time.Hour,
		Snapshot: func() (events.Position, []byte, error) {
			b, err := consumer.Pack(st)
			return pos, b, err
		}}
	sv.Start(0)
	checkpoints := func() int {
		evs, err := store.ReadStream(ctx, events.CheckpointStream("test"), 0, 0, events.Forward)
		if err != nil {
			return 0
		}
		return len(evs)
	}
	fold := func(stream string) {
		res, err := store.Append(ctx, stream, events.Any(), events.EventData{Type: "Thing", Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		pos = res.Position
		st.N++
		st.Names = append(st.Names, stream)
		sv.Folded(ctx, events.RecordedEvent{Stream: stream, Position: pos})
	}
	fold("a")
	fold("b")
	if n := checkpoints(); n != 0 {
		t.Fatalf("%d checkpoints after 2 events", n)
	}
	fold("c")
	if n := checkpoints(); n != 1 {
		t.Fatalf("%d checkpoints after 3 events, want 1", n)
	}
	// Checkpoint events are no progress.
	for i := 0; i < 5; i++ {
		sv.Folded(ctx, events.RecordedEvent{Stream: events.CheckpointStream("other"), Position: pos})
	}
	sv.Save(ctx)
	if n := checkpoints(); n != 1 {
		t.Fatalf("%d checkpoints with nothing folded since, want 1", n)
	}
	fold("d")
	sv.Save(ctx)
	if n := checkpoints(); n != 2 {
		t.Fatalf("%d checkpoints after the last save, want 2", n)
	}
	var packed consumer.Packed
	at, ok, why, err := consumer.LoadCheckpoint(ctx, store, "test", 3, &packed)
	if err != nil || !ok {
		t.Fatal(ok, why, err)
	}
	var got state
	if err := packed.Unpack(&got); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(st)
	if b, _ := json.Marshal(got); at != pos || string(b) != string(want) {
		t.Fatalf("loaded %s at %d, want %s at %d", b, at, want, pos)
	}
}
