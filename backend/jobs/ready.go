package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// The ready-slot reset (issue 23): after the deletes and the force push, a
// reset of a slot with a template creates a fresh database, restores the
// template's env vars and deploys the template until Coolify reports the
// application running:healthy; only then is the slot vacated. Every call
// goes through a.call (fenced), every step is resumable: an uncertain one
// first looks up what the world holds.

var readySteps = bodies{
	events.StepCreateDB:      createDB,
	events.StepRestoreEnv:    restoreEnv,
	events.StepCreateVolumes: createVolumes,
	events.StepDeploy:        deploy,
}

// template is the slot's template and the slot itself (one load), or a
// definite failure for a slot registered without one (its reset has none
// of these steps).
func (a *attempt) template(ctx context.Context) (events.SlotTemplate, slots.SlotState, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return events.SlotTemplate{}, st, err
	}
	if st.Reg.Template == nil {
		return events.SlotTemplate{}, st, failf("slot %s has no template", st.Name)
	}
	return *st.Reg.Template, st, nil
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
	t, st, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	slot, project := st.Name, st.Reg.ProjectUUID
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
		return nil, &stepError{status: 422, code: events.FailureEngineUnknown, msg: "the engine of the deleted database is unknown (it was already gone when the reset read it): declare db_engine in the slot's template, then resume"}
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
	if db.InternalURL != "" {
		createdURLs.Store(db.UUID, db.InternalURL) // for restore_env; never logged (checks.go)
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

// restoreEnv makes the application's normal env vars exactly the
// template application's normal ones (values read now, never recorded)
// plus the new database's internal URL under the template's key. Coolify
// lists each application's normal vars with their preview copies (same key
// twice, is_preview, AC:3207-3245) and creating a normal var creates its
// copy (EnvironmentVariable.php:95-120): only normal vars are compared and
// changed, preview vars are left alone. A locked template var (is_shown_once)
// is hidden from every token: reported as locked, with its fix. The
// database URL is the one the create answered (checks.go). It is
// idempotent, so verify changes nothing: what a crashed attempt created and
// matches stays, what differs is deleted and created again; a final
// listing checks the keys (and, where Coolify shows them, the values).
func restoreEnv(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	t, st, err := a.template(ctx)
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
		var locked []string
		for _, e := range tmpl {
			switch {
			case e.Preview:
				continue
			case e.Locked:
				locked = append(locked, e.Key)
			case e.Hidden:
				return nil, &stepError{status: 403, code: events.FailureSensitive, args: map[string]string{"target": t.EnvFromApp}, msg: "Coolify hides the values of template application " + t.EnvFromApp + "'s env vars from this token: " + doctor.SensitiveFix + ", then resume"}
			}
			want[e.Key] = e.Value
		}
		if len(locked) > 0 {
			return nil, &stepError{status: 422, code: events.FailureEnvLocked, args: map[string]string{"app": t.EnvFromApp, "keys": strings.Join(locked, ", ")}, msg: "template application " + t.EnvFromApp + " has locked env vars (" + strings.Join(locked, ", ") + "): Coolify hides a locked value from every API token, root included; " + doctor.LockedFix(t.EnvFromApp, locked) + " (then resume)"}
		}
	}
	url, err := a.databaseURL(ctx, dbID)
	if err != nil {
		return nil, err
	}
	want[t.DBKey()] = url
	list := func(verify bool) ([]providers.EnvVar, error) {
		all, err := listOf(ctx, a, app, events.NameListEnvs, verify, a.e.deps.PaaS.ListEnvs)
		return slices.DeleteFunc(all, func(e providers.EnvVar) bool { return e.Preview }), err
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
	createdURLs.Delete(dbID)
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

// deploy brings the template code the force push put on the application's
// branch up on Coolify and declares the slot ready only once Coolify
// reports it so: the deployment finished, the application running
// (running:healthy; running:unknown when it has no health check, which is
// Coolify's default for a new application), and the slot's new database
// running. The deployment is recorded (DeploymentStarted) before the wait,
// so a later attempt — a resume, or after a restart or a rescue — follows
// it instead of deploying again; a deploy Coolify skipped because one of
// the app's is already queued follows that one. The waits have the
// template's own bound (deploy_timeout, Coolify's 3,600 s by default),
// not the step deadline (wait.go).
func deploy(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	t, st, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	app, dbID := st.Reg.AppUUID, st.Reg.DBUUID
	out := events.AppDeployed{AppUUID: app}
	if !t.NoDeploy {
		dep, err := a.followOrDeploy(ctx, app, verify)
		if err != nil {
			return nil, err
		}
		var ap providers.Application
		err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: "wait for deployment " + dep.UUID + " and the application running",
			NameCode: events.NameWaitDeployment, NameArgs: events.NameArgs{Deployment: dep.UUID}}, Verify: true},
			func(ctx context.Context) error {
				return a.waiting(ctx, t.WaitBound(), func(ctx context.Context) error {
					var err error
					dep, ap, err = a.waitDeployed(ctx, app, dep)
					return err
				})
			})
		if err != nil {
			return nil, a.boundFailure(err, t, "deployment "+dep.UUID+" of "+app, dep.URL)
		}
		commit := dep.Commit
		if !shaRe.MatchString(commit) {
			commit = "" // Coolify's queue says "HEAD" until it resolved the commit
		}
		out.DeploymentUUID, out.Status, out.FQDN, out.Commit = dep.UUID, ap.Status, ap.FQDN, commit
		out.NoHealthCheck = ap.Status == "running:unknown"
	}
	if dbID != "" && a.job.Done[events.StepCreateDB] {
		var db providers.Database
		err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResDatabase, ID: dbID, Name: "wait for the database running", NameCode: events.NameWaitDatabase}, Verify: true},
			func(ctx context.Context) error {
				return a.waiting(ctx, t.WaitBound(), func(ctx context.Context) error {
					var err error
					db, err = a.waitDatabase(ctx, dbID)
					return err
				})
			})
		if err != nil {
			return nil, a.boundFailure(err, t, "database "+dbID, "")
		}
		out.DBUUID, out.DBStatus = dbID, db.Status
	}
	if t.NoDeploy {
		res := events.StepSucceeded{StepResult: a.result(false), Detail: "the template declares no deploy", DetailCode: events.DetailNoDeploy}
		if out.DBStatus != "" {
			res.Detail += "; database " + dbID + " is " + out.DBStatus
			res.DetailCode, res.DetailArgs = events.DetailNoDeployDB, map[string]string{"db": dbID, "db_status": out.DBStatus}
		}
		return res, nil
	}
	out.StepResult = a.result(false)
	return out, nil
}

