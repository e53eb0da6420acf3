package jobs

import (
	"context"
	"strings"
	"sync"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/events"
)

// The checks before destroying (issue 32): the ready reset's first step
// asks Coolify what the reset will need, with the checks `slotkeeper
// doctor` and /readyz run (backend/doctor/reset.go), and fails — having
// deleted nothing — when something is missing, naming the fix. After a
// queued delete of an application or a database is confirmed, the step
// looks at the server: on an unreachable one Coolify deleted the rows and
// left the containers and data (DeleteResourceJob.php:57-100, 130), which
// stay the slot's as remaining, with their clean-up.

var checkSteps = bodies{events.StepPreflight: preflight}

// preflight runs the reset's checks. It changes nothing, so verify
// changes nothing either. A definite failure (a missing ability, a locked
// or hidden template value, an unknown engine) is not retryable: a resume
// only helps once the fix is made; one that may pass (the server
// unreachable, Coolify not answering) is.
func preflight(ctx context.Context, a *attempt, _ bool) (events.Payload, error) {
	t, st, err := a.template(ctx)
	if err != nil {
		return nil, err
	}
	var rs []doctor.Result
	err = a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResApplication, ID: st.Reg.AppUUID, Name: "check what the reset needs", NameCode: events.NameCheckReset}, Verify: true},
		func(ctx context.Context) error {
			rs = doctor.Run(ctx, doctor.ResetNeeds(a.e.deps.PaaS, []events.SlotTemplate{t}))
			slot, _ := doctor.ResetSlot(ctx, a.e.deps.PaaS, t, st.Reg.AppUUID, st.Reg.DBUUID)
			rs = append(rs, slot...)
			return context.Cause(ctx)
		})
	if err != nil {
		return nil, err // fenced, the store, or ctx: nothing was checked
	}
	failed, definite := doctor.Failed(rs)
	if len(failed) > 0 {
		msgs := make([]string, 0, len(failed))
		for _, r := range failed {
			m := r.Check + ": " + r.Detail
			if r.Fix != "" {
				m += " (fix: " + r.Fix + ")"
			}
			msgs = append(msgs, m)
		}
		return nil, &stepError{status: 422, retryable: !definite, code: events.FailurePreflight,
			msg: "the reset would not finish, so nothing was deleted: " + strings.Join(msgs, "; ")}
	}
	var passed []string
	for _, r := range rs {
		passed = append(passed, r.Check+": "+r.Detail)
	}
	return events.StepSucceeded{StepResult: a.result(false), Detail: "checked before deleting anything: " + strings.Join(passed, "; "),
		DetailCode: events.DetailPreflightPassed}, nil
}

// createdURLs keeps, in memory only, the internal URL (with its password)
// that the 201 of a database's create answered, by database uuid, until
// restore_env has used it. Coolify shows it there to any token allowed to
// create (DatabasesController.php:1950-1968) but later only to a token
// with read:sensitive (DC:56-79); it is never written to the log.
var createdURLs sync.Map

// databaseURL is the new database's internal URL: the create's answer seen
// by this process, else what GET /databases/{uuid} shows (a token with
// read:sensitive). A resume in another process with a token without
// read:sensitive has no way to read it: the step fails with the fix.
func (a *attempt) databaseURL(ctx context.Context, dbID string) (string, error) {
	if u, ok := createdURLs.Load(dbID); ok {
		return u.(string), nil
	}
	var db providers.Database
	err := a.call(ctx, events.StepStarted{Resource: &events.Resource{Kind: events.ResDatabase, ID: dbID, Name: "read internal URL", NameCode: events.NameReadInternalURL}, Verify: true},
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
		return "", fromProvider("read the new database "+dbID, err)
	}
	if db.InternalURL == "" {
		return "", &stepError{status: 403, code: events.FailureSensitive, args: map[string]string{"target": dbID}, msg: "Coolify shows the internal URL of database " + dbID + " only in the answer to its create, which this process did not see (it restarted, or another one created it), and to tokens with read:sensitive: " + doctor.SensitiveFix + ", then resume"}
	}
	return db.InternalURL, nil
}

// serverAfterDelete looks at the server a confirmed queued delete of
// resource kind id ran on: the slot's template's server, else (no
// template, or its server is gone) every server of the token's team (an
// unreachable one may have held it). When it is
// unreachable, the rows are gone but the containers and volumes are not:
// it returns them, each with its clean-up command. Coolify names a
// resource's containers and volumes after its uuid (StartPostgresql.php:28;
// "postgres-data-<uuid>", StandalonePostgresql.php:107; an application's
// storages "<uuid>-<name>", ApplicationsController.php:4898), so the
// clean-up filters by it.
func (a *attempt) serverAfterDelete(ctx context.Context, t *events.SlotTemplate, kind, id string) ([]events.LeftOnServer, error) {
	var down []providers.Server
	res := &events.Resource{Kind: events.ResServer, Name: "is the server of " + kind + " " + id + " reachable after its delete",
		NameCode: events.NameServerReachable, NameArgs: events.NameArgs{Target: id}}
	if t != nil && t.ServerUUID != "" {
		res.ID = t.ServerUUID
	}
	err := a.call(ctx, events.StepStarted{Resource: res, Verify: true}, func(ctx context.Context) error {
		if res.ID != "" {
			srv, l, err := a.e.deps.PaaS.GetServer(ctx, res.ID)
			switch l {
			case providers.Found:
				if !srv.Reachable || !srv.Usable {
					down = append(down, srv)
				}
				return nil
			case providers.Unknown:
				return err
			}
			res.ID = "" // the template's server is gone: every server may have held it
		}
		all, err := a.e.deps.PaaS.ListServers(ctx)
		for _, srv := range all {
			if !srv.Reachable || !srv.Usable {
				down = append(down, srv)
			}
		}
		return err
	})
	if err != nil {
		return nil, fromProvider("look at the server after deleting "+kind+" "+id, err)
	}
	if len(down) == 0 {
		return nil, nil
	}
	var names []string
	for _, s := range down {
		names = append(names, "server "+s.Name+" ("+s.UUID+")")
	}
	where := strings.Join(names, " or ")
	if len(down) > 1 || res.ID == "" {
		where = "unreachable " + where
	}
	return []events.LeftOnServer{
		{Kind: events.ResDockerContainer, ID: id, Server: where, Cleanup: "docker ps -aq --filter name=" + id + " | xargs -r docker rm -f"},
		{Kind: events.ResDockerVolume, ID: id, Server: where, Cleanup: "docker volume ls -q --filter name=" + id + " | xargs -r docker volume rm"},
	}, nil
}

// retireBlocked says why retire must not end the slot as clean: what the
// teardown's deletes left on an unreachable server ("" when nothing).
func (a *attempt) retireBlocked() string {
	var msgs []string
	for _, st := range []string{events.StepDeleteDB, events.StepDeleteApp} {
		for _, l := range events.LeftOf(a.job.Results[st]) {
			msgs = append(msgs, l.Kind+" of "+l.ID+" on "+l.Server+" (clean-up: "+l.Cleanup+")")
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return "Coolify deleted the rows while it could not reach the server, so the slot is not retired as clean: still on the server: " + strings.Join(msgs, "; ")
}
