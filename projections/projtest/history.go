// Package projtest holds what every read-model store's tests share: a
// deterministic history generator that writes realistic slot and job
// streams (successes, failures, timeouts with an uncertain step, abandoned
// attempts that are resumed, incomplete teardowns, promotions, unknown event
// types) and the conformance suite both read models must pass.
package projtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Steps of each job kind, in the order the worker runs them: the step
// table's (events.Steps).
var Steps = map[string][]string{
	events.KindReset:    events.StepNames(events.KindReset, false),
	events.KindTeardown: events.StepNames(events.KindTeardown, false),
	events.KindPromote:  events.StepNames(events.KindPromote, false),
}

// Outcome of a generated job attempt.
type Outcome int

// The ways a generated attempt ends.
const (
	Succeed Outcome = iota
	Fail            // a step fails with an HTTP error, then JobFailed
	TimeOut         // the step deadline passes mid-call: uncertain step
	Abandon         // the worker dies mid-call: the rescuer abandons it
	Cancel          // a person cancels while the job runs
)

// Gen appends generated events to a store. Its output depends only on the
// seed, so two stores fed by Gens with one seed hold the same log (positions,
// payloads and times; only event ids differ).
type Gen struct {
	Store events.Store
	rnd   *rand.Rand
	clock time.Time
	jobs  int
	// Slots are the generated slots and what the generator knows of them.
	Slots map[string]*SlotState
	order []string
	// FailAt, when set, is the step where a failing attempt goes wrong
	// (instead of a random undone step).
	FailAt string
	// Prefix starts every slot name and job id, so several generators can
	// write into one store at once without touching each other's streams.
	Prefix string
	// Appended counts the events this generator wrote.
	Appended int
	// FixedPool makes Random keep the pool's size, as a team's pool does:
	// a retired slot is replaced by a new registration at once and is not
	// visited again. Without it the pool drifts: a retired slot is
	// replaced only now and then, and the live pool grows with the history
	// (about 9× from 100k to 1M events of 128 generators).
	FixedPool bool
}

// SlotState is the generator's model of a slot.
type SlotState struct {
	Name      string
	Reg       events.SlotRegistered
	Rev       events.Revision
	Occupant  string
	Retired   bool
	Remaining []events.Resource // set by an incomplete teardown
}

// NewGen returns a generator with the given seed.
func NewGen(store events.Store, seed uint64) *Gen {
	return &Gen{
		Store: store, rnd: rand.New(rand.NewPCG(seed, seed^0x5107)),
		clock: time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC), Slots: map[string]*SlotState{},
	}
}

func (g *Gen) meta(actor string) events.Metadata {
	g.clock = g.clock.Add(time.Duration(1+g.rnd.IntN(5000)) * time.Millisecond)
	return events.Metadata{Actor: actor, CorrelationID: fmt.Sprintf("req-%d", g.clock.UnixMilli()), Time: g.clock}
}

func (g *Gen) appendSlot(ctx context.Context, s *SlotState, actor string, p events.Payload) error {
	res, err := g.Store.Append(ctx, events.SlotStream(s.Name), events.Exact(s.Rev), events.New(p, g.meta(actor)))
	if err != nil {
		return fmt.Errorf("append %s to slot %s: %w", p.EventType(), s.Name, err)
	}
	g.Appended++
	s.Rev = res.NextExpected
	return nil
}

// Register appends SlotRegistered for a new slot.
func (g *Gen) Register(ctx context.Context, name string) (*SlotState, error) {
	s := &SlotState{Name: name, Reg: events.SlotRegistered{
		Slot: name, ProjectUUID: "prj-" + name, AppUUID: "app-" + name, DBUUID: "db-" + name,
		Repo: events.RepoRef{Project: "PRE", Slug: name}, TemplateRepo: events.RepoRef{Project: "TPL", Slug: "base"},
		TemplateRef: "main",
	}}
	_, err := g.Store.Append(ctx, events.SlotStream(name), events.NoStream(), events.New(s.Reg, g.meta("admin")))
	if err != nil {
		return nil, err
	}
	g.Appended++
	g.Slots[name] = s
	g.order = append(g.order, name)
	return s, nil
}

