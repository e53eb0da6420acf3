package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// stepFunc does one step's outside calls (each through a.call, which
// appends StepStarted first) and returns the result event to record. verify
// is true when a previous attempt started the step and its outcome is
// unknown: the step first checks what the world holds, so a resume never
// repeats an effect blindly.
type stepFunc func(ctx context.Context, a *attempt, verify bool) (events.Payload, error)

// bodies maps step names to their bodies. Each file of steps declares its
// own beside them; runs joins them.
type bodies map[string]stepFunc

// runs holds the bodies of the step tables' steps (events.Steps gives each
// kind's steps, their order, the resource each removes and its plan): one
// body per step name, whatever the kind that runs it. Each file's bodies
// are listed here, explicitly (no init); TestStepTablesAndBodiesMatch
// fails on a table's step with no body and on a body no table runs.
var runs = join(clearSteps, checkSteps, readySteps, adoptSteps, prSteps)

// join is the union of bs; a step name with two bodies is a programming
// error, caught when the package loads.
func join(bs ...bodies) bodies {
	out := bodies{}
	for _, b := range bs {
		for name, f := range b {
			if out[name] != nil {
				panic("jobs: two bodies for step " + name)
			}
			out[name] = f
		}
	}
	return out
}

// clearSteps are the deletes, pushes and bookkeeping of the reset, the
// teardown and the promote, written in this file.
var clearSteps = bodies{
	events.StepDeleteDB:      deleteDB,
	events.StepDeleteEnvVars: deleteEnvVars,
	events.StepDeleteVolumes: deleteVolumes,
	events.StepForcePush:     forcePushTemplate,
	events.StepVacate:        vacate,
	events.StepDeleteApp:     deleteApp,
	events.StepDeleteRepo:    deleteRepo,
	events.StepDeleteProject: deleteProject,
	events.StepRetire:        retire,
	events.StepLookupRepo:    lookupRepo,
	events.StepCreateRepo:    createRepo,
	events.StepPushCode:      pushCode,
	events.StepRecordRepo:    recordRepo,
}

// stepOf is the body of kind's step name, nil when kind's table (with the
// ready reset's steps) has no such step or no body is known.
func stepOf(kind, name string) stepFunc {
	for _, s := range events.Steps(kind, true) {
		if s.Name == name {
			return runs[name]
		}
	}
	return nil
}

func (a *attempt) result(absent bool) events.StepResult {
	return events.StepResult{JobID: a.job.ID, Step: a.step, Attempt: a.n, AlreadyAbsent: absent}
}

// slot reads the slot the job works on. The attempt holds its lock, so the
// registration cannot change under it.
func (a *attempt) slot(ctx context.Context) (slots.SlotState, error) {
	st, err := a.e.slots.Load(ctx, a.job.Queued.Slot)
	if err != nil {
		return st, err
	}
	if !st.Exists {
		return st, failf("slot %s does not exist", a.job.Queued.Slot)
	}
	return st, nil
}

