// Package reconcile compares what the providers hold inside the configured
// scope with what every slot tracks — retired and teardown-incomplete slots
// and promoted repositories included — and records what it finds as events
// on the "reconcile" stream:
//
//   - orphan: at the provider, tracked by nothing;
//   - drift: tracked, but the provider says it is gone (its own 404);
//   - unknown: a list or lookup failed, so that part could not be checked
//     (never read as "nothing there"): the previous findings of that part
//     are carried over, not dropped;
//   - resolved: a finding of the previous run that no longer holds.
//
// It never deletes or changes anything at a provider: a person acts on a
// finding. One run at a time across processes: a run opens by appending
// ReconcileStarted with the stream's expected revision.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/events"
)

// Tracked is one resource something in the log names.
type Tracked struct {
	Provider string // "coolify" | "bitbucket"
	Kind     string // project | application | database | repository
	ID       string // Coolify uuid, or "PROJECT/slug"
	Scope    string // "coolify:<project uuid>" or "bitbucket:<KEY>"
	Slot     string // the slot that names it
	// Template is true for a template repository: known, never an orphan,
	// and not the slot's own resource.
	Template bool
}

// Tracker lists every tracked resource, retired slots included. The
// command wiring implements it over the read model.
type Tracker interface {
	Tracked(ctx context.Context) ([]Tracked, error)
}

// Config is the reconciler's setting.
type Config struct {
	// CoolifyProjects and BitbucketProjects are the scope: the Coolify
	// project uuids and Bitbucket project keys it lists.
	CoolifyProjects   []string
	BitbucketProjects []string
	// ScopeNow, when set, replaces the two lists: it is asked at the start
	// of each run, so a scope that grows while the server runs (the demo's:
	// every slot registered on the simulators, issue 38) is covered from
	// the next run on.
	ScopeNow func(ctx context.Context) (coolify, bitbucket []string)
	// Every is the interval of scheduled runs (0: only on demand).
	Every time.Duration
	// RunTimeout bounds one run (default 5m). A run left open longer than
	// twice this (its process died) may be taken over.
	RunTimeout time.Duration
	// CallTimeout bounds one provider list or lookup (default 30s).
	CallTimeout time.Duration
	// SnapshotAfter is the floor of events since the last full list after
	// which a run records the full list again (default 256; see RunOnce).
	SnapshotAfter int
	Logger        *slog.Logger
	// Observe, if set, is told every finished run (metrics).
	Observe func(Report)
	// Clock schedules the runs and dates them (tests pass a clock.Fake);
	// nil is the wall clock.
	Clock clock.Clock
}

// Reconciler runs reconciliation.
type Reconciler struct {
	store   events.Store
	tracker Tracker
	paas    providers.PaaSInventory
	git     providers.GitInventory
	cfg     Config
	kick    chan struct{}
	kicked  atomic.Bool // a Trigger asked for a run
	mu      sync.Mutex
	running bool
}