// Occupy hands the slot to by.
func (g *Gen) Occupy(ctx context.Context, s *SlotState, by string) error {
	s.Occupant = by
	return g.appendSlot(ctx, s, by, events.SlotOccupied{Slot: s.Name, By: by, Until: g.clock.Add(8 * time.Hour)})
}

// Extend moves the deadline.
func (g *Gen) Extend(ctx context.Context, s *SlotState) error {
	return g.appendSlot(ctx, s, s.Occupant, events.OccupancyExtended{Slot: s.Name, By: s.Occupant, Until: g.clock.Add(24 * time.Hour)})
}

// jobRun is one job while the generator drives it.
type jobRun struct {
	g       *Gen
	slot    *SlotState
	id      string
	kind    string
	rev     events.Revision
	started bool
	attempt int
	done    []string
	plan    []events.Resource
}

func (j *jobRun) append(ctx context.Context, actor string, p events.Payload) error {
	exp := events.Exact(j.rev)
	if !j.started {
		exp = events.NoStream()
	}
	res, err := j.g.Store.Append(ctx, events.JobStream(j.id), exp, events.New(p, j.g.meta(actor)))
	if err != nil {
		return fmt.Errorf("append %s to job %s: %w", p.EventType(), j.id, err)
	}
	j.rev, j.started = res.NextExpected, true
	j.g.Appended++
	return nil
}

func (j *jobRun) worker() string { return fmt.Sprintf("worker:host-%d:%d", j.attempt%2, j.attempt) }

// remaining is what the job has not confirmed deleted (the rule of
// events.JobState.Remaining).
func (j *jobRun) remaining() []events.Resource {
	out := events.WithoutDone(j.kind, j.plan, func(st string) bool { return slices.Contains(j.done, st) })
	if out == nil {
		out = []events.Resource{}
	}
	return out
}

// Job runs a whole job of kind on s: queue, accept, then attempts ending with
// the given outcomes in turn (each non-final one is resumed), and release.
// The last outcome decides how the job ends. It returns the job id.
func (g *Gen) Job(ctx context.Context, s *SlotState, kind string, outcomes ...Outcome) (string, error) {
	g.jobs++
	j := &jobRun{g: g, slot: s, id: fmt.Sprintf("%sj%05d", g.Prefix, g.jobs), kind: kind}
	if kind == events.KindTeardown {
		j.plan = []events.Resource{
			{Kind: events.ResDatabase, ID: s.Reg.DBUUID}, {Kind: events.ResApplication, ID: s.Reg.AppUUID},
			{Kind: events.ResRepository, ID: s.Reg.Repo.String(), Name: s.Reg.Repo.Slug}, {Kind: events.ResProject, ID: s.Reg.ProjectUUID},
		}
	}
	who := s.Occupant
	if who == "" {
		who = "admin"
	}
	q := events.JobQueued{JobID: j.id, Kind: kind, Slot: s.Name, RequestedBy: who, NotBefore: g.clock.Add(time.Minute), Steps: Steps[kind], Resources: j.plan}
	if kind == events.KindPromote {
		q.Params = map[string]string{"project": "PROD", "name": s.Name + "-app"}
	}
	if err := j.append(ctx, who, q); err != nil {
		return "", err
	}
	if err := g.appendSlot(ctx, s, who, events.JobAccepted{Slot: s.Name, JobID: j.id, Kind: kind}); err != nil {
		return "", err
	}
	if len(outcomes) == 0 {
		outcomes = []Outcome{Succeed}
	}
	for i, o := range outcomes {
		if i > 0 {
			from := j.firstUndone()
			if err := j.append(ctx, who, events.JobResumed{JobID: j.id, By: who, FromStep: from}); err != nil {
				return "", err
			}
			if err := g.appendSlot(ctx, s, who, events.JobAccepted{Slot: s.Name, JobID: j.id, Kind: kind, Resumed: true}); err != nil {
				return "", err
			}
		}
		outcome, err := j.attemptRun(ctx, o)
		if err != nil {
			return "", err
		}
		if err := g.appendSlot(ctx, s, "system:jobs", events.JobReleased{Slot: s.Name, JobID: j.id, Outcome: outcome}); err != nil {
			return "", err
		}
		if outcome == events.StatusCancelled || outcome == events.StatusSucceeded {
			break
		}
	}
	return j.id, nil
}

func (j *jobRun) firstUndone() string {
	for _, s := range Steps[j.kind] {
		if !contains(j.done, s) {
			return s
		}
	}
	return ""
}

