package jobs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current folds")

// loadLog appends a recorded log (NDJSON of events.RecordedEvent, in
// position order) to a fresh memstore, keeping ids, payloads and metadata,
// so positions and revisions come out as recorded.
func loadLog(t *testing.T, path string) (events.Store, []events.RecordedEvent) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	var all []events.RecordedEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev events.RecordedEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatal(err)
		}
		res, err := store.Append(context.Background(), ev.Stream, events.Any(), events.EventData{ID: ev.ID, Type: ev.Type, Data: ev.Data, Meta: ev.Meta})
		if err != nil {
			t.Fatal(err)
		}
		if res.NextExpected != ev.Revision {
			t.Fatalf("%s: imported at revision %d, recorded %d", ev.Stream, res.NextExpected, ev.Revision)
		}
		all = append(all, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return store, all
}

// foldedLog is what the code folds a log into: the commands' and engine's
// aggregates (a stable summary of them) and the read model's views.
type foldedLog struct {
	Slots    map[string]slotSummary         `json:"slots"`
	Jobs     map[string]jobSummary          `json:"jobs"`
	Views    []projections.SlotView         `json:"slot_views"`
	JobViews map[string]projections.JobView `json:"job_views"`
}

type slotSummary struct {
	Lifecycle  string `json:"lifecycle"`
	Occupant   string `json:"occupant,omitempty"`
	LockJob    string `json:"lock_job,omitempty"`
	LockKind   string `json:"lock_kind,omitempty"`
	Retired    bool   `json:"retired,omitempty"`
	RetiredBy  string `json:"retired_by,omitempty"`
	Incomplete bool   `json:"incomplete,omitempty"`
	Remaining  int    `json:"remaining,omitempty"`
}

type jobSummary struct {
	Kind      string   `json:"kind"`
	Slot      string   `json:"slot"`
	Status    string   `json:"status"`
	Attempt   int      `json:"attempt"`
	Run       int      `json:"run"`
	Terminals int      `json:"terminals"`
	Done      []string `json:"done"`
	InFlight  string   `json:"in_flight,omitempty"`
	NotBefore string   `json:"not_before"`
	Remaining int      `json:"remaining"`
}

func foldLog(t *testing.T, store events.Store, all []events.RecordedEvent) foldedLog {
	t.Helper()
	ctx := context.Background()
	out := foldedLog{Slots: map[string]slotSummary{}, Jobs: map[string]jobSummary{}, JobViews: map[string]projections.JobView{}}
	for _, ev := range all {
		if name, ok := strings.CutPrefix(ev.Stream, events.SlotStreamPrefix); ok {
			st, err := slots.LoadSlot(ctx, store, name)
			if err != nil {
				t.Fatal(err)
			}
			out.Slots[name] = slotSummary{
				Lifecycle: st.Lifecycle(), Occupant: st.Occupant, LockJob: st.LockJob, LockKind: st.LockKind,
				Retired: st.Retired, RetiredBy: st.RetiredBy, Incomplete: st.Incomplete, Remaining: len(st.Remaining),
			}
		}
		if id, ok := strings.CutPrefix(ev.Stream, events.JobStreamPrefix); ok {
			j, err := slots.LoadJob(ctx, store, id)
			if err != nil {
				t.Fatal(err)
			}
			out.Jobs[id] = jobSummary{
				Kind: j.Queued.Kind, Slot: j.Queued.Slot, Status: j.Status, Attempt: j.Attempt, Run: j.Run(),
				Terminals: j.Terminals, Done: j.Completed(), InFlight: j.InFlight,
				NotBefore: j.NotBefore.UTC().Format(time.RFC3339Nano), Remaining: len(j.Remaining()),
			}
		}
	}
	rm := memory.New(store)
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := projections.Replay(ctx, store, rm, head, 0); err != nil {
		t.Fatal(err)
	}
	if out.Views, err = rm.ListSlots(ctx); err != nil {
		t.Fatal(err)
	}
	for id := range out.Jobs {
		v, err := rm.Job(ctx, id)
		if err != nil {
			t.Fatalf("job view %s: %v", id, err)
		}
		out.JobViews[id] = v
	}
	return out
}

