package bitbucket_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// TestCallsCarryJobTag: the scheduled delete and every confirming GET name
// the job attempt, each with its own request id.
func TestCallsCarryJobTag(t *testing.T) {
	b := setup(t, 20*time.Millisecond)
	ctx := providers.WithCallTag(ctxT(t), providers.CallTag{Job: "job-4", Attempt: 1})
	if _, err := b.c.DeleteRepo(ctx, "SLOT", b.fx.Repo.Slug); err != nil {
		t.Fatal(err)
	}
	reqs := b.sim.Requests()
	ids := map[string]bool{}
	for _, r := range reqs {
		if r.Job != "job-4/1" || !strings.HasSuffix(r.UserAgent, " (job job-4; attempt 1)") || !strings.HasPrefix(r.RequestID, "job-4/1/") {
			t.Errorf("%s %s: job %q, user agent %q, request id %q", r.Method, r.Path, r.Job, r.UserAgent, r.RequestID)
		}
		ids[r.RequestID] = true
	}
	if len(reqs) < 2 || len(ids) != len(reqs) {
		t.Errorf("%d requests, %d distinct request ids", len(reqs), len(ids))
	}
}
