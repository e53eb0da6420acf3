package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// ReconcileConfig is serve's reconciliation setting.
type ReconcileConfig struct {
	Every time.Duration
}

func reconcileFlags(fs *flag.FlagSet, c *ReconcileConfig) {
	fs.DurationVar(&c.Every, "reconcile-every", 15*time.Minute, "interval of scheduled reconciliation runs against the providers (0: only on demand)")
}

func (c ReconcileConfig) validate() error {
	if c.Every < 0 || (c.Every > 0 && c.Every < time.Second) {
		return cfgErr("reconcile-every", "use 0 (on demand only) or at least 1s")
	}
	return nil
}

// reconcileMetrics: findings by class, run duration, last successful run.
type reconcileMetrics struct {
	findings    *prometheus.GaugeVec
	duration    prometheus.Gauge
	lastSuccess prometheus.Gauge
}

func newReconcileMetrics(reg prometheus.Registerer) *reconcileMetrics {
	m := &reconcileMetrics{
		findings:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "slotkeeper_reconcile_findings", Help: "Findings of the latest reconciliation run, by class."}, []string{"class"}),
		duration:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotkeeper_reconcile_last_duration_seconds", Help: "How long the latest reconciliation run took."}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotkeeper_reconcile_last_success_timestamp_seconds", Help: "Unix time of the latest reconciliation run that finished (done)."}),
	}
	reg.MustRegister(m.findings, m.duration, m.lastSuccess)
	return m
}

func (m *reconcileMetrics) observe(rep reconcile.Report) {
	if rep.Run == nil {
		return
	}
	for _, c := range []string{events.FindingOrphan, events.FindingDrift, events.FindingUnknown, events.FindingResolved} {
		m.findings.WithLabelValues(c).Set(float64(rep.Run.Counts[c]))
	}
	if rep.Run.EndedAt != nil {
		m.duration.Set(rep.Run.EndedAt.Sub(rep.Run.StartedAt).Seconds())
		if rep.Run.State == "done" {
			m.lastSuccess.Set(float64(rep.Run.EndedAt.Unix()))
		}
	}
}

