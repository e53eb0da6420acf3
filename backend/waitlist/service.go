package waitlist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// ActorWaitlist is the actor of the events the consumer writes.
const ActorWaitlist = "system:waitlist"

// Occupier is what accepting an offer needs of backend/slots: its Occupy,
// so every rule of occupying (and the hold) applies.
type Occupier interface {
	Occupy(ctx context.Context, a slots.Actor, slot string, c slots.OccupyCmd) error
}

// Config tunes the Service. Zero values pick the defaults noted.
type Config struct {
	// OfferTTL is how long an offer holds a slot (default 15 minutes).
	OfferTTL time.Duration
	// WarnLeads are the lead times of deadline warnings (nil: 60 and 10
	// minutes; empty non-nil: no warnings).
	WarnLeads []time.Duration
	// MaxOccupancy bounds a requested duration (default 30 days, as slots).
	MaxOccupancy time.Duration
	Clock        clock.Clock
	Logger       *slog.Logger
	// OnWarning, if set, is called by the consumer after it appended a
	// DeadlineWarning (the webhook sender); at most once per warning.
	OnWarning func(ctx context.Context, w events.DeadlineWarning)
	// CheckpointEvery is how many events Run folds between checkpoints
	// (default 10,000), at most one per CheckpointGap (default 10 s);
	// CheckpointAfter writes one once that much time passed and something
	// was folded (default 5 minutes). Run also writes one when it stops.
	CheckpointEvery int
	CheckpointGap   time.Duration
	CheckpointAfter time.Duration
	// Health receives the events the consumer cannot fold (it parks them
	// and goes on; backend/consumer). nil: a Health of its own, which only
	// logs them.
	Health *consumer.Health
}

// Service runs the waitlist: commands (Join, Leave, Reorder, Accept,
// Decline), the read model (View), and Run, the log consumer that offers,
// holds, expires and warns.
type Service struct {
	store events.Store
	occ   Occupier
	cfg   Config
	log   *slog.Logger

	// st is the consumer's fold, run by r and guarded by its lock (read
	// it inside r.View).
	st *State
	r  *consumer.Runner

	// fold is the waitlist stream's fold commands decide on (load);
	// foldMu guards it. Never handed out: load returns copies.
	foldMu sync.Mutex
	fold   *State
}

// New returns the waitlist service.
func New(store events.Store, occ Occupier, cfg Config) *Service {
	if cfg.OfferTTL <= 0 {
		cfg.OfferTTL = 15 * time.Minute
	}
	if cfg.WarnLeads == nil {
		cfg.WarnLeads = []time.Duration{60 * time.Minute, 10 * time.Minute}
	}
	cfg.WarnLeads = slices.Clone(cfg.WarnLeads)
	slices.Sort(cfg.WarnLeads)
	if cfg.MaxOccupancy <= 0 {
		cfg.MaxOccupancy = 30 * 24 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Health == nil {
		cfg.Health = consumer.NewHealth(cfg.Logger)
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 10000
	}
	if cfg.CheckpointGap <= 0 {
		cfg.CheckpointGap = 10 * time.Second
	}
	if cfg.CheckpointAfter <= 0 {
		cfg.CheckpointAfter = 5 * time.Minute
	}
	s := &Service{store: store, occ: occ, cfg: cfg, log: cfg.Logger, st: NewState()}
	s.r = consumer.NewRunner(store, s.st, s.options())
	return s
}

func (s *Service) now() time.Time { return s.cfg.Clock.Now().UTC() }

// ---- errors ----

// Commands return backend/apperr's errors (the HTTP layer maps their codes
// to statuses in one place); errf builds one.
func errf(code apperr.Code, details map[string]any, format string, args ...any) *apperr.Error {
	return apperr.New(code, format, args...).With(details)
}

// ---- commands ----

// JoinCmd is POST /api/waitlist's body.
type JoinCmd struct {
	Duration string `json:"duration"`
	Note     string `json:"note,omitempty"`
	// Prefix limits offers to slots whose name starts with it.
	Prefix string `json:"prefix,omitempty"`
}

var prefixRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// load returns the fold of the waitlist stream (the only stream a command
// decides on) as the stream stands now. The fold is kept between commands
// and only the events after it are read (issue 13: a command's cost does
// not grow with the stream's history); the caller gets its own copy. The
// append's expected revision still decides: a fold that missed an event
// (another process appended meanwhile) loses the append and is read on.
func (s *Service) load(ctx context.Context) (*State, error) {
	s.foldMu.Lock()
	defer s.foldMu.Unlock()
	st := s.fold
	if st == nil {
		st = NewState()
	}
	from := uint64(0)
	if st.Exists {
		from = st.Revision + 1
	}
	evs, err := s.store.ReadStream(ctx, events.WaitlistStream, from, 0, events.Forward)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		return nil, err
	}
	if len(evs) > 0 {
		next := st.clone()
		for _, ev := range evs {
			if err := next.Apply(ev); err != nil {
				return nil, err
			}
		}
		st = next
	}
	s.fold = st
	return st.clone(), nil
}

