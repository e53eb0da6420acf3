package memory_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// 10,000 closed pull requests, then a week and a day on the log's clock (a
// fake one stamps the events): the memory read model holds the open PRs and
// DefaultClosedPRs closed ones, not 10,000; until then (all closed within
// the week) it held every one. The list is the same as a read model's that
// keeps every PR, and so is it from a snapshot of the bounded one, and from
// a version 4 snapshot (every PR) loaded by it.
func TestClosedPRsLeaveMemoryBounded(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	clk := clock.NewFake(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	repo := events.RepoRef{Project: "SHOP", Slug: "web"}
	app := func(id int64, p events.Payload) {
		t.Helper()
		clk.Advance(time.Second)
		_, err := log.Append(ctx, events.PRStream(repo, id), events.Any(), events.New(p, events.Metadata{Actor: "bitbucket", Time: clk.Now()}))
		projtest.Must(t, err)
	}
	change := func(id int64, key, state string) {
		app(id, events.PRChanged{RequestID: fmt.Sprintf("%s-%d", key, id), EventKey: key, PR: events.PullRequest{Repo: repo, ID: id,
			Title: fmt.Sprintf("PR %d", id), State: state, Branch: "f", Head: fmt.Sprintf("%040x", id), Source: repo}})
	}
	const open, closed = 5, 10000
	for id := int64(1); id <= open; id++ {
		change(id, "pr:opened", events.PRStateOpen)
	}
	for id := int64(100); id < 100+closed; id++ {
		change(id, "pr:opened", events.PRStateOpen)
		change(id, "pr:merged", events.PRStateMerged)
	}
	bounded := memory.New(log)
	projtest.Catchup(t, log, bounded, 500)
	if n := bounded.HeldPullRequests(); n != open+closed {
		t.Fatalf("within the week the read model holds %d pull requests, want all %d", n, open+closed)
	}
	clk.Advance(8 * 24 * time.Hour)
	change(6, "pr:opened", events.PRStateOpen)
	projtest.Catchup(t, log, bounded, 500)
	if n, max := bounded.HeldPullRequests(), open+1+memory.DefaultClosedPRs; n > max {
		t.Fatalf("eight days on the read model holds %d pull requests, want at most %d", n, max)
	}
	all := memory.NewWithLimits(log, everything)
	projtest.Catchup(t, log, all, 2000)
	if n := all.HeldPullRequests(); n != open+1+closed {
		t.Fatalf("the keep-everything read model holds %d", n)
	}
	list := func(rm *memory.Store) string {
		t.Helper()
		prs, _, err := rm.ListPullRequests(ctx)
		projtest.Must(t, err)
		b, _ := json.Marshal(prs)
		return string(b)
	}
	want := list(all)
	if got := list(bounded); got != want {
		t.Fatalf("bounded lists\n%s\nwant\n%s", got, want)
	}
	prs, _, _ := bounded.ListPullRequests(ctx)
	for i := range open + 1 {
		if prs[i].State != events.PRStateOpen {
			t.Fatalf("the list's first %d are not the open PRs: %+v", open+1, prs[i])
		}
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "bounded.snapshot")
	_, err := bounded.WriteSnapshot(ctx, path)
	projtest.Must(t, err)
	loaded := memory.New(log)
	if _, why, err := loaded.LoadSnapshot(ctx, path); err != nil || why != "" {
		t.Fatalf("load: %v %s", err, why)
	}
	if got := list(loaded); got != want || loaded.HeldPullRequests() != bounded.HeldPullRequests() {
		t.Fatalf("loaded from the snapshot: holds %d, lists\n%s", loaded.HeldPullRequests(), got)
	}
	// A version 4 snapshot holds every PR: it loads, and what the limits do
	// not keep leaves at once.
	v4 := filepath.Join(dir, "v4.snapshot")
	_, err = all.WriteSnapshot(ctx, v4)
	projtest.Must(t, err)
	data, err := os.ReadFile(v4)
	projtest.Must(t, err)
	data = bytes.Replace(data, []byte("slotkeeper-readmodel 5 "), []byte("slotkeeper-readmodel 4 "), 1)
	projtest.Must(t, os.WriteFile(v4, data, 0o600))
	old := memory.New(log)
	if _, why, err := old.LoadSnapshot(ctx, v4); err != nil || why != "" {
		t.Fatalf("load version 4: %v %s", err, why)
	}
	if got := list(old); got != want || old.HeldPullRequests() > open+1+memory.DefaultClosedPRs {
		t.Fatalf("loaded from a version 4 snapshot: holds %d, lists\n%s", old.HeldPullRequests(), got)
	}
	// A late event of a PR that left (its slot released after the merge)
	// brings it back, complete, into every one of them alike.
	app(100, events.PRSlotReleased{Slot: "s1", JobID: "reset"})
	for _, rm := range []*memory.Store{bounded, loaded, old, all} {
		projtest.Catchup(t, log, rm, 500)
	}
	want = list(all)
	if !bytes.Contains([]byte(want), []byte(`"title":"PR 100"`)) {
		t.Fatal("PR 100 is not listed after its late change")
	}
	for name, rm := range map[string]*memory.Store{"bounded": bounded, "loaded": loaded, "version 4": old} {
		if got := list(rm); got != want {
			t.Errorf("%s lists after the late change\n%s\nwant\n%s", name, got, want)
		}
	}
	if diffs, err := memory.Verify(ctx, log, bounded); err != nil || len(diffs) > 0 {
		t.Fatalf("verify: %v %v", err, diffs)
	}
}

var _ projections.PRLister = (*memory.Store)(nil)
