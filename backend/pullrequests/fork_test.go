package pullrequests_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// Pull requests from forks (docs/pull-requests.md, "Pull requests from
// forks"): the delivery's fromRef.repository is the fork, in another
// project or in its author's personal project (~user); the head is fetched
// from there, the comment and build status go to the target's PR.

// prLog is what the PR's stream recorded of refusals, releases and jobs.
func (w *world) prLog(id int64) (refused []events.PRSourceRefused, released []events.PRSlotReleased, queued []events.PRDeployQueued) {
	for _, ev := range w.read(events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, id)) {
		switch e := mustDecode(ev).(type) {
		case events.PRSourceRefused:
			refused = append(refused, e)
		case events.PRSlotReleased:
			released = append(released, e)
		case events.PRDeployQueued:
			queued = append(queued, e)
		}
	}
	return
}

// TestPRFromAFork: a PR from a fork the token reads — a personal fork
// (~DANA) and one in another project (FORKS) — is deployed from the fork:
// its head fetched there (git's upload-pack on the fork, nothing pushed to
// it), pushed over the slot branch, deployed; the comment and the build
// status are the target repository's. A force-push in the fork (the old
// head no longer on the branch) deploys the rewritten head in its place;
// the merge releases the slot.
func TestPRFromAFork(t *testing.T) {
	t.Parallel()
	for _, fork := range []string{"~DANA", "FORKS"} {
		t.Run(fork, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "fk")
			d, err := w.sim.OpenForkPR("APPS", "shop", fork, "feature/forked")
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := w.sim.RepoHeadSHA("APPS", "shop", "feature/forked"); h != "" {
				t.Fatalf("the fork's branch is in the target repository too (%s): the test would not tell them apart", h)
			}
			if out := w.deliver(d, secret); out.Status != http.StatusAccepted {
				t.Fatalf("delivery: %+v", out)
			}
			w.waitPR(d.ID, ready)
			ch := w.waitPR(d.ID, func(p events.Payload) bool { _, ok := p.(events.PRChanged); return ok }).(events.PRChanged)
			if ch.PR.Source.String() != fork+"/shop" || ch.PR.Repo.String() != "APPS/shop" {
				t.Fatalf("recorded source %s, repo %s", ch.PR.Source, ch.PR.Repo)
			}
			st, _ := slots.LoadSlot(context.Background(), w.store, "fk")
			slotRepo := st.Reg.Repo
			if head, _ := w.sim.RepoHeadSHA(slotRepo.Project, slotRepo.Slug, st.Reg.Branch); head != d.Head {
				t.Fatalf("slot branch at %s, want the fork's head %s", head, d.Head)
			}
			var fetched, pushedToFork int
			for _, r := range w.sim.Requests() {
				switch {
				case r.Resource == fork+"/shop" && r.Endpoint == sim.EndpointGitUploadPack && r.Status == http.StatusOK:
					fetched++
				case r.Resource == fork+"/shop" && r.Endpoint == sim.EndpointGitReceivePack:
					pushedToFork++
				case r.Endpoint == sim.EndpointAddComment || r.Endpoint == sim.EndpointEditComment || r.Endpoint == sim.EndpointSetBuildStatus:
					if r.Resource != "APPS/shop" {
						t.Errorf("%s on %s, want the target repository", r.Endpoint, r.Resource)
					}
				}
			}
			if fetched == 0 || pushedToFork != 0 {
				t.Fatalf("%d fetches from the fork, %d pushes to it: want the head fetched there, nothing pushed", fetched, pushedToFork)
			}
			if bs := w.sim.BuildStatuses(d.Head); len(bs) != 1 || bs[0].State != "SUCCESSFUL" {
				t.Fatalf("build statuses %+v", bs)
			}

			// The author rewrites the branch in the fork and force-pushes.
			d2, err := w.sim.ForcePushPR("APPS", "shop", d.ID)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(w.sim.GitRoot(), fork, "shop.git")
			if err := exec.Command("git", "--git-dir", dir, "merge-base", "--is-ancestor", d.Head, d2.Head).Run(); err == nil {
				t.Fatal("the force-push kept the old head as an ancestor: not a rewrite")
			}
			if out := w.deliver(d2, secret); out.Result != "accepted" {
				t.Fatalf("from_ref_updated: %+v", out)
			}
			w.waitPR(d.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == d2.Head })
			if head, _ := w.sim.RepoHeadSHA(slotRepo.Project, slotRepo.Slug, st.Reg.Branch); head != d2.Head {
				t.Fatalf("slot branch at %s after the force-push, want %s", head, d2.Head)
			}
			if cs := w.sim.PRComments("APPS", "shop", d.ID); len(cs) != 1 || !strings.Contains(cs[0].Text, "running on slot **fk**") {
				t.Fatalf("comments %+v: want one, edited in place", cs)
			}
			m, err := w.sim.ClosePR("APPS", "shop", d.ID, "MERGED")
			if err != nil {
				t.Fatal(err)
			}
			w.deliver(m, secret)
			rel := w.waitPR(d.ID, func(p events.Payload) bool { _, ok := p.(events.PRSlotReleased); return ok }).(events.PRSlotReleased)
			if rel.Slot != "fk" || rel.JobID == "" || rel.Reason != "" {
				t.Fatalf("released %+v: want the merge's ready reset", rel)
			}
		})
	}
}