// confirmDelete is the shape of every delete step: when verifying, a GET
// first (absent → already absent; unknown → fail); then the delete, which
// the client only returns from once the resource is confirmed gone.
func confirmDelete(ctx context.Context, a *attempt, verify bool, res events.Resource,
	get func(context.Context) (providers.Lookup, error),
	del func(context.Context) (providers.DeleteOutcome, error)) (absent bool, err error) {
	if verify {
		var l providers.Lookup
		err := a.call(ctx, events.StepStarted{Resource: &res, Verify: true}, func(ctx context.Context) error {
			var err error
			l, err = get(ctx)
			return err
		})
		switch {
		case err != nil && l != providers.Absent:
			return false, fromProvider("verify "+res.Kind+" "+res.ID, err)
		case l == providers.Absent:
			return true, nil
		}
	}
	var out providers.DeleteOutcome
	var recErr error // recording DeleteAccepted failed (fenced, store error)
	resume := func() {}
	err = a.call(ctx, events.StepStarted{Resource: &res}, func(ctx context.Context) error {
		// A delete the provider accepts now and confirms later is recorded
		// at once: until its confirmation the slot shows it "deleting
		// (accepted at …)", not untouched. Each request of the
		// confirmation still has the step deadline.
		ctx = providers.WithDeleteAccepted(a.boundEachRequest(ctx), func(status int) error {
			recErr = a.append(ctx, events.DeleteAccepted{JobID: a.job.ID, Step: a.step, Attempt: a.n, Resource: res, HTTPStatus: status})
			if recErr == nil {
				// What follows is a wait for the provider's queue, not
				// a call (wait.go): the provider's own confirmation
				// bound (coolify.ConfirmTotal) ends it, not the step
				// deadline. The DELETE itself had the step deadline.
				resume = a.suspendDeadlines(queuedDeleteBound)
			}
			return recErr
		})
		var err error
		out, err = del(ctx)
		return err
	})
	resume()
	if recErr != nil {
		return false, recErr
	}
	if err != nil {
		return false, fromProvider("delete "+res.Kind+" "+res.ID, err)
	}
	if out != providers.AlreadyAbsent {
		return false, nil
	}
	// "Already absent" is a claim about the world that we are about to
	// record forever: check it with a GET before trusting it.
	var l providers.Lookup
	err = a.call(ctx, events.StepStarted{Resource: &res, Verify: true}, func(ctx context.Context) error {
		var err error
		l, err = get(ctx)
		return err
	})
	if l != providers.Absent {
		if err == nil {
			err = failf("the provider answered that %s %s does not exist, but a GET found it", res.Kind, res.ID)
		}
		return false, fromProvider("confirm "+res.Kind+" "+res.ID+" is absent", err)
	}
	return true, nil
}

// inVisibleProject guards the lookup of a Coolify resource inside the
// slot's project: Coolify filters every lookup by the token's team, so a
// token of another team gets the genuine "… not found." for a live
// resource. Absent is believed only when the slot's project is visible to
// the token (its GET is found); otherwise the answer is unknown — never
// "already absent".
func (a *attempt) inVisibleProject(project string, get func(context.Context) (providers.Lookup, error)) func(context.Context) (providers.Lookup, error) {
	return func(ctx context.Context) (providers.Lookup, error) {
		l, err := get(ctx)
		if l != providers.Absent || project == "" {
			return l, err
		}
		_, pl, perr := a.e.deps.PaaS.GetProject(ctx, project)
		switch pl {
		case providers.Found:
			return l, err
		case providers.Absent:
			return providers.Unknown, &providers.Error{Op: "coolify.GetProject", Resource: project, Status: 404, Code: providers.CodeForbidden,
				Message: "Coolify answers not found, but the slot's project is not visible to this token either: a token of another team sees live resources as not found, so nothing can be read as absent (check the token's team with `slotkeeper doctor`)"}
		}
		if perr == nil {
			perr = failf("the slot's project %s could not be looked up", project)
		}
		return providers.Unknown, perr
	}
}

func deleteDB(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	id := st.Reg.DBUUID
	// A ready reset makes the same database again unless the template
	// names an engine: read what this one is before deleting it.
	var engine, image string
	if a.job.Queued.Kind == events.KindReset && st.Reg.Template != nil {
		var d providers.Database
		var l providers.Lookup
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResDatabase, ID: id, Name: "read engine", NameCode: events.NameReadEngine}, Verify: true},
			func(ctx context.Context) error {
				var err error
				d, l, err = a.e.deps.PaaS.GetDatabase(ctx, id)
				return err
			})
		if errors.Is(err, errFenced) || ctx.Err() != nil {
			// The read may have succeeded just as ctx ended (a stop, a
			// deadline): never a nil result without an error.
			if err == nil {
				err = ctx.Err()
			}
			return nil, err
		}
		if l == providers.Found {
			engine, image = d.Type, d.Image
		}
	}
	absent, err := confirmDelete(ctx, a, verify, events.Resource{Kind: events.ResDatabase, ID: id},
		a.inVisibleProject(st.Reg.ProjectUUID, func(ctx context.Context) (providers.Lookup, error) {
			_, l, err := a.e.deps.PaaS.GetDatabase(ctx, id)
			return l, err
		}),
		func(ctx context.Context) (providers.DeleteOutcome, error) {
			return a.e.deps.PaaS.DeleteDatabase(ctx, id)
		})
	if err != nil {
		return nil, err
	}
	left, err := a.serverAfterDelete(ctx, st.Reg.Template, events.ResDatabase, id)
	if err != nil {
		return nil, err
	}
	return events.DBDeleted{StepResult: a.result(absent), DBUUID: id, Engine: engine, Image: image, Left: left}, nil
}

