package projections_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// prLog appends a slot's life with pull requests (docs/pull-requests.md):
// a person's occupancy, then PRs taking the slot (the driver's
// SlotOccupied carries the PR's stream as its correlation id, then the
// PR's stream says PRSlotTaken, PRDeployQueued for each push, its
// comments, and PRSlotReleased after the slot was vacated), a PR on
// another slot, and the last one still holding s1.
func prLog(t *testing.T, prs int) *memstore.Store {
	t.Helper()
	ctx := projtest.Ctx(t)
	log := memstore.New()
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	app := func(stream, corr string, p events.Payload) {
		t.Helper()
		at = at.Add(time.Second)
		_, err := log.Append(ctx, stream, events.Any(), events.New(p, events.Metadata{Actor: "bitbucket", CorrelationID: corr, Time: at}))
		projtest.Must(t, err)
	}
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	pr := func(id int64, state, head string) events.PullRequest {
		return events.PullRequest{Repo: repo, ID: id, Title: fmt.Sprintf("PR %d", id), State: state, Branch: "f", Head: head, Source: repo, Author: "Dana", AuthorSlug: "dana"}
	}
	sha := func(n int) string { return fmt.Sprintf("%040x", n) }
	app("slot-s1", "", events.SlotRegistered{Slot: "s1"})
	app("slot-s2", "", events.SlotRegistered{Slot: "s2"})
	app("slot-s1", "req-1", events.SlotOccupied{Slot: "s1", By: "alice"})
	app("slot-s1", "req-2", events.SlotVacated{Slot: "s1"})
	for i := 1; i <= prs; i++ {
		id := int64(i)
		s := events.PRStream(repo, id)
		p := pr(id, events.PRStateOpen, sha(i))
		app(s, "", events.PRChanged{RequestID: fmt.Sprint("o", i), EventKey: "pr:opened", PR: p})
		app("slot-s1", s, events.SlotOccupied{Slot: "s1", By: "Dana", ByID: "bitbucket:dana"})
		app(s, s, events.PRSlotTaken{Slot: "s1", PR: &p})
		app(s, s, events.PRDeployQueued{Slot: "s1", JobID: fmt.Sprint("j", i, "a"), Head: p.Head})
		app(s, s, events.PRCommentPosted{CommentID: id, Version: 1, Phase: "queued"})
		if i == 2 { // a PR on s2 meanwhile: never on s1
			o := events.PRStream(repo, 1000)
			q := pr(1000, events.PRStateOpen, sha(1000))
			app(o, "", events.PRChanged{RequestID: "o1000", EventKey: "pr:opened", PR: q})
			app("slot-s2", o, events.SlotOccupied{Slot: "s2", By: "Dana"})
			app(o, o, events.PRSlotTaken{Slot: "s2", PR: &q})
			app(o, o, events.PRDeployQueued{Slot: "s2", JobID: "j-s2", Head: q.Head})
		}
		app(s, "", events.PRChanged{RequestID: fmt.Sprint("u", i), EventKey: "pr:from_ref_updated", PR: pr(id, events.PRStateOpen, sha(i+500))})
		app(s, s, events.PRDeployQueued{Slot: "s1", JobID: fmt.Sprint("j", i, "b"), Head: sha(i + 500)})
		if i == prs {
			break // the last one still holds s1
		}
		app(s, "", events.PRChanged{RequestID: fmt.Sprint("m", i), EventKey: "pr:merged", PR: pr(id, events.PRStateMerged, sha(i+500))})
		app("slot-s1", s, events.SlotVacated{Slot: "s1"})
		app(s, s, events.PRSlotReleased{Slot: "s1", JobID: fmt.Sprint("r", i)})
		app(s, s, events.PRCommentPosted{CommentID: id, Version: 2, Phase: "ready"})
	}
	return log
}

