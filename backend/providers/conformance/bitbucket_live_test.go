//go:build live

package conformance_test

import (
	"os"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/conformance"
	"github.com/slotkeeper/slotkeeper/backend/providers/git"
)

// TestBitbucketLive runs the Bitbucket half of the suite against the real
// Bitbucket Data Center named by SLOTKEEPER_LIVE_BITBUCKET_URL, _TOKEN and
// _PROJECT (a scratch project), with git auth from _GIT_AUTH (default
// bearer) and _GIT_USER (basic only); _FORK_USER (a personal token's owner)
// adds the pull-request-from-a-fork cases. A missing variable fails the test:
// a live run that skipped proves nothing. `make test-live` runs it.
func TestBitbucketLive(t *testing.T) {
	target := conformance.BitbucketTarget{
		URL:     bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_URL", true),
		Token:   bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_TOKEN", true),
		Project: bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_PROJECT", true),
		GitUser: bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_GIT_USER", false),
		// A personal token's owner (user slug): the fork cases run.
		ForkUser: bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_FORK_USER", false),
	}
	auth, err := git.ParseAuth(bitbucketEnv(t, "SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH", false))
	switch {
	case os.Getenv("SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH") == "":
		auth = git.AuthBearer
	case err != nil:
		t.Fatalf("SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH: %v", err)
	}
	target.GitAuth = auth
	if auth == git.AuthBasic && target.GitUser == "" {
		t.Fatal("SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH=basic needs SLOTKEEPER_LIVE_BITBUCKET_GIT_USER (the personal token owner's username)")
	}
	if auth == git.AuthBearer && target.GitUser != "" {
		t.Fatal("SLOTKEEPER_LIVE_BITBUCKET_GIT_USER is sent only with SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH=basic")
	}
	conformance.Bitbucket(t, target)
}

// bitbucketEnv reads one variable; a required one that is empty fails the
// test (never a skip). The value is never printed.
func bitbucketEnv(t *testing.T, name string, required bool) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" && required {
		t.Fatalf("%s is not set: the live Bitbucket suite needs it (docs/providers.md, \"Conformance suite\")", name)
	}
	return v
}
