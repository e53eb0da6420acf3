package main

import (
	"context"
	"encoding/json"
	"testing"

	sse "github.com/r3labs/sse/v2"

	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// waitChange reads frames until cond holds for a change.
func waitChange(t *testing.T, frames chan *sse.Event, cond func(projections.Change) bool) projections.Change {
	t.Helper()
	for {
		ev := next(t, frames)
		if string(ev.Event) != "change" {
			continue
		}
		var ch projections.Change
		if err := json.Unmarshal(ev.Data, &ch); err != nil {
			t.Fatal(err)
		}
		if cond(ch) {
			return ch
		}
	}
}

// reconcileNow asks for a run and waits for its end on the live stream.
func reconcileNow(t *testing.T, s *server, frames chan *sse.Event) {
	t.Helper()
	if code := s.call(t, "POST", "/api/reconcile/run", nil, nil); code != 202 {
		t.Fatalf("reconcile run: %d", code)
	}
	waitChange(t, frames, func(ch projections.Change) bool {
		return ch.Audit != nil && ch.Audit.Stream == events.ReconcileStream && ch.Audit.Type == "ReconcileFinished"
	})
}

type adoptRefusal struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

// TestAdoptOrphanOverHTTP: an application created outside Slotkeeper in a
// demo slot's project is found as an orphan and adopted into that slot
// through the API, and an orphan repository is deleted, end to end against
// the simulators; the next run shows both resolved. Adopting before any run
// found it (a stale finding), into a retired slot, or again once a slot
// tracks it, and deleting a tracked resource, are 409s with the reason that
// append nothing.
func TestAdoptOrphanOverHTTP(t *testing.T) {
	s := startServe(t, t.TempDir(), "127.0.0.1:0", "--reconcile-every", "0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	frames := follow(ctx, t, s)
	if ev := next(t, frames); string(ev.Event) != "snapshot" {
		t.Fatalf("first frame %s", ev.Event)
	}
	var cedar projections.SlotView
	if code := s.call(t, "GET", "/api/slots/cedar", nil, &cedar); code != 200 {
		t.Fatalf("slot: %d", code)
	}
	var made struct{ Kind, ID string }
	if code := s.call(t, "POST", "/api/sim/resources", map[string]string{"kind": "application", "project": cedar.ProjectUUID, "name": "stray-app"}, &made); code != 201 {
		t.Fatalf("sim resource: %d", code)
	}
	body := map[string]string{"slot": "cedar", "provider": "coolify", "kind": "application", "id": made.ID}
	var refusedOn func(what, route, slot, id, reason string)

	refused := func(what, slot, reason string) {
		t.Helper()
		refusedOn(what, "/api/reconcile/adopt", slot, made.ID, reason)
	}
	refusedOn = func(what, route, slot, id, reason string) {
		t.Helper()
		var before projections.SlotView
		s.call(t, "GET", "/api/slots/"+slot, nil, &before)
		b := map[string]string{"slot": slot, "provider": "coolify", "kind": "application", "id": id}
		var e adoptRefusal
		if code := s.call(t, "POST", route, b, &e); code != 409 || e.Error.Details["reason"] != reason && reason != "" {
			t.Fatalf("%s: %d %+v", what, code, e)
		}
		var after projections.SlotView
		s.call(t, "GET", "/api/slots/"+slot, nil, &after)
		if after.Revision != before.Revision || after.Position != before.Position {
			t.Fatalf("%s appended to slot %s: revision %d → %d", what, slot, before.Revision, after.Revision)
		}
	}
	refused("a finding no run has made", "cedar", "stale_finding")

	reconcileNow(t, s, frames)
	var plan struct {
		slots.Plan
		Finding events.ReconcileFinding `json:"finding"`
	}
	if code := s.call(t, "GET", "/api/reconcile/adopt/plan?slot=cedar&provider=coolify&kind=application&id="+made.ID, nil, &plan); code != 200 ||
		plan.Kind != events.KindAdopt || plan.Finding.Class != events.FindingOrphan || len(plan.Resources) != 1 || plan.Resources[0].ID != made.ID {
		t.Fatalf("plan: %d %+v", code, plan)
	}

	// A retired slot takes nothing in.
	var td slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/slots/glacier/teardown", nil, &td); code != 202 {
		t.Fatalf("teardown: %d", code)
	}
	waitChange(t, frames, func(ch projections.Change) bool {
		return ch.Slot != nil && ch.Slot.Name == "glacier" && ch.Slot.Lifecycle == projections.LifecycleRetired
	})
	refused("adopt into a retired slot", "glacier", "")

	var res slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/reconcile/adopt", body, &res); code != 202 || res.Kind != events.KindAdopt {
		t.Fatalf("adopt: %d %+v", code, res)
	}
	ch := waitChange(t, frames, func(ch projections.Change) bool {
		return ch.Job != nil && ch.Job.ID == res.JobID && ch.Job.State != projections.JobQueued && ch.Job.State != projections.JobRunning
	})
	if ch.Job.State != projections.JobSucceeded {
		t.Fatalf("adopt job: %+v", ch.Job)
	}
	waitChange(t, frames, func(ch projections.Change) bool {
		if ch.Slot == nil || ch.Slot.Name != "cedar" {
			return false
		}
		for _, r := range ch.Slot.Resources {
			if r.ID == made.ID {
				return true
			}
		}
		return false
	})
	refused("adopting what a slot now tracks", "cedar", "tracked")
	// Deleting a tracked resource this way is refused: the slot's own
	// application (never an orphan) and the one it just adopted.
	refusedOn("deleting a slot's own application", "/api/reconcile/delete", "cedar", cedar.AppUUID, "stale_finding")
	refusedOn("deleting what a slot now tracks", "/api/reconcile/delete", "cedar", made.ID, "tracked")

	// Delete an orphan repository: charged to cedar, confirmed gone.
	var stray struct{ Kind, ID string }
	if code := s.call(t, "POST", "/api/sim/resources", map[string]string{"kind": "repository", "project": "SLOT", "name": "stray-repo"}, &stray); code != 201 {
		t.Fatalf("sim resource: %d", code)
	}
	reconcileNow(t, s, frames) // also the first run since the adopt
	if f := findingOf(t, s, made.ID); f.Class != events.FindingResolved {
		t.Fatalf("the adopted orphan after the next run: %+v", f)
	}
	if f := findingOf(t, s, stray.ID); f.Class != events.FindingOrphan {
		t.Fatalf("the stray repository: %+v", f)
	}
	var del slots.JobAcceptedResult
	if code := s.call(t, "POST", "/api/reconcile/delete", map[string]string{"slot": "cedar", "provider": "bitbucket", "kind": "repository", "id": stray.ID}, &del); code != 202 || del.Kind != events.KindDeleteOrphan {
		t.Fatalf("delete: %d %+v", code, del)
	}
	ch = waitChange(t, frames, func(ch projections.Change) bool {
		return ch.Job != nil && ch.Job.ID == del.JobID && ch.Job.State != projections.JobQueued && ch.Job.State != projections.JobRunning
	})
	if ch.Job.State != projections.JobSucceeded {
		t.Fatalf("delete job: %+v", ch.Job)
	}

	reconcileNow(t, s, frames)
	if f := findingOf(t, s, stray.ID); f.Class != events.FindingResolved {
		t.Fatalf("the deleted orphan after the next run: %+v", f)
	}
	var rep struct {
		Links map[string]string `json:"links"`
	}
	s.call(t, "GET", "/api/reconcile", nil, &rep)
	if rep.Links["coolify"] == "" || rep.Links["bitbucket"] == "" {
		t.Fatalf("links: %+v", rep.Links)
	}
}

// findingOf is the latest report's finding about id (zero if none).
func findingOf(t *testing.T, s *server, id string) events.ReconcileFinding {
	t.Helper()
	var rep struct {
		Findings []events.ReconcileFinding `json:"findings"`
	}
	if code := s.call(t, "GET", "/api/reconcile", nil, &rep); code != 200 {
		t.Fatalf("GET /api/reconcile: %d", code)
	}
	for _, f := range rep.Findings {
		if f.ID == id {
			return f
		}
	}
	return events.ReconcileFinding{}
}
