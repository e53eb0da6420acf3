package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/retry"
	"github.com/slotkeeper/slotkeeper/events"
)

// The ready-slot reset (issue 23): after the deletes and the force push, a
// reset of a slot with a template creates a fresh database, restores the
// template's env vars and deploys the template until Coolify reports the
// application running:healthy; only then is the slot vacated. Every call
// goes through a.call (fenced), every step is resumable: an uncertain one
// first looks up what the world holds.

func init() {
	runs[events.StepCreateDB] = createDB
	runs[events.StepRestoreEnv] = restoreEnv
	runs[events.StepCreateVolumes] = createVolumes
	runs[events.StepDeploy] = deploy
}

// template is the slot's template, or a definite failure for a slot
// registered without one (its reset has none of these steps).
func (a *attempt) template(ctx context.Context) (events.SlotTemplate, string, string, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return events.SlotTemplate{}, "", "", err
	}
	if st.Reg.Template == nil {
		return events.SlotTemplate{}, "", "", failf("slot %s has no template", st.Name)
	}
	return *st.Reg.Template, st.Name, st.Reg.ProjectUUID, nil
}

// dbName is the name create_db gives the database: the same for every
// attempt of the job, so a verifying attempt finds the one an uncertain
// create made.
func dbName(slot, jobID string) string {
	id := strings.ReplaceAll(jobID, "-", "")
	if len(id) > 12 {
		id = id[:12]
	}
	return "db-" + slot + "-" + id
}

// result decodes the recorded result of a done step into out.
func (a *attempt) doneResult(step string, out any) bool {
	ev, ok := a.job.Results[step]
	return ok && json.Unmarshal(ev.Data, out) == nil
}

// createDB creates the slot's fresh database in its project, environment
// and server: the template's engine and image, or the deleted one's
// ("same as before", read by delete_db before the delete). The database is
// the slot's from the 201 on: SlotDatabaseChanged goes to the slot stream
// at once (a fact about the world, true whatever happens to the job
// later), then DBCreated ends the step. A verifying attempt first lists
// the databases and adopts the one this job named.
func createDB(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	t, slot, project, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	engine, image := t.DBEngine, t.DBImage
	var del events.DBDeleted
	if a.doneResult(events.StepDeleteDB, &del) {
		if engine == "" {
			engine = del.Engine
		}
		if image == "" && engine == del.Engine {
			image = del.Image
		}
	}
	if engine == "" {
		// The database was gone when delete_db read it (an earlier
		// cancelled reset deleted it): the engine seen at register or at
		// the slot's last create.
		engine, image = t.SeenEngine, t.SeenImage
	}
	if engine == "" {
		return nil, &stepError{status: 422, msg: "the engine of the deleted database is unknown (it was already gone when the reset read it): declare db_engine in the slot's template, then resume"}
	}
	name := dbName(slot, a.job.ID)
	spec := providers.DatabaseSpec{Engine: engine, Name: name, Image: image, ProjectUUID: project, EnvironmentName: t.Environment(), ServerUUID: t.ServerUUID}
	res := &events.Resource{Kind: events.ResDatabase, Name: name}
	var db providers.Database
	found := false
	if verify {
		err := a.call(ctx, events.StepStarted{Resource: res, Verify: true}, func(ctx context.Context) error {
			var err error
			db, found, err = a.findDatabase(ctx, project, name)
			return err
		})
		if err != nil {
			return nil, fromProvider("look for database "+name+" an earlier attempt may have created", err)
		}
	}
	if !found {
		err := a.call(ctx, events.StepStarted{Resource: res}, func(ctx context.Context) error {
			var err error
			db, err = a.e.deps.PaaS.CreateDatabase(ctx, spec)
			return err
		})
		if err != nil {
			return nil, fromProvider("create database "+name, err)
		}
	}
	if err := a.slotDatabase(ctx, slot, db.UUID, engine, image); err != nil {
		return nil, err
	}
	if verify {
		if err := a.dropTwins(ctx, project, name, db.UUID); err != nil {
			return nil, err
		}
	}
	return events.DBCreated{StepResult: a.result(false), DBUUID: db.UUID, Name: name, Engine: engine, Image: image, ProjectUUID: project, Found: found}, nil
}

