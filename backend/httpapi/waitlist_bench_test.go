package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
)

// BenchmarkWaitlistHandOver: 1,000 people wait and 100 slots cycle. Each
// cycle records a reset's success on one slot (SlotVacated + JobReleased
// {succeeded}, one append) and measures, on a live SSE stream of the real
// server, (a) when that change arrives — the plain SSE change latency — and
// (b) when the OfferMade change for that slot arrives: the time from the
// reset's success to the offer on the waiting person's stream. The offered
// person accepts and joins again, so the queue stays at 1,000.
// scripts/bench/waitlist.sh prints p50/p99 of both and their ratio.
func BenchmarkWaitlistHandOver(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newBenchPipeline(ctx)
	log, store, rm, runner, hub := p.log, p.store, p.rm, p.runner, p.hub
	svc := slots.NewService(store, slots.Config{Logger: log})
	wl := waitlist.New(store, svc, waitlist.Config{OfferTTL: time.Hour, WarnLeads: []time.Duration{}, Logger: log})
	go func() { _ = wl.Run(ctx) }()
	s, err := New(Deps{Commands: svc, Reads: rm, Log: store, Waiter: runner, Hub: hub, Logger: log, Waitlist: wl,
		Ready: func(context.Context) error { return nil }, CommandsPerSecond: -1, NoAuth: true})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer cancel()

	const nSlots, nWait = 100, 1000
	admin := slots.Actor{Name: "admin", ID: "user:admin"}
	until := time.Now().Add(24 * time.Hour)
	for i := 0; i < nSlots; i++ {
		n := fmt.Sprintf("s%03d", i)
		if err := svc.Register(ctx, admin, slots.RegisterCmd{Name: n, ProjectUUID: "p" + n, AppUUID: "a" + n, DBUUID: "d" + n,
			Repo: events.RepoRef{Project: "SLOT", Slug: n}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "t"}, TemplateRef: "main"}); err != nil {
			b.Fatal(err)
		}
		if err := svc.Occupy(ctx, admin, n, slots.OccupyCmd{Until: until}); err != nil {
			b.Fatal(err)
		}
	}
	person := func(i int) slots.Actor {
		return slots.Actor{Name: fmt.Sprintf("p%04d", i), ID: fmt.Sprintf("user:p%04d", i)}
	}
	for i := 0; i < nWait; i++ {
		if _, _, err := wl.Join(ctx, person(i), waitlist.JoinCmd{Duration: "1h"}); err != nil {
			b.Fatal(err)
		}
	}

	// The waiting person's stream.
	type frame struct {
		typ, slot string
		at        time.Time
	}
	frames := make(chan frame, 4096)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/stream", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		ev := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev = line[len("event: "):]
			case strings.HasPrefix(line, "data: ") && ev == "change":
				at := time.Now()
				var c struct {
					Audit *struct{ Type, Slot string } `json:"audit"`
				}
				if json.Unmarshal([]byte(line[len("data: "):]), &c) == nil && c.Audit != nil {
					frames <- frame{c.Audit.Type, c.Audit.Slot, at}
				}
			}
		}
	}()

	var plain, offer []time.Duration
	job := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		slot := fmt.Sprintf("s%03d", i%nSlots)
		st, err := slots.LoadSlot(ctx, store, slot)
		if err != nil {
			b.Fatal(err)
		}
		job++
		id := fmt.Sprintf("job-%d", job)
		m := events.Metadata{Actor: "worker:bench"}
		if _, err := store.Append(ctx, events.SlotStream(slot), events.Exact(st.Revision), events.New(events.JobAccepted{Slot: slot, JobID: id, Kind: events.KindReset}, m)); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, err := store.Append(ctx, events.SlotStream(slot), events.Exact(st.Revision+1),
			events.New(events.SlotVacated{Slot: slot, JobID: id}, m), events.New(events.JobReleased{Slot: slot, JobID: id, Outcome: "succeeded"}, m)); err != nil {
			b.Fatal(err)
		}
		var gotPlain, gotOffer bool
		deadline := time.After(10 * time.Second)
		for !gotPlain || !gotOffer {
			select {
			case f := <-frames:
				if f.slot != slot {
					continue
				}
				if f.typ == "JobReleased" && !gotPlain {
					plain, gotPlain = append(plain, f.at.Sub(t0)), true
				}
				if f.typ == "OfferMade" && !gotOffer {
					offer, gotOffer = append(offer, f.at.Sub(t0)), true
				}
			case <-deadline:
				b.Fatalf("cycle %d: no offer of %s on the stream within 10 s", i, slot)
			}
		}
		// The offered person accepts (occupies) and joins again.
		b.StopTimer()
		// The stream and the waitlist are separate consumers of the log.
		if head, err := store.Head(ctx); err != nil || wl.WaitFor(ctx, head) != nil {
			b.Fatal("waitlist did not catch up", err)
		}
		v := wl.View(ctx)
		var e *waitlist.EntryView
		for k := range v.Entries {
			if v.Entries[k].Offer != nil && v.Entries[k].Offer.Slot == slot {
				e = &v.Entries[k]
			}
		}
		if e == nil {
			b.Fatalf("no entry holds the offer of %s", slot)
		}
		who := slots.Actor{Name: e.Who, ID: e.WhoID}
		if _, _, err := wl.Accept(ctx, who, e.ID); err != nil {
			b.Fatal(err)
		}
		if _, _, err := wl.Join(ctx, who, waitlist.JoinCmd{Duration: "1h"}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	q := func(ds []time.Duration, p float64) time.Duration {
		d := slices.Clone(ds)
		slices.Sort(d)
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	if len(offer) > 0 {
		b.ReportMetric(float64(q(offer, 0.5).Microseconds()), "offer-p50-µs")
		b.ReportMetric(float64(q(offer, 0.99).Microseconds()), "offer-p99-µs")
		b.ReportMetric(float64(q(plain, 0.5).Microseconds()), "sse-p50-µs")
		b.ReportMetric(float64(q(plain, 0.99).Microseconds()), "sse-p99-µs")
		b.ReportMetric(float64(q(offer, 0.99))/float64(max(q(plain, 0.99), 1)), "p99-ratio")
	}
}
