package pullrequests_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestPRReportFaults: Bitbucket failing the posts — the first comment POST
// answered 500, a build status's connection reset, an edit answered 409
// (stale version) — still ends with one comment, edited in place, with the
// URL, and a SUCCESSFUL status on the head.
func TestPRReportFaults(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "pf1")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointAddComment, Status: http.StatusInternalServerError, Times: 1})
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointSetBuildStatus, Reset: true, Times: 1})
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointEditComment, Status: http.StatusConflict, Times: 1})
	d, err := w.sim.OpenPR("APPS", "shop", "feature/faults")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	w.waitPR(d.ID, ready)
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "http") {
		t.Fatalf("comments %+v: want one with the URL", cs)
	}
	if bs := w.sim.BuildStatuses(d.Head); len(bs) != 1 || bs[0].State != "SUCCESSFUL" {
		t.Fatalf("build statuses %+v", bs)
	}
}

// TestPRDeployFailureIsReported: the slot repository refusing the push
// (git receive-pack 500, every time) fails the job; the PR's comment says
// failed with the reason and the job's link, the head's status is FAILED.
func TestPRDeployFailureIsReported(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "pf2")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGitReceivePack, Status: http.StatusInternalServerError})
	d, err := w.sim.OpenPR("APPS", "shop", "feature/broken")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	w.waitPR(d.ID, func(p events.Payload) bool { c, ok := p.(events.PRCommentPosted); return ok && c.Phase == "failed" })
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "failed: ") || !strings.Contains(cs[0].Text, "https://slotkeeper.example/jobs/") {
		t.Fatalf("comments %+v", cs)
	}
	if bs := w.sim.BuildStatuses(d.Head); len(bs) != 1 || bs[0].State != "FAILED" {
		t.Fatalf("build statuses %+v", bs)
	}
}

// TestPRCommentDeletedByAPerson: a person deletes the flow's comment; at
// the next push the edit meets Bitbucket's own 404 (NoSuchComment), the
// PR is looked through (no marker left) and one new comment is posted.
func TestPRCommentDeletedByAPerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "del")
	d, err := w.sim.OpenPR("APPS", "shop", "feature/deleted")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	first := w.waitPR(d.ID, ready).(events.PRCommentPosted)
	if !w.sim.DeletePRComment("APPS", "shop", d.ID, first.CommentID) {
		t.Fatal("no comment to delete")
	}
	d2, err := w.sim.PushPR("APPS", "shop", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d2, secret)
	last := w.waitPR(d.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == d2.Head }).(events.PRCommentPosted)
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || cs[0].ID != last.CommentID || cs[0].ID == first.CommentID || !strings.Contains(cs[0].Text, "running on slot") {
		t.Fatalf("comments %+v (recorded %d, deleted %d): want one new one", cs, last.CommentID, first.CommentID)
	}
}
