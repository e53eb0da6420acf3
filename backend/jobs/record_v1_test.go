//go:build record

package jobs_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestRecordV1Log wrote testdata/v1log.ndjson with the engine and commands
// of the two-append acceptance (JobAccepted on the slot, then JobQueued on
// the job): a reset, a teardown, a promote, a cancel of a queued reset, a
// teardown that failed and was resumed to success, and a reset left queued.
// It is a recording tool, built only with -tags record:
//
//	go test -tags record -run TestRecordV1Log ./backend/jobs
func TestRecordV1Log(t *testing.T) {
	w := newWorld(t, nil)
	ctx := context.Background()
	w.startEngine(w.engineConfig())

	w.seed("v1-reset")
	w.occupy("v1-reset")
	res, err := w.svc.Release(ctx, bob, "v1-reset")
	must(t, err)
	w.waitEnded(res.JobID)

	w.seed("v1-teardown")
	res, err = w.svc.Teardown(ctx, bob, "v1-teardown")
	must(t, err)
	w.waitEnded(res.JobID)

	w.seed("v1-promote")
	res, err = w.svc.Promote(ctx, bob, "v1-promote", slots.PromoteCmd{Project: "PROMO", Name: "v1-copy"})
	must(t, err)
	w.waitEnded(res.JobID)

	// A second service with a long grace queues resets that wait.
	slow := slots.NewService(w.store, slots.Config{Grace: time.Hour, Logger: testLogger()})
	w.seed("v1-cancel")
	w.occupy("v1-cancel")
	res, err = slow.Release(ctx, bob, "v1-cancel")
	must(t, err)
	must(t, w.svc.Cancel(ctx, bob, res.JobID))
	w.waitEnded(res.JobID)

	fx := w.seed("v1-resume")
	fault := w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteApplication, Resource: fx.AppUUID, Status: 500})
	res, err = w.svc.Teardown(ctx, bob, "v1-resume")
	must(t, err)
	w.waitEnded(res.JobID)
	w.sim.RemoveFault(fault)
	_, err = w.svc.Resume(ctx, bob, res.JobID)
	must(t, err)
	w.waitEndedN(res.JobID, 2)

	w.seed("v1-open")
	w.occupy("v1-open")
	_, err = slow.Release(ctx, bob, "v1-open")
	must(t, err)

	head, err := w.store.Head(ctx)
	must(t, err)
	f, err := os.Create("testdata/v1log.ndjson")
	must(t, err)
	defer f.Close()
	enc := json.NewEncoder(f)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_ = w.store.SubscribeAll(rctx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		must(t, enc.Encode(ev))
		if ev.Position >= head {
			cancel()
		}
		return nil
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
