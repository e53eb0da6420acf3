package reconcile_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// BenchmarkReconcile10k: one run over 10,000 provider resources (1,000
// slots' project, application, database and repository, plus 6,000 strays:
// 2,000 applications, 2,000 databases, 2,000 repositories) against the
// simulators, through the real clients. Reports the run's time and its
// provider calls against the minimum: two per Coolify project plus two
// team lists, and one per Bitbucket page.
func BenchmarkReconcile10k(b *testing.B) {
	const slots, pageLimit = 1000, 1000
	s, err := sim.Start(context.Background(), sim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var tracked []reconcile.Tracked
	var projects, repos []string
	for i := 0; i < slots; i++ {
		p := s.AddProject(fmt.Sprintf("p%d", i))
		app, _ := s.AddApp(p, fmt.Sprintf("app%d", i))
		db, _ := s.AddDatabase(p, fmt.Sprintf("db%d", i))
		s.AddApp(p, fmt.Sprintf("stray-app%d-a", i))
		s.AddDatabase(p, fmt.Sprintf("stray-db%d-a", i))
		if i%2 == 0 {
			s.AddApp(p, fmt.Sprintf("stray-app%d-b", i))
			s.AddDatabase(p, fmt.Sprintf("stray-db%d-b", i))
		} else {
			s.AddApp(p, fmt.Sprintf("stray-app%d-c", i))
			s.AddDatabase(p, fmt.Sprintf("stray-db%d-c", i))
		}
		projects = append(projects, p)
		slug := fmt.Sprintf("slot-%d", i)
		repos = append(repos, slug, fmt.Sprintf("stray-%d-a", i), fmt.Sprintf("stray-%d-b", i))
		scope := "coolify:" + p
		tracked = append(tracked,
			reconcile.Tracked{Provider: "coolify", Kind: events.ResProject, ID: p, Scope: scope, Slot: slug},
			reconcile.Tracked{Provider: "coolify", Kind: events.ResApplication, ID: app, Scope: scope, Slot: slug},
			reconcile.Tracked{Provider: "coolify", Kind: events.ResDatabase, ID: db, Scope: scope, Slot: slug},
			reconcile.Tracked{Provider: "bitbucket", Kind: events.ResRepository, ID: "SLOT/" + slug, Scope: "bitbucket:SLOT", Slot: slug})
	}
	s.AddListedRepos("SLOT", repos)
	paas := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken()})
	git := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), PageLimit: pageLimit})
	minCalls := 2*slots + 2 + (len(repos)+pageLimit-1)/pageLimit
	var took time.Duration
	var calls, findings int
	for i := 0; i < b.N; i++ {
		r := reconcile.New(memstore.New(), &staticTracker{list: tracked}, paas, git, reconcile.Config{
			CoolifyProjects: projects, BitbucketProjects: []string{"SLOT"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		s.ResetRequests()
		t0 := time.Now()
		rep, err := r.RunOnce(context.Background(), "bench")
		took += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		calls += len(s.Requests())
		findings = len(rep.Findings)
	}
	if findings != 6000 {
		b.Fatalf("%d findings, want the 6,000 strays", findings)
	}
	b.ReportMetric(took.Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/run")
	b.ReportMetric(float64(minCalls), "min-calls")
	b.ReportMetric(float64(calls)/float64(b.N)/float64(minCalls), "x-min")
}

// BenchmarkStandingFindings: 1,000 standing orphans (repositories nobody
// tracks) and one new orphan per run, over 20 runs. Reports the events a
// run appends now (its start and end, the one change, and now and then a
// full-list snapshot) against what recording every current finding each
// run would append (the earlier scheme: findings + 2), measured on the same
// runs.
func BenchmarkStandingFindings(b *testing.B) {
	const standing, runs = 1000, 20
	s, err := sim.Start(context.Background(), sim.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var slugs []string
	for i := 0; i < standing; i++ {
		slugs = append(slugs, fmt.Sprintf("stray-%d", i))
	}
	s.AddListedRepos("SLOT", slugs)
	git := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken(), PageLimit: 1000})
	var appended, fullList int
	for i := 0; i < b.N; i++ {
		store := memstore.New()
		r := reconcile.New(store, &staticTracker{}, nil, git, reconcile.Config{
			BitbucketProjects: []string{"SLOT"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if _, err := r.RunOnce(context.Background(), "bench"); err != nil {
			b.Fatal(err)
		}
		for n := 0; n < runs; n++ {
			s.AddListedRepos("SLOT", []string{fmt.Sprintf("new-%d-%d", i, n)})
			before, _ := store.ReadStream(context.Background(), events.ReconcileStream, 0, 0, events.Forward)
			rep, err := r.RunOnce(context.Background(), "bench")
			if err != nil {
				b.Fatal(err)
			}
			after, _ := store.ReadStream(context.Background(), events.ReconcileStream, 0, 0, events.Forward)
			appended += len(after) - len(before)
			fullList += len(rep.Findings) + 2
		}
	}
	b.ReportMetric(float64(appended)/float64(b.N*runs), "events/run")
	b.ReportMetric(float64(fullList)/float64(b.N*runs), "full-list-events/run")
	b.ReportMetric(float64(fullList)/float64(appended), "x-fewer")
}
