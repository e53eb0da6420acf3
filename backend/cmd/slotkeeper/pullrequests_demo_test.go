package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/demo"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/projections"
)

// TestDemoPullRequestOutOfTheBox: the demo links demo.PRRepo when it seeds
// its pool and, without --bitbucket-webhook-secret, signs the simulated
// Bitbucket's deliveries with a secret of its own, so a pull request
// opened in the simulator and handed to POST /api/hooks/bitbucket/simulated
// is accepted and takes a slot, shown on the slot's view (issue 34).
func TestDemoPullRequestOutOfTheBox(t *testing.T) {
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--grace", "0s")
	var repos struct {
		Repos []struct{ Project, Slug string } `json:"repos"`
	}
	if code := s.call(t, "GET", "/api/pr-repos", nil, &repos); code != 200 || len(repos.Repos) != 1 || repos.Repos[0].Project+"/"+repos.Repos[0].Slug != demo.PRRepo {
		t.Fatalf("linked: %d %+v, want %s", code, repos, demo.PRRepo)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}
	project, slug, _ := strings.Cut(demo.PRRepo, "/")
	var d sim.Delivery
	if code := s.call(t, "POST", "/api/sim/pull-requests", map[string]string{"project": project, "repo": slug, "branch": "feature/demo"}, &d); code != 201 {
		t.Fatalf("open: %d", code)
	}
	var out pullrequests.Outcome
	if code := s.call(t, "POST", "/api/hooks/bitbucket/simulated", d, &out); code != 202 || out.Result != "accepted" {
		t.Fatalf("delivery: %d %+v", code, out)
	}
	for {
		var ch projections.Change
		if err := json.Unmarshal(next(t, frames).Data, &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Slot != nil && ch.Slot.PullRequest != nil {
			pr := ch.Slot.PullRequest
			if pr.ID != d.ID || pr.Repo.String() != demo.PRRepo || pr.Branch != "feature/demo" || pr.Author == "" || pr.Title == "" {
				t.Fatalf("slot %s shows %+v", ch.Slot.Name, pr)
			}
			break
		}
	}
}