// findDatabase looks for the database called name in project's
// environments: the slot's if it is one of them, else the first. Another
// team's token sees neither: GetProject's 404 is then an error, never "not
// created".
func (a *attempt) findDatabase(ctx context.Context, project, name string) (providers.Database, bool, error) {
	all, err := a.databasesNamed(ctx, project, name)
	if err != nil || len(all) == 0 {
		return providers.Database{}, false, err
	}
	if st, err := a.slot(ctx); err == nil {
		for _, d := range all {
			if d.UUID == st.Reg.DBUUID {
				return d, true, nil
			}
		}
	}
	return all[0], true, nil
}

func (a *attempt) databasesNamed(ctx context.Context, project, name string) ([]providers.Database, error) {
	p, l, err := a.e.deps.PaaS.GetProject(ctx, project)
	if l != providers.Found {
		if err == nil {
			err = failf("project %s could not be looked up", project)
		}
		return nil, err
	}
	dbs, err := a.e.deps.PaaS.ListDatabases(ctx)
	if err != nil {
		return nil, err
	}
	var out []providers.Database
	for _, d := range dbs {
		if d.Name == name && (d.EnvironmentID == 0 || slices.Contains(p.Environments, d.EnvironmentID)) {
			out = append(out, d)
		}
	}
	return out, nil
}

// dropTwins deletes every database named name in project but keep, the
// slot's. Only this job makes that name (dbName), so a twin is an earlier
// attempt's create that was still on the wire at this attempt's lookup and
// landed after it: Coolify takes a second database of the same name (its
// create validates name only as 'string|max:255', DatabasesController.php
// :1851-1852 at v4.3.10-41-g379abb2526), so nothing refuses it. A create
// landing after this listing is not seen (docs/jobs.md).
func (a *attempt) dropTwins(ctx context.Context, project, name, keep string) error {
	var all []providers.Database
	err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResDatabase, Name: name}, Verify: true}, func(ctx context.Context) error {
		var err error
		all, err = a.databasesNamed(ctx, project, name)
		return err
	})
	if err != nil {
		return fromProvider("look for a second database "+name, err)
	}
	for _, d := range all {
		if d.UUID == keep {
			continue
		}
		id := d.UUID
		_, err := confirmDelete(ctx, a, false, events.Resource{Kind: events.ResDatabase, ID: id, Name: name + " (twin of " + keep + ")"},
			a.inVisibleProject(project, func(ctx context.Context) (providers.Lookup, error) {
				_, l, err := a.e.deps.PaaS.GetDatabase(ctx, id)
				return l, err
			}),
			func(ctx context.Context) (providers.DeleteOutcome, error) {
				return a.e.deps.PaaS.DeleteDatabase(ctx, id)
			})
		if err != nil {
			return err
		}
	}
	return nil
}

// slotDatabase records on the slot stream that its database is now id
// (once: a retried attempt finds it recorded).
func (a *attempt) slotDatabase(ctx context.Context, slot, id, engine, image string) error {
	_, err := events.Decide(ctx, a.e.store, events.SlotStream(slot), func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		st, err := a.e.slots.Load(ctx, slot)
		if err != nil || st.Reg.DBUUID == id {
			return events.ExpectedRevision{}, nil, err
		}
		return events.Exact(st.Revision), []events.EventData{
			events.New(events.SlotDatabaseChanged{Slot: slot, JobID: a.job.ID, DBUUID: id, Previous: st.Reg.DBUUID, Engine: engine, Image: image}, a.meta()),
		}, nil
	})
	var ae *events.AppendError
	var ce *events.ContendedError
	switch {
	case errors.As(err, &ae):
		return ae.Err
	case errors.As(err, &ce):
		return fmt.Errorf("record the new database of %s: slot kept changing", slot)
	}
	return err
}

