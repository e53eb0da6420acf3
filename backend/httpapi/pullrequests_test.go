package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// TestPullRequestRoutes: linking is an admin's (a viewer is refused and
// nothing is appended); the hook takes no session or token — a valid
// signature is its authentication, a missing or wrong one is 401 and
// changes nothing, an oversized body 413; an unlinked repository 202
// ignored.
func TestPullRequestRoutes(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})

	if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "bad repo"}); a.status != http.StatusBadRequest {
		t.Fatalf("bad repo: %d %s", a.status, a.body)
	}
	viewer := b.tokenFor(t, "vic", auth.RoleViewer, time.Hour)
	before := b.head(t)
	a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "APPS/shop"}, "Authorization", "Bearer "+viewer)
	b.refused(t, "viewer link", a, before, http.StatusForbidden, "slot.register")
	if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "apps/shop"}); a.status != http.StatusCreated {
		t.Fatalf("link: %d %s", a.status, a.body)
	}
	var l struct {
		Repos []struct{ Project, Slug string } `json:"repos"`
	}
	b.do(t, "GET", "/api/pr-repos", nil).decode(t, &l)
	if len(l.Repos) != 1 || l.Repos[0].Project != "APPS" || l.Repos[0].Slug != "shop" {
		t.Fatalf("links %+v", l)
	}

	body := `{"eventKey":"pr:opened","date":"` + time.Now().Format(time.RFC3339) + `","pullRequest":{"id":1,"state":"OPEN","fromRef":{"displayId":"f","latestCommit":"` +
		strings.Repeat("a", 40) + `","repository":{"slug":"other","project":{"key":"X"}}},"toRef":{"repository":{"slug":"other","project":{"key":"X"}}}}}`
	hook := func(sig string, body string) answer {
		return b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-1", "X-Hub-Signature", sig)
	}
	before = b.head(t)
	for _, sig := range []string{"", "sha256=" + strings.Repeat("0", 64), webhook.Sign("wrong", []byte(body))} {
		if a := hook(sig, body); a.status != http.StatusUnauthorized {
			t.Fatalf("signature %q: %d %s", sig, a.status, a.body)
		}
	}
	if a := hook(webhook.Sign("k3y", []byte(strings.Repeat(" ", pullrequests.MaxBody+1))), strings.Repeat(" ", pullrequests.MaxBody+1)); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", a.status)
	}
	if b.head(t) != before {
		t.Fatal("refused deliveries appended events")
	}
	a = hook(webhook.Sign("k3y", []byte(body)), body)
	var out pullrequests.Outcome
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != http.StatusAccepted || out.Result != "ignored" {
		t.Fatalf("unlinked: %d %s", a.status, a.body)
	}
	var rec struct {
		Deliveries []struct{ Result, Reason string } `json:"deliveries"`
	}
	b.do(t, "GET", "/api/hooks/bitbucket/deliveries", nil).decode(t, &rec)
	if len(rec.Deliveries) != 4 || rec.Deliveries[0].Result != "ignored" || rec.Deliveries[1].Result != "refused" || !strings.Contains(rec.Deliveries[1].Reason, "X-Hub-Signature") {
		t.Fatalf("deliveries %+v (the oversized one never reached Receive)", rec.Deliveries)
	}
	if a := b.do(t, "DELETE", "/api/pr-repos/APPS/shop", nil); a.status != http.StatusNoContent {
		t.Fatalf("unlink: %d %s", a.status, a.body)
	}
	if a := b.do(t, "DELETE", "/api/pr-repos/APPS/shop", nil); a.status != http.StatusNotFound {
		t.Fatalf("unlink twice: %d %s", a.status, a.body)
	}
}

