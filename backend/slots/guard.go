package slots

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Every later job runs with the server's provider tokens against whatever a
// slot names, so Register is where a slot is bound to resources it may act
// on (DESIGN.md invariant 12). Three checks, in this order, before anything
// is appended:
//
//  1. Scope: the Coolify project and every Bitbucket project named lie in
//     the configured allow-lists (Scope) → else CodeForbidden (403).
//  2. Ownership: no two unretired slots share a project, application,
//     database or repository, and no slot's repository is any slot's
//     template (or the reverse) → else CodeConflict (409) naming the owner.
//  3. Existence: each resource is looked up at its provider (tri-state,
//     ResourceChecker): absent → CodeUnprocessable (422) naming it; could
//     not check → CodeUpstream (502); the application and database must lie
//     in the project, in one environment → else 422.

// Scope bounds the resources slots may name. An empty list leaves that
// provider unrestricted (serve warns about it) unless Simulated is set.
type Scope struct {
	// CoolifyProjects are the Coolify project uuids a slot may live in.
	CoolifyProjects []string
	// BitbucketProjects are the Bitbucket project keys a slot's repository,
	// its template and a promote's target may lie in (compared without
	// regard to case, as Bitbucket does).
	BitbucketProjects []string
	// Simulated, when set (the demo on the simulators, issue 38), adds every
	// project the simulators hold at the moment of the check: a world
	// seeded through /api/sim/slots after start is in scope at once, and
	// anything the simulators do not hold is not (the lists above are then
	// additions, and empty ones no longer mean "any").
	Simulated SimulatedProjects
}

// SimulatedProjects answers which projects the simulators hold now
// (*sim.Sim in process; the control API of `slotkeeper sim` otherwise).
type SimulatedProjects interface {
	Projects(ctx context.Context) (coolify, bitbucket []string, err error)
}

// Restricted reports whether the scope limits anything (false: any
// project of both providers; serve warns).
func (sc Scope) Restricted() (coolify, bitbucket bool) {
	return sc.Simulated != nil || len(sc.CoolifyProjects) > 0, sc.Simulated != nil || len(sc.BitbucketProjects) > 0
}

func (sc Scope) coolifyOK(ctx context.Context, field, uuid string) (bool, error) {
	if slices.Contains(sc.CoolifyProjects, uuid) {
		return true, nil
	}
	if sc.Simulated == nil {
		return len(sc.CoolifyProjects) == 0, nil
	}
	cool, _, err := sc.Simulated.Projects(ctx)
	return slices.Contains(cool, uuid), simScopeErr(field, uuid, err)
}

func (sc Scope) bitbucketOK(ctx context.Context, field, key string) (bool, error) {
	if sc.Simulated == nil && len(sc.BitbucketProjects) == 0 {
		return true, nil
	}
	has := func(keys []string) bool {
		return slices.ContainsFunc(keys, func(k string) bool { return strings.EqualFold(k, key) })
	}
	if has(sc.BitbucketProjects) || sc.Simulated == nil {
		return has(sc.BitbucketProjects), nil
	}
	_, bb, err := sc.Simulated.Projects(ctx)
	return has(bb), simScopeErr(field, key, err)
}

// simScopeErr: the simulators could not say what they hold (their own
// process is down), so the scope is unknown — a 502, never an answer.
func simScopeErr(field, project string, err error) error {
	if err == nil {
		return nil
	}
	e := apperr.RefuseAs(CodeUpstream, apperr.ReasonProviderUnchecked, "simulators", "field", field, "id", project).
		With(map[string]any{"field": field})
	e.Err = err
	return e
}

// checkBitbucket refuses key outside the Bitbucket scope, naming field.
func (sc Scope) checkBitbucket(ctx context.Context, field, key string) error {
	ok, err := sc.bitbucketOK(ctx, field, key)
	if err != nil {
		return err
	}
	if !ok {
		return outsideScope("bitbucket", field, key)
	}
	return nil
}

// refuseField is the refusal for r (worded by its English variant) that
// names field in its details and as the reason's field arg.
func refuseField(code apperr.Code, r apperr.Reason, variant, field string, kv ...string) *Error {
	return apperr.RefuseAs(code, r, variant, append([]string{"field", field}, kv...)...).With(map[string]any{"field": field})
}