func deleteApp(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	id := st.Reg.AppUUID
	absent, err := confirmDelete(ctx, a, verify, events.Resource{Kind: events.ResApplication, ID: id},
		a.inVisibleProject(st.Reg.ProjectUUID, func(ctx context.Context) (providers.Lookup, error) {
			_, l, err := a.e.deps.PaaS.GetApplication(ctx, id)
			return l, err
		}),
		func(ctx context.Context) (providers.DeleteOutcome, error) {
			return a.e.deps.PaaS.DeleteApplication(ctx, id)
		})
	if err != nil {
		return nil, err
	}
	left, err := a.serverAfterDelete(ctx, st.Reg.Template, events.ResApplication, id)
	if err != nil {
		return nil, err
	}
	return events.AppDeleted{StepResult: a.result(absent), AppUUID: id, Left: left}, nil
}

func deleteRepo(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	r := st.Reg.Repo
	absent, err := confirmDelete(ctx, a, verify, events.Resource{Kind: events.ResRepository, ID: r.String()},
		func(ctx context.Context) (providers.Lookup, error) {
			_, l, err := a.e.deps.GitHost.GetRepo(ctx, r.Project, r.Slug)
			return l, err
		},
		func(ctx context.Context) (providers.DeleteOutcome, error) {
			return a.e.deps.GitHost.DeleteRepo(ctx, r.Project, r.Slug)
		})
	if err != nil {
		return nil, err
	}
	return events.RepoDeleted{StepResult: a.result(absent), Repo: r}, nil
}

func deleteProject(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	id := st.Reg.ProjectUUID
	absent, err := confirmDelete(ctx, a, verify, events.Resource{Kind: events.ResProject, ID: id},
		func(ctx context.Context) (providers.Lookup, error) {
			_, l, err := a.e.deps.PaaS.GetProject(ctx, id)
			return l, err
		},
		func(ctx context.Context) (providers.DeleteOutcome, error) {
			return a.e.deps.PaaS.DeleteProject(ctx, id)
		})
	if err != nil {
		return nil, err
	}
	return events.ProjectDeleted{StepResult: a.result(absent), ProjectUUID: id}, nil
}

// listed records what a step found and is about to delete
// (ResourcesListed): the slot tracks each one until a confirmed deletion
// (EnvVarsDeleted, VolumeDeleted) removes it.
func (a *attempt) listed(ctx context.Context, rs []events.Resource) error {
	if len(rs) == 0 {
		return nil
	}
	return a.append(ctx, events.ResourcesListed{JobID: a.job.ID, Step: a.step, Attempt: a.n, Resources: rs})
}

// deleteEnvVars lists the app's env vars and deletes each (Coolify deletes
// them immediately). A listing is already a check, so verify changes nothing.
func deleteEnvVars(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	app := st.Reg.AppUUID
	envs, err := listOf(ctx, a, app, events.NameListEnvs, false, a.e.deps.PaaS.ListEnvs)
	if err != nil {
		return nil, fromProvider("list env vars of "+app, err)
	}
	found := make([]events.Resource, 0, len(envs))
	for _, env := range envs {
		found = append(found, events.Resource{Kind: events.ResEnvVar, ID: env.UUID, Name: env.Key})
	}
	if err := a.listed(ctx, found); err != nil {
		return nil, err
	}
	ids := []string{}
	for _, env := range envs {
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResEnvVar, ID: env.UUID, Name: env.Key}},
			func(ctx context.Context) error { _, err := a.e.deps.PaaS.DeleteEnv(ctx, app, env.UUID); return err })
		if err != nil {
			return nil, fromProvider("delete env var "+env.Key, err)
		}
		ids = append(ids, env.UUID)
	}
	// Env deletes are immediate; a second listing confirms them.
	envs, err = listOf(ctx, a, app, events.NameListEnvs, true, a.e.deps.PaaS.ListEnvs)
	if err != nil {
		return nil, fromProvider("confirm env vars of "+app+" are gone", err)
	}
	if len(envs) > 0 {
		return nil, failf("%d env vars of %s still exist after their deletion (first: %s)", len(envs), app, envs[0].Key)
	}
	return events.EnvVarsDeleted{StepResult: a.result(false), AppUUID: app, EnvIDs: ids}, nil
}

