package pullrequests_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/jobs"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	gitp "github.com/slotkeeper/slotkeeper/backend/providers/git"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

const secret = "s3cret-webhook"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// world: the simulators, a store, the command service, the job engine and
// the flow with its driver running.
type world struct {
	t     testing.TB
	sim   *sim.Sim
	store events.Store
	svc   *slots.Service
	pr    *pullrequests.Service
	eng   *jobs.Engine
	// cfg is the flow's configuration; startDriver runs a new Service on
	// it (a restarted process), stopDriver ends the running one.
	cfg        pullrequests.Config
	stopDriver func()
	// driverStore, if set, is the store the next startDriver's flow
	// writes through (a test's dying store); nil: the world's.
	driverStore events.Store
}

// startDriver starts a new flow (its driver included) on the world's
// store, as a process starting does.
func (w *world) startDriver() {
	ctx, cancel := context.WithCancel(context.Background())
	store := w.store
	if w.driverStore != nil {
		store = w.driverStore
	}
	pr := pullrequests.New(store, w.svc, w.cfg)
	done := make(chan error, 1)
	go func() { done <- pr.Run(ctx) }()
	w.pr = pr
	w.stopDriver = func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("driver: %v", err)
		}
		w.stopDriver = func() {}
	}
}

func newWorld(t testing.TB, slotNames ...string) *world {
	t.Helper()
	return newWorldWith(t, 20*time.Second, slotNames...)
}

// newWorldWith: newWorld with the engine's step deadline.
func newWorldWith(t testing.TB, stepTimeout time.Duration, slotNames ...string) *world {
	t.Helper()
	s, err := sim.Start(context.Background(), sim.Options{DeleteDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	w := &world{t: t, sim: s, store: ms, svc: slots.NewService(ms, slots.Config{Logger: quiet})}
	for _, n := range slotNames {
		fx, err := s.SeedSlot(n)
		if err != nil {
			t.Fatal(err)
		}
		if fx.TemplateApp, err = s.EnsureTemplateApp(); err != nil {
			t.Fatal(err)
		}
		err = w.svc.Register(context.Background(), slots.Actor{Name: "admin"}, slots.RegisterCmd{
			Name: n, ProjectUUID: fx.ProjectUUID, AppUUID: fx.AppUUID, DBUUID: fx.DBUUID,
			Repo:         events.RepoRef{Project: fx.Repo.Project, Slug: fx.Repo.Slug},
			TemplateRepo: events.RepoRef{Project: fx.Template.Project, Slug: fx.Template.Slug}, TemplateRef: fx.TemplateRef,
			Template: &events.SlotTemplate{ServerUUID: sim.ServerUUID, EnvFromApp: fx.TemplateApp},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fast := providers.Backoff{Initial: 2 * time.Millisecond, Max: 20 * time.Millisecond, Total: 5 * time.Second}
	pusher, err := gitp.New(gitp.Options{Token: s.BitbucketToken()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pusher.Close() })
	bb := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), Confirm: fast, RateRetries: -1})
	deps := jobs.Deps{
		PaaS:    coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken(), Confirm: fast, RateRetries: -1}),
		GitHost: bb, Pusher: pusher,
		RepoURL: func(r events.RepoRef) string { return s.CloneURL(r.Project, r.Slug) },
	}
	eng := jobs.NewEngine(ms, deps, jobs.Config{Workers: 2, WorkerID: "test", StepTimeout: stepTimeout, JobTimeout: 60 * time.Second,
		Lease: 10 * time.Second, RescueGrace: 50 * time.Millisecond, Logger: quiet})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	w.eng = eng
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		eng.Stop(sctx)
		cancel()
		<-done
	})
	w.cfg = pullrequests.Config{Secret: secret, Reporter: pullrequests.BitbucketReporter{Client: bb},
		JobURL: func(id string) string { return "https://slotkeeper.example/jobs/" + id }, Logger: quiet,
		Retry: 20 * time.Millisecond, CallTimeout: 5 * time.Second}
	w.startDriver()
	t.Cleanup(func() { w.stopDriver() })
	if _, err := w.pr.Link(context.Background(), slots.Actor{Name: "admin", ID: "user:admin"}, "APPS/shop"); err != nil {
		t.Fatal(err)
	}
	return w
}

