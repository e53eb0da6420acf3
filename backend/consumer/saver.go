package consumer

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
)

// saver is the Runner's SavePolicy at work: it counts folded events and
// writes a checkpoint when it is time. It is used by one goroutine at a
// time (the Runner's saveMu).
type saver struct {
	Log      Log
	Consumer string
	Version  int
	Every    int
	Gap      time.Duration
	After    time.Duration
	Clock    clock.Clock
	// Snapshot returns the position to claim and the state, encoded; held
	// says the position is below the one applied (Marker). It takes the
	// fold's lock itself; the append happens after it let go, so readers
	// of the fold never wait for the store.
	Snapshot func() (pos events.Position, held bool, state []byte, err error)
	Logger   *slog.Logger

	saved    events.Position // of the last checkpoint written or loaded
	unsaved  int             // events folded since the last checkpoint written
	sinceTry int             // events folded since the last attempt
	at       time.Time       // of the last attempt
}

// Start sets where the consumer starts (its loaded checkpoint, or 0).
func (s *saver) Start(pos events.Position) {
	s.saved, s.at = pos, s.Clock.Now()
}

// Folded counts one folded event and saves when it is time. Checkpoints
// (the consumer's own too) are no progress: counting them would make each
// one call for the next.
func (s *saver) Folded(ctx context.Context, ev events.RecordedEvent) {
	if strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix) {
		return
	}
	s.unsaved++
	s.sinceTry++
	since := s.Clock.Since(s.at)
	if (s.Every > 0 && s.sinceTry >= s.Every && since >= s.Gap) || (s.After > 0 && since >= s.After) {
		s.Save(ctx)
	}
}

// Stop writes the checkpoint at stop if at least atStop events (0: one)
// were folded since the last; a negative atStop writes none.
func (s *saver) Stop(ctx context.Context, atStop int) {
	if atStop >= 0 && s.unsaved >= max(atStop, 1) {
		s.Save(ctx)
	}
}

// Save writes a checkpoint if events were folded since the last one. A
// failure is logged and retried at the next occasion. A held position
// (Marker) is written if it moved, and the folded events stay unsaved
// until a checkpoint claims them all.
func (s *saver) Save(ctx context.Context) {
	if s.unsaved == 0 {
		return
	}
	s.sinceTry, s.at = 0, s.Clock.Now()
	pos, held, b, err := s.Snapshot()
	if err == nil && pos > s.saved {
		err = SaveCheckpoint(ctx, s.Log, s.Consumer, s.Version, pos, json.RawMessage(b))
	}
	if err != nil {
		if ctx.Err() == nil && s.Logger != nil {
			s.Logger.Warn(s.Consumer+": checkpoint not written", "err", err)
		}
		return
	}
	s.saved = max(s.saved, pos)
	if !held {
		s.unsaved = 0
	}
}