// deleteVolumes removes the mount definitions of the app's persistent
// storages (file storages are configuration, not data, and stay). That is
// all Coolify's API can do: its storage delete runs no `docker volume rm`,
// so each Docker volume and its data stay on the server; the result
// (VolumeMountsRemoved) names each one with its manual clean-up, and the
// slot keeps it as a remaining docker_volume. A storage Coolify holds
// read-only (declared by docker-compose or a service) answers 422: the step
// fails at once with what to do, it does not retry.
func deleteVolumes(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	app := st.Reg.AppUUID
	list, err := listOf(ctx, a, app, events.NameListStorages, false, a.e.deps.PaaS.ListStorages)
	if err != nil {
		return nil, fromProvider("list storages of "+app, err)
	}
	found := []events.Resource{}
	for _, s := range list {
		if s.Kind == "persistent" {
			found = append(found, events.Resource{Kind: events.ResVolume, ID: s.UUID, Name: s.Name})
		}
	}
	if err := a.listed(ctx, found); err != nil {
		return nil, err
	}
	ids := []string{}
	left := []events.LeftVolume{}
	for _, s := range list {
		if s.Kind != "persistent" {
			continue
		}
		err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResVolume, ID: s.UUID, Name: s.Name}},
			func(ctx context.Context) error { _, err := a.e.deps.PaaS.DeleteStorage(ctx, app, s.UUID); return err })
		if providers.CodeOf(err) == providers.CodeUnprocessable {
			return nil, &stepError{status: 422, code: events.FailureMountReadOnly, args: map[string]string{"volume": s.Name, "app": app}, msg: fmt.Sprintf("Coolify refuses to remove the mount of volume %s (application %s): %v — a storage declared by docker-compose or a service is read-only through the API (change the compose file), and one with scheduled volume backups must lose them first; then resume", s.Name, app, err)}
		}
		if err != nil {
			return nil, fromProvider("remove the mount of volume "+s.Name, err)
		}
		ids = append(ids, s.UUID)
		left = append(left, leftVolume(app, s))
	}
	list, err = listOf(ctx, a, app, events.NameListStorages, true, a.e.deps.PaaS.ListStorages)
	if err != nil {
		return nil, fromProvider("confirm volumes of "+app+" are gone", err)
	}
	for _, s := range list {
		if s.Kind == "persistent" {
			return nil, failf("the mount of volume %s of %s still exists after its removal", s.Name, app)
		}
	}
	return events.VolumeMountsRemoved{StepResult: a.result(false), AppUUID: app, StorageIDs: ids, Left: left}, nil
}

// leftVolume is what removing s's mount definition leaves on the server.
func leftVolume(app string, s providers.Storage) events.LeftVolume {
	l := events.LeftVolume{StorageUUID: s.UUID, Volume: s.Name, MountPath: s.MountPath, Server: events.AppServer(app),
		Cleanup: "docker volume rm " + s.Name}
	if s.HostPath != "" {
		l.Volume, l.HostPath = "", s.HostPath
		l.Cleanup = "remove the directory " + s.HostPath + " if its data is no longer wanted"
	}
	return l
}