// TestOldLogFoldsTheSame is the catalogue's promise that existing logs keep
// working: testdata/v1log.ndjson was recorded by the engine and commands of
// the two-append acceptance (JobAccepted on the slot, then JobQueued on the
// job; record_v1_test.go) with a reset, a teardown, a promote, a cancel of a
// queued reset, a failed teardown resumed to success and a reset left
// queued. The current code must fold it into the slot and job states and
// the views recorded beside it (v1log.golden.json, written by the code of
// that format).
func TestOldLogFoldsTheSame(t *testing.T) {
	t.Parallel()
	store, all := loadLog(t, "testdata/v1log.ndjson")
	got := foldLog(t, store, all)
	gotJSON, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	const golden = "testdata/v1log.golden.json"
	if *updateGolden {
		if err := os.WriteFile(golden, append(gotJSON, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(gotJSON)) {
		t.Errorf("the recorded old-format log folds differently now:\n%s", lineDiff(string(want), string(gotJSON)))
	}
}

// TestEngineOnOldLog: an engine started on the old-format log does nothing
// to finished jobs, keeps only the open (queued) one in its index, and a
// cancel of that old-format job works.
func TestEngineOnOldLog(t *testing.T) {
	t.Parallel()
	store, all := loadLog(t, "testdata/v1log.ndjson")
	w := newWorld(t, store)
	// The engine's clock stands at the end of the recording, when the open
	// reset's grace had not passed.
	cfg := w.engineConfig()
	cfg.Clock = fixedClock{clock.Real(), all[len(all)-1].Meta.Time}
	eng, stop := w.startEngine(cfg)
	ctx := context.Background()
	head := all[len(all)-1].Position
	if err := eng.WaitApplied(ctx, head); err != nil {
		t.Fatal(err)
	}
	assertEq(t, "jobs in the engine index", eng.IndexedJobs(), 1)
	stop()
	// Nothing is due: the engine appends only its index's checkpoint, at
	// Stop.
	var after []string
	for _, ev := range readAll(t, store) {
		if ev.Position > head {
			after = append(after, ev.Stream+" "+ev.Type)
		}
	}
	if len(after) != 1 || after[0] != events.CheckpointStream("jobs-index")+" ConsumerCheckpointed" {
		t.Fatalf("the engine appended to a log with nothing due: %v, want only its index checkpoint", after)
	}
	open := strings.TrimPrefix(all[len(all)-1].Stream, events.JobStreamPrefix)
	if err := w.svc.Cancel(ctx, bob, open); err != nil {
		t.Fatal(err)
	}
	j, err := slots.LoadJob(ctx, store, open)
	if err != nil {
		t.Fatal(err)
	}
	assertEq(t, "status", j.Status, events.StatusCancelled)
	st := w.slot("v1-open")
	if st.Locked() || !st.Occupied {
		t.Fatalf("slot after the cancel: lock %q occupied %v", st.LockJob, st.Occupied)
	}
}

// fixedClock reads one time; its timers are real.
type fixedClock struct {
	clock.Clock
	t time.Time
}

func (c fixedClock) Now() time.Time { return c.t }

// lineDiff lists the lines that differ, for a readable failure.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("  want: " + a + "\n  got:  " + c + "\n")
		}
	}
	return b.String()
}

// readAll returns every event of store, in position order.
func readAll(t *testing.T, store events.Store) []events.RecordedEvent {
	t.Helper()
	ctx := context.Background()
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []events.RecordedEvent
	if head == 0 {
		return nil
	}
	atHead := errors.New("at the head")
	err = store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= head {
			return atHead
		}
		return nil
	})
	if !errors.Is(err, atHead) {
		t.Fatal(err)
	}
	return out
}
