package projections

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// ErrInvalid is returned by queries for bad arguments (a malformed cursor, a
// negative limit); the API answers 400.
var ErrInvalid = errors.New("projections: invalid query")

// Paging limits of JobsBySlot and Audit.
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// ParsePaging validates JobsBySlot's limit and cursor. It returns the limit
// to use and the exclusive upper bound on QueuedPosition ("before").
func ParsePaging(limit int, cursor string) (int, events.Position, error) {
	switch {
	case limit < 0:
		return 0, 0, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	case limit == 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	if cursor == "" {
		return limit, math.MaxUint64, nil
	}
	n, err := strconv.ParseUint(cursor, 10, 64)
	if err != nil || n == 0 {
		return 0, 0, fmt.Errorf("%w: cursor %q", ErrInvalid, cursor)
	}
	return limit, events.Position(n), nil
}

// AuditLimit validates an audit filter's limit.
func AuditLimit(limit int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("%w: limit %d", ErrInvalid, limit)
	case limit == 0:
		return DefaultLimit, nil
	case limit > MaxLimit:
		return MaxLimit, nil
	}
	return limit, nil
}

// Match reports whether an entry passes the filter (After and Limit are the
// caller's business).
func (f AuditFilter) Match(a AuditEntry) bool {
	return (f.Plumbing || !a.Plumbing) && (f.ActorID == "" || a.ActorID == f.ActorID) &&
		(f.Slot == "" || a.Slot == f.Slot) && (f.JobID == "" || a.JobID == f.JobID) &&
		(f.Actor == "" || a.Actor == f.Actor) && (f.Type == "" || a.Type == f.Type) &&
		(f.Since.IsZero() || !a.Time.Before(f.Since))
}

// RemainingOf lists the resources a slot still owns. JobID names the job a
// person should look at: the one whose recovery is pending, else the active one.
func RemainingOf(v SlotView) []RemainingResource {
	job := ""
	if v.Recovery != nil {
		job = v.Recovery.JobID
	} else if v.ActiveJob != nil {
		job = v.ActiveJob.ID
	}
	out := make([]RemainingResource, 0, len(v.Resources))
	for _, r := range v.Resources {
		rr := RemainingResource{Slot: v.Name, Lifecycle: v.Lifecycle, Resource: r, JobID: job}
		if i := deletingIndex(v.Deleting, r.Kind, r.ID); i >= 0 {
			rr.DeleteAcceptedAt = timePtr(v.Deleting[i].AcceptedAt)
		}
		switch {
		case r.Cleanup != "":
			rr.Cleanup = "on " + r.Name + ": " + r.Cleanup + " (Coolify deleted its row while it could not reach the server)"
			rr.CleanupCode, rr.CleanupCommand = CleanupUnreachable, r.Cleanup
		case r.Kind == events.ResDockerVolume:
			rr.Cleanup = "on " + r.Name + ": docker volume rm " + r.ID + " (Coolify's API cannot delete it; its data is still there)"
			rr.CleanupCode, rr.CleanupCommand = CleanupDockerVolume, "docker volume rm "+r.ID
			if strings.HasPrefix(r.ID, "/") {
				rr.Cleanup = "on " + r.Name + ": remove the directory " + r.ID + " if its data is no longer wanted (a bind mount; Coolify's API cannot delete it)"
				rr.CleanupCode, rr.CleanupCommand = CleanupBindMount, ""
			}
		}
		out = append(out, rr)
	}
	return out
}

// SortRemaining orders remaining resources by slot, kind and id, the order
// every read model answers in.
func SortRemaining(rs []RemainingResource) {
	sort.Slice(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		if a.Resource.Kind != b.Resource.Kind {
			return a.Resource.Kind < b.Resource.Kind
		}
		return a.Resource.ID < b.Resource.ID
	})
}

// Snapshotter is implemented by both read models: the slot list and the
// position it is exact at, read atomically. The SSE snapshot frame needs
// this pair; ListSlots then Position could pair slots with a newer position
// and lose the changes in between. (Without it: read Position first, then
// ListSlots — the views are then at least as new as the position, and
// clients keep the view with the highest position.)
type Snapshotter interface {
	SnapshotSlots(ctx context.Context) ([]SlotView, events.Position, error)
}

// StreamReader reads one stream of the log (an events.Store is one).
type StreamReader interface {
	ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error)
}

// ReadJobEvents reads a job's stream up to position upTo, so that the events
// agree with a read model that has applied upTo.
func ReadJobEvents(ctx context.Context, log StreamReader, id string, upTo events.Position) ([]events.RecordedEvent, error) {
	if log == nil {
		return nil, errors.New("projections: this read model has no event log to read job events from")
	}
	evs, err := log.ReadStream(ctx, events.JobStream(id), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	for i, ev := range evs {
		if ev.Position > upTo {
			return evs[:i], nil
		}
	}
	return evs, nil
}