// attemptRun runs one attempt: claim, steps from the first undone, ending as o.
func (j *jobRun) attemptRun(ctx context.Context, o Outcome) (string, error) {
	g := j.g
	j.attempt++
	w := j.worker()
	if err := j.append(ctx, w, events.JobClaimed{JobID: j.id, Worker: w, Attempt: j.attempt, LeaseUntil: g.clock.Add(30 * time.Second)}); err != nil {
		return "", err
	}
	steps := Steps[j.kind]
	failAt := -1
	if o != Succeed {
		// Fail somewhere among the steps not done yet.
		var undone []int
		for i, s := range steps {
			if !contains(j.done, s) {
				undone = append(undone, i)
			}
		}
		failAt = undone[g.rnd.IntN(len(undone))]
		for _, i := range undone {
			if steps[i] == g.FailAt {
				failAt = i
			}
		}
	}
	for i, step := range steps {
		if contains(j.done, step) {
			continue
		}
		if g.rnd.IntN(3) == 0 {
			if err := j.append(ctx, w, events.LeaseRenewed{JobID: j.id, Attempt: j.attempt, LeaseUntil: g.clock.Add(30 * time.Second)}); err != nil {
				return "", err
			}
		}
		if err := j.append(ctx, w, events.StepStarted{JobID: j.id, Step: step, Attempt: j.attempt}); err != nil {
			return "", err
		}
		if err := j.touch(ctx, step); err != nil {
			return "", err
		}
		if i == failAt {
			return j.end(ctx, o, step)
		}
		if err := j.stepDone(ctx, step); err != nil {
			return "", err
		}
	}
	if err := j.append(ctx, w, events.JobSucceeded{JobID: j.id, Attempt: j.attempt}); err != nil {
		return "", err
	}
	if g.rnd.IntN(2) == 0 {
		if _, err := g.Store.Append(ctx, events.NotifyStream(j.id), events.NoStream(),
			events.New(events.NotificationSent{JobID: j.id, Outcome: events.StatusSucceeded, Status: 200}, g.meta("system:notify"))); err != nil {
			return "", err
		}
		g.Appended++
	}
	return events.StatusSucceeded, nil
}

// touch appends what a step records before its result, as backend/jobs
// does: the env vars / volumes it listed (ResourcesListed), and, half the
// time, a queued delete the provider accepted (DeleteAccepted). Either may
// then be left unconfirmed by a failing attempt.
func (j *jobRun) touch(ctx context.Context, step string) error {
	g, s, w := j.g, j.slot, j.worker()
	var p events.Payload
	switch step {
	case events.StepDeleteEnvVars:
		p = events.ResourcesListed{JobID: j.id, Step: step, Attempt: j.attempt, Resources: []events.Resource{
			{Kind: events.ResEnvVar, ID: "env-1", Name: "DATABASE_URL"}, {Kind: events.ResEnvVar, ID: "env-2", Name: "SECRET_KEY"}}}
	case events.StepDeleteVolumes:
		p = events.ResourcesListed{JobID: j.id, Step: step, Attempt: j.attempt, Resources: []events.Resource{{Kind: events.ResVolume, ID: "vol-1", Name: "data"}}}
	case events.StepDeleteDB, events.StepDeleteApp, events.StepDeleteRepo:
		if g.rnd.IntN(2) == 0 {
			return nil
		}
		r := map[string]events.Resource{
			events.StepDeleteDB:   {Kind: events.ResDatabase, ID: s.Reg.DBUUID},
			events.StepDeleteApp:  {Kind: events.ResApplication, ID: s.Reg.AppUUID},
			events.StepDeleteRepo: {Kind: events.ResRepository, ID: s.Reg.Repo.String()},
		}[step]
		p = events.DeleteAccepted{JobID: j.id, Step: step, Attempt: j.attempt, Resource: r, HTTPStatus: 202}
	default:
		return nil
	}
	return j.append(ctx, w, p)
}