// forcePushTemplate overwrites the slot branch with the template, with a
// lease on the sha read just before. If the branch is already at the
// template's sha (a resumed attempt whose push landed) it records that.
func forcePushTemplate(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	reg := st.Reg
	repoRes := &events.Resource{Kind: events.ResRepository, ID: reg.Repo.String(), Name: reg.Branch}
	srcURL, dstURL := a.e.deps.RepoURL(reg.TemplateRepo), a.e.deps.RepoURL(reg.Repo)
	var tmplSHA, oldSHA string
	err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResRepository, ID: reg.TemplateRepo.String(), Name: reg.TemplateRef}},
		func(ctx context.Context) error {
			var err error
			tmplSHA, err = a.e.deps.Pusher.RemoteSHA(ctx, srcURL, reg.TemplateRef)
			return err
		})
	if err != nil {
		return nil, fromProvider("read template sha", err)
	}
	if tmplSHA == "" {
		return nil, failf("template %s has no branch %s", reg.TemplateRepo, reg.TemplateRef)
	}
	err = a.call(ctx, events.StepStarted{Resource: repoRes, Verify: true}, func(ctx context.Context) error {
		var err error
		oldSHA, err = a.e.deps.Pusher.RemoteSHA(ctx, dstURL, reg.Branch)
		return err
	})
	if err != nil {
		return nil, fromProvider("read slot repo sha", err)
	}
	out := events.ForcePushed{StepResult: a.result(false), Repo: reg.Repo, OldSHA: oldSHA, NewSHA: tmplSHA}
	if oldSHA == tmplSHA {
		return out, nil
	}
	var newSHA string
	err = a.call(ctx, events.StepStarted{Resource: repoRes, ExpectedSHA: oldSHA}, func(ctx context.Context) error {
		var err error
		newSHA, err = a.e.deps.Pusher.ForcePushWithLease(ctx, srcURL, reg.TemplateRef, dstURL, reg.Branch, oldSHA)
		return err
	})
	if err != nil {
		return nil, fromProvider("force push template", err)
	}
	out.NewSHA = newSHA
	return out, nil
}

// The slot-changing steps (vacate, retire, record_repo) make no outside
// call and do not write the slot stream: they check that the job may change
// the slot and record that check. The slot's change itself (SlotVacated,
// SlotRetired, SlotPromoted) is a consequence of the job's terminal success:
// slots.ReleaseLock writes it in the same append as JobReleased, after
// JobSucceeded is in the job stream. Written before the terminal event, it
// could land after a person's cancel (the slot append is not fenced by the
// job stream), leaving "job cancelled" and "slot retired by that job" in the
// log; written after JobSucceeded, which the cancel fences (and which fences
// the cancel), it cannot. See docs/jobs.md, "Streams and order of appends".

// vacate: a successful reset ends the occupancy (SlotVacated, with the
// release).
func vacate(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	if err := a.holdsLock(ctx); err != nil {
		return nil, err
	}
	return events.StepSucceeded{StepResult: a.result(false), Detail: "the slot is vacated when the job's success is recorded",
		DetailCode: events.DetailVacateOnSuccess}, nil
}

// retire: once every resource of a teardown is confirmed gone, a successful
// teardown ends the slot (SlotRetired, with the release).
func retire(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	for _, st := range []string{events.StepDeleteDB, events.StepDeleteApp, events.StepDeleteRepo, events.StepDeleteProject} {
		if !a.job.Done[st] {
			return nil, failf("cannot retire: step %s is not confirmed", st)
		}
	}
	if why := a.retireBlocked(); why != "" {
		return nil, &stepError{status: 409, code: events.FailureManualCleanup, msg: why + " — run each clean-up on the server; the slot stays teardown incomplete, listing them"}
	}
	if err := a.holdsLock(ctx); err != nil {
		return nil, err
	}
	return events.StepSucceeded{StepResult: a.result(false), Detail: "every resource is confirmed gone; the slot is retired when the job's success is recorded",
		DetailCode: events.DetailRetireOnSuccess}, nil
}

// recordRepo: a successful promote records the new repository on the slot
// (SlotPromoted, with the release), once.
func recordRepo(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	if err := a.holdsLock(ctx); err != nil {
		return nil, err
	}
	target := slots.PromoteTarget(&a.job).String()
	return events.StepSucceeded{StepResult: a.result(false), Detail: "promoted to " + target + "; recorded on the slot when the job's success is recorded",
		DetailCode: events.DetailPromoteOnSuccess, DetailArgs: map[string]string{"repo": target}}, nil
}

