package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Audit by replay (issue 28): a slot or a job as a read model held it at a
// moment of the log, and what changed on a slot between two moments. Both
// fold the slot's own stream and its jobs' streams with Project, the same
// fold FoldSlot and FoldJob make for views that left memory, so the answer
// is the view a read model that applied the log up to that moment held.
// A job's answer folds its one stream; a slot's (History, history.go)
// resumes the slot's fold from a checkpoint, so its cost follows the range
// asked, never the slot's history or the log's (issue 37).

// At is a moment of the log: a position, or a time (Position 0). The zero
// At is "now" (the read model's position).
type At struct {
	Position events.Position
	Time     time.Time
}

// IsZero reports whether a is "now".
func (a At) IsZero() bool { return a.Position == 0 && a.Time.IsZero() }

// ParseAt reads an ?at= value: a log position (decimal, from 1) or an
// RFC 3339 time. Anything else is ErrInvalid.
func ParseAt(s string) (At, error) {
	if s != "" && len(s) <= 20 && s[0] >= '0' && s[0] <= '9' {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil && n > 0 {
			return At{Position: events.Position(n)}, nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.IsZero() {
			// 0001-01-01T00:00:00Z is the zero time, which At reads as
			// "now": the earliest time asked is a moment before every
			// event, so it is the next one (fifth attack pass: it
			// answered with the live view).
			t = t.Add(time.Nanosecond)
		}
		return At{Time: t}, nil
	}
	return At{}, fmt.Errorf("%w: %q is neither a log position (a decimal number from 1) nor an RFC 3339 time", ErrInvalid, s)
}

// AsOf says which moment a historic answer shows.
type AsOf struct {
	// Position is the log position the answer is exact at: a read model
	// that applied the log up to Position held this view. For a requested
	// time it is the last event of the streams read at or before that time.
	Position events.Position `json:"position"`
	// Time is the requested time, or for a requested position the time of
	// the latest event of the streams read at or before it (zero if none).
	Time time.Time `json:"time"`
	// Live is true when the moment is the read model's own position (the
	// answer is the live view).
	Live bool `json:"live"`
}

// SlotJobLister is a read model that lists the ids of every job whose view
// names a slot without building their views (both read models are one).
type SlotJobLister interface {
	SlotJobIDs(ctx context.Context, slot string) ([]string, error)
}

// SlotJobIDs lists the jobs of slot: through SlotJobLister when rm is one,
// else by paging JobsBySlot.
func SlotJobIDs(ctx context.Context, rm ReadModel, slot string) ([]string, error) {
	if l, ok := rm.(SlotJobLister); ok {
		return l.SlotJobIDs(ctx, slot)
	}
	var ids []string
	cursor := ""
	for {
		p, err := rm.JobsBySlot(ctx, slot, "", MaxLimit, cursor)
		if err != nil {
			return nil, err
		}
		for _, j := range p.Jobs {
			ids = append(ids, j.ID)
		}
		if p.NextCursor == "" {
			return ids, nil
		}
		cursor = p.NextCursor
	}
}

// SlotHistory reads the slot's stream and the streams of jobIDs up to
// position upTo, merged in position order: every event that reaches the
// slot's view. ErrNotFound if the slot's stream does not exist.
func SlotHistory(ctx context.Context, log StreamReader, name string, jobIDs []string, upTo events.Position) ([]events.RecordedEvent, error) {
	if log == nil {
		return nil, errors.New("projections: this read model has no event log to read slots from")
	}
	evs, err := log.ReadStream(ctx, events.SlotStream(name), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, fmt.Errorf("slot %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	evs = cutPosition(evs, upTo)
	// The pull requests that occupied the slot: their events that reach
	// its view (slotPREvents), from each occupancy on.
	seen := map[events.Position]bool{}
	for _, ev := range slices.Clone(evs) {
		stream := prOccupant(ev)
		if stream == "" {
			continue
		}
		pevs, err := log.ReadStream(ctx, stream, 0, 0, events.Forward)
		if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
			return nil, err
		}
		for _, pev := range cutPosition(slotPREvents(pevs, name, ev.Position), upTo) {
			if !seen[pev.Position] {
				seen[pev.Position] = true
				evs = append(evs, pev)
			}
		}
	}
	for _, id := range jobIDs {
		jevs, err := ReadJobEvents(ctx, log, id, upTo)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		evs = append(evs, jevs...)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Position < evs[j].Position })
	return evs, nil
}

// prOccupant is the pull request's stream a slot event occupied the slot
// for (the driver's SlotOccupied carries the PR's stream as its
// correlation id, docs/pull-requests.md), "" for any other event.
func prOccupant(ev events.RecordedEvent) string {
	c := ev.Meta.CorrelationID
	if ev.Type != "SlotOccupied" || !strings.HasPrefix(c, events.PRStreamPrefix) || c == events.PRReposStream {
		return ""
	}
	return c
}

// slotPREvents are the events of a PR's stream (evs, in order) after
// position after that reach slot name's view: the PRSlotTaken and
// PRDeployQueued naming it (projections.PRSlot), up to and including the
// PRSlotReleased of the slot, after which the PR's stream says nothing
// more about it. A slot's history (SlotHistory, and History's walks)
// holds these and no other PR event.
func slotPREvents(evs []events.RecordedEvent, name string, after events.Position) []events.RecordedEvent {
	var out []events.RecordedEvent
	for _, ev := range evs {
		if ev.Position <= after {
			continue
		}
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		if r, ok := p.(events.PRSlotReleased); ok && r.Slot == name {
			return append(out, ev)
		}
		if PRSlot(p) == name {
			out = append(out, ev)
		}
	}
	return out
}

// cutPosition is the prefix of evs (in position order) up to upTo.
func cutPosition(evs []events.RecordedEvent, upTo events.Position) []events.RecordedEvent {
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Position > upTo })
	return evs[:i]
}