// end finishes an attempt that went wrong at step.
func (j *jobRun) end(ctx context.Context, o Outcome, step string) (string, error) {
	g, s, w := j.g, j.slot, j.worker()
	rem := j.remaining()
	var outcome string
	switch o {
	case Fail:
		if err := j.append(ctx, w, events.StepFailed{JobID: j.id, Step: step, Attempt: j.attempt, Error: "HTTP 500: upstream error", HTTPStatus: 500, Retryable: true}); err != nil {
			return "", err
		}
		outcome = events.StatusFailed
		if err := j.append(ctx, w, events.JobFailed{JobID: j.id, Attempt: j.attempt, Reason: step + " failed: HTTP 500", FailedStep: step, CompletedSteps: append([]string{}, j.done...), Remaining: rem}); err != nil {
			return "", err
		}
	case TimeOut:
		outcome = events.StatusTimedOut
		if err := j.append(ctx, "system:deadline", events.JobTimedOut{JobID: j.id, Attempt: j.attempt, UncertainStep: step, Deadline: "step", CompletedSteps: append([]string{}, j.done...), Remaining: rem}); err != nil {
			return "", err
		}
	case Abandon:
		outcome = events.StatusAbandoned
		// The rescuer names no step: the reducer must find the started one.
		if err := j.append(ctx, "system:rescuer", events.JobAbandoned{JobID: j.id, Attempt: j.attempt, Worker: w, LeaseUntil: g.clock, CompletedSteps: append([]string{}, j.done...), Remaining: rem}); err != nil {
			return "", err
		}
	case Cancel:
		outcome = events.StatusCancelled
		if err := j.append(ctx, s.Occupant, events.JobCancelled{JobID: j.id, By: "admin", Attempt: j.attempt, UncertainStep: step, CompletedSteps: append([]string{}, j.done...), Remaining: rem}); err != nil {
			return "", err
		}
	}
	if j.kind == events.KindTeardown && len(rem) > 0 {
		s.Remaining = rem
		if err := g.appendSlot(ctx, s, "system:jobs", events.TeardownIncomplete{Slot: s.Name, JobID: j.id, Remaining: rem}); err != nil {
			return "", err
		}
	}
	return outcome, nil
}

// stepDone appends the result of a step (and the slot event it implies).
func (j *jobRun) stepDone(ctx context.Context, step string) error {
	g, s, w := j.g, j.slot, j.worker()
	r := events.StepResult{JobID: j.id, Step: step, Attempt: j.attempt, AlreadyAbsent: g.rnd.IntN(10) == 0}
	var p events.Payload
	switch step {
	case events.StepDeleteDB:
		p = events.DBDeleted{StepResult: r, DBUUID: s.Reg.DBUUID}
	case events.StepDeleteEnvVars:
		p = events.EnvVarsDeleted{StepResult: r, AppUUID: s.Reg.AppUUID, EnvIDs: []string{"env-1", "env-2"}}
	case events.StepDeleteVolumes:
		p = events.VolumeDeleted{StepResult: r, AppUUID: s.Reg.AppUUID, StorageIDs: []string{"vol-1"}}
	case events.StepForcePush:
		p = events.ForcePushed{StepResult: r, Repo: s.Reg.Repo, OldSHA: fmt.Sprintf("%040x", g.rnd.Uint64()), NewSHA: fmt.Sprintf("%040x", g.rnd.Uint64())}
	case events.StepDeleteApp:
		p = events.AppDeleted{StepResult: r, AppUUID: s.Reg.AppUUID}
	case events.StepDeleteRepo:
		p = events.RepoDeleted{StepResult: r, Repo: s.Reg.Repo}
	case events.StepDeleteProject:
		p = events.ProjectDeleted{StepResult: r, ProjectUUID: s.Reg.ProjectUUID}
	case events.StepCreateRepo:
		p = events.RepoCreated{StepResult: r, Repo: events.RepoRef{Project: "PROD", Slug: s.Name + "-app"}}
	case events.StepPushCode:
		p = events.CodePushed{StepResult: r, Repo: events.RepoRef{Project: "PROD", Slug: s.Name + "-app"}, SHA: fmt.Sprintf("%040x", g.rnd.Uint64())}
	case events.StepVacate:
		s.Occupant = ""
		if err := g.appendSlot(ctx, s, w, events.SlotVacated{Slot: s.Name, JobID: j.id}); err != nil {
			return err
		}
		p = events.StepSucceeded{StepResult: r, Detail: "slot vacant"}
	case events.StepRetire:
		s.Retired = true
		s.Remaining = nil
		if err := g.appendSlot(ctx, s, w, events.SlotRetired{Slot: s.Name, JobID: j.id}); err != nil {
			return err
		}
		p = events.StepSucceeded{StepResult: r}
	case events.StepRecordRepo:
		if err := g.appendSlot(ctx, s, w, events.SlotPromoted{Slot: s.Name, JobID: j.id, NewRepo: events.RepoRef{Project: "PROD", Slug: s.Name + "-app"}}); err != nil {
			return err
		}
		p = events.StepSucceeded{StepResult: r}
	default:
		p = events.StepSucceeded{StepResult: r, Detail: "repo absent"}
	}
	if err := j.append(ctx, w, p); err != nil {
		return err
	}
	j.done = append(j.done, step)
	return nil
}