// boundFailure words a wait that reached its own bound as the step's honest
// failure (retryable: a resume goes on waiting for the same deployment);
// other errors pass.
func (a *attempt) boundFailure(err error, t events.SlotTemplate, what, url string) error {
	if !errors.Is(err, errWaitBound) {
		return err
	}
	msg := fmt.Sprintf("%s is not ready after %s, the wait's bound (the template's deploy_timeout; Coolify's own deployment timeout is 3600 s)", what, t.WaitBound())
	if url != "" {
		msg += "; see it in Coolify: " + url
	}
	return &stepError{retryable: true, code: events.FailureNotReady, args: map[string]string{"bound": strconv.FormatInt(int64(t.WaitBound()/time.Second), 10)}, msg: msg + "; the slot is not vacated — resume the reset to go on waiting for it"}
}

// followOrDeploy is the deployment the step waits for: the one the log
// names (DeploymentStarted) while Coolify still has it queued, building, or
// finished with the application running; else, for a verifying attempt,
// the application's deployment Coolify has queued or building (an earlier
// attempt's POST whose answer was lost); else a new one. A new one that
// Coolify skipped (a deployment of the app is already queued: the uuid it
// answers was never created) is followed to the queued one. The
// deployment is recorded before the step waits for it.
func (a *attempt) followOrDeploy(ctx context.Context, app string, verify bool) (providers.Deployment, error) {
	res := &events.Resource{Kind: events.ResApplication, ID: app, Name: "deploy", NameCode: events.NameDeploy}
	if rec := a.job.Deployment; rec.AppUUID == app && rec.DeploymentUUID != "" {
		var d providers.Deployment
		var l providers.Lookup
		running := false
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: "look at deployment " + rec.DeploymentUUID,
			NameCode: events.NameLookDeployment, NameArgs: events.NameArgs{Deployment: rec.DeploymentUUID}}, Verify: true},
			func(ctx context.Context) error {
				var err error
				d, l, err = a.e.deps.PaaS.GetDeployment(ctx, rec.DeploymentUUID)
				if err != nil || l != providers.Found || d.Status != "finished" {
					return err
				}
				ap, al, err := a.e.deps.PaaS.GetApplication(ctx, app)
				running = al == providers.Found && strings.HasPrefix(ap.Status, "running:")
				return err
			})
		if l != providers.Absent && err != nil {
			return d, fromProvider("look at deployment "+rec.DeploymentUUID+" an earlier attempt waited for", err)
		}
		if d.URL == "" {
			d.URL = rec.URL
		}
		// Still queued or building: go on waiting for it, no second
		// deployment. Finished with the application running: its health
		// is what is left to see. Anything else: deploy again.
		if l == providers.Found && (d.Status == "queued" || d.Status == "in_progress" || d.Status == "finished" && running) {
			return d, nil
		}
		verify = true // the recorded one is over or unknown: look before deploying
	}
	if verify {
		d, ok, err := a.activeDeployment(ctx, app)
		if err != nil {
			return d, err
		}
		if ok {
			return d, a.recordDeployment(ctx, app, d, events.DeployFound, "")
		}
	}
	var d providers.Deployment
	err := a.call(ctx, events.StepStarted{Resource: res}, func(ctx context.Context) error {
		var err error
		d, err = a.e.deps.PaaS.Deploy(ctx, app)
		return err
	})
	if err != nil {
		return d, fromProvider("deploy "+app, err)
	}
	if d.Skipped {
		return a.followSkipped(ctx, app, d.UUID)
	}
	return d, a.recordDeployment(ctx, app, d, events.DeployQueued, "")
}