// New returns a reconciler; paas or git may be nil (that provider is not
// configured: its scope must be empty).
func New(store events.Store, tracker Tracker, paas providers.PaaSInventory, git providers.GitInventory, cfg Config) *Reconciler {
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = 5 * time.Minute
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.SnapshotAfter <= 0 {
		cfg.SnapshotAfter = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Reconciler{store: store, tracker: tracker, paas: paas, git: git, cfg: cfg, kick: make(chan struct{}, 1)}
}

// ErrBusy is returned when a run is already open (here or in another
// process).
var ErrBusy = errors.New("reconcile: a run is already in progress")

// runScope is the scope of one run.
type runScope struct{ coolify, bitbucket []string }

// scopeNow is the scope a run starting now covers.
func (r *Reconciler) scopeNow(ctx context.Context) runScope {
	if r.cfg.ScopeNow != nil {
		c, b := r.cfg.ScopeNow(ctx)
		return runScope{c, b}
	}
	return runScope{r.cfg.CoolifyProjects, r.cfg.BitbucketProjects}
}

// names is the scope as finding scopes name it.
func (sc runScope) names() []string {
	var out []string
	for _, p := range sc.coolify {
		out = append(out, "coolify:"+p)
	}
	for _, p := range sc.bitbucket {
		out = append(out, "bitbucket:"+p)
	}
	return out
}

// Run runs once at start (with a schedule), then on the schedule and on
// Trigger until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	var next time.Time // the next scheduled run (zero: none)
	if r.cfg.Every > 0 {
		next = r.cfg.Clock.Now()
	}
	clock.Due(ctx, r.cfg.Clock, r.kick, func(ctx context.Context, now time.Time) time.Time {
		scheduled := !next.IsZero() && !now.Before(next)
		if !r.kicked.Swap(false) && !scheduled {
			return next
		}
		if _, err := r.RunOnce(ctx, "system:reconcile"); err != nil && !errors.Is(err, ErrBusy) && ctx.Err() == nil {
			r.cfg.Logger.Warn("reconcile run failed", slog.String("error", err.Error()))
		}
		if scheduled {
			// A ticker's grid: a run on demand does not move it, a run
			// longer than Every is followed by the next at once.
			if next = next.Add(r.cfg.Every); next.Before(r.cfg.Clock.Now()) {
				next = r.cfg.Clock.Now()
			}
		}
		return next
	})
	return nil
}

// Trigger asks Run for a run now. Returns ErrBusy while one is open.
func (r *Reconciler) Trigger(ctx context.Context) error {
	rep, err := r.Latest(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	busy := r.running
	r.mu.Unlock()
	if busy || (rep.Run != nil && rep.Run.State == "running" && !r.stale(*rep.Run)) {
		return ErrBusy
	}
	r.kicked.Store(true)
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return nil
}

func (r *Reconciler) stale(run RunView) bool {
	return r.cfg.Clock.Now().Sub(run.StartedAt) > 2*r.cfg.RunTimeout
}

// RunOnce runs one reconciliation now and returns its report.
func (r *Reconciler) RunOnce(ctx context.Context, actor string) (Report, error) {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return Report{}, ErrBusy
	}
	r.running = true
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.running = false; r.mu.Unlock() }()

	prev, err := r.latest(ctx)
	rev, exists := prev.rev, prev.exists
	if err != nil {
		return Report{}, err
	}
	if prev.Run != nil && prev.Run.State == "running" && !r.stale(*prev.Run) {
		return Report{}, ErrBusy
	}
	runID := uuid.NewString()
	now := r.cfg.Clock.Now().UTC()
	meta := events.Metadata{Actor: actor, CorrelationID: "reconcile-" + runID}
	exp := events.NoStream()
	if exists {
		exp = events.Exact(rev)
	}
	var opening []events.EventData
	if prev.Run != nil && prev.Run.State == "running" {
		// A run whose process died: close it honestly before the new one.
		opening = append(opening, events.New(events.ReconcileFinished{RunID: prev.Run.ID, State: "failed", EndedAt: now, Error: "abandoned: the run did not finish", ErrorCode: events.FailureReconcileAbandoned}, meta))
	}
	sc := r.scopeNow(ctx)
	opening = append(opening, events.New(events.ReconcileStarted{RunID: runID, Scope: sc.names(), StartedAt: now, ChangesOnly: true}, meta))
	res, err := r.store.Append(ctx, events.ReconcileStream, exp, opening...)
	if err != nil {
		if errors.Is(err, events.ErrWrongRevision) {
			return Report{}, ErrBusy
		}
		return Report{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, r.cfg.RunTimeout)
	defer cancel()
	current, runErr := r.compare(rctx, sc, prev.standing(), now)
	state, msg := "done", ""
	var code string
	var codeArgs map[string]string
	var changes []events.ReconcileFinding
	if runErr != nil {
		// Nothing was checked: record no change, so every standing finding
		// holds (a failed run never drops or resolves anything).
		state, msg, current = "failed", runErr.Error(), prev.standing()
		code, codeArgs = r.failureCode(ctx, runErr)
	} else {
		changes = diff(prev.standing(), current, now)
	}
	for i := range current {
		if current[i].RunID == "" {
			current[i].RunID = runID
		}
	}
	for i := range changes {
		changes[i].RunID = runID
	}
	counts := map[string]int{}
	for _, f := range current {
		counts[f.Class]++
	}
	for _, f := range changes {
		if f.Class == events.FindingResolved {
			counts[f.Class]++
		}
	}
	evs := make([]events.EventData, 0, len(changes)+1)
	for _, f := range changes {
		evs = append(evs, events.New(f, meta))
	}
	// Now and then the whole current list goes in too, so that reading it
	// back never has to go further than this run: when the events since the
	// last full list outnumber the list itself (and a floor), which keeps
	// both the log's growth and the read's length proportional to the
	// changes.
	snapshot := prev.sinceBase+len(evs)+2 >= max(r.cfg.SnapshotAfter, len(current))
	if snapshot {
		for i := 0; i < len(current); i += snapshotChunk {
			chunk := current[i:min(i+snapshotChunk, len(current))]
			evs = append(evs, events.New(events.ReconcileSnapshot{RunID: runID, Findings: chunk}, meta))
		}
	}
	evs = append(evs, events.New(events.ReconcileFinished{RunID: runID, State: state, EndedAt: r.cfg.Clock.Now().UTC(), Counts: counts, Error: msg, ErrorCode: code, ErrorArgs: codeArgs, Snapshot: snapshot}, meta))
	// The findings and the end go in with the run's own fence: if another
	// process took a stale run over meanwhile, this one records nothing.
	// (Appends are bounded in size; a huge run is written in chunks.)
	next := res.NextExpected
	for len(evs) > 0 {
		n := min(len(evs), 500)
		ar, err := r.store.Append(context.WithoutCancel(ctx), events.ReconcileStream, events.Exact(next), evs[:n]...)
		if err != nil {
			return Report{}, fmt.Errorf("record the run: %w", err)
		}
		next, evs = ar.NextExpected, evs[n:]
	}
	rep, err := r.Latest(context.WithoutCancel(ctx))
	if err == nil && r.cfg.Observe != nil {
		r.cfg.Observe(rep)
	}
	return rep, err
}

