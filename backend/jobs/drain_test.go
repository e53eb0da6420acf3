package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestDrainingEngineClaimsNothing: of two engines on one store, the one
// that drains (its process got SIGTERM) claims no job from then on, while
// its running attempt goes on; the other claims every new job.
func TestDrainingEngineClaimsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	c1, c2 := w.engineConfig(), w.engineConfig()
	c1.WorkerID, c2.WorkerID = "draining", "serving"
	e1, _ := w.startEngine(c1)
	ctx := context.Background()
	// A running attempt on the draining engine: its first step is slow
	// (a hang would only end at the step's deadline, as a timeout).
	w.seed("first")
	w.occupy("first")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Latency: 3 * time.Second, Times: 1})
	first, err := w.svc.Release(ctx, bob, "first")
	if err != nil {
		t.Fatal(err)
	}
	w.waitJob(first.JobID, 15*time.Second, func(j *events.JobState) bool { return j.Status == events.StatusRunning })
	e1.Drain()
	w.startEngine(c2)
	w.sim.ClearFaults()
	var ids []string
	for _, n := range []string{"a", "b", "c", "d"} {
		w.seed(n)
		w.occupy(n)
		res, err := w.svc.Release(ctx, bob, n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.JobID)
	}
	for _, id := range ids {
		j := w.waitEnded(id)
		assertEq(t, "status of "+id, j.Status, events.StatusSucceeded)
		for _, ev := range w.jobEvents(id) {
			if ev.Type == "JobClaimed" && strings.Contains(ev.Meta.Actor, "draining") {
				t.Fatalf("job %s was claimed by the draining engine (%s)", id, ev.Meta.Actor)
			}
		}
	}
	// The draining engine's own attempt went on to its end.
	j := w.waitEnded(first.JobID)
	if j.Status != events.StatusSucceeded || !strings.Contains(j.Worker, "draining") {
		t.Fatalf("the draining engine's attempt: %s by %s", j.Status, j.Worker)
	}
}

// jsonLines captures a JSON logger's lines.
type jsonLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *jsonLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// TestLogLinesHaveNoDuplicateKeys: the claim and rescue lines carried the
// key "worker" twice (the engine's and the abandoned attempt's), which a
// JSON log pipeline reads as one or the other.
func TestLogLinesHaveNoDuplicateKeys(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	lines := &jsonLines{}
	cfg := w.engineConfig()
	cfg.Logger = slog.New(slog.NewJSONHandler(lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// An attempt of a worker that is gone, its lease already over: this
	// engine's rescuer abandons it at once (no lease of its own need run
	// out, so the engine keeps the default lease: a short real one let a
	// loaded machine miss renewals of the resumed attempt).
	w.seed("s")
	w.occupy("s")
	res, err := w.svc.Release(context.Background(), bob, "s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.store.Append(context.Background(), events.JobStream(res.JobID), events.Any(),
		events.New(events.JobClaimed{JobID: res.JobID, Worker: "worker:gone/x/0", Attempt: 1, LeaseUntil: time.Now().Add(-time.Second)},
			events.Metadata{Actor: "worker:gone/x/0"}))
	if err != nil {
		t.Fatal(err)
	}
	w.startEngine(cfg)
	// Resume only once the abandoned attempt's lock is released (its
	// JobReleased): before that, Resume is refused as job_still_ending —
	// the race that made this test fail under load (issue 36 item 7).
	if j := w.waitEnded(res.JobID); j.Status != events.StatusAbandoned {
		t.Fatalf("the gone worker's attempt: %s, want abandoned", j.Status)
	}
	if _, err := w.svc.Resume(context.Background(), bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	w.waitEndedN(res.JobID, 2)
	lines.mu.Lock()
	out := lines.buf.String()
	lines.mu.Unlock()
	var sawRescue, sawClaim bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		sawRescue = sawRescue || strings.Contains(line, "attempt abandoned")
		sawClaim = sawClaim || strings.Contains(line, "job claimed")
		dec := json.NewDecoder(strings.NewReader(line))
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		keys := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			k := tok.(string)
			if keys[k] {
				t.Fatalf("key %q twice in %s", k, line)
			}
			keys[k] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !sawRescue || !sawClaim {
		t.Fatalf("no rescue or claim line:\n%s", out)
	}
}
