package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
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

// newReconciler builds the reconciler over the world's clients and the
// service that runs its schedule. It runs in every process; the fenced
// ReconcileStarted keeps runs one at a time across them.
func newReconciler(ctx context.Context, c Config, store events.Store, reads projections.ReadModel, w world, scope slots.Scope, reg prometheus.Registerer, log *slog.Logger) (*reconcile.Reconciler, lifecycle.Service) {
	paas, _ := w.deps.PaaS.(providers.PaaSInventory)
	git, _ := w.deps.GitHost.(providers.GitInventory)
	sims := w.sim != nil || w.remote != nil
	// Asked at each run: the demo's scope grows with every slot registered
	// on its simulators (issue 38) — their projects, plus what the flags add.
	scopeNow := func(ctx context.Context) ([]string, []string) {
		cool, bb := reconcile.DefaultScope(ctx, scope.CoolifyProjects, scope.BitbucketProjects, sims, reads)
		if scope.Simulated != nil {
			dc, db := reconcile.DefaultScope(ctx, nil, nil, true, reads)
			cool, bb = unionSorted(cool, dc), unionSorted(bb, db)
		}
		return cool, bb
	}
	met := newReconcileMetrics(reg)
	r := reconcile.New(store, reconcile.NewViewTracker(reads, store), paas, git, reconcile.Config{
		ScopeNow: scopeNow, Every: c.Reconcile.Every, Logger: log, Observe: met.observe,
	})
	if rep, err := r.Latest(ctx); err == nil {
		met.observe(rep)
	}
	return r, &lifecycle.Loop{Run: r.Run}
}

// unionSorted is a ∪ b, sorted, without repeats.
func unionSorted(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
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

func (a reconcileAPI) LatestReport(ctx context.Context) (httpapi.ReconcileReport, error) {
	rep, err := a.r.Latest(ctx)
	if err != nil {
		return httpapi.ReconcileReport{}, err
	}
	return httpapi.ReconcileReport{Report: rep, Links: a.links}, nil
}

func (a reconcileAPI) Trigger(ctx context.Context) error {
	if err := a.r.Trigger(ctx); errors.Is(err, reconcile.ErrBusy) {
		return httpapi.ErrReconcileBusy
	} else {
		return err
	}
}