// restoreEnv makes the application's env vars exactly the template
// application's (values read now, never recorded) plus the new database's
// internal URL under the template's key. It is idempotent, so verify
// changes nothing: what a crashed attempt created and matches stays, what
// differs is deleted and created again; a final listing checks the keys
// (and, where Coolify shows them, the values).
func restoreEnv(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	t, _, _, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	app, dbID := st.Reg.AppUUID, st.Reg.DBUUID
	var created events.DBCreated
	if !a.doneResult(events.StepCreateDB, &created) || created.DBUUID != dbID {
		return nil, failf("the database this reset created is not the slot's (%s)", dbID)
	}
	want := map[string]string{}
	if t.EnvFromApp != "" {
		tmpl, err := listOf(ctx, a, t.EnvFromApp, events.NameListTemplateEnvs, true, a.e.deps.PaaS.ListEnvs)
		if err != nil {
			return nil, fromProvider("list the env vars of template application "+t.EnvFromApp, err)
		}
		for _, e := range tmpl {
			if e.Hidden {
				return nil, &stepError{status: 403, msg: "Coolify hides the values of template application " + t.EnvFromApp + "'s env vars from this token: give the token the read:sensitive ability (its user must be the team's admin), then resume"}
			}
			want[e.Key] = e.Value
		}
	}
	var db providers.Database
	err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResDatabase, ID: dbID, Name: "read internal URL", NameCode: events.NameReadInternalURL}, Verify: true},
		func(ctx context.Context) error {
			var l providers.Lookup
			var err error
			db, l, err = a.e.deps.PaaS.GetDatabase(ctx, dbID)
			if l != providers.Found && err == nil {
				err = failf("database %s not found", dbID)
			}
			return err
		})
	if err != nil {
		return nil, fromProvider("read the new database "+dbID, err)
	}
	if db.InternalURL == "" {
		return nil, &stepError{status: 403, msg: "Coolify hides the internal URL of database " + dbID + " from this token: give the token the read:sensitive ability, then resume"}
	}
	want[t.DBKey()] = db.InternalURL
	list := func(verify bool) ([]providers.EnvVar, error) {
		return listOf(ctx, a, app, events.NameListEnvs, verify, a.e.deps.PaaS.ListEnvs)
	}
	have, err := list(false)
	if err != nil {
		return nil, fromProvider("list env vars of "+app, err)
	}
	keep := map[string]bool{}
	for _, e := range have {
		if v, ok := want[e.Key]; ok && !e.Hidden && v == e.Value && !keep[e.Key] {
			keep[e.Key] = true
			continue
		}
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResEnvVar, ID: e.UUID, Name: e.Key}},
			func(ctx context.Context) error { _, err := a.e.deps.PaaS.DeleteEnv(ctx, app, e.UUID); return err })
		if err != nil {
			return nil, fromProvider("delete env var "+e.Key+" that is not the template's", err)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if keep[k] {
			continue
		}
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResEnvVar, ID: app, Name: k}},
			func(ctx context.Context) error { _, err := a.e.deps.PaaS.CreateEnv(ctx, app, k, want[k]); return err })
		if err != nil {
			return nil, fromProvider("create env var "+k, err)
		}
	}
	have, err = list(true)
	if err != nil {
		return nil, fromProvider("confirm the env vars of "+app, err)
	}
	got := map[string]bool{}
	for _, e := range have {
		v, ok := want[e.Key]
		switch {
		case !ok:
			return nil, failf("env var %s of %s is not the template's after the restore", e.Key, app)
		case got[e.Key]:
			return nil, failf("env var %s of %s exists twice after the restore", e.Key, app)
		case !e.Hidden && e.Value != v:
			return nil, failf("env var %s of %s does not hold the template's value after the restore", e.Key, app)
		}
		got[e.Key] = true
	}
	if len(got) != len(want) {
		return nil, failf("%d of the template's %d env vars exist on %s after the restore", len(got), len(want), app)
	}
	return events.EnvRestored{StepResult: a.result(false), AppUUID: app, From: t.EnvFromApp, Keys: keys}, nil
}