// snapshotChunk is how many findings one ReconcileSnapshot event holds
// (a few hundred KB at most, far below the store's event size limit).
const snapshotChunk = 1000

// diff is what a run records: each current finding that is new or changed
// class or slot since the previous run, and "resolved" for each previous
// one that is gone. A standing finding is not recorded again.
func diff(prev, current []events.ReconcileFinding, now time.Time) []events.ReconcileFinding {
	prevBy := make(map[string]events.ReconcileFinding, len(prev))
	for _, f := range prev {
		prevBy[key(f)] = f
	}
	var out []events.ReconcileFinding
	seen := make(map[string]bool, len(current))
	for _, f := range current {
		k := key(f)
		seen[k] = true
		if p, ok := prevBy[k]; ok && p.Class == f.Class && p.Slot == f.Slot {
			continue
		}
		out = append(out, f)
	}
	for _, p := range prev {
		if !seen[key(p)] {
			p.Class, p.Detail, p.Since = events.FindingResolved, "was "+p.Class, now
			out = append(out, p)
		}
	}
	return out
}

// key identifies a finding's subject across runs.
func key(f events.ReconcileFinding) string {
	return f.Provider + "|" + f.Kind + "|" + f.ID
}

// compare lists the scope and builds this run's findings from what it
// sees and the previous run's findings.
func (r *Reconciler) compare(ctx context.Context, sc runScope, prev []events.ReconcileFinding, now time.Time) ([]events.ReconcileFinding, error) {
	tracked, err := r.tracker.Tracked(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errTracked, err)
	}
	byID := map[string]Tracked{}
	for _, t := range tracked {
		k := t.Provider + "|" + t.Kind + "|" + t.ID
		if old, ok := byID[k]; ok && !old.Template {
			continue // the slot's own claim wins over "is a template"
		}
		byID[k] = t
	}
	var out []events.ReconcileFinding
	unknownScopes := map[string]bool{}
	add := func(f events.ReconcileFinding) { out = append(out, f) }

	for _, inv := range r.inventory(ctx, sc.coolify) {
		scope := "coolify:" + inv.UUID
		if err := r.coolifyScope(ctx, inv, scope, byID, add); err != nil {
			unknownScopes[scope] = true
			add(couldNotCheck("coolify", events.ResProject, inv.UUID, scope, "", err))
		}
	}
	for _, key := range sc.bitbucket {
		scope := "bitbucket:" + key
		if err := r.bitbucketScope(ctx, key, scope, byID, add); err != nil {
			unknownScopes[scope] = true
			add(couldNotCheck("bitbucket", "project", key, scope, "", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Carry "since" over; carry over the previous findings of a scope that
	// could not be checked (what is not in the result is resolved by diff).
	prevBy := map[string]events.ReconcileFinding{}
	for _, f := range prev {
		prevBy[key(f)] = f
	}
	seen := map[string]bool{}
	for i := range out {
		k := key(out[i])
		seen[k] = true
		if p, ok := prevBy[k]; ok && p.Class == out[i].Class && p.Slot == out[i].Slot && !p.Since.IsZero() {
			// A standing finding is what was recorded when it appeared
			// (its first-seen time, its run, its detail).
			out[i] = p
		} else {
			out[i].Since = now
		}
	}
	for _, p := range prev {
		if !seen[key(p)] && unknownScopes[p.Scope] && p.Class != events.FindingUnknown {
			out = append(out, p) // not checked this time: still holds as far as we know
		}
	}
	sortFindings(out)
	return out, nil
}

// sortFindings orders findings problems first: drift, orphan, unknown,
// resolved; then by subject.
func sortFindings(out []events.ReconcileFinding) {
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := classRank(out[i].Class), classRank(out[j].Class); a != b {
			return a < b
		}
		return key(out[i]) < key(out[j])
	})
}

func classRank(c string) int {
	switch c {
	case events.FindingDrift:
		return 0
	case events.FindingOrphan:
		return 1
	case events.FindingUnknown:
		return 2
	}
	return 3
}

// call bounds one provider call.
func (r *Reconciler) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.cfg.CallTimeout)
}

