package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// hookStore runs before just ahead of the first append that match selects
// (closing done when before returns), then sends that append as one already
// on the wire: it reaches the store even if the caller's context was
// cancelled meanwhile.
type hookStore struct {
	events.Store
	match  func(stream string, evs []events.EventData) bool
	before func()
	fired  atomic.Bool
	done   chan struct{}
}

func (h *hookStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if h.match(stream, evs) && !h.fired.Swap(true) {
		h.before()
		close(h.done)
		ctx = context.WithoutCancel(ctx)
	}
	return h.Store.Append(ctx, stream, exp, evs...)
}

func hasType(evs []events.EventData, typ string) bool {
	for _, ev := range evs {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// slotEventOf is the slot-changing event each kind's success implies.
var slotEventOf = map[string]string{
	events.KindReset:    "SlotVacated",
	events.KindTeardown: "SlotRetired",
	events.KindPromote:  "SlotPromoted",
}

// TestSlotEventCanOutrunACancel (issue 12, item 6): a person cancels the job
// at the last moment — just before the worker's slot event (SlotVacated,
// SlotRetired, SlotPromoted) reaches the store, or just before its terminal
// success does. Whatever lands, the log never holds both "job cancelled" and
// "slot changed by that job": a cancelled job left the slot as it was, a
// job whose slot changed succeeded (and the cancel was refused).
func TestSlotEventCanOutrunACancel(t *testing.T) {
	t.Parallel()
	points := []struct {
		name string
		// match selects the worker's append the cancel goes just before.
		match func(slotEvent string) func(string, []events.EventData) bool
		// want is the job's end with the fix: the cancel is refused once the
		// success is recorded, and fences the success before it.
		want string
	}{
		{"before-slot-event", func(slotEvent string) func(string, []events.EventData) bool {
			return func(stream string, evs []events.EventData) bool {
				return strings.HasPrefix(stream, events.SlotStreamPrefix) && hasType(evs, slotEvent)
			}
		}, events.StatusSucceeded},
		{"before-terminal-success", func(string) func(string, []events.EventData) bool {
			return func(stream string, evs []events.EventData) bool {
				return strings.HasPrefix(stream, events.JobStreamPrefix) && hasType(evs, "JobSucceeded")
			}
		}, events.StatusCancelled},
	}
	for _, kind := range []string{events.KindReset, events.KindTeardown, events.KindPromote} {
		for _, p := range points {
			t.Run(kind+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				slotEvent := slotEventOf[kind]
				w := newWorld(t, nil)
				w.patience = 2 * time.Minute
				w.seed("cell")
				if kind == events.KindReset {
					w.occupy("cell")
				}
				var cancelErr error
				hook := &hookStore{Store: w.store, match: p.match(slotEvent), done: make(chan struct{})}
				hook.before = func() {
					// The slot's lock names the job at both points.
					ctx := context.Background()
					id := w.slot("cell").LockJob
					cancelErr = w.svc.Cancel(ctx, slots.Actor{Name: "carol"}, id)
				}
				eng := jobs.NewEngine(hook, w.deps, patientConfig(w))
				done := make(chan error, 1)
				go func() { done <- eng.Run(context.Background()) }()
				t.Cleanup(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					eng.Stop(ctx)
					<-done
				})
				res := startJob(t, w, kind, "cell")
				j := w.waitEnded(res.JobID)
				// Another release (the engine's) may have freed the lock
				// while the hooked one was still cancelling.
				select {
				case <-hook.done:
				case <-time.After(10 * time.Second):
					t.Fatalf("the worker never made the append the cancel was to precede (job %s)", j.Status)
				}
				cancelled := false
				for _, ev := range w.jobEvents(res.JobID) {
					cancelled = cancelled || ev.Type == "JobCancelled"
				}
				changed := 0
				for _, ev := range w.logEvents(events.SlotStream("cell")) {
					var ref struct {
						JobID string `json:"job_id"`
					}
					if ev.Type == slotEvent && json.Unmarshal(ev.Data, &ref) == nil && ref.JobID == res.JobID {
						changed++
					}
				}
				if cancelled && changed > 0 {
					t.Fatalf("the log holds both JobCancelled and %s for job %s (cancel: %v)%s\nslot:%s", slotEvent, res.JobID, cancelErr,
						history(w.jobEvents(res.JobID)), history(w.logEvents(events.SlotStream("cell"))))
				}
				assertEq(t, "job status", j.Status, p.want)
				if j.Status == events.StatusSucceeded {
					assertEq(t, slotEvent+" events", changed, 1)
					if slots.ErrorCode(cancelErr) != slots.CodeConflict {
						t.Errorf("cancel after the success: %v, want conflict", cancelErr)
					}
				} else if changed != 0 {
					t.Errorf("%s written for a job that ended %s", slotEvent, j.Status)
				}
			})
		}
	}
}

// patientConfig is engineConfig with step and job deadlines far beyond what
// an undisturbed run needs even on a loaded machine, for tests whose point is
// not a deadline (git pushes through the simulator can take many seconds).
func patientConfig(w *world) jobs.Config {
	cfg := w.engineConfig()
	cfg.StepTimeout, cfg.JobTimeout = time.Minute, 2*time.Minute
	return cfg
}