// TestSlotAsOfShowsThePullRequest (issue 34): the slot as of any position
// shows the pull request that held it then, at the head of its newest job
// then — what a read model that applied the log up to there showed —
// answered from checkpoints (a few intervals, so that they fall inside a
// PR's occupancy and before its PRSlotTaken), asked in random order, and
// equal to the full fold.
func TestSlotAsOfShowsThePullRequest(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := prLog(t, 4)
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	// What the live read model showed after each event.
	live := memory.New(log)
	want := map[events.Position]string{}
	for p := events.Position(1); p <= head; p++ {
		_, err := projections.Replay(ctx, log, live, p, 1)
		projtest.Must(t, err)
		if v, err := live.Slot(ctx, "s1"); err == nil {
			want[p] = asJSON(t, v)
		}
	}
	// The PR is on the slot at some positions and not at others.
	on, off := 0, 0
	for _, j := range want {
		if strings.Contains(j, `"pull_request"`) {
			on++
		} else {
			off++
		}
	}
	if on == 0 || off == 0 {
		t.Fatalf("the log shows a PR on s1 at %d positions and none at %d", on, off)
	}
	// The change list names each PR taking the slot and leaving it, and
	// equals the full fold's.
	h := projections.NewHistory(log, projections.HistoryOptions{Every: 3})
	page, err := h.SlotChanges(ctx, live, "s1", projections.At{}, projections.At{}, 0)
	projtest.Must(t, err)
	var prs []string
	for _, c := range page.Changes {
		if c.Field == projections.FieldPullRequest {
			prs = append(prs, fmt.Sprintf("%v→%v", c.Before, c.After))
		}
	}
	if got := strings.Join(prs, " "); got != "<nil>→SHOP/web#1 SHOP/web#1→<nil> <nil>→SHOP/web#2 SHOP/web#2→<nil> <nil>→SHOP/web#3 SHOP/web#3→<nil> <nil>→SHOP/web#4" {
		t.Errorf("s1's pull request changes: %s", got)
	}
	ref, _, _, err := refSlotChanges(ctx, log, live, "s1", projections.At{}, projections.At{})
	projtest.Must(t, err)
	if asJSON(t, ref) != asJSON(t, page.Changes) {
		t.Errorf("changes differ from the full fold's:\n got %s\nwant %s", asJSON(t, page.Changes), asJSON(t, ref))
	}
	for _, every := range []int{1, 2, 3, 5, 128} {
		h := projections.NewHistory(log, projections.HistoryOptions{Every: every})
		rnd := rand.New(rand.NewPCG(uint64(every), 7))
		order := rnd.Perm(int(head))
		for _, i := range order {
			p := events.Position(i + 1)
			v, as, err := h.SlotAsOf(ctx, live, "s1", projections.At{Position: p})
			if _, ok := want[p]; !ok {
				if err == nil {
					t.Fatalf("every %d: s1 at %d exists before it was registered", every, p)
				}
				continue
			}
			projtest.Must(t, err)
			if got := asJSON(t, v); got != want[p] {
				t.Fatalf("every %d: s1 as of %d\n got %s\nwant %s", every, p, got, want[p])
			}
			ref, ras, err := refSlotAsOf(ctx, log, live, "s1", projections.At{Position: p})
			projtest.Must(t, err)
			if asJSON(t, ref) != want[p] || ras != as {
				t.Fatalf("every %d: the full fold of s1 as of %d is %s (%+v), History's %+v", every, p, asJSON(t, ref), ras, as)
			}
		}
	}
}

// countingLog counts the reads of pull requests' streams.
type countingLog struct {
	events.Store
	mu  sync.Mutex
	prs int
}

func (c *countingLog) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	if strings.HasPrefix(stream, events.PRStreamPrefix) {
		c.mu.Lock()
		c.prs++
		c.mu.Unlock()
	}
	return c.Store.ReadStream(ctx, stream, from, max, dir)
}

func (c *countingLog) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prs
}

// TestSlotAsOfPRCostFollowsTheRange (issue 37 item 3 kept): with the
// checkpoints built, an answer reads the streams of the PRs that held the
// slot at its checkpoint or took it in the range — not every PR the slot
// ever had: a checkpoint names only the PRs still holding the slot.
func TestSlotAsOfPRCostFollowsTheRange(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := &countingLog{Store: prLog(t, 300)}
	rm := memory.New(log)
	projtest.Catchup(t, log, rm, 1000)
	h := projections.NewHistory(log, projections.HistoryOptions{Every: 16})
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	v, _, err := h.SlotAsOf(ctx, rm, "s1", projections.At{})
	projtest.Must(t, err)
	if v.PullRequest == nil || v.PullRequest.ID != 300 {
		t.Fatalf("s1 now shows %+v, want PR 300", v.PullRequest)
	}
	built := log.reads()
	if built < 300 {
		t.Fatalf("building the checkpoints read PR streams %d times, want one per PR at least", built)
	}
	for _, p := range []events.Position{head / 3, head / 2, head - 5} {
		before := log.reads()
		v, _, err := h.SlotAsOf(ctx, rm, "s1", projections.At{Position: p})
		projtest.Must(t, err)
		if n := log.reads() - before; n > 3 {
			t.Errorf("s1 as of %d (PR %+v) read PR streams %d times, want at most 3", p, v.PullRequest, n)
		}
		before = log.reads()
		if _, err := h.SlotChanges(ctx, rm, "s1", projections.At{Position: p - 10}, projections.At{Position: p}, 0); err != nil {
			t.Fatal(err)
		}
		if n := log.reads() - before; n > 4 {
			t.Errorf("s1's changes in (%d, %d] read PR streams %d times, want at most 4", p-10, p, n)
		}
	}
}