// outsideScope is the refusal of a project (of provider) outside the
// configured scope, naming field.
func outsideScope(provider, field, project string) *Error {
	return apperr.RefuseAs(CodeForbidden, apperr.ReasonOutsideScope, provider, "field", field, "project", project).
		With(map[string]any{"field": field})
}

// checkScope is step 1 of Register.
func (s *Service) checkScope(ctx context.Context, c RegisterCmd) error {
	sc := s.cfg.Scope
	ok, err := sc.coolifyOK(ctx, "project_uuid", c.ProjectUUID)
	if err != nil {
		return err
	}
	if !ok {
		return outsideScope("coolify", "project_uuid", c.ProjectUUID)
	}
	for _, f := range []struct {
		field string
		r     events.RepoRef
	}{{"repo.project", c.Repo}, {"template_repo.project", c.TemplateRepo}} {
		if err := sc.checkBitbucket(ctx, f.field, f.r.Project); err != nil {
			return err
		}
	}
	return nil
}

// ResourceState is a provider's answer about one resource.
type ResourceState int

// The three answers of a lookup (DESIGN.md invariant 6): only the
// provider's own "not found" is Absent.
const (
	ResourceUnknown ResourceState = iota
	ResourceFound
	ResourceAbsent
)

// ErrRefusedID is wrapped by a ResourceChecker's error when the provider's
// client refuses an id before sending anything (its id rules are the ones
// that count: a slot naming an id the client refuses could never be torn
// down).
var ErrRefusedID = errors.New("the provider client refuses this id")

// ResourceChecker looks a slot's resources up at the providers. Each method
// returns ResourceUnknown with an error when it could not tell (401, 403,
// 5xx, timeout, a refused id wrapping ErrRefusedID).
type ResourceChecker interface {
	// CoolifyProject returns the ids of the project's environments.
	CoolifyProject(ctx context.Context, uuid string) (environments []int64, st ResourceState, err error)
	// CoolifyApp and CoolifyDB return the environment the resource lives in
	// (0 when the provider did not say).
	CoolifyApp(ctx context.Context, uuid string) (environment int64, st ResourceState, err error)
	CoolifyDB(ctx context.Context, uuid string) (environment int64, st ResourceState, err error)
	// Repo also returns the repository's default branch ("" when the
	// provider cannot tell it).
	Repo(ctx context.Context, r events.RepoRef) (defaultBranch string, st ResourceState, err error)
}

// DBEngineChecker is the optional part of a ResourceChecker that reads a
// database's engine and image (providercheck.Checker has it): register
// records them in the template as what "same as before" means.
type DBEngineChecker interface {
	CoolifyDBEngine(ctx context.Context, uuid string) (engine, image string, err error)
}

// AppBuildPackChecker is the optional part of a ResourceChecker that reads
// an application's build pack (providercheck.Checker has it).
type AppBuildPackChecker interface {
	CoolifyAppBuildPack(ctx context.Context, uuid string) (string, error)
}