// TestSimulatedBitbucketDelivery: with the simulators, an admin hands the
// server a delivery the simulated Bitbucket answered and the server signs
// it under its own secret and receives it like Bitbucket's (accepted, a
// PRChanged appended); a viewer is refused and nothing is appended; a
// server without a secret refuses the delivery (as the hook would) and
// says why as a code. Without the simulators there is no such route.
func TestSimulatedBitbucketDelivery(t *testing.T) {
	for _, secret := range []string{"k3y", ""} {
		b := &bundle{store: memstore.New()}
		b.deps = func(d *Deps) {
			d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: secret})
			d.Sim = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		}
		b.start(t, HubOptions{})
		if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "APPS/shop"}); a.status != http.StatusCreated {
			t.Fatalf("link: %d %s", a.status, a.body)
		}
		payload := `{"eventKey":"pr:opened","date":"` + time.Now().Format(time.RFC3339) + `","pullRequest":{"id":4,"title":"T","state":"OPEN","fromRef":{"displayId":"feat","latestCommit":"` +
			strings.Repeat("b", 40) + `","repository":{"slug":"shop","project":{"key":"APPS"}}},"toRef":{"repository":{"slug":"shop","project":{"key":"APPS"}}}}}`
		delivery := map[string]any{"id": 4, "head": strings.Repeat("b", 40), "event_key": "pr:opened", "request_id": "req-4", "payload": json.RawMessage(payload)}
		viewer := b.tokenFor(t, "vic", auth.RoleViewer, time.Hour)
		before := b.head(t)
		b.refused(t, "viewer delivery", b.do(t, "POST", "/api/hooks/bitbucket/simulated", delivery, "Authorization", "Bearer "+viewer), before, http.StatusForbidden, "sim.control")
		if a := b.do(t, "POST", "/api/hooks/bitbucket/simulated", map[string]any{"event_key": "pr:opened"}); a.status != http.StatusBadRequest || b.head(t) != before {
			t.Fatalf("no payload: %d %s", a.status, a.body)
		}
		a := b.do(t, "POST", "/api/hooks/bitbucket/simulated", delivery)
		var out pullrequests.Outcome
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatal(err)
		}
		if secret == "" {
			if a.status != http.StatusOK || out.Result != "refused" || out.Code != pullrequests.WhyNoSecret || b.head(t) != before {
				t.Fatalf("no secret: %d %s", a.status, a.body)
			}
			continue
		}
		if a.status != http.StatusAccepted || out.Result != "accepted" || b.head(t) == before {
			t.Fatalf("delivery: %d %s", a.status, a.body)
		}
		var rec struct {
			Deliveries []pullrequests.DeliveryRecord `json:"deliveries"`
		}
		b.do(t, "GET", "/api/hooks/bitbucket/deliveries", nil).decode(t, &rec)
		if len(rec.Deliveries) != 1 || rec.Deliveries[0].Repo != "APPS/shop" || rec.Deliveries[0].PR != 4 || rec.Deliveries[0].EventKey != "pr:opened" {
			t.Fatalf("deliveries %+v", rec.Deliveries)
		}
		again := b.do(t, "POST", "/api/hooks/bitbucket/simulated", delivery)
		if err := json.Unmarshal(again.body, &out); err != nil || out.Result != "duplicate" || out.Code != pullrequests.WhySeen || out.Args["request"] != "req-4" {
			t.Fatalf("again: %d %s", again.status, again.body)
		}
	}
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})
	if a := b.do(t, "POST", "/api/hooks/bitbucket/simulated", map[string]any{"event_key": "pr:opened", "payload": json.RawMessage(`{}`)}); a.status != http.StatusNotFound && a.status != http.StatusMethodNotAllowed {
		t.Fatalf("without simulators: %d %s", a.status, a.body)
	}
}

