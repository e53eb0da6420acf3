package projections

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// ApplySlot folds one event into a slot's view: the slot-<name> stream's own
// events; the resources its jobs list (ResourcesListed) and the deletes the
// providers accepted (DeleteAccepted); and the confirmed deletions of its
// jobs (DBDeleted, AppDeleted, RepoDeleted, ProjectDeleted, EnvVarsDeleted,
// VolumeDeleted, VolumeMountsRemoved), which are the only way a resource id
// leaves Resources (VolumeMountsRemoved adds the Docker volumes it left as
// docker_volume resources, which no API deletes). Job progress reaches the slot
// through RefreshSlotJob. It is pure: v is never modified. Unknown event types
// leave v unchanged.
func ApplySlot(v SlotView, ev events.RecordedEvent, p events.Payload) SlotView {
	return applySlot(v, ev, p, false)
}

// applySlot is ApplySlot; with own, v's LatestJobs map belongs to the caller
// alone (see Ownership) and is changed in place instead of copied.
func applySlot(v SlotView, ev events.RecordedEvent, p events.Payload, own bool) SlotView {
	nv, changed := slotChange(v, ev, p, own)
	if !changed {
		return v
	}
	if strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) {
		nv.Revision = ev.Revision
	}
	nv.UpdatedAt = ev.Meta.Time
	nv.Position = ev.Position
	nv.Ready, nv.Missing, nv.MissingCode, nv.MissingArgs = readiness(nv)
	return nv
}

// slotChange is what one event changes in the slot's view, and whether it
// changed anything (an event that names the slot but changes nothing
// leaves its position and time as they were).
func slotChange(v SlotView, ev events.RecordedEvent, p events.Payload, own bool) (SlotView, bool) {
	t := ev.Meta.Time
	switch e := p.(type) {
	case events.SlotRegistered:
		return registeredSlot(ev, e), true
	case events.SlotOccupied:
		v.Occupant, v.OccupantID, v.OccupiedAt, v.Deadline = e.By, e.ByID, timePtr(t), timePtr(e.Until)
		if v.ActiveJob == nil && v.Lifecycle == LifecycleVacant {
			v.Lifecycle = LifecycleOccupied
		}
		v.setReason("", nil)
	case events.OccupancyExtended:
		v.Deadline = timePtr(e.Until)
	case events.JobAccepted:
		return jobAccepted(v, e, own), true
	case events.JobReleased:
		if v.ActiveJob != nil && v.ActiveJob.ID == e.JobID {
			v.ActiveJob = nil
		}
		if v.ActiveJob == nil {
			v.Lifecycle = restingLifecycle(v)
		}
		v.setReason("", nil)
		if e.Outcome != JobSucceeded {
			// RefreshSlotJob fills in the steps from the job's view.
			v.Recovery = &Recovery{JobID: e.JobID, State: e.Outcome, CompletedSteps: []string{}, Remaining: []events.Resource{}}
			v.setReason(ReasonLastJob, map[string]string{"outcome": e.Outcome})
		}
	case events.SlotVacated:
		v.Occupant, v.OccupantID, v.OccupiedAt, v.Deadline = "", "", nil, nil
		v.PullRequest = nil
	case events.PRSlotTaken:
		if e.PR == nil {
			return v, false // recorded before PRSlotTaken carried the PR
		}
		v.PullRequest = &SlotPR{Repo: e.PR.Repo, ID: e.PR.ID, Title: e.PR.Title, Author: e.PR.Author,
			Branch: e.PR.Branch, Link: e.PR.Link, Head: e.PR.Head}
	case events.PRDeployQueued:
		if v.PullRequest == nil {
			return v, false
		}
		pr := *v.PullRequest
		pr.Head, pr.JobID = e.Head, e.JobID
		v.PullRequest = &pr
	case events.TeardownIncomplete:
		v.Lifecycle = LifecycleIncomplete
		v.Resources = addMissing(v.Resources, e.Remaining)
		v.setReason(ReasonTeardownUnconfirmed, nil)
	case events.SlotRetired:
		v.Lifecycle = LifecycleRetired
		v.Occupant, v.OccupantID, v.OccupiedAt, v.Deadline = "", "", nil, nil
		v.PullRequest = nil
		v.setReason("", nil)
	case events.SlotPromoted:
		v.PromotedTo = append(slices.Clip(v.PromotedTo), e.NewRepo)
	case events.SlotDatabaseChanged:
		v.DBUUID = e.DBUUID
		v.Resources = addMissing(v.Resources, []events.Resource{{Kind: events.ResDatabase, ID: e.DBUUID}})
	case events.AppDeployed:
		v.Deployed = &Deployed{FQDN: e.FQDN, Status: e.Status, NoHealthCheck: e.NoHealthCheck || e.Status == "running:unknown", Commit: e.Commit, JobID: e.JobID, DeployedAt: t}
	case events.DBCreated, events.VolumesCreated, events.ResourcesListed, events.DeleteAccepted:
		return resourcesFound(v, p, t)
	default:
		return resourcesGone(v, p)
	}
	return v, true
}

