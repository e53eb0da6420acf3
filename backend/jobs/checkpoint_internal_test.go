package jobs

// Checkpoints of the engine's index (issue 13): an index started from a
// checkpoint taken at any position P and folding the rest ends in the same
// state as one folding the whole log from 0. These tests reach into the
// index (package jobs); the engine-level ones (restart, crashes across the
// write) are in checkpoint_test.go.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// readLog returns every event of store in position order.
func readLog(t *testing.T, store events.Store) []events.RecordedEvent {
	t.Helper()
	ctx := context.Background()
	head, err := store.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var all []events.RecordedEvent
	if head == 0 {
		return nil
	}
	stop := errors.New("at the head")
	err = store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		all = append(all, ev)
		if ev.Position >= head {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatal(err)
	}
	return all
}

// fold applies evs to x as its Runner would.
func fold(t *testing.T, x *index, evs []events.RecordedEvent) {
	t.Helper()
	for _, ev := range evs {
		if strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix) || !x.Wants(ev) {
			continue
		}
		if err := x.Prepare(context.Background(), ev); err != nil {
			t.Fatalf("prepare %s@%d: %v", ev.Type, ev.Position, err)
		}
		x.r.Update(func() { _ = x.Apply(ev) })
	}
}

// snapshot is x's checkpoint state, encoded.
func snapshot(x *index) (b []byte, err error) {
	x.r.View(func() {
		var st any
		if st, err = x.Snapshot(); err == nil {
			b, err = json.Marshal(st)
		}
	})
	return b, err
}

// indexView is what the index's behaviour depends on: the jobs it holds for
// a reason (not finished; a finished job it still holds is folded again
// from its stream when needed, so holding it or not is the same), each
// locked slot's lock, the jobs popDue would hand out (in the heap, queued,
// lock for their run), running and ended.
type indexView struct {
	Jobs    map[string]events.JobState
	Locks   map[string]slots.SlotState
	Due     []string
	Running []string
	Ended   []string
}

// cloneJob copies what later folds change in place, and blanks the ids of
// Header's events: Accept makes a new one on every fold (the stores give
// the copy its own when it is written), so two folds of one log differ
// there.
func cloneJob(j events.JobState) events.JobState {
	j.Done, j.Results = maps.Clone(j.Done), maps.Clone(j.Results)
	j.DoneOrder, j.Header = slices.Clone(j.DoneOrder), slices.Clone(j.Header)
	for i := range j.Header {
		j.Header[i].ID = ""
	}
	return j
}

func viewOf(x *index) (v indexView) {
	x.r.View(func() { v = viewLocked(x) })
	return v
}

func viewLocked(x *index) indexView {
	v := indexView{Jobs: map[string]events.JobState{}, Locks: map[string]slots.SlotState{}}
	for id, j := range x.jobs {
		if !x.finished(id, j) {
			v.Jobs[id] = cloneJob(*j)
		}
	}
	for name, s := range x.slots {
		if s.Locked() {
			v.Locks[name] = *s
		}
	}
	for _, it := range x.due {
		j := x.jobs[it.id]
		if j == nil || j.Status != events.StatusQueued {
			continue
		}
		if st := x.slots[j.Queued.Slot]; st != nil && st.LockedFor(j) && !slices.Contains(v.Due, it.id) {
			v.Due = append(v.Due, it.id)
		}
	}
	for id := range x.running {
		v.Running = append(v.Running, id)
	}
	for id := range x.ended {
		v.Ended = append(v.Ended, id)
	}
	slices.Sort(v.Due)
	slices.Sort(v.Running)
	slices.Sort(v.Ended)
	return v
}

// sameIndex fails unless b (started from a checkpoint) and a (folded from
// 0) are in the same state, and every job both hold is folded the same.
func sameIndex(t *testing.T, what string, a, b *index) {
	t.Helper()
	va, vb := viewOf(a), viewOf(b)
	if !reflect.DeepEqual(va, vb) {
		ja, _ := json.MarshalIndent(va, "", " ")
		jb, _ := json.MarshalIndent(vb, "", " ")
		t.Fatalf("%s: index from the checkpoint differs from the fold from 0\nfrom 0:\n%s\nfrom the checkpoint:\n%s", what, ja, jb)
	}
	a.r.View(func() {
		b.r.View(func() {
			for id, jb := range b.jobs {
				if ja := a.jobs[id]; ja != nil && !reflect.DeepEqual(cloneJob(*ja), cloneJob(*jb)) {
					t.Fatalf("%s: job %s folded differently:\nfrom 0 %+v\nfrom the checkpoint %+v", what, id, *ja, *jb)
				}
			}
		})
	})
}

