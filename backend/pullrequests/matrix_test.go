package pullrequests_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The pull-request flow's fault matrix (issue 34): each outside call the
// flow adds × each fault, one implementation (runPRCell). Like the job
// engine's matrices (backend/jobs matrix_test.go), every cell asserts on
// the log (the PR's and the job's streams) and on the simulator's recorded
// requests.

// prCall is a call the matrix faults.
type prCall struct {
	name, endpoint string
	// op is the call's name in PRReportFailed ("" for the push, a job's).
	op string
	// pre are faults installed before the cell's own, so the call is
	// reached (a 409 on the edit makes the flow read the comment back).
	pre []sim.Fault
	// fork: the cell's PR is from a fork (~DANA/shop), whose fetch is the
	// faulted call.
	fork bool
}

// The fork the fork cells' PR comes from: dana's personal fork.
const cellFork = "~DANA"

var prCalls = []prCall{
	{name: "push", endpoint: sim.EndpointGitReceivePack},
	// The fetch of the head from the PR's fork: git's ref advertisement,
	// the first request of the fetch.
	{name: "fork-fetch", endpoint: sim.EndpointGitInfoRefs, fork: true},
	{name: "comment-add", endpoint: sim.EndpointAddComment, op: bitbucket.OpAddComment},
	{name: "comment-edit", endpoint: sim.EndpointEditComment, op: bitbucket.OpEditComment},
	{name: "build-status", endpoint: sim.EndpointSetBuildStatus, op: bitbucket.OpSetBuildStatus},
	// The reads: the PR's activities (the comment looked up by its marker
	// before the first POST), and a comment read back after a 409.
	{name: "comment-list", endpoint: sim.EndpointPRActivities, op: bitbucket.OpPRActivities},
	{name: "comment-read", endpoint: sim.EndpointGetComment, op: bitbucket.OpGetComment,
		pre: []sim.Fault{{Endpoint: sim.EndpointEditComment, Status: http.StatusConflict, Times: 1}}},
}

type prFault string

const (
	pfHang    prFault = "hang"       // no answer: the step's or the report's deadline ends it
	pf500     prFault = "500"        //
	pf401     prFault = "401"        // the token refused, every time
	pf403     prFault = "403"        // the token may not (fork cells)
	pf404     prFault = "404"        // Bitbucket's own: not there for the token (fork cells)
	pfForeign prFault = "foreign404" // an ingress's HTML 404, not Bitbucket's
	pfReset   prFault = "reset"      // connection reset before the request took effect
	pfLost    prFault = "lost"       // the request took effect, then the connection was reset
	pfCrash   prFault = "crash"      // the process (the driver) dies while the call hangs
	pfCancel  prFault = "cancel"     // a person cancels the PR's job while the call hangs
)

// prCells: every fault on every call, except those that do not apply —
// a lost answer and a crash of the job's calls (the push, the fork's
// fetch) are the job engine's (its own matrix, backend/jobs, kills the
// worker mid-push); a cancel is of a job, so only of the job's calls; 403
// and Bitbucket's own 404 only of the fork's fetch (the ways a fork is
// unreadable).
func prCells() (out []struct {
	c prCall
	f prFault
}) {
	for _, c := range prCalls {
		for _, f := range []prFault{pfHang, pf500, pf401, pf403, pf404, pfForeign, pfReset, pfLost, pfCrash, pfCancel} {
			job := c.op == ""
			if job && (f == pfLost || f == pfCrash) || !job && f == pfCancel || !c.fork && (f == pf403 || f == pf404) {
				continue
			}
			out = append(out, struct {
				c prCall
				f prFault
			}{c, f})
		}
	}
	return out
}

// TestPRFaultMatrix: for each cell, the PR ends honestly — ready with its
// URL when the fault passes; failed or cancelled with the reason when the
// job cannot push; a definite refusal recorded once (PRReportFailed, naming
// the token) and not retried more often than events arrive — and never
// with a second comment, a second push or a second job.
func TestPRFaultMatrix(t *testing.T) {
	t.Parallel()
	for _, cell := range prCells() {
		t.Run(cell.c.name+"/"+string(cell.f), func(t *testing.T) {
			t.Parallel()
			runPRCell(t, cell.c, cell.f)
		})
	}
}