// reconcileScope is the configured scope; with the simulators and no
// scope set, the demo's own: every slot's Coolify project and the slot and
// template repositories' Bitbucket projects.
func reconcileScope(ctx context.Context, coolify, bitbucket []string, sim bool, reads projections.ReadModel) ([]string, []string) {
	if len(coolify)+len(bitbucket) > 0 || !sim {
		return coolify, bitbucket
	}
	slots, err := reads.ListSlots(ctx)
	if err != nil {
		return nil, nil
	}
	cs, bs := map[string]bool{}, map[string]bool{}
	for _, s := range slots {
		if s.ProjectUUID != "" {
			cs[s.ProjectUUID] = true
		}
		for _, r := range []events.RepoRef{s.Repo, s.TemplateRepo} {
			if r.Project != "" {
				bs[r.Project] = true
			}
		}
	}
	return keys(cs), keys(bs)
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// startReconciler builds the reconciler over the world's clients and runs
// its schedule. It runs in every process; the fenced ReconcileStarted
// keeps runs one at a time across them.
func startReconciler(ctx context.Context, c Config, store events.Store, reads projections.ReadModel, w world, scope slots.Scope, reg prometheus.Registerer, log *slog.Logger, goRun func(string, func(context.Context) error)) *reconcile.Reconciler {
	paas, _ := w.deps.PaaS.(providers.PaaSInventory)
	git, _ := w.deps.GitHost.(providers.GitInventory)
	// The same scope register and promote are held to (--coolify-projects,
	// --bitbucket-projects, the demo's own).
	cool, bb := reconcileScope(ctx, scope.CoolifyProjects, scope.BitbucketProjects, w.sim != nil || w.remote != nil, reads)
	met := newReconcileMetrics(reg)
	r := reconcile.New(store, reconcile.NewViewTracker(reads, store), paas, git, reconcile.Config{
		CoolifyProjects: cool, BitbucketProjects: bb, Every: c.Reconcile.Every, Logger: log, Observe: met.observe,
	})
	if rep, err := r.Latest(ctx); err == nil {
		met.observe(rep)
	}
	goRun("reconciler", r.Run)
	return r
}

// reconcileAPI adapts the reconciler to httpapi.Reconciler.
type reconcileAPI struct {
	r     *reconcile.Reconciler
	links httpapi.ProviderLinks
}

// linksOf derives the links from the configured provider URLs (or the
// simulators').
func linksOf(c Config, w world) httpapi.ProviderLinks {
	cool, bb := c.CoolifyURL, c.BitbucketURL
	switch {
	case w.sim != nil:
		cool, bb = w.sim.CoolifyURL(), w.sim.BitbucketURL()
	case c.SimURL != "" && cool == "" && bb == "":
		cool, bb = c.SimURL, c.SimURL
	}
	cool = strings.TrimSuffix(strings.TrimRight(cool, "/"), "/api/v1")
	return httpapi.ProviderLinks{Coolify: cool, Bitbucket: strings.TrimRight(bb, "/")}
}

// reconcileReport is GET /api/reconcile's answer: the report and the links.
type reconcileReport struct {
	reconcile.Report
	Links httpapi.ProviderLinks `json:"links"`
}

func (a reconcileAPI) LatestReport(ctx context.Context) (any, error) {
	rep, err := a.r.Latest(ctx)
	if err != nil {
		return nil, err
	}
	return reconcileReport{Report: rep, Links: a.links}, nil
}

func (a reconcileAPI) Trigger(ctx context.Context) error {
	if err := a.r.Trigger(ctx); errors.Is(err, reconcile.ErrBusy) {
		return httpapi.ErrReconcileBusy
	} else {
		return err
	}
}

// reconcileActions adapts the slot service and the reconciler to
// httpapi.ReconcileActions: an adopt or a delete is accepted only for an
// orphan of the latest run that no slot tracks now (so a tracked resource
// is never deleted this way).
type reconcileActions struct {
	svc *slots.Service
	r   *reconcile.Reconciler
}

// orphan refuses a stale finding or a tracked resource with a 409 and the
// reason.
func (a reconcileActions) orphan(ctx context.Context, c slots.AdoptCmd) (events.ReconcileFinding, error) {
	f, err := a.r.CurrentOrphan(ctx, c.Provider, c.Kind, c.ID)
	var te *reconcile.TrackedError
	switch {
	case errors.Is(err, reconcile.ErrStale):
		return f, &slots.Error{Code: slots.CodeConflict, Err: err, Details: map[string]any{"reason": "stale_finding"},
			Message: fmt.Sprintf("%s %s %s is not an orphan in the latest reconciliation run (a stale finding): run it again", c.Provider, c.Kind, c.ID)}
	case errors.As(err, &te):
		return f, &slots.Error{Code: slots.CodeConflict, Err: err, Details: map[string]any{"reason": "tracked", "slot": te.Slot},
			Message: fmt.Sprintf("%s %s %s is tracked by slot %s", c.Provider, c.Kind, c.ID, te.Slot)}
	case err != nil:
		return f, &slots.Error{Code: slots.CodeInternal, Message: "read the latest reconciliation run", Err: err}
	}
	return f, nil
}

func (a reconcileActions) PlanAdopt(ctx context.Context, slot string, c slots.AdoptCmd) (httpapi.AdoptPlan, error) {
	return a.plan(ctx, a.svc.PlanAdopt, slot, c)
}

func (a reconcileActions) PlanDeleteOrphan(ctx context.Context, slot string, c slots.AdoptCmd) (httpapi.AdoptPlan, error) {
	return a.plan(ctx, a.svc.PlanDeleteOrphan, slot, c)
}

func (a reconcileActions) DeleteOrphan(ctx context.Context, actor slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error) {
	return a.svc.DeleteOrphan(ctx, actor, slot, c, func() error {
		_, err := a.orphan(ctx, c)
		return err
	})
}

func (a reconcileActions) plan(ctx context.Context, plan func(context.Context, string, slots.AdoptCmd) (slots.Plan, error), slot string, c slots.AdoptCmd) (httpapi.AdoptPlan, error) {
	p, err := plan(ctx, slot, c)
	if err != nil {
		return httpapi.AdoptPlan{}, err
	}
	f, err := a.orphan(ctx, c)
	if err != nil {
		return httpapi.AdoptPlan{}, err
	}
	return httpapi.AdoptPlan{Plan: p, Finding: f}, nil
}

func (a reconcileActions) Adopt(ctx context.Context, actor slots.Actor, slot string, c slots.AdoptCmd) (slots.JobAcceptedResult, error) {
	return a.svc.Adopt(ctx, actor, slot, c, func() error {
		_, err := a.orphan(ctx, c)
		return err
	})
}