// followSkipped follows the deployment Coolify has queued for app when a
// deploy was skipped: the uuid answered (skipped) was never created
// (DeployController.php:539-553), the app's queued one is the real one.
func (a *attempt) followSkipped(ctx context.Context, app, skipped string) (providers.Deployment, error) {
	d, ok, err := a.activeDeployment(ctx, app)
	if err != nil {
		return d, err
	}
	if !ok {
		return d, &stepError{retryable: true, code: events.FailureDeploySkipped, args: map[string]string{"app": app}, msg: fmt.Sprintf("Coolify skipped the deploy of %s (a deployment of it was queued) and answered a deployment uuid it never created (%s), but lists no queued or building deployment of it now; resume the reset to deploy again", app, skipped)}
	}
	return d, a.recordDeployment(ctx, app, d, events.DeployFollowedSkipped, skipped)
}

// activeDeployment is app's newest deployment Coolify has queued or
// building (GET /deployments/applications/{uuid}, newest first).
func (a *attempt) activeDeployment(ctx context.Context, app string) (providers.Deployment, bool, error) {
	var list []providers.Deployment
	err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: app, Name: "list deployments", NameCode: events.NameListDeployments}, Verify: true},
		func(ctx context.Context) error {
			var err error
			list, err = a.e.deps.PaaS.ListDeployments(ctx, app)
			return err
		})
	if err != nil {
		return providers.Deployment{}, false, fromProvider("list the deployments of "+app, err)
	}
	for _, d := range list {
		if d.Status == "queued" || d.Status == "in_progress" {
			return d, true, nil
		}
	}
	return providers.Deployment{}, false, nil
}

// recordDeployment writes what the step waits for before it waits.
func (a *attempt) recordDeployment(ctx context.Context, app string, d providers.Deployment, how, skipped string) error {
	ev := events.DeploymentStarted{JobID: a.job.ID, Step: a.step, Attempt: a.n, AppUUID: app, DeploymentUUID: d.UUID, How: how, SkippedUUID: skipped, URL: d.URL}
	if err := a.append(ctx, ev); err != nil {
		return err
	}
	a.job.Deployment = ev
	return nil
}

