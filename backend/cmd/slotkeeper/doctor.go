package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
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
	templates, err := logTemplates(ctx, c)
	if err != nil {
		return err
	}
	checks := doctorChecks(c, w, templates)
	// What the ready resets will need (issue 32): checked here and by
	// /readyz, not at serve's start (a start refused for it would stop
	// every other job too).
	var ts []events.SlotTemplate
	for _, t := range templates {
		if t.Template != nil {
			ts = append(ts, *t.Template)
		}
	}
	checks = append(checks, doctor.ResetNeeds(w.deps.PaaS, ts))
	rs := doctor.Run(ctx, checks...)
	if n := doctor.Print(stdout, rs); n > 0 {
		return fmt.Errorf("%d of %d checks failed", n, len(rs))
	}
	return nil
}

// doctorChecks is the one list of provider checks: `slotkeeper doctor`
// prints them, serve runs them at start (startupChecks) and /readyz keeps
// reporting the live ones (readinessChecks).
func doctorChecks(c Config, w world, templates []events.SlotRegistered) []doctor.Check {
	var checks []doctor.Check
	if api, ok := w.deps.PaaS.(doctor.CoolifyAPI); ok {
		checks = append(checks, doctor.Coolify(api, scopeList(c.CoolifyProjects)))
	}
	// Projects that hold only templates need no Project admin: the git
	// check below reads each template itself.
	slotProjects := map[string]bool{}
	for _, t := range templates {
		slotProjects[t.Repo.Project] = true
	}
	var onlyTemplates []string
	for _, t := range templates {
		if !slotProjects[t.TemplateRepo.Project] && !slices.Contains(onlyTemplates, t.TemplateRepo.Project) {
			onlyTemplates = append(onlyTemplates, t.TemplateRepo.Project)
		}
	}
	if bb, ok := w.deps.GitHost.(doctor.BitbucketReader); ok {
		checks = append(checks, doctor.BitbucketProjects(bb, scopeList(c.BitbucketProjects), onlyTemplates...))
	}
	if g, ok := w.deps.Pusher.(doctor.GitReader); ok && w.deps.RepoURL != nil {
		var ts []doctor.Template
		seen := map[string]bool{}
		for _, t := range templates {
			name := t.TemplateRepo.Project + "/" + t.TemplateRepo.Slug
			if seen[name+"@"+t.TemplateRef] {
				continue
			}
			seen[name+"@"+t.TemplateRef] = true
			ts = append(ts, doctor.Template{Name: name, URL: w.deps.RepoURL(t.TemplateRepo), Branch: t.TemplateRef})
		}
		checks = append(checks, doctor.GitAuth(g, ts))
	}
	if bb, ok := w.deps.GitHost.(doctor.RepoReader); ok && c.PRRepos != "" {
		var repos []doctor.PRRepo
		for _, e := range splitList(c.PRRepos) {
			if r, err := pullrequests.ParseRepo(e); err == nil {
				pr := doctor.PRRepo{Project: r.Project, Slug: r.Slug}
				if w.deps.RepoURL != nil {
					pr.URL = w.deps.RepoURL(r)
				}
				repos = append(repos, pr)
			}
		}
		g, _ := w.deps.Pusher.(doctor.GitReader)
		checks = append(checks, doctor.PullRequests(bb, g, repos, c.BitbucketWebhookSecret != ""))
	}
	return checks
}

// logTemplates reads every registration from the log, for the templates
// the git check reads and the projects that hold only templates. It opens
// the store the config names and reads to its head, bounded in time; an
// embedded store in use by a running serve cannot be opened (that serve
// ran the same checks at its start).
func logTemplates(ctx context.Context, c Config) ([]events.SlotRegistered, error) {
	if c.Events == "" {
		if _, err := os.Stat(filepath.Join(c.Data, "events.db")); errors.Is(err, fs.ErrNotExist) {
			return nil, nil // no log here: nothing registered (and nothing created)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	store, _, err := openStore(ctx, c, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, fmt.Errorf("read the registered templates: %w", err)
	}
	defer store.Close()
	head, err := store.Head(ctx)
	if err != nil || head == 0 {
		return nil, err
	}
	var out []events.SlotRegistered
	stop := errors.New("at head")
	// Unfiltered: the head event may be of any stream, and it ends the read.
	err = store.SubscribeAll(ctx, 0, events.Filter{}, func(ctx context.Context, ev events.RecordedEvent) error {
		if p, err := events.Decode(ev); err == nil {
			if r, ok := p.(events.SlotRegistered); ok {
				out = append(out, r)
			}
		}
		if ev.Position >= head {
			return stop
		}
		return nil
	})
	if errors.Is(err, stop) {
		err = nil
	}
	return out, err
}

// slotTemplates is logTemplates for a running serve: its read model's
// slots.
func slotTemplates(ctx context.Context, reads interface {
	ListSlots(context.Context) ([]projections.SlotView, error)
}) []events.SlotRegistered {
	list, err := reads.ListSlots(ctx)
	if err != nil {
		return nil
	}
	out := make([]events.SlotRegistered, 0, len(list))
	for _, s := range list {
		out = append(out, events.SlotRegistered{Slot: s.Name, Repo: s.Repo, TemplateRepo: s.TemplateRepo, TemplateRef: s.TemplateRef})
	}
	return out
}

// startupChecks runs the doctor's checks before serve starts with real
// providers: a definite misconfiguration (a wrong base URL, a token of
// another team, a missing permission) refuses the start, naming each one;
// other failures are logged and /readyz reports them until they pass.
func startupChecks(ctx context.Context, c Config, w world, templates []events.SlotRegistered, log *slog.Logger) error {
	// Bounded: an unreachable provider must not hold the start (it is not
	// definite; /readyz reports it).
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	failed, definite := doctor.Failed(doctor.Run(cctx, doctorChecks(c, w, templates)...))
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
