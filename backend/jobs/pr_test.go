package jobs_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// seedPR makes an application repository with a feature branch one commit
// ahead and returns the repository and that commit.
func (w *world) seedPR(slug, branch string) (events.RepoRef, string) {
	w.t.Helper()
	if _, err := w.sim.AddRepo("APPS", slug); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.sim.CommitFile("APPS", slug, "main", "README", "app"); err != nil {
		w.t.Fatal(err)
	}
	head, err := w.sim.CommitFile("APPS", slug, branch, "feature.txt", "change of "+branch)
	if err != nil {
		w.t.Fatal(err)
	}
	return events.RepoRef{Project: "APPS", Slug: slug}, head
}

// TestPRDeploy: a pr_deploy job pushes the PR's head over the slot branch
// (with a lease, read back) and deploys it with the ready reset's deploy
// step: the slot's repository holds the head, Coolify deployed that commit
// and the application runs; the slot stays occupied.
func TestPRDeploy(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seedReady("prs", "")
	w.occupy("prs")
	src, head := w.seedPR("shop", "feature/a")
	w.startEngine(w.engineConfig())
	res, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket", ID: "bitbucket:webhook"}, "prs",
		slots.DeployPRCmd{Source: src, Branch: "feature/a", Head: head})
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusSucceeded {
		t.Fatalf("pr_deploy %s: %s%s", j.Status, j.LastError, history(w.jobEvents(res.JobID)))
	}
	if got, _ := w.sim.RepoHeadSHA(fx.Repo.Project, fx.Repo.Slug, "main"); got != head {
		t.Fatalf("slot branch at %s, want the PR head %s", got, head)
	}
	var pushed, deployed bool
	for _, ev := range w.jobEvents(res.JobID) {
		p, _ := events.Decode(ev)
		switch e := p.(type) {
		case events.PRHeadPushed:
			pushed = e.Head == head && e.OldSHA != head
		case events.AppDeployed:
			deployed = e.Commit == head && strings.HasPrefix(e.Status, "running:")
		}
	}
	if !pushed || !deployed {
		t.Fatalf("pushed=%v deployed=%v%s", pushed, deployed, history(w.jobEvents(res.JobID)))
	}
	if st := w.final("prs"); !st.Occupied || st.Locked() {
		t.Fatalf("slot after pr_deploy: occupied=%v lock=%q", st.Occupied, st.LockJob)
	}
}

// TestPRDeployMovedBranchFails: a branch that moved on after the delivery
// is not deployed as if it were the delivered head.
func TestPRDeployMovedBranchFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seedReady("prm", "")
	w.occupy("prm")
	src, head := w.seedPR("shop", "feature/b")
	if _, err := w.sim.CommitFile("APPS", "shop", "feature/b", "later.txt", "newer push"); err != nil {
		t.Fatal(err)
	}
	w.startEngine(w.engineConfig())
	res, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket"}, "prm", slots.DeployPRCmd{Source: src, Branch: "feature/b", Head: head})
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "supersedes") {
		t.Fatalf("pr_deploy %s: %q", j.Status, j.LastError)
	}
	if j.Done[events.StepDeploy] {
		t.Fatal("deployed a head that is not the delivered one")
	}
}

// TestPRDeployRefusesBadParams: a head that is not a sha, or a source that
// is not PROJECT/slug or ~user/slug, changes nothing.
func TestPRDeployRefusesBadParams(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.seedReady("prb", "")
	w.occupy("prb")
	_, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket"}, "prb",
		slots.DeployPRCmd{Source: events.RepoRef{Project: "APPS", Slug: "shop"}, Branch: "x", Head: "HEAD;rm"})
	if slots.ErrorCode(err) != slots.CodeInvalid {
		t.Fatalf("err %v", err)
	}
	// A fork's repository: a personal project's key is ~ and a user slug,
	// nothing that could leave the clone URL's path.
	head := strings.Repeat("a", 40)
	for _, src := range []events.RepoRef{{Project: "~..", Slug: "shop"}, {Project: "~dana/..", Slug: "shop"}, {Project: "~", Slug: "shop"},
		{Project: "~dana@evil", Slug: "shop"}, {Project: "~dana", Slug: "../shop"}, {Project: "..", Slug: "shop"}} {
		_, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket"}, "prb", slots.DeployPRCmd{Source: src, Branch: "x", Head: head})
		if slots.ErrorCode(err) != slots.CodeInvalid {
			t.Errorf("source %s: %v, want invalid", src, err)
		}
	}
	if _, err := w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket"}, "prb",
		slots.DeployPRCmd{Source: events.RepoRef{Project: "~dana.smith", Slug: "shop"}, Branch: "x", Head: head}); err != nil {
		t.Errorf("a personal fork's source refused: %v", err)
	}
}

