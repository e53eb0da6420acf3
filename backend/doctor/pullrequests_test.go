package doctor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
)

// TestPullRequestsCheck: a linked repository the token reads passes; one
// that does not exist is a definite failure with the fix; a missing
// webhook secret fails; no secret value is printed.
func TestPullRequestsCheck(t *testing.T) {
	s, _ := startSim(t)
	if _, err := s.OpenPR("APPS", "shop", "feature/doc"); err != nil {
		t.Fatal(err)
	}
	bb := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: token})
	g, err := git.New(git.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	repos := []doctor.PRRepo{{Project: "APPS", Slug: "shop", URL: s.CloneURL("APPS", "shop")}, {Project: "APPS", Slug: "gone"}}
	rs := doctor.Run(context.Background(), doctor.PullRequests(bb, g, repos, false))
	if len(rs) != 3 || rs[0].OK || !rs[1].OK || rs[2].OK || !rs[2].Definite || !strings.Contains(rs[2].Fix, "APPS/gone") {
		t.Fatalf("results %+v", rs)
	}
	rs = doctor.Run(context.Background(), doctor.PullRequests(bb, g, repos[:1], true))
	if failed, _ := doctor.Failed(rs); len(failed) != 0 {
		t.Fatalf("failed %+v", failed)
	}
	for _, r := range rs {
		if strings.Contains(r.Detail+r.Fix, token) {
			t.Fatal("the token is in a result")
		}
	}
}