// inventory lists the Coolify scope in one bounded call.
func (r *Reconciler) inventory(ctx context.Context, projects []string) []providers.ProjectInventory {
	if len(projects) == 0 {
		return nil
	}
	if r.paas == nil {
		out := make([]providers.ProjectInventory, len(projects))
		for i, p := range projects {
			out[i] = providers.ProjectInventory{UUID: p, Lookup: providers.Unknown, Err: errors.New("no Coolify client configured")}
		}
		return out
	}
	// Two calls per project plus two: bounded by the call timeout each.
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout*time.Duration(2*len(projects)+2))
	defer cancel()
	return noneVisibleIsUnknown(r.paas.InventoryProjects(cctx, projects))
}

// noneVisibleIsUnknown: Coolify filters every lookup by the token's team,
// so a token of another team gets the genuine "Project not found." for each
// live project. When not one configured project is visible, that is the
// likelier story than every slot project torn down: nothing is reported as
// gone (issue 22).
func noneVisibleIsUnknown(invs []providers.ProjectInventory) []providers.ProjectInventory {
	for _, inv := range invs {
		if inv.Lookup != providers.Absent {
			return invs
		}
	}
	for i := range invs {
		invs[i].Lookup = providers.Unknown
		invs[i].Err = errors.New("Coolify answers \"Project not found.\" for every configured project: the token may belong to another team (it sees live projects as not found); run `slotkeeper doctor`")
	}
	return invs
}