// volumeName is the name create_volumes gives the storage mounted at
// mountPath: new for every reset (Coolify prefixes it with the app's uuid,
// AC:4898), so the next deploy mounts an empty volume, never the old one.
func volumeName(mountPath, jobID string) string {
	base := strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, mountPath), "-")
	if base == "" {
		base = "data"
	}
	if len(base) > 60 {
		base = base[:60]
	}
	return base + "-" + strings.TrimPrefix(dbName("", jobID), "db--")
}

// createVolumes mounts a new, empty volume at each mount path whose
// persistent storage delete_volumes removed (its VolumeMountsRemoved names
// them). A listing first makes it idempotent: a mount path that already has
// this job's storage is not created again. Bind mounts of host directories
// are not recreated (no new name empties them): they are named in Skipped.
func createVolumes(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	app := st.Reg.AppUUID
	var removed events.VolumeMountsRemoved
	a.doneResult(events.StepDeleteVolumes, &removed)
	var want, skipped []string
	if t := st.Reg.Template; t != nil {
		want = append(want, t.Volumes...)
	}
	for _, l := range removed.Left {
		switch {
		case l.HostPath != "":
			if want = slices.DeleteFunc(want, func(m string) bool { return m == l.MountPath }); l.MountPath != "" {
				skipped = append(skipped, l.MountPath)
			}
		case l.MountPath != "" && !slices.Contains(want, l.MountPath):
			want = append(want, l.MountPath)
		}
	}
	list := func(verify bool) ([]providers.Storage, error) {
		return listOf(ctx, a, app, events.NameListStorages, verify, a.e.deps.PaaS.ListStorages)
	}
	mine := func(list []providers.Storage, mount string) *providers.Storage {
		for i, s := range list {
			if s.Kind == "persistent" && s.MountPath == mount && strings.HasSuffix(s.Name, volumeName(mount, a.job.ID)) {
				return &list[i]
			}
		}
		return nil
	}
	have, err := list(false)
	if err != nil {
		return nil, fromProvider("list storages of "+app, err)
	}
	for _, m := range want {
		if mine(have, m) != nil {
			continue
		}
		name := volumeName(m, a.job.ID)
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResVolume, ID: app, Name: name}},
			func(ctx context.Context) error { _, err := a.e.deps.PaaS.CreateStorage(ctx, app, name, m); return err })
		if err != nil {
			return nil, fromProvider("create volume "+name+" at "+m, err)
		}
	}
	have, err = list(true)
	if err != nil {
		return nil, fromProvider("confirm the volumes of "+app, err)
	}
	out := events.VolumesCreated{StepResult: a.result(false), AppUUID: app, Volumes: []events.CreatedVolume{}, Skipped: skipped}
	for _, m := range want {
		s := mine(have, m)
		if s == nil {
			return nil, failf("no new volume is mounted at %s of %s after its creation", m, app)
		}
		out.Volumes = append(out.Volumes, events.CreatedVolume{StorageUUID: s.UUID, Name: s.Name, MountPath: m})
	}
	return out, nil
}

var shaRe = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// Deploy polling: how often the deployment and the application's status
// are read while waiting (the step deadline bounds the wait).
var (
	deployPollFirst = 100 * time.Millisecond
	deployPollMax   = 2 * time.Second
)