func runPRCell(t *testing.T, c prCall, f prFault) {
	push := c.op == "" // the job's call: the push, or the fork's fetch
	// The fork is unreadable: refused (401, 403), or not there (404: git
	// cannot tell Bitbucket's own from a proxy's).
	refused := c.fork && (f == pf401 || f == pf403 || f == pf404 || f == pfForeign)
	stepTimeout := 20 * time.Second
	if push && f == pfHang {
		stepTimeout = 3 * time.Second
	}
	w := newWorldWith(t, stepTimeout, "mx")
	if f == pfHang {
		w.stopDriver()
		w.cfg.CallTimeout = time.Second
		w.startDriver()
	}
	if f == pfCrash {
		// A killed process writes no checkpoint at its stop: the next one
		// starts from the last one written while running (after every
		// event here, held below what was not acted on).
		w.stopDriver()
		w.cfg.Save.Every, w.cfg.Save.AtStop = 1, -1
		w.startDriver()
	}
	for _, p := range c.pre {
		w.sim.AddFault(p)
	}
	flt := sim.Fault{Endpoint: c.endpoint}
	switch {
	case c.fork:
		flt.Resource = cellFork + "/shop"
	case push:
		st, _ := slots.LoadSlot(context.Background(), w.store, "mx")
		flt.Resource = st.Reg.Repo.String()
	}
	switch f {
	case pfHang, pfCrash, pfCancel:
		flt.Hang = true
	case pf500:
		flt.Status = http.StatusInternalServerError
	case pf401:
		flt.Status = http.StatusUnauthorized
		flt.Body = `{"errors":[{"context":null,"message":"Authentication failed. Please check your credentials and try again.","exceptionName":"com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException"}]}`
	case pf403:
		flt.Status = http.StatusForbidden
	case pf404:
		flt.Status = http.StatusNotFound
	case pfForeign:
		flt.Foreign404 = true
	case pfReset:
		flt.Reset = true
	case pfLost:
		flt.Reset, flt.AfterHandler = true, true
	}
	// A fault on a Bitbucket post passes after once (the flow must get
	// past it without a duplicate), except the token's refusal, which
	// stays; a fault on the push stays (the job must end on it).
	if !push && f != pf401 || f == pfCrash || f == pfCancel {
		flt.Times = 1
	}
	fid := w.sim.AddFault(flt)
	fork := ""
	if c.fork {
		fork = cellFork
	}
	d, err := w.sim.OpenForkPR("APPS", "shop", fork, "feature/mx")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	stream := events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, d.ID)
	faulted := func(r sim.Request) bool { return r.Fault == fid }

	switch f {
	case pfCrash:
		waitRequest(t, w, faulted)
		w.stopDriver() // the call in flight is dropped with the process
		w.startDriver()
	case pfCancel:
		waitRequest(t, w, faulted)
		q := w.waitPR(d.ID, func(p events.Payload) bool { _, ok := p.(events.PRDeployQueued); return ok }).(events.PRDeployQueued)
		if err := w.svc.Cancel(context.Background(), slots.Actor{Name: "carol", ID: "user:carol"}, q.JobID); err != nil {
			t.Fatal(err)
		}
	}

	switch {
	case f == pf401 && !push:
		// The refused call is recorded for the ready phase, or, for the
		// read after the one 409: when the 409 met an earlier phase's
		// edit, the next edit needs no read and the PR gets to ready;
		// when it met the ready edit (a slow machine: the first post was
		// already "deploying"), the refusal is the last word until the
		// PR's next event.
		w.waitPR(d.ID, func(p events.Payload) bool {
			e, ok := p.(events.PRReportFailed)
			return ok && e.Phase == "ready" || len(c.pre) > 0 && ready(p)
		})
	case f == pfCancel:
		w.waitPR(d.ID, func(p events.Payload) bool { c, ok := p.(events.PRCommentPosted); return ok && c.Phase == "cancelled" })
	case refused:
		w.waitPR(d.ID, func(p events.Payload) bool {
			c, ok := p.(events.PRCommentPosted)
			return ok && c.Phase == "source_unreadable"
		})
		w.waitPR(d.ID, func(p events.Payload) bool { r, ok := p.(events.PRSlotReleased); return ok && r.Reason != "" })
	case push:
		w.waitPR(d.ID, func(p events.Payload) bool { c, ok := p.(events.PRCommentPosted); return ok && c.Phase == "failed" })
	default:
		w.waitPR(d.ID, ready)
	}

	log := w.read(stream)
	var posted []events.PRCommentPosted
	var failed []events.PRReportFailed
	var jobsQueued []string
	var refusals []events.PRSourceRefused
	var releases []events.PRSlotReleased
	for _, ev := range log {
		p, _ := events.Decode(ev)
		switch e := p.(type) {
		case events.PRCommentPosted:
			posted = append(posted, e)
		case events.PRReportFailed:
			failed = append(failed, e)
		case events.PRDeployQueued:
			jobsQueued = append(jobsQueued, e.JobID)
		case events.PRSourceRefused:
			refusals = append(refusals, e)
		case events.PRSlotReleased:
			releases = append(releases, e)
		}
	}
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	bs := w.sim.BuildStatuses(d.Head)
	reqs := w.sim.Requests()
	count := func(endpoint string, ok func(sim.Request) bool) int {
		n := 0
		for _, r := range reqs {
			if r.Endpoint == endpoint && ok(r) {
				n++
			}
		}
		return n
	}

	// Never a second job, push or comment.
	if len(jobsQueued) != 1 {
		t.Errorf("%d jobs queued, want 1%s", len(jobsQueued), w.history(stream))
	}
	if n := count(sim.EndpointGitReceivePack, func(r sim.Request) bool { return r.Status == http.StatusOK }); n > 1 {
		t.Errorf("%d pushes took effect, want at most 1", n)
	}
	if len(cs) > 1 {
		t.Fatalf("%d comments on the PR, want at most one: %+v", len(cs), cs)
	}
	for _, p := range posted {
		if p.CommentID != posted[0].CommentID {
			t.Errorf("comment ids %d and %d recorded: not edited in place", posted[0].CommentID, p.CommentID)
		}
	}
	j, _ := slots.LoadJob(context.Background(), w.store, jobsQueued[0])

	switch {
	case f == pf401 && !push:
		// Recorded once per phase, naming the token; not retried more
		// often than events about the PR and its job arrived.
		i := slices.IndexFunc(failed, func(e events.PRReportFailed) bool { return e.Call == c.op })
		if i < 0 || failed[i].Code != "unauthorized" || !strings.Contains(failed[i].Reason, "--bitbucket-token") {
			t.Errorf("PRReportFailed %+v: want one of call %s, code unauthorized, a reason naming --bitbucket-token", failed, c.op)
		}
		if len(failed) > 4 {
			t.Errorf("%d PRReportFailed, want one per phase at most", len(failed))
		}
		if wakes := len(log) + len(w.read(events.JobStream(j.ID))); count(c.endpoint, faulted) > wakes {
			t.Errorf("%d refused requests for %d events: a retry storm", count(c.endpoint, faulted), wakes)
		}
		if j.Status != events.StatusSucceeded {
			t.Errorf("job %s: a refused report must not fail the deploy", j.Status)
		}
		// Nothing posted without the look-up: no comment at all when the
		// look-up or the post is refused.
		if (c.endpoint == sim.EndpointPRActivities || c.endpoint == sim.EndpointAddComment) && len(cs) != 0 {
			t.Errorf("comments %+v posted although Bitbucket refused", cs)
		}
		return
	case refused:
		// Coded, recorded once, said on the PR; nothing pushed; the slot
		// given back (a ready reset); no retry.
		if j.Status != events.StatusFailed || j.LastCode != events.CodePRSourceUnreadable {
			t.Errorf("job %s code %q (%q), want failed, %s", j.Status, j.LastCode, j.LastError, events.CodePRSourceUnreadable)
		}
		if len(refusals) != 1 || refusals[0].Code != events.CodePRSourceUnreadable || refusals[0].Source.String() != cellFork+"/shop" ||
			refusals[0].Head != d.Head || refusals[0].JobID != j.ID || refusals[0].Slot != "mx" {
			t.Errorf("PRSourceRefused %+v: want one, coded, naming the fork, head, job and slot", refusals)
		}
		if len(releases) != 1 || releases[0].Slot != "mx" || releases[0].JobID == "" || releases[0].Reason != events.CodePRSourceUnreadable {
			t.Errorf("releases %+v: want the slot given back with a reset, once, with the code", releases)
		}
		if n := count(sim.EndpointGitReceivePack, func(sim.Request) bool { return true }); n != 0 {
			t.Errorf("%d pushes to the slot repository for a head that could not be fetched", n)
		}
		if wakes := len(log) + len(w.read(events.JobStream(j.ID))); count(c.endpoint, faulted) > wakes {
			t.Errorf("%d refused fetches for %d events: a retry storm", count(c.endpoint, faulted), wakes)
		}
		if len(cs) != 1 || !strings.Contains(cs[0].Text, "cannot fetch") || !strings.Contains(cs[0].Text, cellFork+"/shop") ||
			!strings.Contains(cs[0].Text, "went back to the pool") || len(bs) != 1 || bs[0].State != "FAILED" {
			t.Errorf("comment %+v, statuses %+v: want the refusal said to the author, FAILED", cs, bs)
		}
		return
	case f == pfCancel:
		if j.Status != events.StatusCancelled {
			t.Errorf("job %s, want cancelled", j.Status)
		}
		if len(cs) != 1 || !strings.Contains(cs[0].Text, "was cancelled") || len(bs) != 1 || bs[0].State != "FAILED" || !strings.HasPrefix(bs[0].Description, "cancelled") {
			t.Errorf("comment %+v, statuses %+v: want the cancel said on the PR, FAILED", cs, bs)
		}
		return
	case push:
		want := events.StatusFailed
		why := j.LastError
		if f == pfHang {
			want, why = events.StatusTimedOut, "the job timed out during push_pr_head"
		}
		if j.Status != want || why == "" {
			t.Errorf("job %s (%q), want %s with its reason", j.Status, j.LastError, want)
		}
		if len(cs) != 1 || !strings.Contains(cs[0].Text, "failed: "+why) || len(bs) != 1 || bs[0].State != "FAILED" {
			t.Errorf("comment %+v, statuses %+v: want failed with the reason, FAILED", cs, bs)
		}
		if f == pf401 && !strings.Contains(strings.ToLower(j.LastError), "auth") {
			t.Errorf("reason %q does not say the credential was refused", j.LastError)
		}
		return
	}
	// The fault passed: one comment, with the URL, and the status.
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "running on slot **mx**: http") || !strings.HasSuffix(cs[0].Text, "slotkeeper:"+stream) {
		t.Errorf("comments %+v: want one, edited in place, with the URL and the marker", cs)
	}
	if len(bs) != 1 || bs[0].State != "SUCCESSFUL" {
		t.Errorf("build statuses %+v", bs)
	}
	if len(failed) != 0 {
		t.Errorf("a fault that passes was recorded as a refusal: %+v", failed)
	}
	if n := count(sim.EndpointAddComment, func(r sim.Request) bool { return r.Status == http.StatusCreated || r.Fault != 0 && f == pfLost }); n != 1 {
		t.Errorf("%d comment POSTs took effect, want 1", n)
	}
	if f == pfHang {
		for _, r := range reqs {
			if r.Fault != fid {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			done, err := w.sim.WaitFor(ctx, func(q sim.Request) bool { return q.Seq == r.Seq && q.Done() })
			cancel()
			// Aborted by the report's own deadline (1 s here), not the
			// default's 30 s. The slack is a loaded machine's, as in the
			// jobs fault matrix: the simulator records the abort when its
			// server goroutine sees the client's close, which -race beside
			// a CPU hog can delay past the 1 s this allowed.
			if err != nil || !done.WasAborted() || done.Aborted.Sub(r.Arrived) > w.cfg.CallTimeout+10*time.Second {
				t.Errorf("hung %s not aborted at the report's deadline (%v)", r.Path, err)
			}
		}
	}
	if f == pfCrash {
		if from, why, ok := w.pr.Runner().Started(); !ok || from == 0 || why != "" {
			t.Errorf("the restarted driver started at %d (%q): want its checkpoint", from, why)
		}
	}
}