// holdsLock checks that the slot's lock is this job's.
func (a *attempt) holdsLock(ctx context.Context) error {
	st, err := a.slot(ctx)
	if err != nil {
		return err
	}
	if st.LockJob != a.job.ID {
		return failf("slot %s lock is not held by this job", st.Name)
	}
	return nil
}

// lookupRepo is tri-state: only 404 lets the promote go on; found fails
// ("already exists"), unknown aborts.
func lookupRepo(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	r := slots.PromoteTarget(&a.job)
	var l providers.Lookup
	err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResRepository, ID: r.String()}},
		func(ctx context.Context) error {
			var err error
			_, l, err = a.e.deps.GitHost.GetRepo(ctx, r.Project, r.Slug)
			return err
		})
	switch {
	case l == providers.Absent:
		return events.StepSucceeded{StepResult: a.result(false), Detail: "repository " + r.String() + " does not exist",
			DetailCode: events.DetailRepoAbsent, DetailArgs: map[string]string{"repo": r.String()}}, nil
	case l == providers.Found:
		return nil, failf("repository %s already exists", r)
	case err != nil:
		if errors.Is(err, errFenced) || ctx.Err() != nil {
			return nil, err
		}
		se := fromProvider("cannot verify that "+r.String()+" does not exist", err).(*stepError)
		se.uncertain = false
		return nil, se
	}
	return nil, failf("cannot verify that %s does not exist", r)
}

// createRepo records RepoCreated only for a real 201; "already existed" fails.
// Verifying an uncertain create: absent → create again; found → adopt it
// when it is the one this job asked for and empty (adoptCreated). The
// uncertain create may still be on the wire (its worker was killed
// mid-request) and land after this attempt's lookup: the create again then
// answers 409, and the repository is looked up again and adopted on the
// same terms. A 409 on a first create stays a failure.
func createRepo(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	r := slots.PromoteTarget(&a.job)
	res := &events.Resource{Kind: events.ResRepository, ID: r.String()}
	if verify {
		repo, l, err := a.getRepo(ctx, r, res)
		if l == providers.Found {
			return adoptCreated(ctx, a, r, repo, res, events.DetailAdoptedUncertain)
		}
		if l != providers.Absent {
			return nil, fromProvider("verify "+r.String(), err)
		}
	}
	var repo providers.Repo
	var out providers.CreateOutcome
	err := a.call(ctx, events.StepStarted{Resource: res}, func(ctx context.Context) error {
		var err error
		repo, out, err = a.e.deps.GitHost.CreateRepo(ctx, r.Project, r.Slug)
		return err
	})
	if out == providers.Existed && verify {
		found, l, err := a.getRepo(ctx, r, res)
		if l == providers.Found {
			return adoptCreated(ctx, a, r, found, res, events.DetailAdoptedConflict)
		}
		// 409, then no answer or a 404 (a repository in its creation or
		// deletion): whether it is this job's is unknown, so a resume
		// verifies again; after a 404 a retry may see it.
		se := fromProvider("create "+r.String()+" answered 409 but it could not be looked up", err).(*stepError)
		se.retryable, se.uncertain = se.retryable || l == providers.Absent, true
		return nil, se
	}
	if out == providers.Existed {
		return nil, failf("repository %s already exists", r)
	}
	if err != nil {
		return nil, fromProvider("create "+r.String(), err)
	}
	if out != providers.Created {
		return nil, failf("create %s: no 201 answer", r)
	}
	return events.RepoCreated{StepResult: a.result(false), Repo: events.RepoRef{Project: r.Project, Slug: repo.Slug}}, nil
}

// getRepo looks the promote target up (a verifying call).
func (a *attempt) getRepo(ctx context.Context, r events.RepoRef, res *events.Resource) (providers.Repo, providers.Lookup, error) {
	var repo providers.Repo
	var l providers.Lookup
	err := a.call(ctx, events.StepStarted{Resource: res, Verify: true}, func(ctx context.Context) error {
		var err error
		repo, l, err = a.e.deps.GitHost.GetRepo(ctx, r.Project, r.Slug)
		return err
	})
	return repo, l, err
}

