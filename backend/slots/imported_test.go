package slots

import (
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// TestImportTakesThePullRequestStreams: an export of a pool with a linked
// repository holds pr-repos and each PR's stream; the import takes them
// (it refused pr-repos, so a backup of the demo could not be restored) and
// still refuses a PR stream named otherwise.
func TestImportTakesThePullRequestStreams(t *testing.T) {
	repo := events.RepoRef{Project: "DEMO", Slug: "webshop"}
	for _, stream := range []string{events.PRReposStream, events.PRStream(repo, 1), events.PRStream(events.RepoRef{Project: "APP_2", Slug: "web.shop-x"}, 42)} {
		if err := ValidateImported(stream, "PRChanged", []byte(`{}`)); err != nil {
			t.Errorf("%s: %v", stream, err)
		}
	}
	for _, stream := range []string{"pr-demo-webshop-1", "pr-DEMO-../x-1", "pr-DEMO-webshop-x", "pr-DEMO-webshop"} {
		if err := ValidateImported(stream, "PRChanged", []byte(`{}`)); err == nil {
			t.Errorf("%s: taken", stream)
		}
	}
}