// checkResources is step 3 of Register. It returns the slot repository's
// default branch as the provider reports it ("" without a checker).
func (s *Service) checkResources(ctx context.Context, c RegisterCmd) (string, error) {
	ch := s.cfg.Resources
	if ch == nil {
		return "", nil
	}
	judge := func(field, what string, st ResourceState, err error) error {
		switch {
		case errors.Is(err, ErrRefusedID):
			return apperr.InvalidField(field, fmt.Sprintf("%s %s: %v", field, what, err))
		case st == ResourceAbsent:
			return refuseField(CodeUnprocessable, apperr.ReasonResourceAbsent, "", field, "id", what)
		case st != ResourceFound:
			e := refuseField(CodeUpstream, apperr.ReasonProviderUnchecked, "", field, "id", what)
			e.Err = err
			return e
		}
		return nil
	}
	envs, st, err := ch.CoolifyProject(ctx, c.ProjectUUID)
	if e := judge("project_uuid", c.ProjectUUID, st, err); e != nil {
		return "", e
	}
	appEnv, st, err := ch.CoolifyApp(ctx, c.AppUUID)
	if e := judge("app_uuid", c.AppUUID, st, err); e != nil {
		return "", e
	}
	dbEnv, st, err := ch.CoolifyDB(ctx, c.DBUUID)
	if e := judge("db_uuid", c.DBUUID, st, err); e != nil {
		return "", e
	}
	def, st, err := ch.Repo(ctx, c.Repo)
	if e := judge("repo", repoName(c.Repo), st, err); e != nil {
		return "", e
	}
	_, st, err = ch.Repo(ctx, c.TemplateRepo)
	if e := judge("template_repo", repoName(c.TemplateRepo), st, err); e != nil {
		return "", e
	}
	if bc, ok := ch.(AppBuildPackChecker); ok && c.Template != nil {
		bp, err := bc.CoolifyAppBuildPack(ctx, c.AppUUID)
		switch {
		case err != nil:
			e := refuseField(CodeUpstream, apperr.ReasonProviderUnchecked, "build_pack", "app_uuid", "id", c.AppUUID)
			e.Err = err
			return "", e
		case bp == "dockercompose":
			// Coolify answers 422 to deleting a compose-managed storage
			// (ApplicationsController.php:5076-5080 at 379abb25): a reset
			// could never empty its volumes.
			return "", apperr.Refuse(CodeUnprocessable, apperr.ReasonComposeTemplate, "app", c.AppUUID).With(map[string]any{"field": "template"})
		}
	}
	if t := c.Template; t != nil && t.DBEngine == "" {
		if ec, ok := ch.(DBEngineChecker); ok {
			eng, img, err := ec.CoolifyDBEngine(ctx, c.DBUUID)
			if err != nil {
				e := refuseField(CodeUpstream, apperr.ReasonProviderUnchecked, "db_engine", "db_uuid", "id", c.DBUUID)
				e.Err = err
				return "", e
			}
			t.SeenEngine, t.SeenImage = eng, img
		}
	}
	if t := c.Template; t != nil && t.EnvFromApp != "" {
		_, st, err := ch.CoolifyApp(ctx, t.EnvFromApp)
		if e := judge("template.env_from_app", t.EnvFromApp, st, err); e != nil {
			return "", e
		}
	}
	switch {
	case appEnv == 0 || dbEnv == 0:
		return "", &Error{Code: CodeUpstream, Message: "Coolify did not report which environment the application and database live in; nothing was recorded"}
	case !slices.Contains(envs, appEnv):
		return "", refuseField(CodeUnprocessable, apperr.ReasonResourceForeign, "app", "app_uuid", "id", c.AppUUID, "project", c.ProjectUUID)
	case !slices.Contains(envs, dbEnv):
		return "", refuseField(CodeUnprocessable, apperr.ReasonResourceForeign, "db", "db_uuid", "id", c.DBUUID, "project", c.ProjectUUID)
	case appEnv != dbEnv:
		return "", refuseField(CodeUnprocessable, apperr.ReasonResourceForeign, "environment", "db_uuid", "id", c.DBUUID, "project", c.ProjectUUID, "app", c.AppUUID)
	}
	return def, nil
}

// owners is the index of what the unretired slots name, folded from the
// registry's SlotClaimed and the slot streams' SlotRegistered and
// SlotRetired (ownersFold, run by a consumer.Runner). It catches up with
// the log (from where it stopped) each time Register asks, under
// Register's mutex, so its cost follows new events, not history.
//
// The index is per process, but the decision is not: Register appends its
// SlotClaimed to events.SlotRegistryStream with the registry revision the
// index has seen (RegRev), so a claim made meanwhile by another process
// fails the append, and the retry sees it.
type owners struct {
	mu sync.Mutex // held by Register from the check to the appends
	f  *ownersFold
	r  *consumer.Runner
}

// The owners index is checkpointed like the log's consumers: the first
// Register after a start folds only the log after the newest checkpoint,
// not the whole history, and writes one when a catch-up folded
// ownersSaveEvery events since the last.
const (
	ownersConsumer  = "slot-owners"
	ownersVersion   = 1
	ownersSaveEvery = 10_000
)