// deliver sends d as Bitbucket would, signed with key.
func (w *world) deliver(d sim.Delivery, key string) pullrequests.Outcome {
	w.t.Helper()
	h := http.Header{}
	h.Set(pullrequests.HeaderEventKey, d.EventKey)
	h.Set(pullrequests.HeaderRequestID, d.RequestID)
	if key != "" {
		h.Set(pullrequests.HeaderSignature, webhook.Sign(key, d.Payload))
	}
	out, err := w.pr.Receive(context.Background(), h, d.Payload)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// waitPR waits (on the log, not the clock) until the PR's stream has an
// event ok accepts, and returns it.
func (w *world) waitPR(id int64, ok func(p events.Payload) bool) events.Payload {
	w.t.Helper()
	stream := events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, id)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var found events.Payload
	stop := errors.New("found")
	err := w.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{stream}}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Stream != stream {
			return nil
		}
		if p, err := events.Decode(ev); err == nil && ok(p) {
			found = p
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		w.t.Fatalf("pull request %d: %v\n%s", id, err, w.history(stream))
	}
	return found
}

func (w *world) history(stream string) string {
	evs, _ := w.store.ReadStream(context.Background(), stream, 0, 0, events.Forward)
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("  " + e.Type + " " + string(e.Data) + "\n")
	}
	return b.String()
}

func (w *world) count(prefix string) int {
	n := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	head, _ := w.store.Head(ctx)
	if head == 0 {
		return 0
	}
	// Everything up to the head, then stop (a subscription goes on
	// waiting for new events otherwise).
	end := errors.New("head")
	w.store.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		if strings.HasPrefix(ev.Stream, prefix) {
			n++
		}
		if ev.Position >= head {
			return end
		}
		return nil
	})
	return n
}

func ready(p events.Payload) bool {
	c, ok := p.(events.PRCommentPosted)
	return ok && c.Phase == "ready"
}

// TestPROpenedGetsASlotAndItsURL: a signed pr:opened of a linked repository
// is answered 202 at once; the driver occupies the free ready slot for the
// PR's author, a pr_deploy pushes the head and deploys it, and the PR gets
// one comment ending with the app URL and a SUCCESSFUL build status on the
// head. The same delivery again changes nothing.
func TestPROpenedGetsASlotAndItsURL(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "pr1")
	d, err := w.sim.OpenPR("APPS", "shop", "feature/login")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(d, secret); out.Status != http.StatusAccepted || out.Result != "accepted" {
		t.Fatalf("delivery: %+v", out)
	}
	w.waitPR(d.ID, ready)
	st, err := slots.LoadSlot(context.Background(), w.store, "pr1")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Occupied || st.Occupant != "Dana Developer" || st.OccupantID != "bitbucket:dana" {
		t.Fatalf("slot: occupied=%v by %q (%q)", st.Occupied, st.Occupant, st.OccupantID)
	}
	if head, _ := w.sim.RepoHeadSHA(st.Reg.Repo.Project, st.Reg.Repo.Slug, st.Reg.Branch); head != d.Head {
		t.Fatalf("slot repo at %s, want the PR head %s", head, d.Head)
	}
	cs := w.sim.PRComments("APPS", "shop", d.ID)
	if len(cs) != 1 || !strings.Contains(cs[0].Text, "running on slot **pr1**: http") || cs[0].Version < 1 {
		t.Fatalf("comments %+v: want one, edited in place, with the app URL", cs)
	}
	bs := w.sim.BuildStatuses(d.Head)
	if len(bs) != 1 || bs[0].State != "SUCCESSFUL" || !strings.HasPrefix(bs[0].URL, "http") {
		t.Fatalf("build statuses %+v", bs)
	}
	n := w.count(events.PRStreamPrefix)
	if out := w.deliver(d, secret); out.Result != "duplicate" || out.Status != http.StatusOK {
		t.Fatalf("repeated delivery: %+v", out)
	}
	d2 := d
	d2.RequestID = "another-request"
	if out := w.deliver(d2, secret); out.Result != "duplicate" {
		t.Fatalf("same state, new request id: %+v", out)
	}
	if m := w.count(events.PRStreamPrefix); m != n {
		t.Fatalf("a repeated delivery appended %d events", m-n)
	}
}

// TestPRRefusedAndIgnored: unsigned, badly signed and no-secret deliveries
// get 401 and append nothing; an unlinked repository's 202 and nothing.
func TestPRRefusedAndIgnored(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d, err := w.sim.OpenPR("APPS", "shop", "feature/x")
	if err != nil {
		t.Fatal(err)
	}
	head, _ := w.store.Head(context.Background())
	for name, key := range map[string]string{"unsigned": "", "wrong secret": "guess"} {
		if out := w.deliver(d, key); out.Status != http.StatusUnauthorized || out.Result != "refused" {
			t.Errorf("%s: %+v", name, out)
		}
	}
	other, err := w.sim.OpenPR("OTHER", "app", "feature/y")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(other, secret); out.Status != http.StatusAccepted || out.Result != "ignored" {
		t.Errorf("unlinked: %+v", out)
	}
	bad := d
	bad.Payload = []byte(strings.Replace(string(d.Payload), d.Head, "HEAD;rm -rf", 1))
	if out := w.deliver(bad, secret); out.Status != http.StatusBadRequest {
		t.Errorf("malformed head: %+v", out)
	}
	noSecret := pullrequests.New(w.store, w.svc, pullrequests.Config{Logger: quiet})
	h := http.Header{}
	h.Set(pullrequests.HeaderEventKey, d.EventKey)
	h.Set(pullrequests.HeaderRequestID, d.RequestID)
	h.Set(pullrequests.HeaderSignature, webhook.Sign("", d.Payload))
	if out, _ := noSecret.Receive(context.Background(), h, d.Payload); out.Status != http.StatusUnauthorized {
		t.Errorf("no secret configured: %+v", out)
	}
	if after, _ := w.store.Head(context.Background()); after != head {
		t.Fatal("refused or ignored deliveries appended events")
	}
}

