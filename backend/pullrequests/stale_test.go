package pullrequests_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// freshness is a flow on a fake clock without a driver: what Receive
// appends is all there is to see.
type freshness struct {
	t     *testing.T
	clk   *clock.Fake
	store events.Store
	pr    *pullrequests.Service
}

func newFreshness(t *testing.T, maxAge time.Duration) *freshness {
	t.Helper()
	ms := memstore.New()
	t.Cleanup(func() { ms.Close() })
	clk := clock.NewFake(time.Date(2026, 12, 8, 1, 0, 0, 0, time.UTC))
	f := &freshness{t: t, clk: clk, store: ms, pr: pullrequests.New(ms, slots.NewService(ms, slots.Config{Logger: quiet}),
		pullrequests.Config{Secret: secret, Clock: clk, MaxDeliveryAge: maxAge, Logger: quiet})}
	if _, err := f.pr.Link(context.Background(), slots.Actor{Name: "admin", ID: "user:admin"}, "APPS/shop"); err != nil {
		t.Fatal(err)
	}
	return f
}

// body is a signed pr:opened payload of PR id dated date ("" leaves the
// date out), as Bitbucket Data Center sends it (Event payload page).
func prBody(id int64, date string) []byte {
	repo := map[string]any{"slug": "shop", "project": map[string]any{"key": "APPS"}}
	p := map[string]any{"eventKey": "pr:opened", "pullRequest": map[string]any{
		"id": id, "title": "t", "state": "OPEN",
		"author":  map[string]any{"user": map[string]any{"displayName": "Dana", "slug": "dana"}},
		"fromRef": map[string]any{"displayId": "feature/x", "latestCommit": strings.Repeat("a", 40), "repository": repo},
		"toRef":   map[string]any{"displayId": "main", "repository": repo},
	}}
	if date != "" {
		p["date"] = date
	}
	b, _ := json.Marshal(p)
	return b
}

