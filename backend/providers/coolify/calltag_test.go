package coolify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// TestCallsCarryJobTag: every request of a tagged call — the delete and
// each confirming GET — names the job attempt and has its own request id;
// an untagged call still has a user agent and a request id.
func TestCallsCarryJobTag(t *testing.T) {
	b := setup(t, 20*time.Millisecond)
	ctx := providers.WithCallTag(ctxT(t), providers.CallTag{Job: "job-9", Attempt: 2})
	if _, err := b.c.DeleteDatabase(ctx, b.fx.DBUUID); err != nil {
		t.Fatal(err)
	}
	reqs := b.sim.Requests()
	ids := map[string]bool{}
	for _, r := range reqs {
		if r.Job != "job-9/2" || !strings.HasPrefix(r.UserAgent, "slotkeeper/") || !strings.HasSuffix(r.UserAgent, " (job job-9; attempt 2)") || !strings.HasPrefix(r.RequestID, "job-9/2/") {
			t.Errorf("%s %s: job %q, user agent %q, request id %q", r.Method, r.Path, r.Job, r.UserAgent, r.RequestID)
		}
		ids[r.RequestID] = true
	}
	if len(reqs) < 2 || len(ids) != len(reqs) {
		t.Errorf("%d requests, %d distinct request ids", len(reqs), len(ids))
	}
	b.sim.ResetRequests()
	if _, _, err := b.c.GetApplication(ctxT(t), b.fx.AppUUID); err != nil {
		t.Fatal(err)
	}
	r := b.sim.Requests()[0]
	if r.Job != "" || !strings.HasPrefix(r.UserAgent, "slotkeeper/") || strings.Contains(r.UserAgent, "job") || r.RequestID == "" {
		t.Errorf("untagged: job %q, user agent %q, request id %q", r.Job, r.UserAgent, r.RequestID)
	}
}