// TestPRFromAForkTheTokenCannotRead: the fork refuses the token (401 on
// every fetch). The job fails once with the coded reason, nothing is pushed
// to the slot repository, the refusal is recorded once, the author is told
// on the PR what to do, and the slot goes back to the pool (a ready reset).
// The same delivery again is a duplicate. Once the token may read the fork,
// the author's next push takes a slot again and is deployed.
func TestPRFromAForkTheTokenCannotRead(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "nr")
	fid := w.sim.AddFault(sim.Fault{Resource: "~DANA/shop", Status: http.StatusUnauthorized})
	d, err := w.sim.OpenForkPR("APPS", "shop", "~dana", "feature/private")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	rel := w.waitPR(d.ID, func(p events.Payload) bool { r, ok := p.(events.PRSlotReleased); return ok && r.Reason != "" }).(events.PRSlotReleased)
	w.waitPR(d.ID, func(p events.Payload) bool {
		c, ok := p.(events.PRCommentPosted)
		return ok && c.Phase == "source_unreadable"
	})
	if rel.Slot != "nr" || rel.Reason != events.CodePRSourceUnreadable || rel.JobID == "" {
		t.Fatalf("released %+v", rel)
	}
	w.waitJobEnd(rel.JobID)
	if reset, _ := slots.LoadJob(context.Background(), w.store, rel.JobID); reset.Queued.Kind != events.KindReset || reset.Status != events.StatusSucceeded {
		t.Fatalf("the slot's reset: %s %s (%s)", reset.Queued.Kind, reset.Status, reset.LastError)
	}
	w.waitSlotVacated("nr")
	refused, released, queued := w.prLog(d.ID)
	if len(refused) != 1 || len(released) != 1 || len(queued) != 1 {
		t.Fatalf("%d refusals, %d releases, %d jobs: want one each", len(refused), len(released), len(queued))
	}
	if !strings.Contains(refused[0].Reason, "HTTP 401") || !strings.Contains(refused[0].Reason, "--bitbucket-token") || strings.Contains(refused[0].Reason, w.sim.BitbucketToken()) {
		t.Fatalf("reason %q: want the status and the setting, never the token", refused[0].Reason)
	}
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "cannot fetch") || !strings.Contains(cs[0].Text, "~DANA/shop") || !strings.Contains(cs[0].Text, "push a new commit") {
		t.Fatalf("comments %+v: want the refusal and what to do", cs)
	}
	// The PR's job pushed nothing (the fetch comes first); what reached the
	// slot repository afterwards is the reset's template.
	for _, r := range w.sim.Requests() {
		if r.Endpoint == sim.EndpointGitReceivePack && strings.HasPrefix(r.Job, queued[0].JobID+"/") {
			t.Fatalf("the refused job pushed: %s %s", r.Method, r.Path)
		}
	}
	if out := w.deliver(d, secret); out.Result != "duplicate" {
		t.Fatalf("the same delivery again: %+v", out)
	}

	// The fork now reads (its owner granted the token's user read); the
	// author pushes: a new head takes a slot again.
	w.sim.RemoveFault(fid)
	d2, err := w.sim.PushPR("APPS", "shop", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d2, secret)
	w.waitPR(d.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == d2.Head })
	if _, released, queued := w.prLog(d.ID); len(released) != 1 || len(queued) != 2 {
		t.Fatalf("%d releases, %d jobs after the new head: want 1 and 2", len(released), len(queued))
	}
}

// TestPRFromAForkDeletedAfterItOpened: the PR from a fork is deployed; the
// author pushes again and then deletes the fork before the job fetches the
// new head. The fetch finds nothing (404): refused with the code, once, the
// slot given back, and said on the PR.
func TestPRFromAForkDeletedAfterItOpened(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "gone")
	d, err := w.sim.OpenForkPR("APPS", "shop", "~DANA", "feature/short-lived")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	w.waitPR(d.ID, ready)
	d2, err := w.sim.PushPR("APPS", "shop", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !w.sim.DropRepo("~DANA", "shop") {
		t.Fatal("no fork to delete")
	}
	w.deliver(d2, secret)
	w.waitPR(d.ID, func(p events.Payload) bool {
		c, ok := p.(events.PRCommentPosted)
		return ok && c.Phase == "source_unreadable" && c.Head == d2.Head
	})
	w.waitPR(d.ID, func(p events.Payload) bool { r, ok := p.(events.PRSlotReleased); return ok && r.Reason != "" })
	refused, released, queued := w.prLog(d.ID)
	if len(refused) != 1 || refused[0].Head != d2.Head || !strings.Contains(refused[0].Reason, "HTTP 404") || len(released) != 1 || len(queued) != 2 {
		t.Fatalf("refusals %+v, releases %+v, %d jobs", refused, released, len(queued))
	}
	j, _ := slots.LoadJob(context.Background(), w.store, queued[1].JobID)
	if j.Status != events.StatusFailed || j.LastCode != events.CodePRSourceUnreadable || j.Done[events.StepDeploy] {
		t.Fatalf("job %s %q: want failed before deploying, coded", j.Status, j.LastCode)
	}
	if bs := w.sim.BuildStatuses(d2.Head); len(bs) != 1 || bs[0].State != "FAILED" {
		t.Fatalf("build statuses %+v", bs)
	}
}