// waitRequest waits for the first recorded request ok accepts.
func waitRequest(t *testing.T, w *world, ok func(sim.Request) bool) sim.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := w.sim.WaitFor(ctx, ok)
	if err != nil {
		t.Fatalf("the faulted call never came: %v", err)
	}
	return r
}

// TestPRFirstCommentExactlyOnce: Bitbucket creates the comment but its 201
// never arrives (the connection reset after the write: a proxy's idle
// timeout, a node failing over — the request took effect, the answer was
// lost). Nothing records the comment, yet the next try finds it by its
// marker in the PR's activities and edits it: one comment, edited in
// place, one POST.
func TestPRFirstCommentExactlyOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "eo")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointAddComment, Reset: true, AfterHandler: true, Times: 1})
	d, err := w.sim.OpenPR("APPS", "shop", "feature/once")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	w.waitPR(d.ID, ready)
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || cs[0].Version < 1 || !strings.Contains(cs[0].Text, "running on slot") {
		t.Fatalf("comments %+v: want one, edited in place", cs)
	}
	posts, looks := 0, 0
	for _, r := range w.sim.Requests() {
		switch r.Endpoint {
		case sim.EndpointAddComment:
			posts++
		case sim.EndpointPRActivities:
			looks++
		}
	}
	if posts != 1 || looks < 2 {
		t.Fatalf("%d POSTs and %d look-ups: want one POST, and a look-up before it and after the lost answer", posts, looks)
	}
}