// ownersFold is the index's state, and its checkpoint's.
type ownersFold struct {
	Regs map[string]events.SlotRegistered `json:"regs"` // unretired slots, claimed or registered
	// Pending are the claims whose SlotRegistered is not in the log yet
	// (being appended now, or lost in a crash), with the claim's event.
	Pending map[string]events.RecordedEvent `json:"pending"`
	RegRev  events.Revision                 `json:"reg_rev"`  // the registry's last revision folded
	RegSeen bool                            `json:"reg_seen"` // whether the registry stream exists
}

func newOwnersFold() *ownersFold {
	return &ownersFold{Regs: map[string]events.SlotRegistered{}, Pending: map[string]events.RecordedEvent{}}
}

func newOwners(store events.Store, log *slog.Logger, health *consumer.Health) *owners {
	f := newOwnersFold()
	return &owners{f: f, r: consumer.NewRunner(store, f, consumer.Options{Logger: log, Health: health})}
}

// catchUp folds the log up to its head, and writes a checkpoint if that
// passed ownersSaveEvery events since the last.
func (o *owners) catchUp(ctx context.Context) error {
	if err := o.r.Sync(ctx); err != nil {
		return err
	}
	o.r.Save(ctx, ownersSaveEvery)
	return nil
}

// Name implements consumer.Fold.
func (f *ownersFold) Name() string { return ownersConsumer }

// Version implements consumer.Fold.
func (f *ownersFold) Version() int { return ownersVersion }

// Wants implements consumer.Fold: the registry, and slots' registrations
// and retirements.
func (f *ownersFold) Wants(ev events.RecordedEvent) bool {
	return ev.Stream == events.SlotRegistryStream ||
		(strings.HasPrefix(ev.Stream, events.SlotStreamPrefix) && (ev.Is(events.SlotRegistered{}) || ev.Is(events.SlotRetired{})))
}

// Snapshot implements consumer.Fold.
func (f *ownersFold) Snapshot() (any, error) { return f, nil }

// Restore implements consumer.Fold.
func (f *ownersFold) Restore(b []byte) error {
	g := newOwnersFold()
	if err := json.Unmarshal(b, g); err != nil {
		return err
	}
	if g.Regs == nil {
		g.Regs = map[string]events.SlotRegistered{}
	}
	if g.Pending == nil {
		g.Pending = map[string]events.RecordedEvent{}
	}
	*f = *g
	return nil
}

// Apply implements consumer.Fold.
func (f *ownersFold) Apply(ev events.RecordedEvent) error {
	switch {
	case ev.Stream == events.SlotRegistryStream:
		f.RegRev, f.RegSeen = ev.Revision, true
		if !ev.Is(events.SlotClaimed{}) {
			return nil
		}
		p, err := events.Decode(ev)
		if err != nil {
			return err
		}
		c := p.(events.SlotClaimed)
		if _, done := f.Regs[c.Slot]; !done {
			f.Regs[c.Slot] = c.SlotRegistered
			f.Pending[c.Slot] = ev
		}
	default:
		p, err := events.Decode(ev)
		if err != nil {
			return err
		}
		switch e := p.(type) {
		case events.SlotRegistered:
			f.Regs[e.Slot] = e
			delete(f.Pending, e.Slot)
		case events.SlotRetired:
			name := strings.TrimPrefix(ev.Stream, events.SlotStreamPrefix)
			delete(f.Regs, name)
			delete(f.Pending, name)
		}
	}
	return nil
}

// expected is the condition of the next claim's append: the registry as
// the index has seen it.
func (o *owners) expected() (exp events.ExpectedRevision) {
	o.r.View(func() {
		exp = events.NoStream()
		if o.f.RegSeen {
			exp = events.Exact(o.f.RegRev)
		}
	})
	return exp
}