func expected(st *State) events.ExpectedRevision { return events.Expect(st.Exists, st.Revision) }

func meta(a slots.Actor, now time.Time) events.Metadata {
	return events.Metadata{Actor: a.Name, ActorID: a.ID, CorrelationID: a.CorrelationID, ClientRequestID: a.ClientRequestID, Time: now}
}

// decide loads the waitlist, runs f and appends what it returns with the
// stream's expected revision (events.Decide: a lost race loads and decides
// again, within its one budget).
func (s *Service) decide(ctx context.Context, f func(st *State) ([]events.EventData, error)) (events.AppendResult, error) {
	res, err := events.Decide(ctx, s.store, events.WaitlistStream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		st, err := s.load(ctx)
		if err != nil {
			return events.ExpectedRevision{}, nil, loadFailed(err)
		}
		evs, err := f(st)
		return expected(st), evs, err
	})
	return res, apperr.Decided(err, "the waitlist")
}

func loadFailed(err error) error {
	return &apperr.Error{Code: apperr.Internal, Message: "load waitlist", Err: err}
}

// Join puts the actor at the back of the queue. One entry per person.
func (s *Service) Join(ctx context.Context, a slots.Actor, c JoinCmd) (string, events.Position, error) {
	if a.Name == "" {
		return "", 0, errf(apperr.Invalid, nil, "no actor")
	}
	d, err := time.ParseDuration(c.Duration)
	if err != nil || d <= 0 {
		return "", 0, apperr.Refuse(apperr.Invalid, apperr.ReasonDurationInvalid, "field", "duration", "duration", c.Duration).With(map[string]any{"field": "duration"})
	}
	if d > s.cfg.MaxOccupancy {
		return "", 0, apperr.Refuse(apperr.Unprocessable, apperr.ReasonDurationTooLong, "field", "duration", "duration", d.String(), "max", s.cfg.MaxOccupancy.String()).
			With(map[string]any{"field": "duration", "max": s.cfg.MaxOccupancy.String()})
	}
	if d < time.Minute {
		return "", 0, apperr.Refuse(apperr.Unprocessable, apperr.ReasonDurationTooShort, "field", "duration", "duration", d.String()).With(map[string]any{"field": "duration"})
	}
	if utf8.RuneCountInString(c.Note) > 200 || !utf8.ValidString(c.Note) {
		return "", 0, apperr.InvalidField("note", "note: at most 200 characters of UTF-8")
	}
	if c.Prefix != "" && !prefixRE.MatchString(c.Prefix) {
		return "", 0, apperr.InvalidField("prefix", fmt.Sprintf("prefix %q: lowercase letters, digits and '-'", c.Prefix))
	}
	id := uuid.NewString()
	res, err := s.decide(ctx, func(st *State) ([]events.EventData, error) {
		if e := st.entryOf(a.ID, a.Name); e != nil {
			return nil, apperr.Refuse(apperr.Conflict, apperr.ReasonAlreadyWaiting, "who", a.Name, "entry_id", e.ID).With(map[string]any{"entry_id": e.ID})
		}
		return []events.EventData{events.New(events.WaitlistJoined{EntryID: id, WhoID: a.ID, Who: a.Name,
			DurationSeconds: int64(d / time.Second), Note: c.Note, Prefix: c.Prefix}, meta(a, s.now()))}, nil
	})
	return id, res.Position, err
}

// Leave removes an entry: one's own, or anyone's with anyone (an admin).
// Leaving with an open offer gives the offer up.
func (s *Service) Leave(ctx context.Context, a slots.Actor, entryID string, anyone bool) (events.Position, error) {
	res, err := s.decide(ctx, func(st *State) ([]events.EventData, error) {
		e := st.Entries[entryID]
		if e == nil {
			return nil, noEntry(entryID)
		}
		if !owns(a, e) && !anyone {
			return nil, apperr.Refuse(apperr.Forbidden, apperr.ReasonEntryNotYours, "entry_id", entryID, "who", e.Who).With(map[string]any{"entry_id": entryID})
		}
		return []events.EventData{events.New(events.WaitlistLeft{EntryID: entryID, By: a.Name, Reason: a.Reason}, meta(a, s.now()))}, nil
	})
	return res.Position, err
}