func (r *Reconciler) coolifyScope(ctx context.Context, inv providers.ProjectInventory, scope string, byID map[string]Tracked, add func(events.ReconcileFinding)) error {
	project, l, err := inv.UUID, inv.Lookup, inv.Err
	switch l {
	case providers.Unknown:
		return err
	case providers.Absent:
		if t, ok := byID["coolify|"+events.ResProject+"|"+project]; ok {
			add(events.ReconcileFinding{Class: events.FindingDrift, Provider: "coolify", Kind: events.ResProject, ID: project, Scope: scope, Slot: t.Slot, Detail: "the project is gone at Coolify"})
		}
		// Everything tracked inside it is gone with it.
		for _, t := range byID {
			if t.Scope == scope && t.Kind != events.ResProject {
				add(events.ReconcileFinding{Class: events.FindingDrift, Provider: "coolify", Kind: t.Kind, ID: t.ID, Scope: scope, Slot: t.Slot, Detail: "its project is gone at Coolify"})
			}
		}
		return nil
	}
	if _, ok := byID["coolify|"+events.ResProject+"|"+project]; !ok {
		add(events.ReconcileFinding{Class: events.FindingOrphan, Provider: "coolify", Kind: events.ResProject, ID: project, Name: inv.Project.Name, Scope: scope})
	}
	present := map[string]bool{}
	for _, a := range inv.Applications {
		present["coolify|"+events.ResApplication+"|"+a.UUID] = true
		if _, ok := byID["coolify|"+events.ResApplication+"|"+a.UUID]; !ok {
			add(events.ReconcileFinding{Class: events.FindingOrphan, Provider: "coolify", Kind: events.ResApplication, ID: a.UUID, Name: a.Name, Scope: scope})
		}
	}
	for _, d := range inv.Databases {
		present["coolify|"+events.ResDatabase+"|"+d.UUID] = true
		if _, ok := byID["coolify|"+events.ResDatabase+"|"+d.UUID]; !ok {
			add(events.ReconcileFinding{Class: events.FindingOrphan, Provider: "coolify", Kind: events.ResDatabase, ID: d.UUID, Name: d.Name, Scope: scope})
		}
	}
	// Tracked here but not listed: look it up before calling it drift (a
	// list can lag; only the provider's own 404 says "gone").
	for k, t := range byID {
		if t.Scope != scope || t.Kind == events.ResProject || present[k] {
			continue
		}
		cctx, cancel := r.call(ctx)
		var l providers.Lookup
		var err error
		switch t.Kind {
		case events.ResApplication:
			_, l, err = lookupApp(cctx, r.paas, t.ID)
		case events.ResDatabase:
			_, l, err = lookupDB(cctx, r.paas, t.ID)
		default:
			cancel()
			continue
		}
		cancel()
		switch l {
		case providers.Absent:
			add(events.ReconcileFinding{Class: events.FindingDrift, Provider: "coolify", Kind: t.Kind, ID: t.ID, Scope: scope, Slot: t.Slot, Detail: "gone at Coolify"})
		case providers.Unknown:
			add(couldNotCheck("coolify", t.Kind, t.ID, scope, t.Slot, err))
		}
		// Found but not listed in this project: it moved; not this
		// scope's business.
	}
	return nil
}

// lookupApp and lookupDB use the PaaS's lookups when the inventory client
// has them (the Coolify client does).
func lookupApp(ctx context.Context, p providers.PaaSInventory, id string) (providers.Application, providers.Lookup, error) {
	if g, ok := p.(interface {
		GetApplication(context.Context, string) (providers.Application, providers.Lookup, error)
	}); ok {
		return g.GetApplication(ctx, id)
	}
	return providers.Application{}, providers.Unknown, errors.New("no lookup")
}

