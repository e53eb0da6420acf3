package jobs_test

import (
	"context"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// readModel rebuilds the memory read model from the world's log.
func (w *world) readModel() *memory.Store {
	w.t.Helper()
	rm := memory.New(w.store)
	if _, err := projections.Replay(context.Background(), w.store, rm, 0, 0); err != nil {
		w.t.Fatal(err)
	}
	return rm
}

func remainingOf(t *testing.T, rm *memory.Store, slot string) map[string]projections.RemainingResource {
	t.Helper()
	all, err := rm.RemainingResources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]projections.RemainingResource{}
	for _, r := range all {
		if r.Slot == slot {
			out[r.Resource.Kind+":"+r.Resource.ID] = r
		}
	}
	return out
}

// Issue 12 item 10: the env vars and volumes a reset lists are the slot's
// resources (and in /api/resources/remaining) until their deletion is
// confirmed; a job stopped half way leaves them visible, not forgotten.
func TestListedEnvVarsAndVolumesStayTrackedUntilConfirmed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx := context.Background()
	fx := w.seed("tr1")
	w.occupy("tr1")
	var vols []sim.Storage
	for _, s := range w.sim.Storages(fx.AppUUID) {
		if s.Kind == "persistent" {
			vols = append(vols, s)
		}
	}
	envs := w.sim.Envs(fx.AppUUID)
	if len(vols) == 0 || len(envs) == 0 {
		t.Fatalf("the fixture has %d env vars and %d persistent volumes; the test needs both", len(envs), len(vols))
	}
	// Deleting a volume is refused: the step fails after listing them.
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteStorage, Status: 403})
	res, err := w.svc.Release(ctx, bob, "tr1")
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	assertEq(t, "status", j.Status, events.StatusFailed)

	rem := remainingOf(t, w.readModel(), "tr1")
	for _, v := range vols {
		r, ok := rem[events.ResVolume+":"+v.UUID]
		if !ok {
			t.Fatalf("volume %s (%s) is not a remaining resource of the slot: %v", v.Name, v.UUID, rem)
		}
		if r.JobID != res.JobID || r.Resource.Name != v.Name || r.DeleteAcceptedAt != nil {
			t.Errorf("volume row %+v", r)
		}
	}
	for k := range rem {
		if k[:len(events.ResEnvVar)] == events.ResEnvVar {
			t.Errorf("env var %s is still listed after EnvVarsDeleted confirmed them", k)
		}
	}

	// Resumed without the fault, the job confirms the volumes gone.
	w.sim.ClearFaults()
	if _, err := w.svc.Resume(ctx, bob, res.JobID); err != nil {
		t.Fatal(err)
	}
	j = w.waitEndedN(res.JobID, 2)
	assertEq(t, "status after resume", j.Status, events.StatusSucceeded)
	rem = remainingOf(t, w.readModel(), "tr1")
	for k := range rem {
		if k[:len(events.ResVolume)] == events.ResVolume || k[:len(events.ResEnvVar)] == events.ResEnvVar {
			t.Errorf("%s is still listed after the reset succeeded", k)
		}
	}
	var listed int
	for _, ev := range w.jobEvents(res.JobID) {
		if ev.Type == "ResourcesListed" {
			listed++
		}
	}
	if listed < 3 { // env vars and volumes, then the volumes again
		t.Errorf("%d ResourcesListed events: %s", listed, types(w.jobEvents(res.JobID)))
	}
}

// Issue 12 item 10: a delete the provider accepted (Coolify queued it) but
// nobody confirmed is recorded (DeleteAccepted) and shows "deleting
// (accepted at …)"; one the provider refused shows nothing of the kind.
func TestAcceptedButUnconfirmedDeleteIsRecorded(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx := context.Background()

	// Refused: the delete itself answers 403. Never accepted.
	w.seed("ac1")
	w.occupy("ac1")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteDatabase, Status: 403, Times: 1})
	res1, err := w.svc.Release(ctx, bob, "ac1")
	if err != nil {
		t.Fatal(err)
	}
	assertEq(t, "refused job", w.waitEnded(res1.JobID).Status, events.StatusFailed)

	// Accepted: the delete is queued, then the confirming GET is refused.
	fx := w.seed("ac2")
	w.occupy("ac2")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointGetDatabase, Status: 403, Resource: fx.DBUUID})
	res2, err := w.svc.Release(ctx, bob, "ac2")
	if err != nil {
		t.Fatal(err)
	}
	assertEq(t, "unconfirmed job", w.waitEnded(res2.JobID).Status, events.StatusFailed)

	for _, ev := range w.jobEvents(res1.JobID) {
		if ev.Type == "DeleteAccepted" {
			t.Fatalf("a refused delete was recorded as accepted: %s", history(w.jobEvents(res1.JobID)))
		}
	}
	var accepted events.RecordedEvent
	for _, ev := range w.jobEvents(res2.JobID) {
		if ev.Type == "DeleteAccepted" {
			accepted = ev
		}
	}
	if accepted.Type == "" {
		t.Fatalf("no DeleteAccepted: %s", history(w.jobEvents(res2.JobID)))
	}

	rm := w.readModel()
	r1 := remainingOf(t, rm, "ac1")[events.ResDatabase+":"+w.slot("ac1").Reg.DBUUID]
	if r1.Resource.ID == "" || r1.DeleteAcceptedAt != nil {
		t.Errorf("refused delete: row %+v", r1)
	}
	r2 := remainingOf(t, rm, "ac2")[events.ResDatabase+":"+fx.DBUUID]
	if r2.Resource.ID == "" || r2.DeleteAcceptedAt == nil || !r2.DeleteAcceptedAt.Equal(accepted.Meta.Time) {
		t.Errorf("accepted delete: row %+v, accepted at %s", r2, accepted.Meta.Time)
	}
	v, err := rm.Slot(ctx, "ac2")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Deleting) != 1 || v.Deleting[0].ID != fx.DBUUID || v.Deleting[0].JobID != res2.JobID {
		t.Errorf("slot deleting = %+v", v.Deleting)
	}
}