// TestPullRequestList: GET /api/pull-requests lists the read model's pull
// requests, the waiting ones first in the order they will be served (not
// the order they opened), with since when they wait; ?state= narrows it;
// any other state is 400 naming the field. A viewer may read it.
func TestPullRequestList(t *testing.T) {
	b := setup(t, HubOptions{})
	ctx := context.Background()
	repo := events.RepoRef{Project: "APPS", Slug: "shop"}
	at := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	app := func(id int64, ps ...events.Payload) {
		t.Helper()
		for _, p := range ps {
			at = at.Add(time.Minute)
			if _, err := b.store.Append(ctx, events.PRStream(repo, id), events.Any(), events.New(p, events.Metadata{Actor: "bitbucket", Time: at})); err != nil {
				t.Fatal(err)
			}
		}
	}
	pr := func(id int64) events.PullRequest {
		return events.PullRequest{Repo: repo, ID: id, Title: "T" + strconv.FormatInt(id, 10), State: events.PRStateOpen, Branch: "f", Head: strings.Repeat("c", 40), Source: repo}
	}
	for _, id := range []int64{1, 2, 3} {
		app(id, events.PRChanged{RequestID: "r" + strconv.FormatInt(id, 10), EventKey: "pr:opened", PR: pr(id)})
	}
	p1 := pr(1)
	app(1, events.PRSlotTaken{Slot: "s1", PR: &p1})
	app(3, events.PRWaiting{Reason: "every ready slot is occupied"}) // 3 waits before 2
	app(2, events.PRWaiting{Reason: "every ready slot is occupied"})
	if err := b.runner.WaitFor(ctx, b.head(t)); err != nil {
		t.Fatal(err)
	}
	var l struct {
		PullRequests []projections.PRView `json:"pull_requests"`
		Position     events.Position      `json:"position"`
	}
	viewer := b.tokenFor(t, "vic", auth.RoleViewer, time.Hour)
	if a := b.do(t, "GET", "/api/pull-requests", nil, "Authorization", "Bearer "+viewer); a.status != http.StatusOK {
		t.Fatalf("list: %d %s", a.status, a.body)
	} else {
		a.decode(t, &l)
	}
	var got []int64
	for _, v := range l.PullRequests {
		got = append(got, v.ID)
	}
	if fmt.Sprint(got) != "[3 2 1]" || l.Position != b.head(t) {
		t.Fatalf("listed %v at %d, want [3 2 1] (waiting in order, then the one holding s1) at %d", got, l.Position, b.head(t))
	}
	if w := l.PullRequests[0]; w.WaitingSince == nil || w.Slot != "" || l.PullRequests[2].Slot != "s1" || l.PullRequests[2].WaitingSince != nil {
		t.Fatalf("listed %+v", l.PullRequests)
	}
	b.do(t, "GET", "/api/pull-requests?state=waiting", nil).decode(t, &l)
	if len(l.PullRequests) != 2 || l.PullRequests[0].ID != 3 || l.PullRequests[1].ID != 2 {
		t.Fatalf("waiting: %+v", l.PullRequests)
	}
	b.do(t, "GET", "/api/pull-requests?state=closed", nil).decode(t, &l)
	if len(l.PullRequests) != 0 {
		t.Fatalf("closed: %+v", l.PullRequests)
	}
	for _, bad := range []string{"sleeping", "OPEN", "waiting,open"} {
		a := b.do(t, "GET", "/api/pull-requests?state="+url.QueryEscape(bad), nil)
		if e := a.apiError(t); a.status != http.StatusBadRequest || e.Details["field"] != "state" || !strings.Contains(e.Message, "waiting, open, closed") {
			t.Fatalf("state=%s: %d %s", bad, a.status, a.body)
		}
	}
}

