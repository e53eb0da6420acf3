package projections

import (
	"context"
	"errors"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// Log is what a read model that keeps only part of its views in memory reads
// the rest from: one stream (a job's), the log in order (audit pages) and
// its head (snapshot checks). An events.Store is one.
type Log interface {
	StreamReader
	SubscribeAll(ctx context.Context, after events.Position, filter events.Filter, h events.Handler) error
	Head(ctx context.Context) (events.Position, error)
}

// jobState is the State of a read that rebuilds job views only: slot views
// are not kept (Project builds one from the event alone and it is dropped),
// so a job's view and an event's audit entry come out exactly as the full
// read model makes them, at the cost of reading nothing but job streams.
// A job the state does not hold is folded from its stream on first use, up
// to the position before the event at hand (see load).
type jobState struct {
	ctx  context.Context
	log  StreamReader
	jobs map[string]*JobView
	err  error
}

func (s *jobState) GetSlot(string) *SlotView  { return nil }
func (s *jobState) PutSlot(*SlotView)         {}
func (s *jobState) GetJob(id string) *JobView { return s.jobs[id] }
func (s *jobState) PutJob(v *JobView)         { s.jobs[v.ID] = v }

// load makes sure the state holds job id as of upTo (if the log has it).
func (s *jobState) load(id string, upTo events.Position) error {
	if _, ok := s.jobs[id]; ok {
		return nil
	}
	v, err := FoldJob(s.ctx, s.log, id, upTo)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.jobs[id] = v
	return nil
}

// FoldJob rebuilds job id's view from its stream, up to position upTo, with
// Project: the view equals the one a read model that applied the log up to
// upTo holds (a job's view is made from its own stream's events only).
// Returns ErrNotFound if no event up to upTo made a view.
func FoldJob(ctx context.Context, log StreamReader, id string, upTo events.Position) (*JobView, error) {
	evs, err := ReadJobEvents(ctx, log, id, upTo)
	if err != nil {
		return nil, err
	}
	v := foldJobEvents(id, evs)
	if v == nil {
		return nil, ErrNotFound
	}
	return v, nil
}

// foldJobEvents folds job id's stream (its prefix) with Project; nil if no
// event made a view.
func foldJobEvents(id string, evs []events.RecordedEvent) *JobView {
	st := &jobState{jobs: map[string]*JobView{}}
	for _, ev := range evs {
		Project(st, DecodeEvent(ev))
	}
	return st.jobs[id]
}

// errScanDone ends an audit scan's subscription; it never leaves this file.
var errScanDone = errors.New("audit scan done")

// AuditFromLog answers an audit query from the log instead of from memory:
// the entries matching f after f.After and up to position upTo, at most
// limit of them. It returns them and the last position it looked at (the
// cursor to go on from). The entries equal a full read model's: each event
// is projected with Project over the views of the jobs it belongs to, which
// are folded from their streams when the scan meets them first. Events that
// fail the filter on their own fields are not decoded.
func AuditFromLog(ctx context.Context, log Log, f AuditFilter, upTo events.Position, limit int) ([]AuditEntry, events.Position, error) {
	out := []AuditEntry{}
	last := f.After
	if upTo <= f.After || limit <= 0 {
		return out, last, nil
	}
	st := &jobState{ctx: ctx, log: log, jobs: map[string]*JobView{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := log.SubscribeAll(ctx, f.After, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Position > upTo {
			return errScanDone
		}
		last = ev.Position
		id := EventJobID(ev.Stream)
		if (f.Type != "" && ev.Type != f.Type) || (f.Actor != "" && ev.Meta.Actor != f.Actor) ||
			(!f.Since.IsZero() && ev.Meta.Time.Before(f.Since)) {
			// Not decoded or applied: the job's view, if held, is now
			// behind the log, so it is folded again when needed.
			if strings.HasPrefix(ev.Stream, events.JobStreamPrefix) {
				delete(st.jobs, id)
			}
		} else {
			// A job stream's first event has nothing before it to fold.
			if id != "" && (ev.Revision > 0 || !strings.HasPrefix(ev.Stream, events.JobStreamPrefix)) {
				if err := st.load(id, ev.Position-1); err != nil {
					return err
				}
			}
			a := *Project(st, DecodeEvent(ev)).Audit
			if f.Match(a) {
				out = append(out, a)
			}
		}
		if len(out) == limit || ev.Position == upTo {
			return errScanDone
		}
		return nil
	})
	if errors.Is(err, errScanDone) {
		err = nil
	}
	return out, last, err
}

// EventJobID is the job a job-<id> or notify stream belongs to ("" for
// other streams): Project reads that job's view for the event's slot.
func EventJobID(stream string) string {
	switch {
	case strings.HasPrefix(stream, events.JobStreamPrefix):
		return stream[len(events.JobStreamPrefix):]
	case strings.HasPrefix(stream, events.NotifyStreamPrefix):
		return stream[len(events.NotifyStreamPrefix):]
	}
	return ""
}