func lookupDB(ctx context.Context, p providers.PaaSInventory, id string) (providers.Database, providers.Lookup, error) {
	if g, ok := p.(interface {
		GetDatabase(context.Context, string) (providers.Database, providers.Lookup, error)
	}); ok {
		return g.GetDatabase(ctx, id)
	}
	return providers.Database{}, providers.Unknown, errors.New("no lookup")
}

func errString(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}

func (r *Reconciler) bitbucketScope(ctx context.Context, project, scope string, byID map[string]Tracked, add func(events.ReconcileFinding)) error {
	if r.git == nil {
		return errors.New("no Bitbucket client configured")
	}
	cctx, cancel := r.call(ctx)
	repos, err := r.git.ListRepos(cctx, project)
	cancel()
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, rp := range repos {
		id := rp.Project + "/" + rp.Slug
		present[id] = true
		if _, ok := byID["bitbucket|"+events.ResRepository+"|"+id]; !ok {
			add(events.ReconcileFinding{Class: events.FindingOrphan, Provider: "bitbucket", Kind: events.ResRepository, ID: id, Name: rp.Name, Scope: scope})
		}
	}
	for _, t := range byID {
		if t.Scope != scope || t.Kind != events.ResRepository || present[t.ID] {
			continue
		}
		proj, slug, _ := strings.Cut(t.ID, "/")
		cctx, cancel := r.call(ctx)
		_, l, err := r.git.GetRepo(cctx, proj, slug)
		cancel()
		switch l {
		case providers.Absent:
			add(events.ReconcileFinding{Class: events.FindingDrift, Provider: "bitbucket", Kind: events.ResRepository, ID: t.ID, Scope: scope, Slot: t.Slot, Detail: "gone at Bitbucket"})
		case providers.Unknown:
			add(couldNotCheck("bitbucket", events.ResRepository, t.ID, scope, t.Slot, err))
		}
	}
	return nil
}

// couldNotCheck is the unknown finding of a scope whose listing, or of a
// tracked resource whose lookup, failed (err nil: no answer).
// A provider's answer is coded (events.FailureProvider: provider, problem,
// and its HTTP status as args "status") for the dashboard's words; any
// other error has no code, and the class's explanation says it.
func couldNotCheck(provider, kind, id, scope, slot string, err error) events.ReconcileFinding {
	f := events.ReconcileFinding{Class: events.FindingUnknown, Provider: provider, Kind: kind, ID: id, Scope: scope, Slot: slot, Detail: "could not check: " + errString(err)}
	if pe, ok := providers.AsError(err); ok {
		f.ErrorCode, f.ErrorArgs = events.FailureProvider, map[string]string{"provider": provider, "problem": string(pe.Code)}
		if pe.Status != 0 {
			f.ErrorArgs["status"] = strconv.Itoa(pe.Status)
		}
	}
	return f
}

// failureCode is a failed run's code (events.FailureReconcile*) and its
// parts: its own bound ran out, the server stopped (ctx, the caller's,
// ended), or the tracked resources could not be read.
func (r *Reconciler) failureCode(ctx context.Context, err error) (string, map[string]string) {
	switch {
	case ctx.Err() != nil:
		return events.FailureReconcileStopped, nil
	case errors.Is(err, context.DeadlineExceeded):
		return events.FailureReconcileTimeout, map[string]string{"bound": r.cfg.RunTimeout.String()}
	case errors.Is(err, errTracked):
		return events.FailureReconcileTracked, nil
	}
	return events.FailureInternal, nil
}

// RunView is a run as the API shows it.
type RunView struct {
	ID        string         `json:"id"`
	State     string         `json:"state"` // running | done | failed
	StartedAt time.Time      `json:"started_at"`
	EndedAt   *time.Time     `json:"ended_at,omitempty"`
	Scope     []string       `json:"scope"`
	Counts    map[string]int `json:"counts"`
	Error     string         `json:"error,omitempty"`
	// ErrorCode and ErrorArgs are Error as a code (events.FailureReconcile*)
	// and its parts, for the dashboard's words; absent for a run recorded
	// before the codes (its Error is then all there is).
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
}

