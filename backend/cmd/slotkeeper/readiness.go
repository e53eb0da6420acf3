package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/doctor"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// readiness is what /readyz reports beyond the read model: the store accepts
// writes, and every provider answered an authenticated probe. The checks run
// in the background (every interval), so /readyz answers from the last
// round and a load balancer's polling never reaches the providers; until the
// first round has run everything counts as not ready.
type readiness struct {
	store    events.Store
	probes   []probe
	interval time.Duration
	clock    clock.Clock // nil: the wall clock
	log      *slog.Logger

	draining atomic.Bool // set on SIGTERM: /readyz answers 503 at once

	mu      sync.Mutex
	checked bool
	failing []string // reasons, in probe order ("" when all pass)
	// last holds, per probe with an every, when it last ran and its
	// answer (touched only by round, which never runs twice at once).
	last []probeRun
}

// probe checks one dependency; name appears in /readyz reasons and logs.
// every, if set, spaces a passing probe's runs at least that far apart
// (its pass stands in between; a failing one runs every round, so a
// recovery shows at once): a provider's probe costs API budget (issue 32),
// the store's does not.
type probe struct {
	name  string
	check func(ctx context.Context) error
	every time.Duration
}

type probeRun struct {
	at  time.Time
	err error
	ran bool
}

// providerProbeEvery spaces the provider probes: Coolify's budget is 200
// requests a minute per user, shared by every process and job (issue 32),
// and /readyz's answer needs no fresher word than this on a token's
// abilities or a server's reachability. A shorter --ready-interval
// shortens it with it (every providerProbeRounds rounds at most).
const (
	providerProbeEvery  = time.Minute
	providerProbeRounds = 12
)

// spacing is how long p's pass stands: its every, at most
// providerProbeRounds intervals.
func (r *readiness) spacing(p probe) time.Duration {
	return min(p.every, providerProbeRounds*r.interval)
}

// probeStream is where the write probe "appends": with an expected revision
// no stream can have, so the store takes the write path, refuses the
// condition (ErrWrongRevision) and writes nothing. Any other answer means
// it cannot write. (2^62, not near 2^64: KurrentDB reads expected versions
// as signed, and -2 would mean "any".)
const probeStream = "slotkeeper-readiness-probe"

// storeProbeName names the store's write probe (commands are refused at
// once while it fails).
const storeProbeName = "event store"

func storeProbe(store events.Store) probe {
	return probe{name: storeProbeName, check: func(ctx context.Context) error {
		// A refusal of the whole process (no $all read, bad credentials)
		// stops the subscriptions for good while writes may still pass:
		// name it here, or the process would look ready with projections
		// that never move (issue 24 item 2).
		if r, ok := store.(events.Refuser); ok {
			if err := r.Refused(); err != nil {
				return fmt.Errorf("refuses this process: %v", err)
			}
		}
		_, err := store.Append(ctx, probeStream, events.Exact(1<<62),
			events.New(events.Unknown{Type: "ReadinessProbe", Data: []byte("{}")}, events.Metadata{Actor: "system:readiness"}))
		switch {
		case errors.Is(err, events.ErrWrongRevision):
			return nil
		case err == nil:
			return errors.New("the write probe was appended (the store ignored its condition)")
		}
		return fmt.Errorf("refuses writes: %v", err)
	}}
}

// identityProbe checks that the store is still the one this process
// started on: its identity, and a head not behind what was seen. A
// mismatch closes the guard for good (events.Guard.Check).
func identityProbe(g *events.Guard) probe {
	return probe{name: "event store identity", check: g.Check}
}

// sharedReadModelProbe fails while a shared read model is bound to
// another event store (a replay elsewhere rebuilt it from another log), or
// is past the log's head: it was built from another log (a wiped, replaced or rewound
// store), and projecting this log into it would mix the two. The position
// is read before the head, so a read model that is only ever behind the
// log never looks ahead of it.
func sharedReadModelProbe(rm projections.ReadModel, store events.Store, storeID string) probe {
	return probe{name: "read model", check: func(ctx context.Context) error {
		if b, ok := rm.(interface {
			StoreID(context.Context) (string, error)
		}); ok {
			bound, err := b.StoreID(ctx)
			if err != nil {
				return err
			}
			if bound != storeID {
				return fmt.Errorf("built from event store %q, this process runs on %s: rebuild it with `slotkeeper replay`", bound, storeID)
			}
		}
		p, err := rm.Position(ctx)
		if err != nil {
			return err
		}
		h, err := store.Head(ctx)
		if err != nil {
			return err
		}
		if p > h {
			return fmt.Errorf("at position %d, past the event store's head %d: it was built from another log; rebuild it with `slotkeeper replay`", p, h)
		}
		return nil
	}}
}