// registeredSlot is a slot's view as its registration makes it.
func registeredSlot(ev events.RecordedEvent, e events.SlotRegistered) SlotView {
	name := e.Slot
	if name == "" {
		name = strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
	}
	branch := e.Branch
	if branch == "" {
		branch = "main"
	}
	v := SlotView{
		Name: name, Lifecycle: LifecycleVacant,
		ProjectUUID: e.ProjectUUID, AppUUID: e.AppUUID, DBUUID: e.DBUUID,
		Repo: e.Repo, TemplateRepo: e.TemplateRepo, TemplateRef: e.TemplateRef, Branch: branch,
		LatestJobs: map[string]JobRef{}, Resources: []events.Resource{},
		HasTemplate: e.Template != nil,
	}
	for _, r := range []events.Resource{
		{Kind: events.ResProject, ID: e.ProjectUUID},
		{Kind: events.ResApplication, ID: e.AppUUID},
		{Kind: events.ResDatabase, ID: e.DBUUID},
		{Kind: events.ResRepository, ID: e.Repo.String(), Name: e.Repo.Slug},
	} {
		if r.ID != "" && r.ID != "/" {
			v.Resources = append(v.Resources, r)
		}
	}
	return v
}

// jobAccepted makes a job the slot's active one (own: v's maps are this
// fold's own and may be changed in place).
func jobAccepted(v SlotView, e events.JobAccepted, own bool) SlotView {
	ref := JobRef{ID: e.JobID, Kind: e.Kind, State: JobQueued}
	if old, ok := v.LatestJobs[e.Kind]; ok && old.ID == e.JobID {
		ref = old // a resumed job keeps its progress
		ref.State = JobQueued
	}
	v.ActiveJob = &ref
	if !own {
		v.LatestJobs = maps.Clone(v.LatestJobs)
	}
	if v.LatestJobs == nil {
		v.LatestJobs = map[string]JobRef{}
	}
	v.LatestJobs[e.Kind] = ref
	v.Lifecycle = lifecycleOfKind(e.Kind, v.Lifecycle)
	if e.Kind == events.KindReset || e.Kind == events.KindPRDeploy {
		v.Deployed = nil // the job is changing what runs
	}
	v.Recovery = nil
	code := ReasonJob
	if e.Resumed {
		code = ReasonJobResumed
	}
	v.setReason(code, map[string]string{"kind": e.Kind, "id": e.JobID})
	return v
}

// resourcesFound adds what a step created or found to the slot's
// resources: nothing it holds goes untracked.
func resourcesFound(v SlotView, p events.Payload, t time.Time) (SlotView, bool) {
	switch e := p.(type) {
	case events.DBCreated:
		// The new database is the slot's from its 201 on.
		rs := addMissing(v.Resources, []events.Resource{{Kind: events.ResDatabase, ID: e.DBUUID, Name: e.Name}})
		if len(rs) == len(v.Resources) && v.DBUUID == e.DBUUID {
			return v, false
		}
		v.Resources, v.DBUUID = rs, e.DBUUID
	case events.VolumesCreated:
		var rs []events.Resource
		for _, c := range e.Volumes {
			rs = append(rs, events.Resource{Kind: events.ResVolume, ID: c.StorageUUID, Name: c.Name})
		}
		nrs := addMissing(v.Resources, rs)
		if len(nrs) == len(v.Resources) {
			return v, false
		}
		v.Resources = nrs
	case events.ResourcesListed:
		// What a step found and is about to delete is the slot's until a
		// confirmed deletion removes it (nothing untracked).
		rs := addMissing(v.Resources, e.Resources)
		if len(rs) == len(v.Resources) {
			return v, false
		}
		v.Resources = rs
	case events.DeleteAccepted:
		r := e.Resource
		rs := addMissing(v.Resources, []events.Resource{r})
		d := PendingDelete{Kind: r.Kind, ID: r.ID, AcceptedAt: t, JobID: e.JobID}
		i := deletingIndex(v.Deleting, r.Kind, r.ID)
		if i >= 0 && v.Deleting[i] == d && len(rs) == len(v.Resources) {
			return v, false
		}
		v.Resources = rs
		v.Deleting = slices.Clone(v.Deleting)
		if i >= 0 {
			v.Deleting[i] = d
		} else {
			v.Deleting = append(v.Deleting, d)
		}
	}
	return v, true
}