// Reorder moves an entry to position (0-based); admins only, with a reason
// (the caller checks the role).
func (s *Service) Reorder(ctx context.Context, a slots.Actor, entryID string, position int, reason string) (events.Position, error) {
	if reason == "" {
		return 0, apperr.Refuse(apperr.Unprocessable, apperr.ReasonReorderNeedsReason, "field", "reason").With(map[string]any{"field": "reason"})
	}
	if utf8.RuneCountInString(reason) > 200 {
		return 0, apperr.InvalidField("reason", "reason: at most 200 characters")
	}
	res, err := s.decide(ctx, func(st *State) ([]events.EventData, error) {
		if st.Entries[entryID] == nil {
			return nil, noEntry(entryID)
		}
		if position < 0 || position >= len(st.Order) {
			// The message counts as the request does, from 0; the args
			// (and the dashboard) from 1: the one refusal whose English is
			// not its reason's sentence (docs/api.md "Reasons").
			return nil, errf(apperr.Unprocessable, map[string]any{"field": "position"}, "position %d: use 0..%d", position, len(st.Order)-1).
				Because(apperr.ReasonPositionOutOfRange, "field", "position", "position", strconv.Itoa(position+1), "max", strconv.Itoa(len(st.Order)))
		}
		return []events.EventData{events.New(events.WaitlistReordered{EntryID: entryID, Position: position, By: a.Name, Reason: reason}, meta(a, s.now()))}, nil
	})
	return res.Position, err
}

func noEntry(entryID string) *apperr.Error {
	return apperr.Refuse(apperr.NotFound, apperr.ReasonEntryNotFound, "entry_id", entryID)
}

func owns(a slots.Actor, e *Entry) bool {
	if e.WhoID != "" || a.ID != "" {
		return e.WhoID == a.ID
	}
	return e.Who == a.Name
}

// Decline gives up the open offer of the actor's entry.
func (s *Service) Decline(ctx context.Context, a slots.Actor, entryID string) (events.Position, error) {
	res, err := s.decide(ctx, func(st *State) ([]events.EventData, error) {
		e, o, err := s.ownOffer(st, a, entryID)
		if err != nil {
			return nil, err
		}
		return []events.EventData{events.New(events.OfferDeclined{OfferID: o.ID, EntryID: e.ID, Slot: o.Slot}, meta(a, s.now()))}, nil
	})
	return res.Position, err
}

func (s *Service) ownOffer(st *State, a slots.Actor, entryID string) (*Entry, *Offer, error) {
	e := st.Entries[entryID]
	if e == nil {
		return nil, nil, noEntry(entryID)
	}
	if !owns(a, e) {
		return nil, nil, apperr.Refuse(apperr.Forbidden, apperr.ReasonOfferNotYours, "entry_id", entryID, "who", e.Who).With(map[string]any{"entry_id": entryID})
	}
	o := st.offerOf(entryID)
	if o == nil {
		return nil, nil, apperr.Refuse(apperr.Conflict, apperr.ReasonNoOpenOffer, "entry_id", entryID).With(map[string]any{"entry_id": entryID})
	}
	if !s.now().Before(o.ExpiresAt) {
		return nil, nil, apperr.Refuse(apperr.Conflict, apperr.ReasonOfferExpired, "entry_id", entryID, "slot", o.Slot, "expired_at", o.ExpiresAt.UTC().Format(time.RFC3339)).
			With(map[string]any{"entry_id": entryID, "slot": o.Slot, "expired_at": o.ExpiresAt})
	}
	return e, o, nil
}

// Accept occupies the offered slot for the actor (through slots.Occupy, so
// the slot's rules and the hold apply) and records OfferAccepted. It
// returns the slot. A crash between the two appends is repaired by the
// consumer, which sees the slot occupied by the offer's person.
func (s *Service) Accept(ctx context.Context, a slots.Actor, entryID string) (string, events.Position, error) {
	st, err := s.load(ctx)
	if err != nil {
		return "", 0, loadFailed(err)
	}
	e, o, err := s.ownOffer(st, a, entryID)
	if err != nil {
		return "", 0, err
	}
	until := s.now().Add(e.Duration)
	if err := s.occ.Occupy(ctx, slots.Actor{Name: e.Who, ID: a.ID, CorrelationID: a.CorrelationID, ClientRequestID: a.ClientRequestID},
		o.Slot, slots.OccupyCmd{By: e.Who, ByID: e.WhoID, Until: until}); err != nil {
		return "", 0, err
	}
	res, err := s.decide(ctx, func(st *State) ([]events.EventData, error) {
		if st.Offers[o.ID] == nil {
			return nil, nil // the consumer recorded it already
		}
		return []events.EventData{events.New(events.OfferAccepted{OfferID: o.ID, EntryID: e.ID, Slot: o.Slot, Until: until}, meta(a, s.now()))}, nil
	})
	return o.Slot, res.Position, err
}
