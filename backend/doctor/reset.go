package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/events"
)

// The checks before destroying (issue 32): what the reset of a slot with a
// template will need, asked of Coolify read-only. `slotkeeper doctor`,
// /readyz and the reset's first step (preflight, backend/jobs) run the same
// checks, so a reset that cannot finish does not start: it fails at its
// first step, with nothing deleted, and says why with the fix.

// ResetAPI is what ResetNeeds reads (providers.PaaS has it). Every call is
// a GET.
type ResetAPI interface {
	HasAbility(ctx context.Context, ability string) (bool, error)
	ListEnvs(ctx context.Context, appUUID string) ([]providers.EnvVar, error)
	GetServer(ctx context.Context, uuid string) (providers.Server, providers.Lookup, error)
}

// ResetNeeds checks, for every distinct template: the token's write
// ability (every delete and create needs it) and deploy ability (unless no
// template deploys); that the template application's env values are
// readable by the token (read:sensitive) and none is locked; and that
// Coolify can reach each template's server. Its cost is 1-2 requests, plus
// one per distinct template application and one per distinct server.
func ResetNeeds(api ResetAPI, templates []events.SlotTemplate) Check {
	return func(ctx context.Context) []Result {
		if len(templates) == 0 {
			return nil
		}
		var out []Result
		deploys := false
		apps, servers := map[string]bool{}, map[string]bool{}
		for _, t := range templates {
			deploys = deploys || !t.NoDeploy
			if t.EnvFromApp != "" {
				apps[t.EnvFromApp] = true
			}
			if t.ServerUUID != "" {
				servers[t.ServerUUID] = true
			}
		}
		out = append(out, resetAbilities(ctx, api, deploys)...)
		for _, app := range sorted(apps) {
			out = append(out, TemplateEnvs(ctx, api, app))
		}
		for _, srv := range sorted(servers) {
			out = append(out, ServerReachable(ctx, api, srv))
		}
		return out
	}
}

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func resetAbilities(ctx context.Context, api ResetAPI, deploys bool) []Result {
	const name = "coolify: abilities a ready reset needs"
	need := []string{"write"}
	if deploys {
		need = append(need, "deploy")
	}
	for _, ab := range need {
		ok, err := api.HasAbility(ctx, ab)
		switch {
		case err != nil:
			return []Result{{Check: name, Detail: "could not tell " + ab + ": " + err.Error(), Fix: "retry; check that Coolify answers", Definite: definite(err)}}
		case !ok:
			return []Result{{Check: name, Detail: "the token lacks the " + ab + " ability: Coolify answers \"Missing required permissions: " + ab + "\"; a reset of a slot with a template would fail after deleting its data",
				Fix: "make a token with the read, write and deploy abilities (and read:sensitive when a template copies env vars) and pass it with --coolify-token-file", Definite: true}}
		}
	}
	return []Result{{Check: name, OK: true, Detail: strings.Join(need, ", ")}}
}

// TemplateEnvs checks that the token can read the values of the template
// application's normal env vars (its preview copies are not copied): a
// value is shown only to a token with read:sensitive (AC:108-119,
// ApiSensitiveData.php:12-21), and never for a locked variable
// (is_shown_once), root included (AC:129-131).
func TemplateEnvs(ctx context.Context, api ResetAPI, app string) Result {
	name := "coolify: env values of template application " + app
	envs, err := api.ListEnvs(ctx, app)
	if err != nil {
		r := Result{Check: name, Detail: "could not list them: " + err.Error(), Fix: "retry; check that Coolify answers", Definite: definite(err)}
		if providers.CodeOf(err) == providers.CodeNotFound {
			r.Fix = "set env_from_app in the slot's template to an application of the token's team (Coolify answers another team's as not found)"
		}
		return r
	}
	var locked, hidden []string
	n := 0
	for _, e := range envs {
		if e.Preview {
			continue
		}
		n++
		switch {
		case e.Locked:
			locked = append(locked, e.Key)
		case e.Hidden:
			hidden = append(hidden, e.Key)
		}
	}
	switch {
	case len(locked) > 0:
		return Result{Check: name, Definite: true,
			Detail: keysText(locked) + " locked in Coolify (is_shown_once): Coolify hides a locked value from every API token, root included, so no reset can copy it",
			Fix:    LockedFix(app, locked)}
	case len(hidden) > 0:
		return Result{Check: name, Definite: true,
			Detail: "Coolify hides the values of " + keysText(hidden) + " from this token: it lacks the read:sensitive ability",
			Fix:    SensitiveFix}
	}
	return Result{Check: name, OK: true, Detail: fmt.Sprintf("%d env values readable, none locked", n)}
}

// SensitiveFix is the fix for values Coolify hides from the token.
const SensitiveFix = "make a token that also has the read:sensitive ability (its user must be allowed to read sensitive data: an admin or owner of the team) and pass it with --coolify-token-file"

