package memory_test

import (
	"cmp"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// A slot held by a pull request shows it (issue 34): PRSlotTaken on the
// PR's stream puts the PR on the slot, each PRDeployQueued moves its head
// and job, the slot's vacating removes it. Applied live (Apply, with the
// changed slot in the Change the dashboard is sent) and replayed (quiet
// batches) alike.
func TestSlotShowsThePullRequestHoldingIt(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	meta := events.Metadata{Actor: "t", Time: at}
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	prStream := events.PRStream(repo, 3)
	pr := events.PullRequest{Repo: repo, ID: 3, Title: "Faster checkout", State: events.PRStateOpen, Branch: "feature/checkout",
		Head: "1111111111111111111111111111111111111111", Source: repo, Author: "Dana Developer", AuthorSlug: "dana",
		Link: "https://bitbucket.example/projects/SHOP/repos/web/pull-requests/3"}
	app := func(stream string, ps ...events.Payload) {
		t.Helper()
		for _, p := range ps {
			if _, err := log.Append(ctx, stream, events.Any(), events.New(p, meta)); err != nil {
				t.Fatal(err)
			}
		}
	}
	app("slot-s1", events.SlotRegistered{Slot: "s1"}, events.SlotOccupied{Slot: "s1", By: "Dana Developer", ByID: "bitbucket:dana"})
	app(events.PRReposStream, events.PRRepoLinked{Repo: repo, By: "admin"}) // "pr-repos" is no PR's stream
	app(prStream, events.PRChanged{RequestID: "r1", EventKey: "pr:opened", PR: pr}, events.PRSlotTaken{Slot: "s1", PR: &pr})

	live := memory.New(log)
	var all []events.RecordedEvent
	for _, stream := range []string{"slot-s1", events.PRReposStream, prStream} {
		evs, err := log.ReadStream(ctx, stream, 0, 0, events.Forward)
		projtest.Must(t, err)
		all = append(all, evs...)
	}
	slices.SortFunc(all, func(a, b events.RecordedEvent) int { return cmp.Compare(a.Position, b.Position) })
	var changed *projections.SlotView
	for _, ev := range all {
		chs, err := live.Apply(ctx, []projections.Event{projections.DecodeEvent(ev)})
		projtest.Must(t, err)
		if ev.Type == "PRSlotTaken" && len(chs) == 1 {
			changed = chs[0].Slot
		}
	}
	if changed == nil || changed.PullRequest == nil || changed.PullRequest.Title != "Faster checkout" {
		t.Fatalf("PRSlotTaken changed the slot to %+v, want the PR on it", changed)
	}
	check := func(what string, rm projections.ReadModel, head, job string) {
		t.Helper()
		v, err := rm.Slot(ctx, "s1")
		projtest.Must(t, err)
		p := v.PullRequest
		if p == nil || p.ID != 3 || p.Repo != repo || p.Title != pr.Title || p.Author != pr.Author || p.Branch != pr.Branch || p.Link != pr.Link || p.Head != head || p.JobID != job {
			t.Fatalf("%s: slot s1's pull request %+v, want #3 at %s (job %q)", what, p, head, job)
		}
	}
	check("taken", live, pr.Head, "")

	head2 := "2222222222222222222222222222222222222222"
	app(prStream, events.PRDeployQueued{Slot: "s1", JobID: "j2", Head: head2})
	replayed := memory.New(log)
	projtest.Catchup(t, log, replayed, 100)
	check("replayed", replayed, head2, "j2")

	app("slot-s1", events.SlotVacated{Slot: "s1"})
	app(prStream, events.PRSlotReleased{Slot: "s1", JobID: "j3"})
	gone := memory.New(log)
	projtest.Catchup(t, log, gone, 100)
	if v, _ := gone.Slot(ctx, "s1"); v.PullRequest != nil {
		t.Fatalf("vacated slot still shows %+v", v.PullRequest)
	}
}

// The pull requests are in the read model's snapshot (since version 4): a read
// model loaded from it lists them as the one that wrote it.
func TestSnapshotKeepsThePullRequests(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	meta := events.Metadata{Actor: "t", Time: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	for id := int64(1); id <= 3; id++ {
		pr := events.PullRequest{Repo: repo, ID: id, State: events.PRStateOpen, Branch: "f", Head: strings.Repeat("a", 40), Source: repo}
		for _, p := range []events.Payload{events.PRChanged{RequestID: "r", EventKey: "pr:opened", PR: pr}, events.PRWaiting{Reason: "full"}} {
			_, err := log.Append(ctx, events.PRStream(repo, id), events.Any(), events.New(p, meta))
			projtest.Must(t, err)
		}
	}
	first := memory.New(log)
	projtest.Catchup(t, log, first, 100)
	want, _, err := first.ListPullRequests(ctx)
	projtest.Must(t, err)
	if len(want) != 3 || !want[0].Waiting() {
		t.Fatalf("listed %+v", want)
	}
	path := filepath.Join(t.TempDir(), "readmodel.snapshot")
	_, err = first.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	loaded := memory.New(log)
	if _, why, err := loaded.LoadSnapshot(ctx, path); err != nil || why != "" {
		t.Fatalf("load: %v %s", err, why)
	}
	got, _, err := loaded.ListPullRequests(ctx)
	projtest.Must(t, err)
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) || !strings.Contains(string(w), `"waiting_since"`) {
		t.Fatalf("loaded %s\nwant %s", g, w)
	}
}