// adoptCreated records repo, found at r after this job's uncertain create,
// as that create's: only when it is the one the job asked for (same project
// and name) and empty (nothing was pushed to it); anything else is another's
// and fails. Its git side may lag the REST answer that showed it: Bitbucket
// shows a repository INITIALISING ("just been created in the database and
// the associated SCM is currently in the process of creating its storage",
// Bitbucket Server javadoc 9.3.0, Repository.State) before git can read it,
// so a git "not found" there is retryable and uncertain: a resume looks again.
func adoptCreated(ctx context.Context, a *attempt, r events.RepoRef, repo providers.Repo, res *events.Resource, code string) (events.Payload, error) {
	if !strings.EqualFold(repo.Project, r.Project) || repo.Name != r.Slug {
		return nil, failf("repository %s exists as %s/%s named %q, not the %q this job asked for; it was not created by this job", r, repo.Project, repo.Slug, repo.Name, r.Slug)
	}
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	var sha string
	err = a.call(ctx, events.StepStarted{Resource: res, Verify: true}, func(ctx context.Context) error {
		var err error
		sha, err = a.e.deps.Pusher.RemoteSHA(ctx, a.e.deps.RepoURL(r), st.Reg.Branch)
		return err
	})
	if err != nil {
		se := fromProvider("verify "+r.String(), err).(*stepError)
		if providers.CodeOf(err) == providers.CodeNotFound {
			se.retryable, se.uncertain = true, true
		}
		return nil, se
	}
	if sha != "" {
		return nil, failf("repository %s exists and is not empty; it was not created by this job", r)
	}
	return events.StepSucceeded{StepResult: a.result(false), Detail: "adopted " + r.String() + " (same project and name, empty): it " + adoptedHow[code],
		DetailCode: code, DetailArgs: map[string]string{"repo": r.String()}}, nil
}

// adoptedHow is each adopt code's English, for the log and older dashboards.
var adoptedHow = map[string]string{
	events.DetailAdoptedUncertain: "exists after this job's uncertain create",
	events.DetailAdoptedConflict:  "answered 409 to this attempt's create: the earlier attempt's create landed after this attempt's lookup",
}

// pushCode pushes the slot's branch to the new repository, never forced. A
// verifying attempt first checks whether the new repo already has the
// slot's sha.
func pushCode(ctx context.Context, a *attempt, verify bool) (events.Payload, error) {
	st, err := a.slot(ctx)
	if err != nil {
		return nil, err
	}
	dst := slots.PromoteTarget(&a.job)
	srcURL, dstURL := a.e.deps.RepoURL(st.Reg.Repo), a.e.deps.RepoURL(dst)
	res := &events.Resource{Kind: events.ResRepository, ID: dst.String(), Name: st.Reg.Branch}
	if verify {
		var src, have string
		err := a.call(ctx, events.StepStarted{Resource: res, Verify: true}, func(ctx context.Context) error {
			var err error
			if src, err = a.e.deps.Pusher.RemoteSHA(ctx, srcURL, st.Reg.Branch); err != nil {
				return err
			}
			have, err = a.e.deps.Pusher.RemoteSHA(ctx, dstURL, st.Reg.Branch)
			return err
		})
		if err != nil {
			return nil, fromProvider("verify push to "+dst.String(), err)
		}
		if have != "" && have == src {
			return events.CodePushed{StepResult: a.result(false), Repo: dst, SHA: have}, nil
		}
	}
	var sha string
	err = a.call(ctx, events.StepStarted{Resource: res}, func(ctx context.Context) error {
		var err error
		sha, err = a.e.deps.Pusher.PushNew(ctx, srcURL, st.Reg.Branch, dstURL, st.Reg.Branch)
		return err
	})
	if err != nil {
		return nil, fromProvider("push to "+dst.String(), err)
	}
	return events.CodePushed{StepResult: a.result(false), Repo: dst, SHA: sha}, nil
}