// TestPRFirstCommentExactlyOnceAcrossACrash: the process dies after
// Bitbucket's 201 for the first comment and before PRCommentPosted is
// appended (from that append on, nothing it writes reaches the log). The
// next process, from the driver's checkpoint, finds the comment by its
// marker and edits it: one POST, one comment, edited in place.
func TestPRFirstCommentExactlyOnceAcrossACrash(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "cr")
	w.stopDriver()
	dying := &dyingStore{Store: w.store, hit: make(chan struct{})}
	w.driverStore = dying
	w.cfg.Save.Every, w.cfg.Save.AtStop = 1, -1
	w.startDriver()
	d, err := w.sim.OpenPR("APPS", "shop", "feature/crash")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	select {
	case <-dying.hit:
	case <-time.After(30 * time.Second):
		t.Fatal("the first comment was never recorded")
	}
	w.stopDriver()
	if cs := w.sim.PRComments("APPS", "shop", d.ID); len(cs) != 1 {
		t.Fatalf("comments before the restart: %+v, want the one posted", cs)
	}
	w.driverStore = nil
	w.startDriver()
	w.waitPR(d.ID, ready)
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || cs[0].Version < 1 || !strings.Contains(cs[0].Text, "running on slot") {
		t.Fatalf("comments %+v: want one, edited in place", cs)
	}
	posts := 0
	for _, r := range w.sim.Requests() {
		if r.Endpoint == sim.EndpointAddComment {
			posts++
		}
	}
	if posts != 1 {
		t.Fatalf("%d comment POSTs, want 1", posts)
	}
}

