package pullrequests_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestReplayedDeliveryWithANewRequestID (fifth attack pass): X-Request-Id
// is not covered by the signature, so anyone who saw two signed deliveries
// of one PR (a proxy's log, Bitbucket's webhook history page) could send
// them again and again, each under a fresh request id, and the PR went back
// and forth between the two heads: one PRChanged and one pr_deploy job per
// replay, without bound. A signed body received once is the same delivery
// whatever request id it comes under: duplicate, nothing appended.
func TestReplayedDeliveryWithANewRequestID(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "rp1")
	d1, err := w.sim.OpenPR("APPS", "shop", "feature/replay")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(d1, secret); out.Result != "accepted" {
		t.Fatalf("open: %+v", out)
	}
	d2, err := w.sim.PushPR("APPS", "shop", d1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(d2, secret); out.Result != "accepted" {
		t.Fatalf("push: %+v", out)
	}
	stream := events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, d1.ID)
	changed := func() int {
		evs, err := w.store.ReadStream(context.Background(), stream, 0, 0, events.Forward)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ev := range evs {
			if ev.Type == "PRChanged" {
				n++
			}
		}
		return n
	}
	before := changed()
	for i := range 6 {
		d := d1
		if i%2 == 1 {
			d = d2
		}
		h := http.Header{}
		h.Set(pullrequests.HeaderEventKey, d.EventKey)
		h.Set(pullrequests.HeaderRequestID, fmt.Sprintf("replay-%d", i))
		h.Set(pullrequests.HeaderSignature, webhook.Sign(secret, d.Payload))
		out, err := w.pr.Receive(context.Background(), h, d.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if out.Result != "duplicate" || out.Code != pullrequests.WhySeen || out.Args["request"] != d.RequestID {
			t.Errorf("replay %d of %s under a new request id: %+v, want duplicate of request %s", i, d.RequestID, out, d.RequestID)
		}
	}
	if after := changed(); after != before {
		t.Fatalf("replays appended %d PRChanged\n%s", after-before, w.history(stream))
	}
}

// TestForgedDeliveriesDoNotHideRealOnes (fifth attack pass): the admin
// page's list of deliveries kept the last 200 of any kind, so 200 unsigned
// posts from anyone pushed every real delivery out of it (and out of the
// only record of refused ones). Unverified deliveries now keep at most
// unverifiedMax places; verified ones are pushed out only by verified ones.
func TestForgedDeliveriesDoNotHideRealOnes(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "rp2")
	d, err := w.sim.OpenPR("APPS", "shop", "feature/hidden")
	if err != nil {
		t.Fatal(err)
	}
	if out := w.deliver(d, secret); out.Result != "accepted" {
		t.Fatalf("open: %+v", out)
	}
	for i := range 1000 {
		f := d
		f.RequestID = fmt.Sprintf("forged-%d", i)
		key := ""
		if i%2 == 1 {
			key = "guess"
		}
		if out := w.deliver(f, key); out.Result != "refused" {
			t.Fatalf("forged %d: %+v", i, out)
		}
	}
	f := d
	f.RequestID, f.EventKey = "forged-odd-key", "pr:opened\u202e<img src=x onerror=alert(1)>"
	w.deliver(f, "")
	if r := w.pr.Recent()[0]; r.RequestID != f.RequestID || r.EventKey != "" {
		t.Fatalf("a forged delivery's odd event key is listed as %q, want none", r.EventKey)
	}
	recent := w.pr.Recent()
	refused, found := 0, false
	for _, r := range recent {
		switch {
		case r.Result == "refused":
			refused++
		case r.RequestID == d.RequestID:
			found = true
		}
	}
	if !found || refused > 50 || recent[0].RequestID != "forged-odd-key" {
		t.Fatalf("after 1,000 forged deliveries: the real one listed %v, %d refused listed (want at most 50), newest %q", found, refused, recent[0].RequestID)
	}
}
