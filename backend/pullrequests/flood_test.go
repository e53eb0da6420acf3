package pullrequests_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestWebhookFlood: 1,000 forged deliveries (no signature, another key, a
// body changed after signing) append nothing; 1,000 copies of each real
// delivery (the open and one push), sent at once from 8 senders, some with
// new request ids, make one PRChanged per real change and one job per head.
func TestWebhookFlood(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "fl1")
	d, err := w.sim.OpenPR("APPS", "shop", "feature/flood")
	if err != nil {
		t.Fatal(err)
	}
	head, _ := w.store.Head(context.Background())
	send := func(i int, dv deliveryish) pullrequests.Outcome {
		h := http.Header{}
		h.Set(pullrequests.HeaderEventKey, dv.key)
		h.Set(pullrequests.HeaderRequestID, dv.id)
		h.Set(pullrequests.HeaderSignature, dv.sig)
		out, err := w.pr.Receive(context.Background(), h, dv.body)
		if err != nil {
			t.Error(err)
		}
		return out
	}
	forged := func(i int) deliveryish {
		f := deliveryish{key: d.EventKey, id: fmt.Sprintf("forged-%d", i), body: d.Payload}
		switch i % 3 {
		case 0: // unsigned
		case 1:
			f.sig = webhook.Sign(fmt.Sprintf("guess-%d", i), d.Payload)
		case 2:
			f.sig = webhook.Sign(secret, d.Payload)
			f.body = append([]byte(nil), d.Payload...)
			f.body[len(f.body)-2] ^= 1 // changed after signing
		}
		return f
	}
	flood := func(n int, mk func(int) deliveryish, want string) {
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < n; i += 8 {
					if out := send(i, mk(i)); want != "" && out.Result != want {
						t.Errorf("delivery %d: %+v, want %s", i, out, want)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	flood(1000, forged, "refused")
	if after, _ := w.store.Head(context.Background()); after != head {
		t.Fatal("forged deliveries appended events")
	}
	real := func(dv deliveryish) func(int) deliveryish {
		return func(i int) deliveryish {
			c := dv
			if i%2 == 1 {
				c.id = fmt.Sprintf("retry-%s-%d", dv.id, i) // Bitbucket's redelivery: a new request id
			}
			return c
		}
	}
	flood(1000, real(signed(d.EventKey, d.RequestID, d.Payload)), "")
	d2, err := w.sim.PushPR("APPS", "shop", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	flood(1000, real(signed(d2.EventKey, d2.RequestID, d2.Payload)), "")
	w.waitPR(d.ID, func(p events.Payload) bool { return ready(p) && p.(events.PRCommentPosted).Head == d2.Head })
	evs, err := w.store.ReadStream(context.Background(), events.PRStream(events.RepoRef{Project: "APPS", Slug: "shop"}, d.ID), 0, 0, events.Forward)
	if err != nil {
		t.Fatal(err)
	}
	changed, queued := 0, map[string]int{}
	for _, ev := range evs {
		p, _ := events.Decode(ev)
		switch e := p.(type) {
		case events.PRChanged:
			changed++
		case events.PRDeployQueued:
			queued[e.Head]++
		}
	}
	if changed != 2 || queued[d2.Head] != 1 || queued[d.Head] > 1 {
		t.Fatalf("PRChanged %d (want 2), jobs per head %v (one at most each, one for the last)", changed, queued)
	}
}

type deliveryish struct {
	key, id, sig string
	body         []byte
}

func signed(key, id string, body []byte) deliveryish {
	return deliveryish{key: key, id: id, sig: webhook.Sign(secret, body), body: body}
}