// TestPRUpdatedThenMerged: a newer push queues the same job for the new
// head (the slot ends at it, one comment still); the merge releases the
// slot with a ready reset, and a late update of the closed PR changes
// nothing.
func TestPRUpdatedThenMerged(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "pr2")
	d, err := w.sim.OpenPR("APPS", "shop", "feature/cart")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	d2, err := w.sim.PushPR("APPS", "shop", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(d2, secret); out.Result != "accepted" {
		t.Fatalf("update: %+v", out)
	}
	w.waitPR(d.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == d2.Head })
	st, _ := slots.LoadSlot(context.Background(), w.store, "pr2")
	if head, _ := w.sim.RepoHeadSHA(st.Reg.Repo.Project, st.Reg.Repo.Slug, st.Reg.Branch); head != d2.Head {
		t.Fatalf("slot repo at %s, want the newer head %s", head, d2.Head)
	}
	if cs := w.sim.PRComments("APPS", "shop", d.ID); len(cs) != 1 {
		t.Fatalf("%d comments, want one edited in place", len(cs))
	}
	m, err := w.sim.ClosePR("APPS", "shop", d.ID, "MERGED")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(m, secret); out.Result != "accepted" {
		t.Fatalf("merge: %+v", out)
	}
	rel := w.waitPR(d.ID, func(p events.Payload) bool { _, ok := p.(events.PRSlotReleased); return ok }).(events.PRSlotReleased)
	if rel.Slot != "pr2" || rel.JobID == "" {
		t.Fatalf("released %+v: want the ready reset queued", rel)
	}
	j, err := slots.LoadJob(context.Background(), w.store, rel.JobID)
	if err != nil || j.Queued.Kind != events.KindReset {
		t.Fatalf("release job %+v %v", j.Queued, err)
	}
	if out := w.deliver(d2, secret); out.Result != "duplicate" {
		t.Fatalf("late update of a merged PR: %+v", out)
	}
}

// TestPRWaitsWhenThePoolIsFull: with no free ready slot the PR is told so
// and takes the slot when one frees up is left to the waitlist (not yet).
func TestPRWaitsWhenThePoolIsFull(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d, err := w.sim.OpenPR("APPS", "shop", "feature/full")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(d, secret)
	w.waitPR(d.ID, func(p events.Payload) bool { c, ok := p.(events.PRCommentPosted); return ok && c.Phase == "waiting" })
	if cs := w.sim.PRComments("APPS", "shop", d.ID); len(cs) != 1 || !strings.Contains(cs[0].Text, "waits") {
		t.Fatalf("comments %+v", cs)
	}
}

// TestPRWaitingTakesTheFreedSlot: with one slot, a second PR waits; when
// the first merges, the slot's reset runs and the waiting PR takes the
// slot and gets its URL.
func TestPRWaitingTakesTheFreedSlot(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "one")
	a, err := w.sim.OpenPR("APPS", "shop", "feature/first")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(a, secret)
	w.waitPR(a.ID, ready)
	b, err := w.sim.OpenPR("APPS", "shop", "feature/second")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(b, secret)
	w.waitPR(b.ID, func(p events.Payload) bool { _, ok := p.(events.PRWaiting); return ok })
	m, err := w.sim.ClosePR("APPS", "shop", a.ID, "MERGED")
	if err != nil {
		t.Fatal(err)
	}
	w.deliver(m, secret)
	taken := w.waitPR(b.ID, func(p events.Payload) bool { _, ok := p.(events.PRSlotTaken); return ok }).(events.PRSlotTaken)
	if taken.Slot != "one" {
		t.Fatalf("took %q", taken.Slot)
	}
	w.waitPR(b.ID, ready)
	if cs := w.sim.PRComments("APPS", "shop", b.ID); len(cs) != 1 || !strings.Contains(cs[0].Text, "running on slot **one**") {
		t.Fatalf("comments %+v", cs)
	}
}