// dyingStore is the store as a process sees it that dies at its first
// append of PRCommentPosted: that append and every later one fail.
type dyingStore struct {
	events.Store
	dead atomic.Bool
	hit  chan struct{}
}

func (d *dyingStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error) {
	if !d.dead.Load() && slices.ContainsFunc(evs, func(e events.EventData) bool { return e.Type == "PRCommentPosted" }) {
		d.dead.Store(true)
		close(d.hit)
	}
	if d.dead.Load() {
		return events.AppendResult{}, errors.New("the process is dead")
	}
	return d.Store.Append(ctx, stream, exp, evs...)
}

// TestPRDriverRestartsFromItsCheckpoint: two PRs ready, the process
// stopped and started again. The new driver starts from its checkpoint
// (not from the start of the log) and re-acts on nothing: no job queued,
// no comment posted or edited for the PRs already where their state says;
// a new push after the restart is acted on once.
func TestPRDriverRestartsFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "ck1", "ck2")
	a, err := w.sim.OpenPR("APPS", "shop", "feature/ck-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.sim.OpenPR("APPS", "shop", "feature/ck-b")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(a, secret)
	w.deliver(b, secret)
	w.waitPR(a.ID, ready)
	w.waitPR(b.ID, ready)
	w.stopDriver()
	head, _ := w.store.Head(context.Background())
	before := len(w.sim.Requests())
	queued := w.count(events.JobStreamPrefix)
	bComment := w.sim.PRComments("APPS", "shop", b.ID)

	w.startDriver()
	a2, err := w.sim.PushPR("APPS", "shop", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(a2, secret)
	w.waitPR(a.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == a2.Head })

	from, why, ok := w.pr.Runner().Started()
	if !ok || from == 0 || from > head || why != "" {
		t.Fatalf("restarted at %d (%q), want its checkpoint (log head was %d)", from, why, head)
	}
	// Only the new head's job and its report happened after the restart.
	jobsAfter := 0
	for _, ev := range w.read(events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, b.ID)) {
		if ev.Position > head {
			t.Errorf("PR %d (untouched) got %s after the restart", b.ID, ev.Type)
		}
	}
	for _, ev := range w.read(events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, a.ID)) {
		if _, isQ := mustDecode(ev).(events.PRDeployQueued); isQ && ev.Position > head {
			jobsAfter++
		}
	}
	if jobsAfter != 1 {
		t.Errorf("%d jobs queued for the new head after the restart, want 1", jobsAfter)
	}
	if n := w.count(events.JobStreamPrefix); n <= queued {
		t.Errorf("no job events after the restart")
	}
	bPath := "/pull-requests/" + strconv.FormatInt(b.ID, 10)
	for _, r := range w.sim.Requests()[before:] {
		if r.Server == "bitbucket" && strings.Contains(r.Path, bPath) {
			t.Errorf("after the restart: %s %s (the untouched PR)", r.Method, r.Path)
		}
	}
	if got := w.sim.PRComments("APPS", "shop", b.ID); !slices.Equal(got, bComment) {
		t.Errorf("PR %d's comment changed: %+v", b.ID, got)
	}
}

func mustDecode(ev events.RecordedEvent) events.Payload {
	p, _ := events.Decode(ev)
	return p
}
