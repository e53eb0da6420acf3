package jobs_test

import (
	"context"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestResetLeavesDockerVolumeNamed: Coolify's storage delete removes only
// the mount definition; the reset records exactly that, names the Docker
// volume left on the server with its clean-up, and never writes
// VolumeDeleted (issue 22 item 3).
func TestResetLeavesDockerVolumeNamed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seed("vol")
	w.occupy("vol")
	w.startEngine(w.engineConfig())
	before := w.sim.DockerVolumes()
	if len(before) != 1 {
		t.Fatalf("seeded docker volumes %+v", before)
	}
	vol := before[0].Name
	res := startJob(t, w, events.KindReset, "vol")
	if j := w.waitEnded(res.JobID); j.Status != events.StatusSucceeded {
		t.Fatalf("reset %s: %s", j.Status, j.LastError)
	}
	var removed *events.VolumeMountsRemoved
	for _, ev := range w.jobEvents(res.JobID) {
		if ev.Type == "VolumeDeleted" {
			t.Fatalf("VolumeDeleted recorded although the volume's data is still on the server: %s", ev.Data)
		}
		if ev.Type == "VolumeMountsRemoved" {
			p, err := events.Decode(ev)
			if err != nil {
				t.Fatal(err)
			}
			e := p.(events.VolumeMountsRemoved)
			removed = &e
		}
	}
	if removed == nil || len(removed.Left) != 1 || removed.Left[0].Volume != vol || removed.Left[0].Cleanup != "docker volume rm "+vol ||
		!strings.Contains(removed.Left[0].Server, fx.AppUUID) {
		t.Fatalf("VolumeMountsRemoved %+v, want the volume %s left with its clean-up", removed, vol)
	}
	if !w.sim.HasDockerVolume(vol) || w.sim.HasStorage(fx.StorageUUIDs[0]) {
		t.Fatalf("sim: docker volume kept %v (want true), mount row kept %v (want false)", w.sim.HasDockerVolume(vol), w.sim.HasStorage(fx.StorageUUIDs[0]))
	}
	// The read model keeps the left volume among the slot's remaining
	// resources, with its clean-up; the mount definition is gone from it.
	rm := w.readModel()
	rem := remainingOf(t, rm, "vol")
	r, ok := rem[events.ResDockerVolume+":"+vol]
	if !ok || !strings.Contains(r.Cleanup, "docker volume rm "+vol) || !strings.Contains(r.Cleanup, fx.AppUUID) {
		t.Fatalf("remaining %v: want docker_volume:%s with its clean-up", rem, vol)
	}
	for k := range rem {
		if strings.HasPrefix(k, events.ResVolume+":") {
			t.Errorf("%s still listed after its mount definition was removed", k)
		}
	}
	jv, err := rm.Job(context.Background(), res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range jv.Steps {
		if s.Name == events.StepDeleteVolumes && (len(s.Left) != 1 || !strings.Contains(s.Detail, "left on the server")) {
			t.Errorf("job page step %+v: want the volume named as left on the server", s)
		}
		if s.Name == events.StepDeleteDB && !strings.Contains(s.Detail, "does not prove the server cleaned up") {
			t.Errorf("job page delete_db detail %q does not say what the 404 proves", s.Detail)
		}
	}
}

// TestComposeStorageFailsOnce: a read-only (compose) storage answers 422;
// the reset fails at once with what to do, without retrying the delete.
func TestComposeStorageFailsOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, nil)
	fx := w.seed("compose")
	w.occupy("compose")
	if err := w.sim.SetAppBuildPack(fx.AppUUID, "dockercompose"); err != nil {
		t.Fatal(err)
	}
	w.startEngine(w.engineConfig())
	res := startJob(t, w, events.KindReset, "compose")
	j := w.waitEnded(res.JobID)
	if j.Status != events.StatusFailed || !strings.Contains(j.LastError, "read-only") {
		t.Fatalf("reset %s: %q", j.Status, j.LastError)
	}
	n := 0
	for _, r := range w.sim.Requests() {
		if r.Endpoint == sim.EndpointDeleteStorage {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d storage deletes, want 1 (a 422 is no reason to retry)", n)
	}
	if !w.sim.HasStorage(fx.StorageUUIDs[0]) {
		t.Fatal("storage gone")
	}
}