// waitDeployed polls the deployment until it ends, then the application
// until Coolify reports it running, recording each change of phase. While
// the deployment is queued, the servers' queue (GET /deployments) is read
// instead of the deployment itself: it holds the deployment's status and
// its place, in one request, and one read serves every wait of the engine
// for queueFresh. Transient read failures keep polling (the
// wait's bound bounds them); a definite refusal stops.
func (a *attempt) waitDeployed(ctx context.Context, app string, dep providers.Deployment) (providers.Deployment, providers.Application, error) {
	p := a.newPoller()
	status := dep.Status
	followed := false
	for finished := false; !finished; {
		var d providers.Deployment
		l := providers.Unknown
		var err error
		if status == "queued" || status == "" {
			var q []providers.Deployment
			err = p.do(ctx, func(ctx context.Context) error {
				var err error
				q, err = a.e.queue.get(ctx, a.e.now, queueFresh, a.e.deps.PaaS.ActiveDeployments)
				return err
			})
			if err == nil {
				me := slices.IndexFunc(q, func(x providers.Deployment) bool { return x.UUID == dep.UUID })
				if me >= 0 {
					d, l = q[me], providers.Found
				}
				if l == providers.Found && d.Status == "queued" {
					// Its place: the queued ones before it on its server,
					// and those building there (one FIFO queue per
					// server, applications.php:119-166).
					ph := events.WaitPhase{Phase: events.WaitQueued, DeploymentUUID: dep.UUID, Status: d.Status, URL: dep.URL}
					for i, x := range q {
						switch {
						case x.ServerID != d.ServerID || i == me:
						case x.Status == "in_progress":
							ph.Building++
						case x.Status == "queued" && i < me:
							ph.Ahead++
						}
					}
					if err := p.phase(ctx, ph); err != nil {
						return dep, providers.Application{}, err
					}
				}
			}
		}
		if err != nil && !errors.Is(err, errStepDeadline) && ctx.Err() == nil {
			// The queue only adds the place in it: without it, the
			// deployment itself says how it stands.
			a.log.Debug("build queue not readable; reading the deployment", "err", err)
			err = nil
		}
		if l != providers.Found && err == nil {
			err = p.do(ctx, func(ctx context.Context) error {
				var err error
				d, l, err = a.e.deps.PaaS.GetDeployment(ctx, dep.UUID)
				return err
			})
		}
		switch {
		case errors.Is(err, errStepDeadline):
			return dep, providers.Application{}, err
		case l == providers.Found:
			if d.URL == "" {
				d.URL = dep.URL
			}
			if d.ServerID == 0 {
				d.ServerID = dep.ServerID
			}
			dep, status = d, d.Status
			switch d.Status {
			case "finished":
				finished = true
				continue
			case "failed", "cancelled-by-user":
				return dep, providers.Application{}, &stepError{retryable: true, code: events.FailureDeployFailed, args: map[string]string{"deployment": dep.UUID, "app": app, "provider_status": d.Status}, msg: fmt.Sprintf("deployment %s of %s ended %s (see its log in Coolify: %s); the slot is not vacated — fix the template and resume the reset to deploy again", dep.UUID, app, d.Status, dep.URL)}
			case "in_progress":
				if err := p.phase(ctx, events.WaitPhase{Phase: events.WaitBuilding, DeploymentUUID: dep.UUID, Status: d.Status, URL: dep.URL}); err != nil {
					return dep, providers.Application{}, err
				}
			}
		case l == providers.Absent && !followed:
			// A uuid Coolify never created: a skipped deploy whose
			// message was not the known one. The app's queued
			// deployment is the real one.
			followed = true
			nd, err := a.followSkipped(ctx, app, dep.UUID)
			if err != nil {
				return dep, providers.Application{}, err
			}
			dep, status = nd, nd.Status
			continue
		case l == providers.Absent:
			return dep, providers.Application{}, failf("deployment %s of %s is not known to Coolify", dep.UUID, app)
		case err != nil && !transient(err):
			return dep, providers.Application{}, fromProvider("read deployment "+dep.UUID, err)
		}
		if err := p.pause(ctx); err != nil {
			return dep, providers.Application{}, err
		}
	}
	finishedAt := a.e.now()
	for {
		var ap providers.Application
		l := providers.Unknown
		err := p.do(ctx, func(ctx context.Context) error {
			var err error
			ap, l, err = a.e.deps.PaaS.GetApplication(ctx, app)
			return err
		})
		switch {
		case errors.Is(err, errStepDeadline):
			return dep, ap, err
		case l == providers.Found && (ap.Status == "running:healthy" || ap.Status == "running:unknown"):
			return dep, ap, nil
		case l == providers.Found:
			// Not running yet, or not well: Coolify's status check may
			// not have seen the new container yet (settleAfterDeploy).
			phase := events.WaitStarting
			if strings.HasPrefix(ap.Status, "running:") || strings.HasPrefix(ap.Status, "restarting") {
				phase = events.WaitHealth
			}
			settled := a.e.now().Sub(finishedAt) >= settleAfterDeploy
			bad := strings.HasPrefix(ap.Status, "exited") || strings.HasPrefix(ap.Status, "restarting") || strings.HasSuffix(ap.Status, ":unhealthy")
			if settled && bad {
				return dep, ap, &stepError{retryable: true, code: events.FailureAppUnhealthy, args: map[string]string{"app": app, "provider_status": ap.Status}, msg: fmt.Sprintf("application %s is %s (Coolify's words) %s after deployment %s finished; the slot is not vacated — see the application in Coolify, then resume the reset to deploy again", app, ap.Status, settleAfterDeploy, dep.UUID)}
			}
			if err := p.phase(ctx, events.WaitPhase{Phase: phase, DeploymentUUID: dep.UUID, Status: ap.Status, URL: dep.URL}); err != nil {
				return dep, ap, err
			}
		case l == providers.Absent:
			return dep, ap, failf("application %s is not found after its deployment", app)
		case err != nil && !transient(err):
			return dep, ap, fromProvider("read application "+app, err)
		}
		if err := p.pause(ctx); err != nil {
			return dep, ap, err
		}
	}
}