// fromCheckpoint is a new index restored from a checkpoint's state.
func fromCheckpoint(t *testing.T, store events.Store, state []byte) *index {
	t.Helper()
	x := newIndex(store, quietLogger())
	var err error
	x.r.Update(func() { err = x.Restore(state) })
	if err != nil {
		t.Fatalf("checkpoint state refused: %v", err)
	}
	return x
}

// cutSituations counts what the fold from 0 is in the middle of at a cut,
// so each test can check its cuts reach the cases it is about.
type cutSituations struct {
	oldAcceptPending int // an old-format JobAccepted whose JobQueued/JobResumed is not folded yet
	headerPending    int // a one-append JobAccepted whose job stream copy is not written yet
	resumeOfForgot   int // right after the JobAccepted of a resume of a job the index forgot
	endedWithLock    int
	running, queued  int
}

// checkCuts folds evs from 0 and, at every cut, takes the index's
// checkpoint state; then for each cut restores it into a new index, folds
// the rest and compares the two at every later cut and at the end.
func checkCuts(t *testing.T, store events.Store, evs []events.RecordedEvent, cut func(i int) bool) cutSituations {
	t.Helper()
	a := newIndex(store, quietLogger())
	type snap struct {
		at    int // events folded
		state []byte
		view  indexView
	}
	var snaps []snap
	var sit cutSituations
	forgotten := map[string]bool{}
	for i, ev := range evs {
		resumeOfForgot := false
		if ev.Type == "JobAccepted" {
			p, _ := events.Decode(ev)
			acc := p.(events.JobAccepted)
			a.r.View(func() { resumeOfForgot = acc.Resumed && a.jobs[acc.JobID] == nil && forgotten[acc.JobID] })
		}
		fold(t, a, evs[i:i+1])
		a.r.View(func() {
			for id := range forgotten {
				if a.jobs[id] != nil {
					delete(forgotten, id)
				}
			}
			if ev.Type == "JobReleased" {
				p, _ := events.Decode(ev)
				if id := p.(events.JobReleased).JobID; a.jobs[id] == nil {
					forgotten[id] = true
				}
			}
		})
		if !cut(i + 1) {
			continue
		}
		b, err := snapshot(a)
		if err != nil {
			t.Fatal(err)
		}
		v := viewOf(a)
		for _, s := range v.Locks {
			j, held := v.Jobs[s.LockJob]
			switch {
			case s.LockRun == 0 && !held:
				sit.oldAcceptPending++
			case s.LockRun == 0 && j.Terminal() && slices.Contains(v.Ended, j.ID):
				if ev.Type == "JobAccepted" {
					sit.oldAcceptPending++
				}
			case held && len(j.Header) > 0:
				sit.headerPending++
			}
		}
		if resumeOfForgot {
			sit.resumeOfForgot++
		}
		sit.endedWithLock += len(v.Ended)
		sit.running += len(v.Running)
		sit.queued += len(v.Due)
		snaps = append(snaps, snap{at: i + 1, state: b, view: v})
	}
	for k, s := range snaps {
		x := fromCheckpoint(t, store, s.state)
		if got := viewOf(x); !reflect.DeepEqual(got, s.view) {
			t.Fatalf("cut after %d events: the restored index is not the one checkpointed:\n%+v\n%+v", s.at, got, s.view)
		}
		done := s.at
		for i, later := range snaps[k+1:] {
			if i%10 != 0 {
				continue // comparing at a few later cuts is enough to place a difference
			}
			fold(t, x, evs[done:later.at])
			done = later.at
			if got := viewOf(x); !reflect.DeepEqual(got, later.view) {
				ja, _ := json.MarshalIndent(later.view, "", " ")
				jb, _ := json.MarshalIndent(got, "", " ")
				t.Fatalf("checkpoint after %d events, folded to %d: differs from the fold from 0\nfrom 0:\n%s\nfrom the checkpoint:\n%s", s.at, later.at, ja, jb)
			}
		}
		fold(t, x, evs[done:])
		sameIndex(t, fmt.Sprintf("checkpoint after %d of %d events", s.at, len(evs)), a, x)
	}
	return sit
}

// TestCheckpointedIndexFoldsTheSameOldLog: the v1 engine's recorded log
// (old-format acceptances: JobAccepted, then the command's JobQueued or
// JobResumed), cut after every event.
func TestCheckpointedIndexFoldsTheSameOldLog(t *testing.T) {
	t.Parallel()
	store, evs := loadNDJSON(t, "testdata/v1log.ndjson")
	sit := checkCuts(t, store, evs, func(int) bool { return true })
	if sit.oldAcceptPending == 0 || sit.endedWithLock == 0 || sit.running == 0 || sit.queued == 0 {
		t.Fatalf("the cuts miss a case: %+v", sit)
	}
}