// TestPRForkKeysHostile: a delivery whose fork (or target) names a
// repository that is not PROJECT/slug or ~user/slug — path traversal, URL
// parts, encodings — is refused with 400 naming the field, and nothing is
// appended. Well-formed forks in a personal project are accepted.
func TestPRForkKeysHostile(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d, err := w.sim.OpenForkPR("APPS", "shop", "~DANA", "feature/keys")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	mutate := func(ref, field, value string) sim.Delivery {
		var p map[string]any
		if err := json.Unmarshal(d.Payload, &p); err != nil {
			t.Fatal(err)
		}
		repo := p["pullRequest"].(map[string]any)[ref].(map[string]any)["repository"].(map[string]any)
		if field == "key" {
			repo["project"].(map[string]any)["key"] = value
		} else {
			repo["slug"] = value
		}
		out := d
		out.Payload, _ = json.Marshal(p)
		n++
		out.RequestID = "hostile-" + strconv.Itoa(n)
		return out
	}
	head, _ := w.store.Head(context.Background())
	for _, c := range []struct{ ref, field, value string }{
		{"fromRef", "key", "../APPS"}, {"fromRef", "key", ".."}, {"fromRef", "key", "~dana/../APPS"}, {"fromRef", "key", "~.."},
		{"fromRef", "key", "~"}, {"fromRef", "key", "~dana%2F.."}, {"fromRef", "key", "APPS?x=1"}, {"fromRef", "key", "APPS#frag"},
		{"fromRef", "key", "evil@attacker.example"}, {"fromRef", "key", "~dana@attacker.example"}, {"fromRef", "key", "~dana/x"},
		{"fromRef", "key", ""}, {"fromRef", "key", " APPS"}, {"fromRef", "key", "~dana\n"}, {"fromRef", "key", "~da..na"},
		{"fromRef", "key", "http://attacker.example/x"}, {"fromRef", "key", "~dana:pw"},
		{"fromRef", "slug", ".."}, {"fromRef", "slug", "shop/../../etc"}, {"fromRef", "slug", "shop.git/../x"}, {"fromRef", "slug", "%2e%2e"},
		{"fromRef", "slug", "shop?x=1"}, {"fromRef", "slug", "shop#x"}, {"fromRef", "slug", "a b"}, {"fromRef", "slug", "-rf"},
		{"fromRef", "slug", "shop..x"}, {"fromRef", "slug", ""},
		{"toRef", "key", "~DANA"}, {"toRef", "key", "../APPS"}, {"toRef", "slug", "../shop"},
	} {
		out := w.deliver(mutate(c.ref, c.field, c.value), secret)
		want := "pullRequest." + c.ref + ".repository"
		if out.Status != http.StatusBadRequest || out.Code != "malformed" || out.Args["field"] != want {
			t.Errorf("%s %s %q: %+v, want 400 malformed %s", c.ref, c.field, c.value, out, want)
		}
	}
	if after, _ := w.store.Head(context.Background()); after != head {
		t.Fatal("a refused delivery appended events")
	}
	if rs := w.pr.Recent(); len(rs) == 0 || rs[0].Result != "refused" {
		t.Fatalf("deliveries list %+v: want the refusals there", rs)
	}
	// The first is accepted; the others are then the same PR at the same
	// head (a duplicate): read, not refused.
	for i, key := range []string{"~DANA", "~dana.smith", "~d_s-1", "FORKS"} {
		out := w.deliver(mutate("fromRef", "key", key), secret)
		if i == 0 && out.Result != "accepted" || i > 0 && out.Code != "pr_at_head" {
			t.Errorf("fork key %q: %+v, want it read", key, out)
		}
	}
}

// waitSlotVacated waits (on the log) for the slot's SlotVacated.
func (w *world) waitSlotVacated(slot string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stream := events.SlotStream(slot)
	stop := errors.New("vacated")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{stream}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream == stream && ev.Type == "SlotVacated" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		w.t.Fatalf("slot %s never vacated: %v", slot, err)
	}
}