// Cut is the prefix of evs (in position order, none past limit, the read
// model's position) that a read model had applied at moment at, and the
// AsOf describing it. A time cuts before the first event recorded after
// it: the log is in append order, and a read model never skips an event.
func Cut(evs []events.RecordedEvent, at At, limit events.Position) ([]events.RecordedEvent, AsOf) {
	switch {
	case at.IsZero() || at.Position >= limit && at.Time.IsZero():
		return evs, AsOf{Position: limit, Time: lastTime(evs), Live: true}
	case at.Position > 0:
		out := cutPosition(evs, at.Position)
		return out, AsOf{Position: at.Position, Time: lastTime(out)}
	}
	i := slices.IndexFunc(evs, func(ev events.RecordedEvent) bool { return ev.Meta.Time.After(at.Time) })
	if i < 0 {
		// Nothing of these streams after it: the view is the live one.
		return evs, AsOf{Position: limit, Time: at.Time, Live: true}
	}
	out := evs[:i]
	var pos events.Position
	if len(out) > 0 {
		pos = out[len(out)-1].Position
	}
	return out, AsOf{Position: pos, Time: at.Time}
}

func lastTime(evs []events.RecordedEvent) time.Time {
	if len(evs) == 0 {
		return time.Time{}
	}
	return evs[len(evs)-1].Meta.Time
}

// foldSlotEvents folds a slot's history (SlotHistory's) with Project and
// returns its view (nil if no event made one). each, if set, sees every
// event with the slot's view before and after it (nil: no view yet).
func foldSlotEvents(name string, evs []events.RecordedEvent, each func(ev events.RecordedEvent, before, after *SlotView)) *SlotView {
	st := &foldState{slots: map[string]*SlotView{}, jobs: map[string]*JobView{}}
	for _, ev := range evs {
		before := st.slots[name]
		Project(st, DecodeEvent(ev))
		if each != nil {
			each(ev, before, st.slots[name])
		}
	}
	return st.slots[name]
}

// JobAsOf is job id's view as rm held it at moment at (never past rm's
// position), folded from the job's stream. ErrNotFound if the job did not
// exist then.
func JobAsOf(ctx context.Context, log StreamReader, rm ReadModel, id string, at At) (JobView, AsOf, error) {
	limit, err := rm.Position(ctx)
	if err != nil {
		return JobView{}, AsOf{}, err
	}
	evs, err := ReadJobEvents(ctx, log, id, limit)
	if err != nil {
		return JobView{}, AsOf{}, err
	}
	evs, as := Cut(evs, at, limit)
	v := foldJobEvents(id, evs)
	if v == nil {
		return JobView{}, as, fmt.Errorf("job %q at position %d: %w", id, as.Position, ErrNotFound)
	}
	return *v, as, nil
}