// resourcesGone removes what a confirmed deletion removed, and adds what
// it left on the server (the Docker volumes an unmount leaves, the
// containers and data of an unreachable server).
func resourcesGone(v SlotView, p events.Payload) (SlotView, bool) {
	rs := removeConfirmed(v.Resources, p)
	if e, ok := p.(events.VolumeMountsRemoved); ok {
		// The mount definitions are gone; the Docker volumes and their
		// data are not, and stay the slot's (Coolify's API cannot
		// delete them). A volume an earlier attempt of the step
		// unmounted is no longer listed, so it is not in Left: its
		// listed entry (name = the volume's name) says what it was.
		var left []events.Resource
		covered := map[string]bool{}
		for _, l := range e.Left {
			left = append(left, l.Resource())
			covered[l.StorageUUID] = true
		}
		for _, r := range v.Resources {
			if r.Kind == events.ResVolume && !covered[r.ID] && r.Name != "" {
				left = append(left, events.AppServerResource(events.ResDockerVolume, r.Name, e.AppUUID))
			}
		}
		rs = addMissing(rs, left)
	}
	var left []events.LeftOnServer
	switch e := p.(type) {
	case events.DBDeleted:
		left = e.Left
	case events.AppDeleted:
		left = e.Left
	}
	for _, l := range left {
		// The row is gone, its containers and data are not: the
		// server was unreachable (issue 32).
		rs = addMissing(rs, []events.Resource{l.Resource()})
	}
	if e, ok := p.(events.AppDeleted); ok && e.AppUUID != "" && e.AppUUID == v.AppUUID {
		// Deleting the slot's application takes its env vars and
		// volumes with it (Coolify deletes an app with its volumes and
		// configuration).
		rs = slices.DeleteFunc(slices.Clone(rs), func(r events.Resource) bool {
			return r.Kind == events.ResEnvVar || r.Kind == events.ResVolume
		})
	}
	if slices.Equal(rs, v.Resources) {
		return v, false // nothing of this slot's changed
	}
	v.Resources = rs
	v.Deleting = keepHeld(v.Deleting, rs)
	return v, true
}

// readiness says whether a vacant slot is ready for its next occupant and,
// if not, what it lacks: in English and as a code with its parts.
func readiness(v SlotView) (bool, []string, string, map[string]string) {
	if v.Lifecycle != LifecycleVacant {
		return false, nil, "", nil
	}
	_, reset := v.LatestJobs[events.KindReset]
	switch {
	case !v.HasTemplate && reset:
		return false, []string{"no slot template: its reset deleted the database, env vars and volumes and force-pushed the template, but re-created nothing and deployed nothing (register the slot with a template)"}, MissingNoTemplateReset, nil
	case !v.HasTemplate:
		return false, []string{"no slot template: a reset will not re-create its database, settings or deployment"}, MissingNoTemplate, nil
	case v.Deployed != nil && (v.Deployed.Status == "running:healthy" || v.Deployed.Status == "running:unknown"):
		// running:unknown is running with no health check (Coolify's
		// default for a new application): ready, shown as such.
		return true, nil, "", nil
	case v.Deployed != nil:
		return false, []string{"the application is " + v.Deployed.Status + ", not running"}, MissingNotHealthy, map[string]string{"status": v.Deployed.Status}
	case reset:
		return false, []string{"its last reset did not finish bringing it back to the template (no healthy deployment)"}, MissingResetIncomplete, nil
	}
	return false, []string{"not reset to its template yet: it is as it was registered"}, MissingNeverReset, nil
}