// TestCheckpointedIndexFoldsTheSameGenerated: projtest's realistic mix
// (failures, timeouts, abandoned and resumed attempts; old-format
// acceptances: the job's JobQueued/JobResumed, then the slot's
// JobAccepted), from several generators at once so jobs of many slots are
// open together, cut before and after every JobAccepted, after every
// terminal event, and every 50th.
func TestCheckpointedIndexFoldsTheSameGenerated(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := projtest.NewGen(store, uint64(40+i))
			g.Prefix = fmt.Sprintf("g%d-", i)
			if err := g.Random(ctx, 2, 300); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	evs := readLog(t, store)
	cut := func(n int) bool {
		switch {
		case n%50 == 0 || n == len(evs):
			return true
		case evs[n-1].Type == "JobAccepted" || events.IsTerminal(evs[n-1].Type):
			return true // the lock just taken; an ended job holding its lock
		}
		return n < len(evs) && evs[n].Type == "JobAccepted" // between the two appends
	}
	sit := checkCuts(t, store, evs, cut)
	if sit.endedWithLock == 0 || sit.running == 0 {
		t.Fatalf("the cuts miss a case: %+v", sit)
	}
}

// TestCheckpointedIndexFoldsTheSameOneAppend: a log in today's shape (the
// slot's JobAccepted carries the job; the job stream's copy follows, or is
// written by the claim), with resumes of jobs the index forgot, cancels of
// queued jobs and, at the end, a queued job, a running one and an ended one
// still holding its lock; cut after every event.
func TestCheckpointedIndexFoldsTheSameOneAppend(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	writeOneAppendLog(t, store, 7)
	evs := readLog(t, store)
	sit := checkCuts(t, store, evs, func(int) bool { return true })
	if sit.headerPending == 0 || sit.resumeOfForgot == 0 || sit.endedWithLock == 0 || sit.running == 0 || sit.queued == 0 {
		t.Fatalf("the cuts miss a case: %+v", sit)
	}
}