func (f *freshness) send(requestID string, body []byte) pullrequests.Outcome {
	f.t.Helper()
	h := http.Header{}
	h.Set(pullrequests.HeaderEventKey, "pr:opened")
	h.Set(pullrequests.HeaderRequestID, requestID)
	h.Set(pullrequests.HeaderSignature, webhook.Sign(secret, body))
	out, err := f.pr.Receive(context.Background(), h, body)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *freshness) head() events.Position {
	f.t.Helper()
	p, err := f.store.Head(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// bitbucketDate is a time as Bitbucket writes a payload's date: ISO 8601
// with the offset without a colon, in the Bitbucket server's zone.
func bitbucketDate(t time.Time, zone *time.Location) string {
	return t.In(zone).Format("2006-01-02T15:04:05-0700")
}

// TestStaleSignedDeliveryIsRefused (sixth attack pass): a signed delivery
// captured elsewhere (a proxy's log, another environment sharing the
// secret) and never delivered here has a body this server's replay record
// does not know; it was accepted however old. A signed body dated more than
// MaxDeliveryAge from the server's clock, either way, is refused with 400
// (stale_delivery), appends nothing and is listed as refused; a fresh one,
// or one within the window of clock skew, is accepted; a retry of an
// accepted one is the duplicate it was before; a missing or garbled date is
// a malformed delivery.
func TestStaleSignedDeliveryIsRefused(t *testing.T) {
	f := newFreshness(t, 0) // the default window, 15 min
	seoul := time.FixedZone("KST", 9*3600)
	now := f.clk.Now()
	start := f.head()
	for _, c := range []struct {
		name string
		date string
	}{
		{"captured two hours ago", bitbucketDate(now.Add(-2*time.Hour), seoul)},
		{"captured a month ago", bitbucketDate(now.AddDate(0, -1, 0), time.UTC)},
		{"16 minutes old", bitbucketDate(now.Add(-16*time.Minute), seoul)},
		{"dated 16 minutes ahead", bitbucketDate(now.Add(16*time.Minute), seoul)},
	} {
		out := f.send("stale-"+strings.ReplaceAll(c.name, " ", "-"), prBody(1, c.date))
		if out.Status != http.StatusBadRequest || out.Result != "refused" || out.Code != pullrequests.WhyStale || out.Args["max_age"] != "15m0s" || out.Args["date"] == "" {
			t.Errorf("%s (%s): %+v, want 400 refused %s", c.name, c.date, out, pullrequests.WhyStale)
		}
	}
	if f.head() != start {
		t.Fatal("stale deliveries appended events")
	}
	if r := f.pr.Recent(); len(r) != 4 || r[0].Result != "refused" || r[0].ReasonCode != pullrequests.WhyStale || r[0].Repo != "APPS/shop" {
		t.Fatalf("deliveries list %+v, want the four refused as stale", r)
	}

	for _, c := range []struct {
		name string
		id   int64
		date string
	}{
		{"missing", 2, ""},
		{"not a time", 2, "yesterday"},
		{"no offset", 2, "2026-12-08T01:00:00"},
		{"a Unix time", 2, "1796000000"},
	} {
		out := f.send("bad-date-"+strings.ReplaceAll(c.name, " ", "-"), prBody(c.id, c.date))
		if out.Status != http.StatusBadRequest || out.Code != pullrequests.WhyMalformed || out.Args["field"] != "date" {
			t.Errorf("date %s (%q): %+v, want 400 malformed date", c.name, c.date, out)
		}
	}
	if f.head() != start {
		t.Fatal("deliveries with a bad date appended events")
	}

	// Fresh, and within the window of skew either way (Bitbucket's clock
	// behind or ahead of this one), in Bitbucket's form and in RFC 3339.
	changed := 0
	for i, date := range []string{
		bitbucketDate(now, seoul),
		bitbucketDate(now.Add(-14*time.Minute), seoul),
		bitbucketDate(now.Add(14*time.Minute), time.UTC),
		now.Add(-time.Minute).Format(time.RFC3339Nano),
		now.UTC().Format("2006-01-02T15:04:05.000Z"),
	} {
		id := int64(10 + i)
		if out := f.send(fmt.Sprintf("fresh-%d", i), prBody(id, date)); out.Status != http.StatusAccepted || out.Result != "accepted" {
			t.Errorf("dated %s: %+v, want accepted", date, out)
			continue
		}
		changed++
		evs, err := f.store.ReadStream(context.Background(), events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, id), 0, 0, events.Forward)
		if err != nil || len(evs) != 1 || evs[0].Type != "PRChanged" {
			t.Errorf("dated %s: the PR's stream is %v %v, want its PRChanged", date, evs, err)
		}
	}
	// A retry of the first (the same body and request id, as a sender
	// retries) ten seconds later is the duplicate it always was, not stale.
	f.clk.Advance(10 * time.Second)
	if out := f.send("fresh-0", prBody(10, bitbucketDate(now, seoul))); out.Result != "duplicate" || out.Code != pullrequests.WhySeen {
		t.Errorf("retry: %+v, want duplicate", out)
	}
	// The same accepted body replayed after the window: stale, refused
	// before the PR's record is read.
	f.clk.Advance(20 * time.Minute)
	if out := f.send("replay-later", prBody(10, bitbucketDate(now, seoul))); out.Code != pullrequests.WhyStale {
		t.Errorf("replay after the window: %+v, want %s", out, pullrequests.WhyStale)
	}
	if got := f.head() - start; int(got) != changed {
		t.Fatalf("%d events appended, want the %d fresh deliveries' PRChanged", got, changed)
	}
}

// A configured window: an hour. 50 minutes old is taken, 70 is not.
func TestDeliveryAgeIsConfigurable(t *testing.T) {
	f := newFreshness(t, time.Hour)
	now := f.clk.Now()
	if out := f.send("r-50", prBody(1, bitbucketDate(now.Add(-50*time.Minute), time.UTC))); out.Result != "accepted" {
		t.Errorf("50 minutes old with an hour's window: %+v", out)
	}
	if out := f.send("r-70", prBody(2, bitbucketDate(now.Add(-70*time.Minute), time.UTC))); out.Code != pullrequests.WhyStale || out.Args["max_age"] != "1h0m0s" {
		t.Errorf("70 minutes old with an hour's window: %+v", out)
	}
}

// Stale signed bodies are what a replayer sends, as often as they like
// from one captured body under fresh request ids: like unsigned ones they
// keep to their few places in the deliveries list and never push out a
// delivery that was accepted.
func TestStaleReplaysDoNotHideRealDeliveries(t *testing.T) {
	f := newFreshness(t, 0)
	if out := f.send("real", prBody(1, bitbucketDate(f.clk.Now(), time.UTC))); out.Result != "accepted" {
		t.Fatalf("real: %+v", out)
	}
	captured := prBody(2, bitbucketDate(f.clk.Now().Add(-3*time.Hour), time.UTC))
	for i := range 300 {
		f.send(fmt.Sprintf("replay-%d", i), captured)
	}
	found := false
	for _, r := range f.pr.Recent() {
		found = found || r.RequestID == "real"
	}
	if !found {
		t.Fatal("300 stale replays pushed the accepted delivery out of the list")
	}
}
