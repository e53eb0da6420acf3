package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
)

// doctorCmd runs `slotkeeper doctor [serve flags]`: the read-only checks of
// the configured providers, one line each with the exact fix, exit 1 when
// any fails. It takes serve's flags and environment, so the configuration
// checked is the one serve would run with.
func doctorCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	c, err := parseServe(args, env, stderr)
	if err != nil {
		return err
	}
	if c.useSim() {
		return &usageError{"doctor checks real providers: give --coolify-url, --bitbucket-url and their tokens (or --sim-url)"}
	}
	w, err := openWorld(ctx, c, false)
	if err != nil {
		return err
	}
	defer w.close()
	rs := doctor.Run(ctx, doctorChecks(c, w)...)
	if n := doctor.Print(stdout, rs); n > 0 {
		return fmt.Errorf("%d of %d checks failed", n, len(rs))
	}
	return nil
}

// doctorChecks is the one list of provider checks: `slotkeeper doctor`
// prints them, serve runs them at start (startupChecks) and /readyz keeps
// reporting the live ones (readinessChecks).
func doctorChecks(c Config, w world) []doctor.Check {
	var checks []doctor.Check
	if api, ok := w.deps.PaaS.(doctor.CoolifyAPI); ok {
		checks = append(checks, doctor.Coolify(api, splitList(c.CoolifyProjects)))
	}
	// Bitbucket token kind and permissions, and git auth (ls-remote of each
	// template): the lead appends doctor.Bitbucket(…) and the git check
	// here (backend/doctor/bitbucket.go).
	return checks
}

// startupChecks runs the doctor's checks before serve starts with real
// providers: a definite misconfiguration (a wrong base URL, a token of
// another team, a missing permission) refuses the start, naming each one;
// other failures are logged and /readyz reports them until they pass.
func startupChecks(ctx context.Context, c Config, w world, log *slog.Logger) error {
	// Bounded: an unreachable provider must not hold the start (it is not
	// definite; /readyz reports it).
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	failed, definite := doctor.Failed(doctor.Run(cctx, doctorChecks(c, w)...))
	var refuse []string
	for _, r := range failed {
		log.Warn("provider check failed", slog.String("check", r.Check), slog.String("detail", r.Detail), slog.String("fix", r.Fix), slog.Bool("definite", r.Definite))
		if r.Definite {
			refuse = append(refuse, r.Check+": "+r.Detail+" (fix: "+r.Fix+")")
		}
	}
	if definite {
		return errors.New("refusing to start on a definite misconfiguration (run `slotkeeper doctor` for every check): " + strings.Join(refuse, "; "))
	}
	return nil
}

// checksProbe is the readiness probe of a list of doctor checks: ready when
// every result passes.
func checksProbe(name string, checks []doctor.Check) probe {
	return probe{name: name, check: func(ctx context.Context) error {
		failed, _ := doctor.Failed(doctor.Run(ctx, checks...))
		if len(failed) == 0 {
			return nil
		}
		var msgs []string
		for _, r := range failed {
			msgs = append(msgs, r.Check+": "+r.Detail)
		}
		return errors.New(strings.Join(msgs, "; "))
	}}
}