// RefreshSlotJob copies a job's progress into the slot: the active job's and
// the latest-of-kind's references, and the recovery information while the
// slot's newest job ended without success. It returns v unchanged (and false)
// when the slot does not show that job.
func RefreshSlotJob(v SlotView, j JobView) (SlotView, bool) {
	return refreshSlotJob(v, j, false)
}

// refreshSlotJob is RefreshSlotJob; with own, v's ActiveJob and LatestJobs
// belong to the caller alone (see Ownership) and are changed in place.
func refreshSlotJob(v SlotView, j JobView, own bool) (SlotView, bool) {
	changed := false
	ref := RefOf(j)
	if v.ActiveJob != nil && v.ActiveJob.ID == j.ID && *v.ActiveJob != ref {
		if own {
			*v.ActiveJob = ref
		} else {
			v.ActiveJob = &ref
		}
		changed = true
	}
	if old, ok := v.LatestJobs[j.Kind]; ok && old.ID == j.ID && old != ref {
		if !own {
			v.LatestJobs = maps.Clone(v.LatestJobs)
		}
		v.LatestJobs[j.Kind] = ref
		changed = true
	}
	if v.Recovery != nil && v.Recovery.JobID == j.ID {
		rec := recoveryOf(j)
		if rec == nil && v.ActiveJob == nil {
			// Resumed and not yet re-accepted: the recovery information
			// stays until the slot accepts the job again.
			rec = v.Recovery
		}
		if !recoveryEqual(rec, v.Recovery) {
			v.Recovery = rec
			changed = true
		}
	}
	if changed && j.Position > v.Position {
		v.Position = j.Position
		v.UpdatedAt = j.UpdatedAt
	}
	return v, changed
}

// recoveryOf is the recovery information of a job that ended without
// success, nil otherwise.
func recoveryOf(j JobView) *Recovery {
	if !events.Ended(j.State) || j.State == JobSucceeded {
		return nil
	}
	rem := j.Remaining
	if rem == nil {
		rem = []events.Resource{}
	}
	return &Recovery{JobID: j.ID, State: j.State, CompletedSteps: CompletedSteps(j), UncertainStep: j.UncertainStep, Remaining: rem}
}

func recoveryEqual(a, b *Recovery) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.JobID == b.JobID && a.State == b.State && a.UncertainStep == b.UncertainStep &&
		slices.Equal(a.CompletedSteps, b.CompletedSteps) && slices.Equal(a.Remaining, b.Remaining)
}

func lifecycleOfKind(kind, current string) string {
	switch kind {
	case events.KindReset:
		return LifecycleResetting
	case events.KindTeardown:
		return LifecycleTearingDown
	case events.KindPromote:
		return LifecyclePromoting
	}
	return current
}

// restingLifecycle is the lifecycle of a slot no job holds.
func restingLifecycle(v SlotView) string {
	switch {
	case v.Lifecycle == LifecycleRetired || v.Lifecycle == LifecycleIncomplete:
		return v.Lifecycle
	case v.Occupant != "":
		return LifecycleOccupied
	default:
		return LifecycleVacant
	}
}

// addMissing returns rs plus the resources of more it does not hold yet.
func addMissing(rs, more []events.Resource) []events.Resource {
	out := slices.Clone(rs)
	if out == nil {
		out = []events.Resource{}
	}
	for _, r := range more {
		if !slices.ContainsFunc(out, func(x events.Resource) bool { return x.Kind == r.Kind && x.ID == r.ID }) {
			out = append(out, r)
		}
	}
	return out
}

// deletingIndex finds the pending delete of (kind, id), -1 if none.
func deletingIndex(ds []PendingDelete, kind, id string) int {
	return slices.IndexFunc(ds, func(d PendingDelete) bool { return d.Kind == kind && d.ID == id })
}

// keepHeld returns the pending deletes whose resource rs still holds (nil
// when none is left, so the field drops out of the JSON).
func keepHeld(ds []PendingDelete, rs []events.Resource) []PendingDelete {
	var out []PendingDelete
	for _, d := range ds {
		if slices.ContainsFunc(rs, func(r events.Resource) bool { return r.Kind == d.Kind && r.ID == d.ID }) {
			out = append(out, d)
		}
	}
	return out
}
