package conformance_test

import (
	"context"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/conformance"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// TestBitbucketSimulator runs the Bitbucket half of the suite against the
// simulator, with each token kind in the mode it works in: a project token
// as Bearer (the only way Data Center takes it), a personal token as Bearer
// and as Basic with its owner. A scheduled delete takes a while, as on a
// real server.
func TestBitbucketSimulator(t *testing.T) {
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.AddBitbucketProject("SKCONF")
	const projToken = "conformancePROJ-3e8a"
	if err := s.AddBitbucketToken(sim.BitbucketToken{Token: projToken, Kind: sim.TokenProject, Project: "SKCONF", ProjectPerm: sim.PermAdmin}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		target conformance.BitbucketTarget
	}{
		{"project token, bearer", conformance.BitbucketTarget{Token: projToken}},
		{"personal token, bearer", conformance.BitbucketTarget{Token: s.BitbucketToken(), GitAuth: git.AuthBearer, ForkUser: s.BitbucketUser()}},
		{"personal token, basic with its owner", conformance.BitbucketTarget{Token: s.BitbucketToken(), GitAuth: git.AuthBasic, GitUser: s.BitbucketUser(), ForkUser: s.BitbucketUser()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.target.URL, tc.target.Project, tc.target.Timeout = s.BitbucketURL(), "SKCONF", time.Minute
			conformance.Bitbucket(t, tc.target)
			if left := s.Repos("SKCONF"); len(left) != 0 {
				t.Fatalf("the suite left scratch repositories: %+v", left)
			}
		})
	}
	if all := s.Repos("SLOT"); len(all) != 0 {
		t.Fatalf("the suite touched another project: %+v", all)
	}
}