// prMatrixSteps are the pr_deploy's own outside calls (issue 34): the
// read of the slot branch (git's ref advertisement, ls-remote) and the
// push of the PR's head over it. Its deploy step is the ready reset's,
// faulted in TestReadyFaultMatrix.
var prMatrixSteps = []stepCall{
	{events.KindPRDeploy, events.StepPushPRHead, sim.EndpointGitInfoRefs, func(fx sim.SlotFixture) string { return fx.Repo.Project + "/" + fx.Repo.Slug }},
	{events.KindPRDeploy, events.StepPushPRHead, sim.EndpointGitReceivePack, func(fx sim.SlotFixture) string { return fx.Repo.Project + "/" + fx.Repo.Slug }},
	// The fetch of the PR's head from its fork (git's upload-pack: only a
	// fetch makes it, so only the fork's is faulted).
	{events.KindPRDeploy, events.StepPushPRHead, sim.EndpointGitUploadPack, func(sim.SlotFixture) string { return prCellFork + "/shop" }},
}

// checkPRCode: a fetch the fork refused (401, 403) or did not have (404)
// ends the job coded pr_source_unreadable, which the PR's driver acts on
// (it gives the slot back); no failure of the slot repository's calls is
// coded so (they are the usual failures, resumable).
func checkPRCode(t *testing.T, c stepCall, f faultKind, fx sim.SlotFixture, j events.JobState) {
	t.Helper()
	fork := c.resource(fx) == prCellFork+"/shop"
	switch {
	case fork && (f == f401 || f == f403 || f == f404):
		if j.LastCode != events.CodePRSourceUnreadable || j.Done[events.StepPushPRHead] {
			t.Errorf("fork fetch %s: code %q (%q), want %s before anything was pushed", f, j.LastCode, j.LastError, events.CodePRSourceUnreadable)
		}
	case j.LastCode == events.CodePRSourceUnreadable:
		t.Errorf("%s on %s coded %q (%q): only the fork's refusal is", f, c.resource(fx), j.LastCode, j.LastError)
	}
}

// TestPRDeployFaultMatrix: the push of the PR's head × each fault, by the
// engine's one cell (runCell): the honest terminal event, no request
// outside the fenced span, a hung push aborted, and a resume (a new job
// after a cancel) that ends with the slot branch at the PR's head and the
// application running — the worker killed mid-push included, with exactly
// one push that took effect.
func TestPRDeployFaultMatrix(t *testing.T) {
	t.Parallel()
	runStepCells(t, prMatrixSteps, byEndpoint)
}

// The PR every pr_deploy cell deploys: a feature branch of APPS/shop's
// fork in dana's personal project (a PR from a fork: the head is fetched
// from there).
const (
	prCellBranch = "feature/cell"
	prCellFork   = "~DANA"
)

// startPRDeploy queues the cell's pr_deploy (the application repository,
// its branch and its fork made on first use) and returns the job.
func startPRDeploy(t *testing.T, w *world, slot string) (slots.JobAcceptedResult, error) {
	head, _ := w.sim.RepoHeadSHA(prCellFork, "shop", prCellBranch)
	if head == "" {
		_, head = w.seedPR("shop", prCellBranch)
		if _, err := w.sim.ForkRepo("APPS", "shop", prCellFork); err != nil {
			t.Fatal(err)
		}
	}
	return w.svc.DeployPR(context.Background(), slots.Actor{Name: "bitbucket", ID: "system:pull-requests"}, slot,
		slots.DeployPRCmd{Source: events.RepoRef{Project: prCellFork, Slug: "shop"}, Branch: prCellBranch, Head: head})
}

// checkPRDeployed: the slot branch holds the PR's head, the application
// runs it, and exactly one push reached the slot repository.
func checkPRDeployed(t *testing.T, w *world, fx sim.SlotFixture, jobID string) {
	t.Helper()
	head, _ := w.sim.RepoHeadSHA(prCellFork, "shop", prCellBranch)
	if got, _ := w.sim.RepoHeadSHA(fx.Repo.Project, fx.Repo.Slug, "main"); got != head {
		t.Errorf("slot branch at %s, want the PR head %s", got, head)
	}
	pushes := 0
	for _, r := range w.sim.Requests() {
		if r.Endpoint == sim.EndpointGitReceivePack && r.Resource == fx.Repo.Project+"/"+fx.Repo.Slug && r.Status == http.StatusOK {
			pushes++
		}
	}
	if pushes != 1 {
		t.Errorf("%d pushes took effect on the slot repository, want 1", pushes)
	}
	var deployed bool
	for _, ev := range w.jobEvents(jobID) {
		if p, _ := events.Decode(ev); p != nil {
			if d, ok := p.(events.AppDeployed); ok {
				deployed = d.Commit == head && strings.HasPrefix(d.Status, "running:")
			}
		}
	}
	if !deployed {
		t.Errorf("the application does not run the PR head%s", history(w.jobEvents(jobID)))
	}
}
