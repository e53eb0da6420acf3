package consumer

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Saver decides when a consumer writes its checkpoint: after Every events
// folded if Gap passed since the last attempt (so a catch-up of a million
// events writes a few checkpoints, not a hundred), or once After passed
// and something was folded, and once more when the consumer stops (Save).
// It is used by one goroutine at a time (the consumer's subscription, then
// its shutdown).
type Saver struct {
	Log      Log
	Consumer string
	Version  int
	Every    int
	Gap      time.Duration
	After    time.Duration
	// Snapshot returns the fold's position and state, JSON-encoded. It
	// takes the consumer's lock itself; the append happens after it let
	// go, so readers of the fold never wait for the store.
	Snapshot func() (events.Position, []byte, error)
	Logger   *slog.Logger

	saved    events.Position // of the last checkpoint written or loaded
	unsaved  int             // events folded since the last checkpoint written
	sinceTry int             // events folded since the last attempt
	at       time.Time       // of the last attempt
}

// Start sets where the consumer starts (its loaded checkpoint, or 0).
func (s *Saver) Start(pos events.Position) {
	s.saved, s.at = pos, time.Now()
}

// Folded counts one folded event and saves when it is time. Checkpoints
// (the consumer's own too) are no progress: counting them would make each
// one call for the next.
func (s *Saver) Folded(ctx context.Context, ev events.RecordedEvent) {
	if strings.HasPrefix(ev.Stream, events.CheckpointStreamPrefix) {
		return
	}
	s.unsaved++
	s.sinceTry++
	if since := time.Since(s.at); (s.sinceTry >= s.Every && since >= s.Gap) || since >= s.After {
		s.Save(ctx)
	}
}

// Save writes a checkpoint if events were folded since the last one. A
// failure is logged and retried at the next occasion.
func (s *Saver) Save(ctx context.Context) {
	if s.unsaved == 0 {
		return
	}
	s.sinceTry, s.at = 0, time.Now()
	pos, b, err := s.Snapshot()
	if err == nil && pos > s.saved {
		err = SaveCheckpoint(ctx, s.Log, s.Consumer, s.Version, pos, json.RawMessage(b))
	}
	if err != nil {
		if ctx.Err() == nil && s.Logger != nil {
			s.Logger.Warn(s.Consumer+": checkpoint not written", "err", err)
		}
		return
	}
	s.saved, s.unsaved = pos, 0
}
