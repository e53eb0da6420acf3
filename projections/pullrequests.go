package projections

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// PRView is one pull request as the read model lists it (issue 34,
// docs/pull-requests.md): what Bitbucket last said about it and where the
// flow has it — holding a slot, or waiting for one (and since when). Folded
// from the PR's own stream (pr-<PROJECT>-<slug>-<id>) by ApplyPR.
type PRView struct {
	// Stream is the PR's stream, its key.
	Stream string         `json:"stream"`
	Repo   events.RepoRef `json:"repo"`
	ID     int64          `json:"id"`
	// Title and Link are the opening delivery's (a renamed PR keeps its
	// first title, as on the board's card); the rest is the latest
	// delivery's.
	Title  string `json:"title,omitempty"`
	Author string `json:"author,omitempty"`
	Branch string `json:"branch"`
	Link   string `json:"link,omitempty"`
	Head   string `json:"head"`
	// State is Bitbucket's (OPEN, MERGED, DECLINED) or DELETED.
	State string `json:"state"`
	// Slot is the slot the PR took (PRSlotTaken); it stays named after the
	// PR closed, with Released set once the slot was given back.
	Slot     string `json:"slot,omitempty"`
	Released bool   `json:"released,omitempty"`
	// JobID is the newest pr_deploy job queued for the PR.
	JobID string `json:"job_id,omitempty"`
	// WaitingSince is when the PR found no free slot (PRWaiting) and
	// WaitingPosition that event's position: open PRs without a slot are
	// served in that order (the driver's queue, oldest first). Both are
	// cleared when it takes a slot or closes.
	WaitingSince    *time.Time      `json:"waiting_since,omitempty"`
	WaitingPosition events.Position `json:"waiting_position,omitempty"`
	// Phase is the last phase said on the PR (PRCommentPosted: queued,
	// deploying, ready, failed, cancelled, waiting), "" before any.
	Phase    string    `json:"phase,omitempty"`
	OpenedAt time.Time `json:"opened_at"`
	// UpdatedAt and Position are the PR's last event's.
	UpdatedAt time.Time       `json:"updated_at"`
	Position  events.Position `json:"position"`
}

// Waiting reports whether the PR waits for a slot.
func (v PRView) Waiting() bool { return v.WaitingPosition != 0 }

// PRState is the part of a State that holds pull requests. Both read
// models implement it; the folds of one slot or job (FoldSlot, FoldJob,
// the as-of walks) do not, and Project leaves pull requests out there.
type PRState interface {
	GetPR(stream string) *PRView
	PutPR(v *PRView)
}

// PRLister is a read model that lists pull requests (both read models
// are).
type PRLister interface {
	// ListPullRequests answers PRList's order: the waiting PRs first, in
	// the order they will be served, then the other open ones, then the
	// ClosedPRsListed most recently changed closed ones.
	ListPullRequests(ctx context.Context) ([]PRView, events.Position, error)
}

// ClosedPRsListed is how many closed pull requests ListPullRequests lists
// (the most recently changed); the open ones are always all listed.
const ClosedPRsListed = 50

// ApplyPR folds one event of a PR's stream into v (the zero view for a PR
// not seen yet). It reports false, leaving v as it was, for an event that
// changes nothing listed (a PR stream's events before its first delivery
// cannot exist; events of other types are ignored).
func ApplyPR(v PRView, ev events.RecordedEvent, p events.Payload) (PRView, bool) {
	switch e := p.(type) {
	case events.PRChanged:
		pr := e.PR
		if v.Stream == "" {
			v = PRView{Stream: ev.Stream, Repo: pr.Repo, ID: pr.ID, Title: pr.Title, Link: pr.Link, OpenedAt: ev.Meta.Time}
		}
		v.Author, v.Branch, v.Head, v.State = pr.Author, pr.Branch, pr.Head, pr.State
		if v.Title == "" {
			v.Title = pr.Title
		}
		if v.Link == "" {
			v.Link = pr.Link
		}
		if pr.State != events.PRStateOpen {
			v.WaitingSince, v.WaitingPosition = nil, 0
		}
	case events.PRSlotTaken:
		v.Slot, v.Released = e.Slot, false
		v.WaitingSince, v.WaitingPosition = nil, 0
	case events.PRWaiting:
		if v.WaitingPosition == 0 && v.Slot == "" {
			t := ev.Meta.Time
			v.WaitingSince, v.WaitingPosition = &t, ev.Position
		}
	case events.PRDeployQueued:
		v.JobID = e.JobID
	case events.PRSlotReleased:
		v.Released = true
	case events.PRCommentPosted:
		v.Phase = e.Phase
	default:
		return v, false
	}
	if v.Stream == "" {
		return v, false // no delivery recorded yet: nothing to list
	}
	v.UpdatedAt, v.Position = ev.Meta.Time, ev.Position
	return v, true
}

// FoldPR rebuilds the view of the PR whose stream is stream from its
// events up to position upTo, with ApplyPR: the view a read model that
// applied the log up to upTo holds (a PR's view is made from its own
// stream's events only). nil when no event up to upTo made one. The memory
// read model folds a closed PR whose view left memory when a late event of
// its stream comes (docs/pull-requests.md, "Closed pull requests leave
// memory").
func FoldPR(ctx context.Context, log StreamReader, stream string, upTo events.Position) (*PRView, error) {
	evs, err := log.ReadStream(ctx, stream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v PRView
	for _, ev := range evs {
		if ev.Position > upTo {
			break
		}
		p, err := events.Decode(ev)
		if err != nil {
			continue // Project skips an undecodable payload the same way
		}
		v, _ = ApplyPR(v, ev, p)
	}
	if v.Stream == "" {
		return nil, nil
	}
	return &v, nil
}

// projectPR applies a PR stream's event to st's pull requests, if st holds
// them.
func projectPR(st State, ev events.RecordedEvent, p events.Payload) *PRView {
	ps, ok := st.(PRState)
	if !ok || ev.Stream == events.PRReposStream {
		return nil
	}
	var cur PRView
	if v := ps.GetPR(ev.Stream); v != nil {
		cur = *v
	}
	nv, changed := ApplyPR(cur, ev, p)
	if !changed {
		return nil
	}
	ps.PutPR(&nv)
	return &nv
}

// SortPRs puts prs in ListPullRequests' order and keeps ClosedPRsListed
// closed ones: the waiting ones by WaitingPosition (the driver's order),
// then the other open ones oldest first (OpenedAt, then stream), then the
// closed ones most recently changed first.
func SortPRs(prs []PRView) []PRView {
	rank := func(v PRView) int {
		switch {
		case v.State == events.PRStateOpen && v.Waiting():
			return 0
		case v.State == events.PRStateOpen:
			return 1
		}
		return 2
	}
	sort.Slice(prs, func(i, j int) bool {
		a, b := prs[i], prs[j]
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra < rb
		}
		switch rank(a) {
		case 0:
			return a.WaitingPosition < b.WaitingPosition
		case 1:
			if !a.OpenedAt.Equal(b.OpenedAt) {
				return a.OpenedAt.Before(b.OpenedAt)
			}
			return a.Stream < b.Stream
		}
		return a.Position > b.Position
	})
	closed := 0
	for i, v := range prs {
		if rank(v) == 2 {
			if closed == ClosedPRsListed {
				return prs[:i]
			}
			closed++
		}
	}
	return prs
}