// providerProbes check that each provider answers and accepts the
// server's token. Coolify's runs the doctor's Coolify checks without the
// per-project ones (base URL and version, the token's team, its abilities):
// it used to look up the scope's first project, which a normal teardown
// deletes, and /readyz then answered 503 for good. Bitbucket's looks one
// repository up: found or absent (its own 404, after authenticating the
// request) proves it answers; unknown (401, 403, 5xx, timeout) does not.
//
// The Coolify probe also runs the ready reset's checks (issue 32) for the
// templates of the registered slots (templates; nil: none): abilities
// incl. read:sensitive where a template copies env values, no locked
// template value, each template's server reachable — /readyz is not ready
// while a reset would fail after deleting data. Both provider probes run at
// most once per providerProbeEvery: a few Coolify requests a minute.
func providerProbes(paas providers.PaaS, git providers.GitHost, scope slots.Scope, templates ...func(context.Context) []events.SlotTemplate) []probe {
	coolifyProbe := probe{name: "coolify", every: providerProbeEvery, check: func(ctx context.Context) error {
		_, l, err := paas.GetProject(ctx, "slotkeeper-readiness-probe")
		return lookupReady(l, err, false, "")
	}}
	if api, ok := paas.(doctor.CoolifyAPI); ok {
		coolifyProbe = probe{name: "coolify", every: providerProbeEvery, check: func(ctx context.Context) error {
			// One round asks each ability once: the doctor's checks and
			// the reset's share the answers.
			m := &abilityMemo{PaaS: paas, api: api, seen: map[string]bool{}}
			checks := []doctor.Check{doctor.Coolify(m, nil)}
			for _, tf := range templates {
				checks = append(checks, func(ctx context.Context) []doctor.Result {
					return doctor.ResetNeeds(m, tf(ctx))(ctx)
				})
			}
			return checksProbe("coolify", checks).check(ctx)
		}}
	}
	return []probe{
		coolifyProbe,
		{name: "bitbucket", every: providerProbeEvery, check: func(ctx context.Context) error {
			key := "SLOTKEEPERPROBE"
			if len(scope.BitbucketProjects) > 0 {
				key = scope.BitbucketProjects[0]
			}
			_, l, err := git.GetRepo(ctx, key, "slotkeeper-readiness-probe")
			return lookupReady(l, err, false, "")
		}},
	}
}

func lookupReady(l providers.Lookup, err error, mustExist bool, what string) error {
	switch {
	case l == providers.Found:
		return nil
	case l == providers.Absent && mustExist:
		return fmt.Errorf("%s (in the configured scope) does not exist", what)
	case l == providers.Absent:
		return nil
	case err != nil:
		return err
	}
	return errors.New("no answer")
}