// errTracked: the slots' tracked resources could not be read.
var errTracked = errors.New("read tracked resources")

// Report is the latest run and its findings (GET /api/reconcile).
type Report struct {
	Run      *RunView                  `json:"run"`
	Findings []events.ReconcileFinding `json:"findings"`
	// Position is the store position of the report's newest event.
	Position events.Position `json:"position"`
}

// Latest reads the newest run and the current findings from the end of the
// reconcile stream: back to the newest full list (a snapshot, or a run of an
// older log that recorded everything), then the changes of the runs after
// it. Its cost is bounded by the snapshot rule, not by the stream's history.
func (r *Reconciler) Latest(ctx context.Context) (Report, error) {
	st, err := r.latest(ctx)
	return st.Report, err
}

// latestState is Latest's report plus what RunOnce needs to go on.
type latestState struct {
	Report
	rev    events.Revision // the stream's last revision
	exists bool
	// sinceBase counts the events after the newest full list.
	sinceBase int
	current   []events.ReconcileFinding
}

// standing is the current list without the resolved ones.
func (l latestState) standing() []events.ReconcileFinding { return l.current }

// runEvents is one run as read back.
type runEvents struct {
	id       string
	started  *events.ReconcileStarted
	finished *events.ReconcileFinished
	findings []events.ReconcileFinding // in log order
	snapshot []events.ReconcileFinding
	events   int
}

// base reports whether the run holds a full list (and is complete enough to
// use): a snapshot, or an older log's run that recorded every finding (a
// failed run of an older log recorded none: it is no base).
func (r *runEvents) base() bool {
	if r.started == nil {
		return false
	}
	if r.finished != nil && r.finished.Snapshot {
		return true
	}
	return !r.started.ChangesOnly && r.finished != nil && r.finished.State == "done"
}

func (r *Reconciler) latest(ctx context.Context) (latestState, error) {
	st := latestState{Report: Report{Findings: []events.ReconcileFinding{}}}
	runs, err := r.readRuns(ctx, &st)
	if err != nil || len(runs) == 0 {
		return st, err
	}
	// The newest run is the one the report shows (an abandoned run's
	// closing Finished is older than the run that wrote it).
	newest := runs[0]
	for _, x := range runs {
		if x.started != nil {
			newest = x
			break
		}
	}
	st.Run = newest.view()
	st.current, st.sinceBase = fold(runs)
	st.Findings = append(st.Findings, st.current...)
	for _, f := range newest.findings {
		if f.Class == events.FindingResolved {
			st.Findings = append(st.Findings, f)
		}
	}
	return st, nil
}

// readRuns reads the stream backward, newest run first, down to the
// newest run that holds a full list (runEvents.base), and notes the
// stream's end in st. Each run's findings and snapshot come out in log
// order.
func (r *Reconciler) readRuns(ctx context.Context, st *latestState) ([]*runEvents, error) {
	var (
		runs []*runEvents    // newest first
		byID                 = map[string]*runEvents{}
		from events.Revision = math.MaxUint64
	)
	get := func(id string) *runEvents {
		if x, ok := byID[id]; ok {
			return x
		}
		x := &runEvents{id: id}
		byID[id] = x
		runs = append(runs, x)
		return x
	}
	done := false
	for !done {
		page, err := r.store.ReadStream(ctx, events.ReconcileStream, from, 256, events.Backward)
		if errors.Is(err, events.ErrStreamNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			break
		}
		for _, ev := range page {
			if !st.exists {
				st.rev, st.exists, st.Position = ev.Revision, true, ev.Position
			}
			p, err := events.Decode(ev)
			if err != nil {
				return nil, err
			}
			switch e := p.(type) {
			case events.ReconcileFinished:
				get(e.RunID).finished = &e
				get(e.RunID).events++
			case events.ReconcileFinding:
				x := get(e.RunID)
				x.findings = append(x.findings, e)
				x.events++
			case events.ReconcileSnapshot:
				x := get(e.RunID)
				x.snapshot = append(x.snapshot, e.Findings...)
				x.events++
			case events.ReconcileStarted:
				x := get(e.RunID)
				x.started = &e
				x.events++
				if x.base() {
					done = true
				}
			}
			if done {
				break
			}
		}
		if done || page[len(page)-1].Revision == 0 {
			break
		}
		from = page[len(page)-1].Revision - 1
	}
	// Read backward: reverse the findings and snapshot chunks of each run.
	for _, x := range runs {
		slices.Reverse(x.findings)
		slices.Reverse(x.snapshot)
	}
	return runs, nil
}