// deploy starts a deployment of the application (the template code the
// force push put on its branch) and waits until the deployment finished
// and Coolify reports the application running:healthy. A failed or
// cancelled deployment fails the step (retryable: resuming deploys again).
// A resumed attempt deploys again: a second deployment of the same commit
// changes nothing the first would not have. The wait is one call under the
// step's context: the step deadline bounds it, and a cancel or a fence
// ends it (the attempt's context).
func deploy(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	t, _, _, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	app := st.Reg.AppUUID
	if t.NoDeploy {
		return events.StepSucceeded{StepResult: a.result(false), Detail: "the template declares no deploy"}, nil
	}
	var depID string
	err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: "deploy", NameCode: events.NameDeploy}},
		func(ctx context.Context) error {
			var err error
			depID, err = a.e.deps.PaaS.Deploy(ctx, app)
			return err
		})
	if err != nil {
		return nil, fromProvider("deploy "+app, err)
	}
	var dep providers.Deployment
	var ap providers.Application
	err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: "wait for deployment " + depID + " and running:healthy",
		NameCode: events.NameWaitDeployment, NameArgs: events.NameArgs{Deployment: depID}}, Verify: true},
		func(ctx context.Context) error {
			var err error
			dep, ap, err = a.waitHealthy(ctx, app, depID)
			return err
		})
	if err != nil {
		return nil, err
	}
	commit := dep.Commit
	if !shaRe.MatchString(commit) {
		commit = "" // Coolify's queue says "HEAD" until it resolved the commit
	}
	return events.AppDeployed{StepResult: a.result(false), AppUUID: app, DeploymentUUID: depID, Status: ap.Status, FQDN: ap.FQDN, Commit: commit}, nil
}

// waitHealthy polls the deployment until it ends, then the application
// until running:healthy. Transient read failures keep polling (the step
// deadline bounds them); a definite refusal stops.
func (a *attempt) waitHealthy(ctx context.Context, app, depID string) (providers.Deployment, providers.Application, error) {
	waits := retry.Backoff{Initial: deployPollFirst, Max: deployPollMax}.Start(a.e.cfg.Clock)
	pause := func() error {
		if waits.Wait(ctx) != nil {
			return context.Cause(ctx)
		}
		return nil
	}
	transient := func(err error) bool {
		pe, ok := providers.AsError(err)
		return ok && pe.Retryable() && pe.Code != providers.CodeCanceled
	}
	var dep providers.Deployment
	for finished := false; !finished; {
		d, l, err := a.e.deps.PaaS.GetDeployment(ctx, depID)
		switch {
		case l == providers.Found && d.Status == "finished":
			dep, finished = d, true
			continue
		case l == providers.Found && (d.Status == "failed" || d.Status == "cancelled-by-user"):
			return d, providers.Application{}, &stepError{retryable: true, msg: fmt.Sprintf("deployment %s of %s ended %s (see its log in Coolify); the slot is not vacated — fix the template and resume the reset to deploy again", depID, app, d.Status)}
		case l == providers.Absent:
			return d, providers.Application{}, failf("deployment %s of %s is not known to Coolify", depID, app)
		case err != nil && !transient(err):
			return d, providers.Application{}, fromProvider("read deployment "+depID, err)
		}
		if err := pause(); err != nil {
			return d, providers.Application{}, err
		}
	}
	for {
		ap, l, err := a.e.deps.PaaS.GetApplication(ctx, app)
		switch {
		case l == providers.Found && ap.Status == "running:healthy":
			return dep, ap, nil
		case l == providers.Found && strings.HasPrefix(ap.Status, "exited"):
			return dep, ap, &stepError{retryable: true, msg: fmt.Sprintf("application %s is %s after deployment %s finished; the slot is not vacated — resume the reset to deploy again", app, ap.Status, depID)}
		case l == providers.Absent:
			return dep, ap, failf("application %s is not found after its deployment", app)
		case err != nil && !transient(err):
			return dep, ap, fromProvider("read application "+app, err)
		}
		if err := pause(); err != nil {
			return dep, ap, err
		}
	}
}