// round runs every probe once, all at once, and keeps the result. Each
// probe's call is bounded by probeTimeout, so a dependency that stopped
// answering (a store whose client would retry for 10 s) shows within the
// interval plus half of it, not after the client gives up.
func (r *readiness) round(ctx context.Context) {
	errs := make([]error, len(r.probes))
	if len(r.last) != len(r.probes) {
		r.last = make([]probeRun, len(r.probes))
	}
	c := r.clock
	if c == nil {
		c = clock.Real()
	}
	now := c.Now()
	var wg sync.WaitGroup
	for i, p := range r.probes {
		if l := r.last[i]; p.every > 0 && l.ran && l.err == nil && now.Sub(l.at) < r.spacing(p) {
			continue // passed lately: too soon to spend budget on it again
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, probeTimeout(r.interval))
			defer cancel()
			// The round does not wait for a call that overstays its bound
			// (a client may finish its retry sleep first): it ends on its
			// own later, and the round reports no answer now.
			res := make(chan error, 1)
			go func() { res <- p.check(pctx) }()
			select {
			case errs[i] = <-res:
			case <-pctx.Done():
				errs[i] = pctx.Err()
			}
			if errors.Is(errs[i], context.DeadlineExceeded) && ctx.Err() == nil {
				errs[i] = fmt.Errorf("no answer within %s", probeTimeout(r.interval))
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	for i, p := range r.probes {
		if p.every > 0 && (!r.last[i].ran || r.last[i].err != nil || now.Sub(r.last[i].at) >= r.spacing(p)) {
			r.last[i] = probeRun{at: now, err: errs[i], ran: true}
		}
	}
	var failing []string
	for i, p := range r.probes {
		if errs[i] != nil {
			failing = append(failing, p.name+": "+errs[i].Error())
		}
	}
	r.mu.Lock()
	was := r.failing
	first := !r.checked
	r.checked, r.failing = true, failing
	r.mu.Unlock()
	changed := strings.Join(was, "; ") != strings.Join(failing, "; ")
	switch {
	case first:
		for _, p := range r.probes {
			if reason := findReason(failing, p.name); reason != "" {
				r.log.Warn("not reached at start", slog.String("dependency", p.name), slog.String("reason", reason))
			} else {
				r.log.Info("reached", slog.String("dependency", p.name))
			}
		}
	case changed && len(failing) > 0:
		r.log.Warn("not ready", slog.String("reasons", strings.Join(failing, "; ")))
	case changed:
		r.log.Info("ready again: every dependency answers")
	}
}

func findReason(failing []string, name string) string {
	for _, f := range failing {
		if strings.HasPrefix(f, name+": ") {
			return strings.TrimPrefix(f, name+": ")
		}
	}
	return ""
}

// run repeats the probes every interval on r's clock until ctx is done.
func (r *readiness) run(ctx context.Context) error {
	c := r.clock
	if c == nil {
		c = clock.Real()
	}
	clock.Every(ctx, c, r.interval, r.round)
	return nil
}

// service runs the first round at its start (start-up logs what was
// reached), then a round every interval; its drain makes /readyz answer
// 503 at once.
func (r *readiness) service() *lifecycle.Loop {
	return &lifecycle.Loop{
		Init:    func(ctx context.Context) error { r.round(ctx); return nil },
		Run:     r.run,
		OnDrain: func() { r.draining.Store(true) },
	}
}

// probeTimeout bounds one probe's call: half the interval, at least 500 ms
// (a loaded machine's loopback round trip) and at most 10 s.
func probeTimeout(interval time.Duration) time.Duration {
	return min(max(interval/2, 500*time.Millisecond), 10*time.Second)
}

// failingReason is why the named probe failed in the last round, "" when
// it passed (or has not run).
func (r *readiness) failingReason(name string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return findReason(r.failing, name)
}

// err is the reason /readyz reports, nil when ready.
func (r *readiness) err() error {
	if r.draining.Load() {
		return errors.New("shutting down")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.checked {
		return errors.New("dependencies not checked yet")
	}
	if len(r.failing) > 0 {
		return errors.New(strings.Join(r.failing, "; "))
	}
	return nil
}

// registeredTemplates lists the templates of the slots a reset may still
// run on (registered with one, not retired), for the readiness probe's
// reset checks: the read model names them, the slot fold holds each
// template.
func registeredTemplates(reads interface {
	ListSlots(context.Context) ([]projections.SlotView, error)
}, cache *slots.SlotCache) func(context.Context) []events.SlotTemplate {
	return func(ctx context.Context) []events.SlotTemplate {
		list, err := reads.ListSlots(ctx)
		if err != nil {
			return nil
		}
		var out []events.SlotTemplate
		for _, v := range list {
			if !v.HasTemplate || v.Lifecycle == projections.LifecycleRetired {
				continue
			}
			if st, err := cache.Load(ctx, v.Name); err == nil && st.Reg.Template != nil {
				out = append(out, *st.Reg.Template)
			}
		}
		return out
	}
}

// abilityMemo answers each ability once per probe run (the checks run one
// after another, never at once).
type abilityMemo struct {
	providers.PaaS
	api  doctor.CoolifyAPI
	seen map[string]bool
	has  map[string]bool
}

func (m *abilityMemo) BaseURL() string                                { return m.api.BaseURL() }
func (m *abilityMemo) Version(ctx context.Context) (string, error)    { return m.api.Version(ctx) }
func (m *abilityMemo) Team(ctx context.Context) (coolify.Team, error) { return m.api.Team(ctx) }

func (m *abilityMemo) HasAbility(ctx context.Context, ability string) (bool, error) {
	if m.seen[ability] {
		return m.has[ability], nil
	}
	ok, err := m.PaaS.HasAbility(ctx, ability)
	if err == nil {
		if m.has == nil {
			m.has = map[string]bool{}
		}
		m.seen[ability], m.has[ability] = true, ok
	}
	return ok, err
}

// readyChecks are the API's Writable (commands refused at once while the
// store takes no write) and Ready (/readyz).
func readyChecks(rd *readiness, guard *events.Guard, health *consumer.Health, damage storeDamage, reads projections.ReadModel, startHead events.Position) (writable func() error, ready func(context.Context) error) {
	writable = func() error {
		if err := guard.Err(); err != nil {
			return err
		}
		if why := rd.failingReason(storeProbeName); why != "" {
			return fmt.Errorf("%w: %s", events.ErrUnavailable, why)
		}
		return nil
	}
	ready = func(ctx context.Context) error {
		if err := guard.Err(); err != nil {
			return err
		}
		if err := rd.err(); err != nil {
			return err
		}
		if err := health.Err(); err != nil {
			return err
		}
		if damage != nil && damage.Err() != nil {
			return damage.Err()
		}
		p, err := reads.Position(ctx)
		if err != nil {
			return err
		}
		if p < startHead {
			return fmt.Errorf("read model at %d of %d", p, startHead)
		}
		return nil
	}
	return writable, ready
}
