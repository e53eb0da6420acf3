package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
)

// CoolifyAPI is what the Coolify checks read (the coolify client has it).
// Every call is a GET.
type CoolifyAPI interface {
	// BaseURL is the configured API base, e.g. https://coolify.example/api/v1.
	BaseURL() string
	Version(ctx context.Context) (string, error)
	Team(ctx context.Context) (coolify.Team, error)
	HasAbility(ctx context.Context, ability string) (bool, error)
	GetProject(ctx context.Context, uuid string) (providers.Project, providers.Lookup, error)
}

// Coolify checks a Coolify deployment read-only: the base URL (GET
// /version answers a version; a URL ending in /api reaches Coolify's
// catch-all instead), the version against coolify.MinVersion, the token's
// team, that each of projects is visible to the token, and its abilities
// (read: /version answered; write and deploy: Coolify's GET-only probes).
//
// A project that is not visible fails, but not definitely: a teardown
// deletes slot projects, and a scope may still name one. When not one of
// the configured projects is visible, the token is most likely of another
// team (every lookup is filtered by the token's team): that failure is
// definite.
func Coolify(api CoolifyAPI, projects []string) Check {
	return func(ctx context.Context) []Result {
		const base = "coolify: base URL"
		b := strings.TrimRight(api.BaseURL(), "/")
		if strings.HasSuffix(b, "/api") {
			return []Result{{Check: base, Detail: b + " ends in /api: Coolify's catch-all answers every path there with a 404 that looks like \"not found\"",
				Fix: "set --coolify-url to " + b + "/v1", Definite: true}}
		}
		v, err := api.Version(ctx)
		if err != nil {
			r := Result{Check: base, Detail: "GET " + b + "/version: " + err.Error(), Definite: definite(err)}
			switch providers.CodeOf(err) {
			case providers.CodeForeign:
				r.Fix = coolify.BaseURLHint(b) + "; set --coolify-url to the API base, e.g. https://coolify.example/api/v1"
			case providers.CodeUnauthorized:
				r.Fix = "the token is refused: make a new API token in Coolify (Keys & Tokens → API tokens) and pass it with --coolify-token-file"
			case providers.CodeForbidden:
				r.Fix = "Coolify refuses the API: enable it (Settings → API access) and allow this host's IP, and give the token the read ability"
			default:
				r.Fix = "make " + b + " reachable from this host (retrying may be enough)"
			}
			return []Result{r}
		}
		out := []Result{{Check: base, OK: true, Detail: b + " answers as Coolify " + v}}
		ok, err := coolify.VersionAtLeast(v, coolify.MinVersion)
		switch {
		case err != nil:
			out = append(out, Result{Check: "coolify: version", Detail: err.Error(), Fix: "point --coolify-url at Coolify's API", Definite: true})
		case !ok:
			out = append(out, Result{Check: "coolify: version", Detail: "Coolify " + v + " is older than " + coolify.MinVersion + " (the storages endpoints and storage uuids)",
				Fix: "upgrade Coolify to " + coolify.MinVersion + " or later", Definite: true})
		default:
			out = append(out, Result{Check: "coolify: version", OK: true, Detail: v + " ≥ " + coolify.MinVersion})
		}
		team, err := api.Team(ctx)
		if err != nil {
			out = append(out, Result{Check: "coolify: team", Detail: "GET /team: " + err.Error(), Fix: "make the token in the team that owns the slots' projects", Definite: definite(err)})
			return out
		}
		teamName := fmt.Sprintf("%q (#%d)", team.Name, team.ID)
		out = append(out, Result{Check: "coolify: team", OK: true, Detail: "the token belongs to team " + teamName})
		out = append(out, abilities(ctx, api)...)
		var missing []Result
		for _, id := range projects {
			name := "coolify: project " + id
			_, l, err := api.GetProject(ctx, id)
			switch l {
			case providers.Found:
				out = append(out, Result{Check: name, OK: true, Detail: "visible to team " + teamName})
			case providers.Absent:
				r := Result{Check: name, Detail: "not found by a token of team " + teamName + ": it was deleted (a teardown deletes slot projects) or belongs to another team, whose resources Coolify answers \"not found\" for",
					Fix: "if it was torn down, remove it from --coolify-projects; otherwise make the token while the team that owns it is selected"}
				out = append(out, r)
				missing = append(missing, r)
			default:
				out = append(out, Result{Check: name, Detail: "could not look it up: " + errString(err), Fix: "retry; check that Coolify answers", Definite: definite(err)})
			}
		}
		if len(projects) > 0 && len(missing) == len(projects) {
			// Not one of them visible: the token's team is the likely cause.
			for i := range out {
				if strings.HasPrefix(out[i].Check, "coolify: project ") && !out[i].OK {
					out[i].Definite = true
				}
			}
		}
		return out
	}
}

// abilities reports read (the /version call needed it), write (required:
// every delete needs it) and deploy (needed by the reset of a slot with a
// template, issue 23; reported, not required, since slots without one never
// deploy).
func abilities(ctx context.Context, api CoolifyAPI) []Result {
	const name = "coolify: token abilities"
	write, err := api.HasAbility(ctx, "write")
	if err != nil {
		return []Result{{Check: name, Detail: "could not tell write: " + err.Error(), Fix: "retry; check that Coolify answers", Definite: definite(err)}}
	}
	if !write {
		return []Result{{Check: name, Detail: "read only: Coolify answers \"Missing required permissions: write\"; every reset and teardown would fail",
			Fix: "make a token with the read and write abilities (or root) and pass it with --coolify-token-file", Definite: true}}
	}
	deploy, err := api.HasAbility(ctx, "deploy")
	d := "read, write"
	switch {
	case err != nil:
		d += "; deploy unknown (" + err.Error() + ")"
	case deploy:
		d += ", deploy"
	default:
		d += "; no deploy: the reset of a slot registered with a template would fail at its deploy step (give the token the deploy ability; its env-var copy also needs read:sensitive)"
	}
	return []Result{{Check: name, OK: true, Detail: d}}
}

// definite: an answer retrying cannot change (a refused token, a missing
// permission, a wrong base URL); a transport failure, a 5xx, a rate limit or
// a timeout may pass.
func definite(err error) bool {
	switch providers.CodeOf(err) {
	case providers.CodeUnauthorized, providers.CodeForbidden, providers.CodeForeign, providers.CodeInvalid, providers.CodeNotFound:
		return true
	}
	return false
}

func errString(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}
