package projections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/slotkeeper/slotkeeper/events"
)

// errReplayDone stops the catch-up subscription once the target position is
// reached; it never leaves this package.
var errReplayDone = errors.New("replay done")

// Replay applies the log to target from target's checkpoint up to upTo
// (0: the store's head when Replay starts), in batches of maxBatch events
// (<= 0: 2000), and returns the position reached. An empty target is rebuilt
// from scratch; `slotkeeper replay` runs it into a fresh read model. For an
// Exclusive target it holds the projector lock while it works.
func Replay(ctx context.Context, store events.Store, target Target, upTo events.Position, maxBatch int) (events.Position, error) {
	if ex, ok := target.(Exclusive); ok {
		lockCtx, release, err := ex.Acquire(ctx)
		if err != nil {
			return 0, fmt.Errorf("projections: acquire projector lock: %w", err)
		}
		defer release()
		ctx = lockCtx
	}
	if maxBatch <= 0 {
		maxBatch = 2000
	}
	from, err := target.Position(ctx)
	if err != nil {
		return 0, err
	}
	if upTo == 0 {
		if upTo, err = store.Head(ctx); err != nil {
			return from, err
		}
	}
	if from >= upTo {
		return from, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := pump(ctx, store, from, maxBatch, upTo)
	defer func() {
		cancel()
		<-p.done
	}()
	quiet, _ := target.(QuietTarget)
	reached := from
	for {
		batch, ok := p.next()
		if !ok {
			return reached, p.err
		}
		if quiet != nil {
			err = quiet.ApplyQuiet(ctx, batch)
		} else {
			_, err = target.Apply(ctx, batch)
		}
		if err != nil {
			return reached, err
		}
		reached = batch[len(batch)-1].Position
	}
}

// Verify rebuilds the log into shadow (an empty read model, normally
// memory.New) up to live's position and compares every query answer. It
// returns one line per difference (none: the live read model is what the log
// proves). If live moves on while Verify compares, the shadow catches up to
// it and compares again, a few times.
func Verify(ctx context.Context, store events.Store, live ReadModel, shadow Target) ([]string, error) {
	var diffs []string
	for try := 0; try < 5; try++ {
		pos, err := live.Position(ctx)
		if err != nil {
			return nil, fmt.Errorf("projections: live position: %w", err)
		}
		if pos > 0 {
			if _, err := Replay(ctx, store, shadow, pos, 0); err != nil {
				return nil, fmt.Errorf("projections: rebuild shadow: %w", err)
			}
		}
		if diffs, err = Compare(ctx, live, shadow); err != nil {
			return nil, err
		}
		after, err := live.Position(ctx)
		if err != nil {
			return nil, err
		}
		if len(diffs) == 0 || after == pos {
			return diffs, nil
		}
	}
	return diffs, nil
}

// Compare asks a and b every question the API asks and lists the
// differences: positions, the slot list, every slot (archived ones too, see
// SlotNamer), each slot's jobs (all pages) and latest
// job per kind, every job's view, the remaining resources and the whole
// audit feed.
func Compare(ctx context.Context, a, b ReadModel) ([]string, error) {
	var diffs []string
	diff := func(what string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		if string(jx) != string(jy) {
			diffs = append(diffs, fmt.Sprintf("%s differs:\n  live:   %s\n  shadow: %s", what, jx, jy))
		}
	}
	pa, err := a.Position(ctx)
	if err != nil {
		return nil, err
	}
	pb, err := b.Position(ctx)
	if err != nil {
		return nil, err
	}
	diff("position", pa, pb)
	sa, err := a.ListSlots(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := b.ListSlots(ctx)
	if err != nil {
		return nil, err
	}
	diff("slot list", slotNames(sa), slotNames(sb))
	// The pull requests, when both list them.
	if la, ok := a.(PRLister); ok {
		if lb, ok := b.(PRLister); ok {
			xa, _, err := la.ListPullRequests(ctx)
			if err != nil {
				return nil, err
			}
			xb, _, err := lb.ListPullRequests(ctx)
			if err != nil {
				return nil, err
			}
			diff("pull requests", xa, xb)
		}
	}
	// Every slot's view and jobs, archived ones (not listed) included.
	na, err := allSlotNames(ctx, a, sa)
	if err != nil {
		return nil, err
	}
	nb, err := allSlotNames(ctx, b, sb)
	if err != nil {
		return nil, err
	}
	diff("slot names", na, nb)
	names := slices.Clone(nb)
	seen := map[string]bool{}
	for _, n := range nb {
		seen[n] = true
	}
	for _, n := range na {
		if !seen[n] {
			names = append(names, n)
		}
	}
	names = append(names, "") // jobs whose slot was never registered
	for _, name := range names {
		va, ea := a.Slot(ctx, name)
		vb, eb := b.Slot(ctx, name)
		if name != "" {
			diff("slot "+name, errOr(va, ea), errOr(vb, eb))
		}
		ja, err := allJobs(ctx, a, name)
		if err != nil {
			return nil, err
		}
		jb, err := allJobs(ctx, b, name)
		if err != nil {
			return nil, err
		}
		diff("jobs of slot "+name, ja, jb)
		for _, kind := range events.JobKinds() { // every kind, from the vocabulary
			la, ea := a.LatestJob(ctx, name, kind)
			lb, eb := b.LatestJob(ctx, name, kind)
			diff("latest "+kind+" job of slot "+name, errOr(la.ID, ea), errOr(lb.ID, eb))
		}
	}
	ra, err := a.RemainingResources(ctx)
	if err != nil {
		return nil, err
	}
	rb, err := b.RemainingResources(ctx)
	if err != nil {
		return nil, err
	}
	diff("remaining resources", ra, rb)
	var after events.Position
	for {
		ea, err := a.Audit(ctx, AuditFilter{After: after, Limit: MaxLimit})
		if err != nil {
			return nil, err
		}
		eb, err := b.Audit(ctx, AuditFilter{After: after, Limit: MaxLimit})
		if err != nil {
			return nil, err
		}
		diff(fmt.Sprintf("audit after %d", after), ea, eb)
		if len(ea) == 0 || len(eb) == 0 {
			break
		}
		after = min(ea[len(ea)-1].Position, eb[len(eb)-1].Position)
	}
	return diffs, nil
}

func allJobs(ctx context.Context, rm ReadModel, slot string) ([]JobView, error) {
	var out []JobView
	cursor := ""
	for {
		p, err := rm.JobsBySlot(ctx, slot, "", MaxLimit, cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Jobs...)
		if p.NextCursor == "" {
			return out, nil
		}
		cursor = p.NextCursor
	}
}

func slotNames(vs []SlotView) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Name
	}
	return out
}

// errOr compares an answer or, for a failed query, its error class.
func errOr(v any, err error) any {
	switch {
	case errors.Is(err, ErrNotFound):
		return "not found"
	case err != nil:
		return "error: " + err.Error()
	}
	return v
}