// LockedFix is the fix for locked template variables: a locked value can
// never be read back through the API, so either it is unlocked, or the
// value is declared where every slot resolves it itself — a Coolify shared
// variable, which the template variable names by reference (a readable
// value such as {{project.KEY}}).
func LockedFix(app string, keys []string) string {
	return "in Coolify, unlock " + keysText(keys) + " of application " + app +
		", or keep the value out of the template: declare it as a shared variable (team, project or environment) and set the template's variable to its reference, e.g. {{project." + keys[0] + "}} (a reference is readable and each slot resolves it); then run the reset again"
}

// keysText names env vars: "env var K" or "env vars K1, K2".
func keysText(keys []string) string {
	if len(keys) == 1 {
		return "env var " + keys[0]
	}
	return "env vars " + strings.Join(keys, ", ")
}

// ServerReachable checks that Coolify can reach the server a reset creates
// on and deletes from (GET /servers/{uuid}: settings.is_reachable and
// is_usable, ServersController.php:149-184). On an unreachable server a
// queued delete removes Coolify's rows and leaves containers and data
// behind (DeleteResourceJob.php:57-100, 130).
func ServerReachable(ctx context.Context, api ResetAPI, uuid string) Result {
	name := "coolify: server " + uuid
	srv, l, err := api.GetServer(ctx, uuid)
	switch {
	case l == providers.Absent:
		return Result{Check: name, Detail: "not found by this token (Coolify answers another team's server as not found)",
			Fix: "set server_uuid in the slot's template to a server of the token's team", Definite: true}
	case l != providers.Found:
		return Result{Check: name, Detail: "could not read it: " + errString(err), Fix: "retry; check that Coolify answers", Definite: definite(err)}
	case !srv.Reachable || !srv.Usable:
		return Result{Check: name, Detail: fmt.Sprintf("Coolify cannot reach or use server %s (is_reachable %v, is_usable %v): a delete now would remove Coolify's rows and leave the containers and data on the server, and nothing new can start there", srv.Name, srv.Reachable, srv.Usable),
			Fix: "make the server reachable from Coolify (Servers → " + srv.Name + " → Validate Server), then run the reset again"}
	}
	return Result{Check: name, OK: true, Detail: "server " + srv.Name + " reachable and usable"}
}

// SlotAPI is what ResetSlot reads.
type SlotAPI interface {
	GetApplication(ctx context.Context, uuid string) (providers.Application, providers.Lookup, error)
	GetDatabase(ctx context.Context, uuid string) (providers.Database, providers.Lookup, error)
}

// ResetSlot checks one slot: the application a reset deploys exists, and
// the engine of the database it will create is known (the template's, the
// current database's, or the one seen at register) and one Coolify creates
// (routes/api.php:294-304). It returns the engine it found.
func ResetSlot(ctx context.Context, api SlotAPI, t events.SlotTemplate, appUUID, dbUUID string) ([]Result, string) {
	var out []Result
	_, l, err := api.GetApplication(ctx, appUUID)
	switch l {
	case providers.Found:
		out = append(out, Result{Check: "coolify: application " + appUUID, OK: true, Detail: "there to be deployed"})
	case providers.Absent:
		out = append(out, Result{Check: "coolify: application " + appUUID, Detail: "not found: a reset would delete the slot's data and then have nothing to deploy",
			Fix: "register the slot again with its application's uuid, or tear it down", Definite: true})
	default:
		out = append(out, Result{Check: "coolify: application " + appUUID, Detail: "could not read it: " + errString(err), Fix: "retry; check that Coolify answers", Definite: definite(err)})
	}
	engine := t.DBEngine
	if engine == "" && dbUUID != "" {
		d, l, err := api.GetDatabase(ctx, dbUUID)
		switch l {
		case providers.Found:
			engine = d.Type
		case providers.Absent:
		default:
			out = append(out, Result{Check: "coolify: database engine", Detail: "could not read database " + dbUUID + ": " + errString(err), Fix: "retry; check that Coolify answers", Definite: definite(err)})
			return out, ""
		}
	}
	if engine == "" {
		engine = t.SeenEngine
	}
	switch {
	case engine == "":
		out = append(out, Result{Check: "coolify: database engine", Detail: "unknown: the template names none and the slot's database is gone",
			Fix: "declare db_engine in the slot's template (postgresql, mysql, …)", Definite: true})
	case !coolify.Engines[engine]:
		out = append(out, Result{Check: "coolify: database engine", Detail: engine + " is not a database type Coolify's API creates",
			Fix: "declare db_engine in the slot's template as one of postgresql, mysql, mariadb, mongodb, redis, clickhouse, dragonfly, keydb", Definite: true})
	default:
		out = append(out, Result{Check: "coolify: database engine", OK: true, Detail: engine})
	}
	return out, engine
}
