package projtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// testPullRequests: the read model lists every pull request (issue 34,
// docs/pull-requests.md): the waiting ones first in the order the driver
// serves them (PRWaiting's), with since when they wait; then the open ones
// holding a slot; then the most recently changed closed ones, at most
// ClosedPRsListed. Applied live (each change carries the PR's view, which
// the dashboard follows) and replayed in batches alike; "pr-repos" is no
// PR.
func testPullRequests(t *testing.T, open Open, reference Reference) {
	ctx := Ctx(t)
	log := memstore.New()
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	n := 0
	app := func(stream string, p events.Payload) {
		t.Helper()
		n++
		meta := events.Metadata{Actor: "bitbucket", ActorID: "system:pull-requests", Time: t0.Add(time.Duration(n) * time.Minute)}
		_, err := log.Append(ctx, stream, events.Any(), events.New(p, meta))
		Must(t, err)
	}
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	pr := func(id int64, state string) events.PullRequest {
		return events.PullRequest{Repo: repo, ID: id, Title: fmt.Sprintf("PR %d", id), State: state, Branch: fmt.Sprintf("feature/%d", id),
			Head: fmt.Sprintf("%040x", id), Source: repo, Author: "Dana", AuthorSlug: "dana", Link: fmt.Sprintf("https://bitbucket.example/pr/%d", id)}
	}
	opened := func(id int64) string {
		s := events.PRStream(repo, id)
		app(s, events.PRChanged{RequestID: fmt.Sprintf("open-%d", id), EventKey: "pr:opened", PR: pr(id, events.PRStateOpen)})
		return s
	}
	app(events.PRReposStream, events.PRRepoLinked{Repo: repo, By: "admin"})
	app("slot-s1", events.SlotRegistered{Slot: "s1"})
	// 60 closed PRs: more than are listed.
	for id := int64(100); id < 160; id++ {
		s := opened(id)
		app(s, events.PRChanged{RequestID: fmt.Sprintf("close-%d", id), EventKey: "pr:declined", PR: pr(id, events.PRStateDeclined)})
	}
	a := opened(1)
	app("slot-s1", events.SlotOccupied{Slot: "s1", By: "Dana", ByID: "bitbucket:dana"})
	p1 := pr(1, events.PRStateOpen)
	app(a, events.PRSlotTaken{Slot: "s1", PR: &p1})
	app(a, events.PRDeployQueued{Slot: "s1", JobID: "job-a", Head: p1.Head})
	app(a, events.PRCommentPosted{CommentID: 7, Version: 1, Phase: "deploying", JobID: "job-a", Head: p1.Head})
	c := opened(3) // opened before 2, waits after it
	b := opened(2)
	app(b, events.PRWaiting{Reason: "every ready slot is occupied"})
	app(c, events.PRWaiting{Reason: "every ready slot is occupied"})
	app(b, events.PRWaiting{Reason: "again"}) // a repeat keeps its place
	d := opened(4)
	app(d, events.PRWaiting{Reason: "every ready slot is occupied"})
	app(d, events.PRChanged{RequestID: "merge-4", EventKey: "pr:merged", PR: pr(4, events.PRStateMerged)})

	live := open(t, log)
	lctx := exclusive(t, ctx, live)
	carried := map[string]projections.PRView{}
	for _, ev := range readAll(t, log) {
		chs := carryPRs(t, lctx, live, ev, carried)
		if ev.Stream == events.PRReposStream && len(chs) == 1 && chs[0].PullRequest != nil {
			t.Fatal("pr-repos made a pull request")
		}
	}
	list := func(rm projections.Target) []projections.PRView {
		t.Helper()
		l, ok := rm.(projections.PRLister)
		if !ok {
			t.Fatalf("%T lists no pull requests", rm)
		}
		prs, pos, err := l.ListPullRequests(ctx)
		Must(t, err)
		if want, _ := rm.(projections.ReadModel).Position(ctx); pos != want {
			t.Fatalf("listed at %d, the read model is at %d", pos, want)
		}
		return prs
	}
	got := list(live)
	streams := func(prs []projections.PRView) []string {
		out := make([]string, len(prs))
		for i, v := range prs {
			out[i] = v.Stream
		}
		return out
	}
	want := []string{b, c, a, d}
	for id := int64(159); len(want) < 4+projections.ClosedPRsListed-1; id-- {
		want = append(want, events.PRStream(repo, id))
	}
	expect(t, "pull requests", fmt.Sprint(streams(got)), fmt.Sprint(want))
	byStream := map[string]projections.PRView{}
	for _, v := range got {
		byStream[v.Stream] = v
		diffJSON(t, "the last change's view of "+v.Stream, carried[v.Stream], v)
	}
	if v := byStream[b]; !v.Waiting() || v.WaitingSince == nil || v.Slot != "" || v.State != events.PRStateOpen || v.Title != "PR 2" {
		t.Errorf("PR 2 is %+v, want waiting, open, without a slot", v)
	}
	if v := byStream[c]; v.WaitingSince == nil || !v.WaitingSince.After(*byStream[b].WaitingSince) {
		t.Errorf("PR 3 waits since %v, want after PR 2 (%v)", v.WaitingSince, byStream[b].WaitingSince)
	}
	if v := byStream[a]; v.Waiting() || v.Slot != "s1" || v.JobID != "job-a" || v.Phase != "deploying" || v.Link != "https://bitbucket.example/pr/1" {
		t.Errorf("PR 1 is %+v, want holding s1 with job-a, deploying", v)
	}
	if v := byStream[d]; v.Waiting() || v.State != events.PRStateMerged {
		t.Errorf("PR 4 is %+v, want merged, not waiting", v)
	}

	// Replayed in batches, the same list (and the reference's).
	replayed := open(t, log)
	Catchup(t, log, replayed, 7)
	diffJSON(t, "replayed pull requests", list(replayed), got)
	ref := reference(log)
	Catchup(t, log, ref, 1)
	diffJSON(t, "reference's pull requests", list(ref), got)

	// PR 2 takes the freed slot: PR 3 is the first to wait now.
	app("slot-s1", events.SlotVacated{Slot: "s1"})
	app(a, events.PRChanged{RequestID: "merge-1", EventKey: "pr:merged", PR: pr(1, events.PRStateMerged)})
	app(a, events.PRSlotReleased{Slot: "s1", JobID: "reset-1"})
	app("slot-s1", events.SlotOccupied{Slot: "s1", By: "Dana", ByID: "bitbucket:dana"})
	p2 := pr(2, events.PRStateOpen)
	app(b, events.PRSlotTaken{Slot: "s1", PR: &p2})
	Catchup(t, log, replayed, 3)
	got = list(replayed)
	expect(t, "after PR 2 took s1", fmt.Sprint(streams(got)[:4]), fmt.Sprint([]string{c, b, a, d}))
	if v := got[1]; v.Waiting() || v.WaitingSince != nil || v.Slot != "s1" {
		t.Errorf("PR 2 is %+v, want holding s1, not waiting", v)
	}
	if v := got[2]; !v.Released || v.Slot != "s1" || v.State != events.PRStateMerged {
		t.Errorf("PR 1 is %+v, want merged, its slot released", v)
	}
}