// waitDatabase polls the slot's new database until Coolify reports it
// running. Its row reads "exited" until its start ran (the column's
// default) and stays so when the start failed (StartPostgresql.php:221-230,
// no retry): "exited" dbStartGrace after the create is a failed start, and
// the step fails honestly — the slot is never ready with its database down.
func (a *attempt) waitDatabase(ctx context.Context, dbID string) (providers.Database, error) {
	created := a.e.now()
	if ev, ok := a.job.Results[events.StepCreateDB]; ok && !ev.Meta.Time.IsZero() {
		created = ev.Meta.Time
	}
	p := a.newPoller()
	for {
		var db providers.Database
		l := providers.Unknown
		err := p.do(ctx, func(ctx context.Context) error {
			var err error
			db, l, err = a.e.deps.PaaS.GetDatabase(ctx, dbID)
			return err
		})
		switch {
		case errors.Is(err, errStepDeadline):
			return db, err
		case l == providers.Found && strings.HasPrefix(db.Status, "running"):
			return db, nil
		case l == providers.Found:
			if a.e.now().Sub(created) >= dbStartGrace && !strings.HasPrefix(db.Status, "starting") {
				return db, &stepError{retryable: true, code: events.FailureDBStartFailed, args: map[string]string{"db": dbID, "provider_status": db.Status}, msg: fmt.Sprintf("database %s is %s (Coolify's words) %s after its create: its start failed, and Coolify does not retry it; the slot is not vacated — see the database in Coolify (start it there once fixed), then resume the reset", dbID, db.Status, a.e.now().Sub(created).Round(time.Second))}
			}
			if err := p.phase(ctx, events.WaitPhase{Phase: events.WaitDatabase, DBUUID: dbID, Status: db.Status}); err != nil {
				return db, err
			}
		case l == providers.Absent:
			return db, failf("database %s is not found after its create", dbID)
		case err != nil && !transient(err):
			return db, fromProvider("read database "+dbID, err)
		}
		if err := p.pause(ctx); err != nil {
			return db, err
		}
	}
}