// view is the run as the report shows it (nil for a run whose start is
// not read).
func (x *runEvents) view() *RunView {
	s := x.started
	if s == nil {
		return nil
	}
	v := &RunView{ID: x.id, State: "running", StartedAt: s.StartedAt, Scope: s.Scope, Counts: map[string]int{}}
	if f := x.finished; f != nil {
		t := f.EndedAt
		v.State, v.EndedAt, v.Counts, v.Error, v.ErrorCode, v.ErrorArgs = f.State, &t, f.Counts, f.Error, f.ErrorCode, f.ErrorArgs
	}
	return v
}

// fold folds the runs (newest first) oldest to newest from their base into
// the standing findings (sorted), and counts the events after the base.
func fold(runs []*runEvents) (current []events.ReconcileFinding, sinceBase int) {
	cur := map[string]events.ReconcileFinding{}
	for i := len(runs) - 1; i >= 0; i-- {
		x := runs[i]
		if x.base() {
			clear(cur)
			sinceBase = 0
			list := x.snapshot
			if x.finished == nil || !x.finished.Snapshot {
				list = x.findings // an older log's run: its findings are the full list
			}
			for _, f := range list {
				if f.Class != events.FindingResolved {
					cur[key(f)] = f
				}
			}
			continue
		}
		sinceBase += x.events
		for _, f := range x.findings {
			if f.Class == events.FindingResolved {
				delete(cur, key(f))
			} else {
				cur[key(f)] = f
			}
		}
	}
	current = make([]events.ReconcileFinding, 0, len(cur))
	for _, f := range cur {
		current = append(current, f)
	}
	sortFindings(current)
	return current, sinceBase
}

// ErrStale is returned by CurrentOrphan for a finding that is not an orphan
// in the latest run (never found, resolved, or of another class).
var ErrStale = errors.New("reconcile: not an orphan in the latest run")

// TrackedError is returned by CurrentOrphan for a resource some slot tracks
// now (adopted since the run, or registered): acting on it as an orphan
// would give it two owners, or delete what a slot owns.
type TrackedError struct{ Slot string }

func (e *TrackedError) Error() string {
	return "reconcile: tracked by slot " + e.Slot
}

// CurrentOrphan returns the latest run's orphan finding for the resource,
// ErrStale if the latest run does not hold it as an orphan, or a
// *TrackedError if a slot tracks it now.
func (r *Reconciler) CurrentOrphan(ctx context.Context, provider, kind, id string) (events.ReconcileFinding, error) {
	rep, err := r.Latest(ctx)
	if err != nil {
		return events.ReconcileFinding{}, err
	}
	want := provider + "|" + kind + "|" + id
	var found *events.ReconcileFinding
	for i, f := range rep.Findings {
		if f.Class == events.FindingOrphan && key(f) == want {
			found = &rep.Findings[i]
			break
		}
	}
	if found == nil {
		return events.ReconcileFinding{}, ErrStale
	}
	tracked, err := r.tracker.Tracked(ctx)
	if err != nil {
		return events.ReconcileFinding{}, err
	}
	for _, t := range tracked {
		if t.Provider+"|"+t.Kind+"|"+t.ID == want {
			return events.ReconcileFinding{}, &TrackedError{Slot: t.Slot}
		}
	}
	return *found, nil
}