// registered appends the SlotRegistered a claim carries to the slot's own
// stream. It is idempotent: the stream must not exist yet, and when it
// does because another process completed the same claim first, that is
// success. The event keeps the claim's metadata and names the claim as its
// cause, so it reads the same whoever wrote it.
func registered(ctx context.Context, store events.Store, claim events.RecordedEvent) error {
	p, err := events.Decode(claim)
	if err != nil {
		return err
	}
	reg := p.(events.SlotClaimed).SlotRegistered
	meta := claim.Meta
	meta.CausationID = claim.ID
	_, err = store.Append(ctx, events.SlotStream(reg.Slot), events.NoStream(), events.New(reg, meta))
	if !errors.Is(err, events.ErrWrongRevision) {
		return err
	}
	first, rerr := store.ReadStream(ctx, events.SlotStream(reg.Slot), 0, 1, events.Forward)
	if rerr != nil {
		return rerr
	}
	if len(first) == 1 && first[0].Is(events.SlotRegistered{}) && first[0].Meta.CausationID == claim.ID {
		return nil // completed by another process
	}
	return fmt.Errorf("slot %s was created by something other than its claim %s", reg.Slot, claim.ID)
}

// completePending appends the SlotRegistered of every claim whose
// registration is missing: the registrant crashed (or stopped) between its
// two appends, or is completing it right now (then one of the two appends
// wins and both writes are the same). So a claim never holds resources
// for a slot that cannot come to exist.
func (o *owners) completePending(ctx context.Context, store events.Store) error {
	var pending map[string]events.RecordedEvent
	o.r.View(func() { pending = maps.Clone(o.f.Pending) })
	for _, n := range slices.Sorted(maps.Keys(pending)) {
		if err := registered(ctx, store, pending[n]); err != nil {
			return err
		}
	}
	return nil
}

// checkOwners is step 2 of Register: c may name nothing an unretired slot
// names, and its repository and template must not be any slot's template
// or repository.
func (o *owners) check(c RegisterCmd) (err error) {
	o.r.View(func() { err = o.f.check(c) })
	return err
}

func (f *ownersFold) check(c RegisterCmd) error {
	if sameRepo(c.Repo, c.TemplateRepo) {
		return apperr.Refuse(CodeUnprocessable, apperr.ReasonTemplateIsOwnRepo, "repo", repoName(c.Repo)).With(map[string]any{"field": "template_repo"})
	}
	taken := func(field, value, owner, as string) *Error {
		return apperr.RefuseAs(CodeConflict, apperr.ReasonResourceOwned, as, "field", field, "value", value, "owner", owner).
			With(map[string]any{"field": field, "owner": owner})
	}
	names := make([]string, 0, len(f.Regs))
	for n := range f.Regs {
		names = append(names, n)
	}
	slices.Sort(names) // the same answer every time
	// Field by field, so the answer names the first field in the order of
	// the command, whichever slot owns it.
	rules := []struct {
		field, value, as string // as: the English variant, what the slot holds it as
		owns             func(r events.SlotRegistered) bool
	}{
		{"project_uuid", c.ProjectUUID, "project", func(r events.SlotRegistered) bool { return r.ProjectUUID == c.ProjectUUID }},
		{"app_uuid", c.AppUUID, "app", func(r events.SlotRegistered) bool { return r.AppUUID == c.AppUUID }},
		{"db_uuid", c.DBUUID, "db", func(r events.SlotRegistered) bool { return r.DBUUID == c.DBUUID }},
		{"repo", repoName(c.Repo), "repo", func(r events.SlotRegistered) bool { return sameRepo(r.Repo, c.Repo) }},
		{"repo", repoName(c.Repo), "template", func(r events.SlotRegistered) bool { return sameRepo(r.TemplateRepo, c.Repo) }},
		{"template_repo", repoName(c.TemplateRepo), "repo", func(r events.SlotRegistered) bool { return sameRepo(r.Repo, c.TemplateRepo) }},
	}
	for _, rule := range rules {
		for _, n := range names {
			if rule.owns(f.Regs[n]) {
				return taken(rule.field, rule.value, n, rule.as)
			}
		}
	}
	return nil
}

func repoName(r events.RepoRef) string { return r.Project + "/" + r.Slug }

// sameRepo compares repositories as Bitbucket does: project keys without
// regard to case.
func sameRepo(a, b events.RepoRef) bool {
	return strings.EqualFold(a.Project, b.Project) && a.Slug == b.Slug
}