// TestSlotAsOfPullRequest: GET /api/slots/{name}?at= replays the PR's
// stream too: the slot as of a moment a pull request held it shows that
// PR (at the head of its newest job then), while the slot now, vacated,
// shows none.
func TestSlotAsOfPullRequest(t *testing.T) {
	b := setup(t, HubOptions{})
	ctx := context.Background()
	b.register(t, "s1")
	repo := events.RepoRef{Project: "APPS", Slug: "shop"}
	stream := events.PRStream(repo, 7)
	pr := events.PullRequest{Repo: repo, ID: 7, Title: "Checkout", State: events.PRStateOpen, Branch: "f", Head: strings.Repeat("a", 40), Source: repo, Author: "Dana"}
	app := func(s string, p events.Payload) events.Position {
		t.Helper()
		r, err := b.store.Append(ctx, s, events.Any(), events.New(p, events.Metadata{Actor: "bitbucket", CorrelationID: stream, Time: time.Now().UTC()}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Position
	}
	app(stream, events.PRChanged{RequestID: "r1", EventKey: "pr:opened", PR: pr})
	app("slot-s1", events.SlotOccupied{Slot: "s1", By: "Dana", Until: time.Now().Add(time.Hour).UTC()})
	app(stream, events.PRSlotTaken{Slot: "s1", PR: &pr})
	held := app(stream, events.PRDeployQueued{Slot: "s1", JobID: "j-7", Head: strings.Repeat("b", 40)})
	app("slot-s1", events.SlotVacated{Slot: "s1"})
	app(stream, events.PRSlotReleased{Slot: "s1", JobID: "r-7"})
	if err := b.runner.WaitFor(ctx, b.head(t)); err != nil {
		t.Fatal(err)
	}
	var then struct {
		projections.SlotView
		AsOf projections.AsOf `json:"as_of"`
	}
	b.do(t, "GET", "/api/slots/s1?at="+strconv.FormatUint(uint64(held), 10), nil).decode(t, &then)
	if p := then.PullRequest; p == nil || p.ID != 7 || p.Title != "Checkout" || p.Head != strings.Repeat("b", 40) || p.JobID != "j-7" || then.AsOf.Position != held {
		t.Fatalf("s1 as of %d: %+v (as of %+v), want PR 7 at its second head", held, p, then.AsOf)
	}
	var now projections.SlotView
	b.do(t, "GET", "/api/slots/s1", nil).decode(t, &now)
	if now.PullRequest != nil {
		t.Fatalf("s1 now: %+v", now.PullRequest)
	}
}

// TestDeliveriesNotice: each delivery the server records (accepted or
// refused alike) tells the connected streams (`event: deliveries`, no id,
// data DeliveriesFrame with the count), so the admin page's list follows
// without a reload; a stream connected later is not told of earlier ones.
func TestDeliveriesNotice(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func() (*bufio.Scanner, func()) {
		req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/api/stream", nil)
		req.Header.Set("Authorization", "Bearer "+b.token)
		resp, err := (&http.Client{Transport: b.tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		return sc, func() { resp.Body.Close() }
	}
	// next returns the next frame's kind and data.
	next := func(sc *bufio.Scanner) (string, string) {
		t.Helper()
		kind := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && kind != "":
				return kind, strings.TrimPrefix(line, "data: ")
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return "", ""
	}
	upTo := func(sc *bufio.Scanner, want string) string {
		t.Helper()
		for {
			if kind, data := next(sc); kind == want {
				return data
			}
		}
	}
	sc, done := open()
	defer done()
	upTo(sc, "snapshot")
	before := b.head(t)
	body := `{"eventKey":"pr:opened"}`
	if a := b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-1"); a.status != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d %s", a.status, a.body)
	}
	var f struct {
		Received uint64 `json:"received"`
	}
	data := upTo(sc, NoticeDeliveries)
	if err := json.Unmarshal([]byte(data), &f); err != nil || f.Received != 1 || b.head(t) != before {
		t.Fatalf("deliveries frame %q (%v), head %d → %d", data, err, before, b.head(t))
	}
	if a := b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "repo:refs_changed", "X-Request-Id", "r-2", "X-Hub-Signature", webhook.Sign("k3y", []byte(body))); a.status != http.StatusAccepted {
		t.Fatalf("ignored: %d %s", a.status, a.body)
	}
	if data := upTo(sc, NoticeDeliveries); data != `{"received":2}` {
		t.Fatalf("second deliveries frame %q", data)
	}
	// A stream opened now hears of the next delivery only.
	sc2, done2 := open()
	defer done2()
	upTo(sc2, "snapshot")
	hook := func() {
		if a := b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-3"); a.status != http.StatusUnauthorized {
			t.Fatalf("unsigned: %d %s", a.status, a.body)
		}
	}
	hook()
	if data := upTo(sc2, NoticeDeliveries); data != `{"received":3}` {
		t.Fatalf("the new stream's first deliveries frame %q", data)
	}
}

