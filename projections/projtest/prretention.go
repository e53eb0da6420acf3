package projtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// PRHolder is a read model that reports how many pull requests' views it
// holds (the memory one: closed ones leave it, docs/pull-requests.md
// "Closed pull requests leave memory").
type PRHolder interface{ HeldPullRequests() int }

// testClosedPRsLeave: closed pull requests long past the memory read
// model's retention leave its memory, the open ones never do, and the list
// answers the same as a read model keeping every PR (PostgreSQL keeps its
// rows): applied live event by event (each change's view equal to the
// list's) and by the reference. A late event of a PR whose view left (the
// slot's release recorded after its close) brings it back, complete, as
// the most recently changed closed PR. The events' times come from a fake
// clock, moved past the retention.
func testClosedPRsLeave(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	log := memstore.New()
	clk := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	app := func(stream string, p events.Payload) {
		t.Helper()
		clk.Advance(time.Second)
		meta := events.Metadata{Actor: "bitbucket", ActorID: "system:pull-requests", Time: clk.Now()}
		_, err := log.Append(ctx, stream, events.Any(), events.New(p, meta))
		Must(t, err)
	}
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	pr := func(id int64, state string) events.PullRequest {
		return events.PullRequest{Repo: repo, ID: id, Title: fmt.Sprintf("PR %d", id), State: state, Branch: fmt.Sprintf("feature/%d", id),
			Head: fmt.Sprintf("%040x", id), Source: repo, Author: "Dana", AuthorSlug: "dana"}
	}
	opened := func(id int64) string {
		s := events.PRStream(repo, id)
		app(s, events.PRChanged{RequestID: fmt.Sprintf("open-%d", id), EventKey: "pr:opened", PR: pr(id, events.PRStateOpen)})
		return s
	}
	// Two open PRs from the start (one waits), then 260 closed: more than
	// the memory read model's default keeps beyond its retention.
	first, waiting := opened(1), opened(2)
	app(waiting, events.PRWaiting{Reason: "every ready slot is occupied"})
	const closedN = 260
	for id := int64(100); id < 100+closedN; id++ {
		s := opened(id)
		app(s, events.PRChanged{RequestID: fmt.Sprintf("close-%d", id), EventKey: "pr:declined", PR: pr(id, events.PRStateDeclined)})
	}
	// Eight days on (past the default week), one more PR opens; then the
	// first closed PR's slot release is recorded late.
	clk.Advance(8 * 24 * time.Hour)
	later := opened(3)
	late := events.PRStream(repo, 100)

	live := open(t, log)
	lctx := exclusive(t, ctx, live)
	carried := map[string]projections.PRView{}
	applyAll := func() {
		t.Helper()
		from, err := live.Position(ctx)
		Must(t, err)
		for _, ev := range readAll(t, log) {
			if ev.Position > from {
				carryPRs(t, lctx, live, ev, carried)
			}
		}
	}
	applyAll()
	held := func() int {
		if h, ok := live.(PRHolder); ok {
			return h.HeldPullRequests()
		}
		return -1
	}
	if n := held(); n >= 0 && n >= 3+closedN {
		t.Errorf("the read model holds %d pull requests eight days after %d closed, want fewer", n, closedN)
	}
	app(late, events.PRSlotReleased{Slot: "s1", JobID: "reset-100"})
	applyAll()

	list := func(rm projections.Target) []projections.PRView {
		t.Helper()
		prs, _, err := rm.(projections.PRLister).ListPullRequests(ctx)
		Must(t, err)
		return prs
	}
	got := list(live)
	var streams []string
	for _, v := range got {
		streams = append(streams, v.Stream)
		diffJSON(t, "the last change's view of "+v.Stream, carried[v.Stream], v)
	}
	want := []string{waiting, first, later, late}
	for id := int64(100 + closedN - 1); len(want) < 3+projections.ClosedPRsListed; id-- {
		want = append(want, events.PRStream(repo, id))
	}
	expect(t, "pull requests", fmt.Sprint(streams), fmt.Sprint(want))
	if v := got[3]; v.Title != "PR 100" || v.OpenedAt.IsZero() || v.State != events.PRStateDeclined || !v.Released {
		t.Errorf("the late-changed PR is %+v, want PR 100 complete, declined, released", v)
	}
	ref := reference(log)
	Catchup(t, log, ref, 1)
	diffJSON(t, "reference's pull requests", list(ref), got)
	replayed := open(t, log)
	Catchup(t, log, replayed, 50)
	diffJSON(t, "replayed pull requests", list(replayed), got)
}