// Unknown appends an event of a type this binary does not know (a newer
// writer's), which read models must tolerate.
func (g *Gen) Unknown(ctx context.Context, s *SlotState) error {
	res, err := g.Store.Append(ctx, events.SlotStream(s.Name), events.Exact(s.Rev), events.EventData{
		Type: "SlotRenamedInTheFuture", Data: []byte(`{"slot":"` + s.Name + `","new":"x"}`), Meta: g.meta("admin"),
	})
	if err != nil {
		return err
	}
	g.Appended++
	s.Rev = res.NextExpected
	return nil
}

// Random appends a random history over slots new slots until this
// generator has written about n events in all.
func (g *Gen) Random(ctx context.Context, slots, n int) error {
	for i := 0; i < slots; i++ {
		if _, err := g.Register(ctx, fmt.Sprintf("%ss%03d", g.Prefix, i)); err != nil {
			return err
		}
	}
	for g.Appended < n {
		i := g.rnd.IntN(len(g.order))
		s := g.Slots[g.order[i]]
		if s.Retired {
			if g.FixedPool {
				g.order[i] = g.order[len(g.order)-1]
				g.order = g.order[:len(g.order)-1]
			}
			// Keep the pool from running dry: a retired slot is replaced.
			if g.FixedPool || g.rnd.IntN(4) == 0 {
				if _, err := g.Register(ctx, fmt.Sprintf("%ss%03d", g.Prefix, len(g.Slots))); err != nil {
					return err
				}
			}
			continue
		}
		if s.Remaining != nil {
			if _, err := g.Job(ctx, s, events.KindTeardown, g.outcomes()...); err != nil {
				return err
			}
			continue
		}
		var err error
		switch r := g.rnd.IntN(100); {
		case r < 3:
			err = g.Unknown(ctx, s)
		case s.Occupant == "":
			err = g.Occupy(ctx, s, []string{"alice", "bob", "chen", "dara"}[g.rnd.IntN(4)])
		case r < 15:
			err = g.Extend(ctx, s)
		case r < 70:
			_, err = g.Job(ctx, s, events.KindReset, g.outcomes()...)
		case r < 88:
			_, err = g.Job(ctx, s, events.KindPromote, g.outcomes()...)
		default:
			_, err = g.Job(ctx, s, events.KindTeardown, g.outcomes()...)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// outcomes picks how a job's attempts end: mostly success, sometimes a
// failure, timeout or abandonment followed by a resume, sometimes an end
// without success that stays.
func (g *Gen) outcomes() []Outcome {
	bad := []Outcome{Fail, TimeOut, Abandon, Cancel}
	switch r := g.rnd.IntN(10); {
	case r < 6:
		return []Outcome{Succeed}
	case r < 8:
		return []Outcome{bad[g.rnd.IntN(3)], Succeed}
	default:
		return []Outcome{bad[g.rnd.IntN(4)]}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Many appends about n events of the mix to store from gens generators at
// once, each on its own slots and jobs (names start with prefix and the
// generator's number), so every stream keeps its causal order while the
// store's group commit batches the appends: how cmd/loggen and the
// benchmarks make a big log fast. Generator i has seed i+1 and slots
// slots; fixedPool sets each one's FixedPool.
func Many(ctx context.Context, store events.Store, prefix string, n, gens, slots int, fixedPool bool) error {
	var wg sync.WaitGroup
	errs := make(chan error, gens)
	for i := range gens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := NewGen(store, uint64(i+1))
			g.Prefix = fmt.Sprintf("%s%03d-", prefix, i)
			g.FixedPool = fixedPool
			errs <- g.Random(ctx, slots, n/gens)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