// TestStaleSignedDeliveryThroughTheHook (sixth attack pass, through the
// real route): a delivery signed under the configured secret but dated
// more than --bitbucket-webhook-max-age (15 min) from the server's clock,
// either way — a body captured elsewhere and sent later — is 400 in the
// documented error shape, its refusal named in details (reason_code
// stale_delivery, reason_args date and max_age), nothing is appended, and
// the admin's deliveries list shows it refused as stale. The same PR
// dated now is accepted and appended, so the route can append.
func TestStaleSignedDeliveryThroughTheHook(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})
	if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "APPS/shop"}); a.status != http.StatusCreated {
		t.Fatalf("link: %d %s", a.status, a.body)
	}
	seoul := time.FixedZone("KST", 9*3600)
	body := func(date time.Time) string { // Bitbucket's form of the date, e.g. 2017-09-19T09:45:32+1000
		return `{"eventKey":"pr:opened","date":"` + date.In(seoul).Format("2006-01-02T15:04:05-0700") + `","pullRequest":{"id":7,"title":"T","state":"OPEN",` +
			`"fromRef":{"displayId":"feature/x","latestCommit":"` + strings.Repeat("a", 40) + `","repository":{"slug":"shop","project":{"key":"APPS"}}},` +
			`"toRef":{"displayId":"main","repository":{"slug":"shop","project":{"key":"APPS"}}}}}`
	}
	hook := func(id, body string) answer {
		return b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", id,
			"X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	}

	before := b.head(t)
	for i, date := range []time.Time{time.Now().Add(-2 * time.Hour), time.Now().Add(16 * time.Minute)} {
		id := fmt.Sprintf("stale-%d", i)
		a := hook(id, body(date))
		b.refused(t, id, a, before, http.StatusBadRequest, "")
		// The documented shape (openapi.json Error): one "error" object
		// with code, reason, args, message and details, nothing else.
		var raw map[string]map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &raw); err != nil || len(raw) != 1 || raw["error"] == nil {
			t.Fatalf("%s: not the error shape: %s", id, a.body)
		}
		for k := range raw["error"] {
			if !slices.Contains([]string{"code", "reason", "args", "message", "details"}, k) {
				t.Fatalf("%s: error has %q, which the document does not allow: %s", id, k, a.body)
			}
		}
		e := a.apiError(t)
		args, _ := e.Details["reason_args"].(map[string]any)
		if e.Code != CodeInvalid || e.Reason != "invalid" || e.Args == nil || !strings.Contains(e.Message, "replay") ||
			e.Details["reason_code"] != pullrequests.WhyStale || args["max_age"] != "15m0s" || args["date"] == "" {
			t.Fatalf("%s: %s, want 400 invalid naming stale_delivery {date, max_age 15m0s}", id, a.body)
		}
	}

	// The log: the PR's stream was never written.
	prEvents := func() []events.RecordedEvent {
		evs, err := b.store.ReadStream(context.Background(), events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, 7), 0, 100, events.Forward)
		if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatal(err)
		}
		return evs
	}
	if evs := prEvents(); len(evs) != 0 {
		t.Fatalf("stale deliveries wrote the PR's stream: %+v", evs)
	}

	var rec struct {
		Deliveries []struct {
			RequestID  string            `json:"request_id"`
			Result     string            `json:"result"`
			ReasonCode string            `json:"reason_code"`
			ReasonArgs map[string]string `json:"reason_args"`
		} `json:"deliveries"`
	}
	b.do(t, "GET", "/api/hooks/bitbucket/deliveries", nil).decode(t, &rec)
	if len(rec.Deliveries) != 2 {
		t.Fatalf("deliveries %+v, want the two stale ones", rec.Deliveries)
	}
	for i, d := range rec.Deliveries {
		if want := fmt.Sprintf("stale-%d", 1-i); d.RequestID != want || d.Result != "refused" || d.ReasonCode != pullrequests.WhyStale || d.ReasonArgs["max_age"] != "15m0s" {
			t.Fatalf("delivery %d %+v, want %s refused as %s", i, d, want, pullrequests.WhyStale)
		}
	}

	// The same PR dated now: accepted, one event on its stream.
	if a := hook("fresh", body(time.Now())); a.status != http.StatusAccepted {
		t.Fatalf("fresh: %d %s", a.status, a.body)
	}
	if after := b.head(t); after == before {
		t.Fatal("the fresh delivery appended nothing")
	}
	if evs := prEvents(); len(evs) != 1 || evs[0].Type != "PRChanged" || evs[0].Meta.CorrelationID != "fresh" {
		t.Fatalf("the PR's stream holds %+v, want the fresh delivery's PRChanged only", evs)
	}
}