// TestCheckpointStateRoundTrips: the job and slot folds survive the
// checkpoint's JSON exactly (maps, Header, results, times), for every state
// the one-append and the old log pass through.
func TestCheckpointStateRoundTrips(t *testing.T) {
	t.Parallel()
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	writeOneAppendLog(t, store, 3)
	old, oldEvs := loadNDJSON(t, "testdata/v1log.ndjson")
	for _, c := range []struct {
		store events.Store
		evs   []events.RecordedEvent
	}{{store, readLog(t, store)}, {old, oldEvs}} {
		x := newIndex(c.store, quietLogger())
		for _, ev := range c.evs {
			fold(t, x, []events.RecordedEvent{ev})
			b, err := snapshot(x)
			var want indexState
			_ = json.Unmarshal(b, &want) // only for its job and slot ids
			jobs, locks := map[string]events.JobState{}, map[string]slots.SlotState{}
			x.r.View(func() {
				for id := range want.Jobs {
					jobs[id] = *x.jobs[id]
				}
				for name := range want.Locks {
					locks[name] = *x.slots[name]
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			var got indexState
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			for id, j := range jobs {
				if !reflect.DeepEqual(*got.Jobs[id], j) {
					t.Fatalf("after %s@%d: job %s does not survive JSON:\n got %#v\nwant %#v", ev.Type, ev.Position, id, *got.Jobs[id], j)
				}
			}
			for name, s := range locks {
				if !reflect.DeepEqual(*got.Locks[name], s) {
					t.Fatalf("after %s@%d: slot %s does not survive JSON:\n got %#v\nwant %#v", ev.Type, ev.Position, name, *got.Locks[name], s)
				}
			}
		}
	}
}

// The consumer runtime's properties (backend/consumer/consumertest) hold
// for the index on a log in today's shape: from a checkpoint at any cut
// (TestCheckpointedIndexFoldsTheSame* check every cut, and the situations
// they reach), across a crash at a checkpoint write, past an unusable
// checkpoint, it ends as the fold from 0. (Its bounded checkpoint is
// TestCheckpointHoldsNoFinishedJobs.)
func TestIndexConsumer(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New:     func(store events.Store) consumer.Fold { return newIndex(store, quietLogger()) },
		Log:     func(t testing.TB, store events.Store) { writeOneAppendLogRounds(t.(*testing.T), store, 5, 3) },
		Observe: func(f consumer.Fold) any { return viewLocked(f.(*index)) },
	})
}

// A checkpoint state that does not hold together is refused by Restore
// (the Runner then folds from 0), and leaves the index as it was.
func TestRestoreRefusesStatesThatDoNotHoldTogether(t *testing.T) {
	for name, state := range map[string]string{
		"garbage":     `{"jobs": 17}`,
		"job missing": `{"jobs":{},"locks":{},"running":["nobody"],"ended":[]}`,
		"null job":    `{"jobs":{"j1":null},"locks":{},"running":[],"ended":[]}`,
		"no lock":     `{"jobs":{},"locks":{"s":{"Name":"s"}},"running":[],"ended":[]}`,
	} {
		x := newIndex(nil, quietLogger())
		if err := x.Restore([]byte(state)); err == nil {
			t.Errorf("%s: restored", name)
		}
		if x.len() != 0 || len(x.slots) != 0 {
			t.Errorf("%s: a refused state changed the index", name)
		}
	}
}

// TestCheckpointHoldsNoFinishedJobs: the checkpoint's state holds only the
// open jobs and held locks; finished jobs are not in it, even those the
// index still holds because a loop works on them, so its size does not
// grow with them.
func TestCheckpointHoldsNoFinishedJobs(t *testing.T) {
	t.Parallel()
	size := func(rounds int) (int, indexState) {
		store := memstore.New()
		defer store.Close()
		writeOneAppendLogRounds(t, store, 9, rounds)
		x := newIndex(store, quietLogger())
		evs := readLog(t, store)
		// Every job pinned, as if a loop still worked on each when the
		// checkpoint is taken: the index holds them all, finished or not.
		for _, ev := range evs {
			if id, ok := strings.CutPrefix(ev.Stream, events.JobStreamPrefix); ok && ev.Revision == 0 {
				x.pin(id)
			}
		}
		fold(t, x, evs)
		if held := x.len(); held < 3*rounds {
			t.Fatalf("the index holds %d jobs, want every one of the %d rounds' (pinned)", held, rounds)
		}
		b, err := snapshot(x)
		if err != nil {
			t.Fatal(err)
		}
		var st indexState
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return len(b), st
	}
	small, sst := size(4)
	big, bst := size(40)
	// What the log leaves open at its end: a queued job, a running one and
	// an ended one still holding its lock, one per slot.
	for _, st := range []indexState{sst, bst} {
		if len(st.Jobs) != 3 || len(st.Locks) != 3 || len(st.Running) != 1 || len(st.Ended) != 1 {
			t.Fatalf("checkpoint holds %d jobs, %d locks, running %v, ended %v; want the 3 open jobs and their locks", len(st.Jobs), len(st.Locks), st.Running, st.Ended)
		}
		for id, j := range st.Jobs {
			if j.Terminal() && !slices.Contains(st.Ended, id) {
				t.Fatalf("checkpoint holds finished job %s (%s)", id, j.Status)
			}
		}
	}
	// The open jobs differ in their details (steps, errors), not in number:
	// 120 more finished jobs would add over 100 KB.
	if big > 2*small {
		t.Fatalf("checkpoint state is %d bytes after 4 rounds of jobs and %d after 40: it grows with finished jobs", small, big)
	}
}

// loadNDJSON appends a recorded log (NDJSON of events.RecordedEvent) to a
// fresh memstore, keeping positions and revisions.
func loadNDJSON(t *testing.T, path string) (events.Store, []events.RecordedEvent) {
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
		if _, err := store.Append(context.Background(), ev.Stream, events.Any(), events.EventData{ID: ev.ID, Type: ev.Type, Data: ev.Data, Meta: ev.Meta}); err != nil {
			t.Fatal(err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	all = readLog(t, store)
	return store, all
}

func writeOneAppendLog(t *testing.T, store events.Store, seed uint64) {
	writeOneAppendLogRounds(t, store, seed, 6)
}

// writeOneAppendLogRounds writes, on three slots interleaved at random
// (each slot's events in order), rounds jobs per slot in today's shape:
// JobAccepted{run 1, job} on the slot, the job stream's JobQueued copy
// (or, now and then, left to the claim, which writes it with JobClaimed),
// claim, steps, an end (success; failure, released, then resumed once the
// index forgot it; or a cancel while queued) and the release. At the end
// slot a has a queued job, b a running one and c an ended one whose lock is
// not yet released.
func writeOneAppendLogRounds(t *testing.T, store events.Store, seed uint64, rounds int) {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(seed, 99))
	clock := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	type app struct {
		stream string
		evs    []events.EventData
	}
	meta := func(actor string) events.Metadata {
		clock = clock.Add(time.Duration(1+rnd.IntN(3000)) * time.Millisecond)
		return events.Metadata{Actor: actor, CorrelationID: "c", Time: clock}
	}
	one := func(stream string, p events.Payload, m events.Metadata) app {
		return app{stream, []events.EventData{events.New(p, m)}}
	}
	steps := events.StepNames(events.KindReset, false)[:2]
	var queues [][]app
	for si, slot := range []string{"a", "b", "c"} {
		slot += fmt.Sprint(seed)
		var q []app
		slotS := events.SlotStream(slot)
		for r := 0; r <= rounds; r++ {
			id := fmt.Sprintf("%s-%03d", slot, r)
			jobS := events.JobStream(id)
			worker := "worker:w/n/1"
			jq := events.JobQueued{JobID: id, Kind: events.KindReset, Slot: slot, RequestedBy: "bob", Steps: events.StepNames(events.KindReset, false)}
			m := meta("bob")
			jq.NotBefore = m.Time.Add(time.Minute)
			q = append(q, one(slotS, events.JobAccepted{Slot: slot, JobID: id, Kind: events.KindReset, Run: 1, Job: &jq}, m))
			last := r == rounds
			if last && si == 0 {
				break // a: queued, its copy not written
			}
			claim := app{jobS, []events.EventData{events.New(events.JobClaimed{JobID: id, Worker: worker, Attempt: 1, LeaseUntil: clock.Add(time.Minute)}, meta(worker))}}
			if rnd.IntN(3) == 0 {
				claim.evs = append([]events.EventData{events.New(jq, m)}, claim.evs...) // the claim writes the copy
			} else {
				q = append(q, one(jobS, jq, m))
			}
			outcome := rnd.IntN(4)
			if outcome == 3 && !last {
				q = append(q, one(jobS, events.JobCancelled{JobID: id, By: "bob"}, meta("bob")),
					one(slotS, events.JobReleased{Slot: slot, JobID: id, Outcome: events.StatusCancelled}, meta("bob")))
				continue
			}
			q = append(q, claim, one(jobS, events.StepStarted{JobID: id, Step: steps[0], Attempt: 1}, meta(worker)))
			if last && si == 1 {
				break // b: running
			}
			failed := outcome == 2
			if failed {
				q = append(q, app{jobS, []events.EventData{
					events.New(events.StepFailed{JobID: id, Step: steps[0], Attempt: 1, Error: "403"}, meta(worker)),
					events.New(events.JobFailed{JobID: id, Attempt: 1, Reason: "403", FailedStep: steps[0], CompletedSteps: []string{}}, meta(worker)),
				}})
			} else {
				q = append(q, one(jobS, events.StepSucceeded{StepResult: events.StepResult{JobID: id, Step: steps[0], Attempt: 1}}, meta(worker)),
					one(jobS, events.JobSucceeded{JobID: id, Attempt: 1}, meta(worker)))
			}
			if last {
				break // c: ended, lock held
			}
			q = append(q, one(slotS, events.JobReleased{Slot: slot, JobID: id, Outcome: map[bool]string{true: "failed", false: "succeeded"}[failed]}, meta(worker)))
			if failed {
				// Resumed later (after other slots' events, so the index
				// forgot it): the resume's acceptance, then its copy.
				rm := meta("bob")
				q = append(q,
					one(slotS, events.JobAccepted{Slot: slot, JobID: id, Kind: events.KindReset, Run: 2, Resumed: true, By: "bob", FromStep: steps[0]}, rm),
					one(jobS, events.JobResumed{JobID: id, By: "bob", FromStep: steps[0]}, rm),
					one(jobS, events.JobClaimed{JobID: id, Worker: worker, Attempt: 2, LeaseUntil: clock.Add(time.Minute)}, meta(worker)),
					one(jobS, events.JobSucceeded{JobID: id, Attempt: 2}, meta(worker)),
					one(slotS, events.JobReleased{Slot: slot, JobID: id, Outcome: "succeeded"}, meta(worker)))
			}
		}
		queues = append(queues, q)
	}
	for {
		var open []int
		for i, q := range queues {
			if len(q) > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			return
		}
		i := open[rnd.IntN(len(open))]
		a := queues[i][0]
		queues[i] = queues[i][1:]
		if _, err := store.Append(ctx, a.stream, events.Any(), a.evs...); err != nil {
			t.Fatal(err)
		}
	}
}