// exclusive is the context rm's Apply wants: under its exclusive lock
// when it has one (projections.Exclusive), released when t ends.
func exclusive(t *testing.T, ctx context.Context, rm projections.Target) context.Context {
	t.Helper()
	ex, ok := rm.(projections.Exclusive)
	if !ok {
		return ctx
	}
	lockCtx, release, err := ex.Acquire(ctx)
	Must(t, err)
	t.Cleanup(release)
	return lockCtx
}

// carryPRs applies ev alone to rm, as the live feed does, and keeps in
// carried each PR view its changes carry (what the dashboard follows),
// checking each is at ev's position. It returns the changes.
func carryPRs(t *testing.T, ctx context.Context, rm projections.Target, ev events.RecordedEvent, carried map[string]projections.PRView) []projections.Change {
	t.Helper()
	chs, err := rm.Apply(ctx, []projections.Event{projections.DecodeEvent(ev)})
	Must(t, err)
	for _, ch := range chs {
		if ch.PullRequest != nil {
			if ch.PullRequest.Position != ev.Position {
				t.Fatalf("the change at %d carries PR %s at %d", ev.Position, ch.PullRequest.Stream, ch.PullRequest.Position)
			}
			carried[ch.PullRequest.Stream] = *ch.PullRequest
		}
	}
	return chs
}

// readAll is every event of log, in order.
func readAll(t *testing.T, log events.Store) []events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(Ctx(t))
	defer cancel()
	head, err := log.Head(ctx)
	Must(t, err)
	var out []events.RecordedEvent
	done := errors.New("done")
	err = log.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		out = append(out, ev)
		if ev.Position >= head {
			return done
		}
		return nil
	})
	if !errors.Is(err, done) {
		t.Fatal(err)
	}
	return out
}