// Fields a SlotChange names.
const (
	FieldOccupant  = "occupant"
	FieldDeadline  = "deadline"
	FieldLifecycle = "lifecycle"
	FieldResource  = "resource"
	FieldActiveJob = "active_job"
	// FieldPullRequest: the pull request holding the slot, as
	// "PROJECT/slug#id" (docs/pull-requests.md).
	FieldPullRequest = "pull_request"
)

// SlotChange is one field of a slot's view changed by one event.
type SlotChange struct {
	Field string `json:"field"`
	// Change is "gained" or "lost" for a resource; empty otherwise.
	Change string `json:"change,omitempty"`
	// Before and After are the field's values (null: unset): a string for
	// occupant and lifecycle, a time for deadline, a resource, an
	// {id, kind} for active_job.
	Before any `json:"before"`
	After  any `json:"after"`
	// The event that made the change.
	Position events.Position `json:"position"`
	Type     string          `json:"type"`
	Stream   string          `json:"stream"`
	Actor    string          `json:"actor"`
	Time     time.Time       `json:"time"`
}

// ActiveJobRef is the active job as a change names it (its progress is
// not a change of the slot).
type ActiveJobRef struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
}

// diffSlot lists the fields ev changed from before (nil: no view yet) to after.
func diffSlot(ev events.RecordedEvent, before, after *SlotView) []SlotChange {
	var b SlotView
	if before != nil {
		b = *before
	}
	var out []SlotChange
	add := func(field, change string, was, is any) {
		out = append(out, SlotChange{Field: field, Change: change, Before: was, After: is,
			Position: ev.Position, Type: ev.Type, Stream: ev.Stream, Actor: ev.Meta.Actor, Time: ev.Meta.Time})
	}
	if b.Occupant != after.Occupant {
		add(FieldOccupant, "", orNil(b.Occupant), orNil(after.Occupant))
	}
	if !sameTime(b.Deadline, after.Deadline) {
		add(FieldDeadline, "", timeOrNil(b.Deadline), timeOrNil(after.Deadline))
	}
	if b.Lifecycle != after.Lifecycle {
		add(FieldLifecycle, "", orNil(b.Lifecycle), orNil(after.Lifecycle))
	}
	had := map[[2]string]bool{}
	for _, r := range b.Resources {
		had[[2]string{r.Kind, r.ID}] = true
	}
	has := map[[2]string]bool{}
	for _, r := range after.Resources {
		has[[2]string{r.Kind, r.ID}] = true
		if !had[[2]string{r.Kind, r.ID}] {
			add(FieldResource, "gained", nil, r)
		}
	}
	for _, r := range b.Resources {
		if !has[[2]string{r.Kind, r.ID}] {
			add(FieldResource, "lost", r, nil)
		}
	}
	if ja, jb := activeRef(b.ActiveJob), activeRef(after.ActiveJob); ja != jb {
		add(FieldActiveJob, "", refOrNil(ja), refOrNil(jb))
	}
	if pa, pb := prName(b.PullRequest), prName(after.PullRequest); pa != pb {
		add(FieldPullRequest, "", orNil(pa), orNil(pb))
	}
	return out
}

// prName names the PR holding a slot ("" for none).
func prName(p *SlotPR) string {
	if p == nil {
		return ""
	}
	return p.Repo.String() + "#" + strconv.FormatInt(p.ID, 10)
}

func orNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func timeOrNil(t *time.Time) any {
	if t == nil {
		return nil
	}
	return *t
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func activeRef(j *JobRef) ActiveJobRef {
	if j == nil {
		return ActiveJobRef{}
	}
	return ActiveJobRef{ID: j.ID, Kind: j.Kind}
}

func refOrNil(r ActiveJobRef) any {
	if r.ID == "" {
		return nil
	}
	return r
}
