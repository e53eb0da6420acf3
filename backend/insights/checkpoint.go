package insights

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// Checkpoints of the read model (backend/consumer): its whole fold, which is
// bounded (see fold), at the position of the last event folded. The fold
// only summarises the log, so any process may write one.
const (
	checkpointConsumer = "insights"
	checkpointVersion  = 2 // 2: the fold holds hours (slot-time per hour); a version-1 checkpoint is ignored and the log folded from 0
)

// Run starts from the newest usable checkpoint (else from position 0) and
// follows the log until ctx ends, writing a checkpoint every
// CheckpointEvery events or CheckpointAfter and a last one when it stops.
func (s *Service) Run(ctx context.Context) error {
	var packed consumer.Packed
	var f fold
	from, ok, why, err := consumer.LoadCheckpoint(ctx, s.store, checkpointConsumer, checkpointVersion, &packed)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("insights: read checkpoint: %w", err)
	}
	if ok {
		if err := packed.Unpack(&f); err != nil {
			ok, why = false, "state does not unpack: "+err.Error()
		}
	}
	if ok {
		s.mu.Lock()
		s.f, s.pos = f.complete(), from
		s.mu.Unlock()
		s.cfg.Logger.Info("insights: starting from checkpoint", "position", from)
	} else {
		from = 0
		if why != "" {
			s.cfg.Logger.Warn("insights: checkpoint ignored, folding the log from the start", "why", why)
		}
	}
	head, err := s.store.Head(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("insights: read the log's head: %w", err)
	}
	if from >= head {
		s.markCaughtUp()
	}
	saver := &consumer.Saver{Log: s.store, Consumer: checkpointConsumer, Version: checkpointVersion,
		Every: s.cfg.CheckpointEvery, Gap: s.cfg.CheckpointGap, After: s.cfg.CheckpointAfter, Logger: s.cfg.Logger,
		Snapshot: func() (events.Position, []byte, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			b, err := consumer.Pack(s.f)
			return s.pos, b, err
		}}
	saver.Start(from)
	// Unfiltered, so the position follows the log's head and catching up
	// is visible.
	err = s.store.SubscribeAll(ctx, from, events.Filter{}, func(ctx context.Context, ev events.RecordedEvent) error {
		s.Apply(ev)
		if ev.Position >= head {
			s.markCaughtUp()
		}
		saver.Folded(ctx, ev)
		return nil
	})
	// The last checkpoint outlives ctx, briefly.
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	saver.Save(c)
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// CaughtUp is closed once Run has folded the log up to its head as it was
// when Run started (from a checkpoint or from 0). It stays open if Run ends
// first.
func (s *Service) CaughtUp() <-chan struct{} { return s.caughtUp }

func (s *Service) markCaughtUp() { s.caughtUpOnce.Do(func() { close(s.caughtUp) }) }

// complete gives a decoded fold the maps an empty one has.
func (f fold) complete() fold {
	if f.Slots == nil {
		f.Slots = map[string]*slotTrack{}
	}
	if f.Jobs == nil {
		f.Jobs = map[string]*jobTrack{}
	}
	if f.Waiting == nil {
		f.Waiting = map[string]time.Time{}
	}
	if f.Steps == nil {
		f.Steps = map[string]map[string]series{}
	}
	return f
}

// series is a list of samples. Its JSON is compact, because a checkpoint
// holds thousands per series: the samples as signed varints (milliseconds:
// the first time since the Unix epoch, then each time's difference from
// the one before, each followed by its duration), base64-encoded.
type series []sample

// MarshalJSON implements json.Marshaler.
func (xs series) MarshalJSON() ([]byte, error) {
	var b []byte
	var prev int64
	for _, x := range xs {
		t := x.T.UnixMilli()
		b = binary.AppendVarint(b, t-prev)
		b = binary.AppendVarint(b, x.D.Milliseconds())
		prev = t
	}
	return json.Marshal(b)
}

// UnmarshalJSON implements json.Unmarshaler.
func (xs *series) UnmarshalJSON(data []byte) error {
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	var out series
	var t int64
	for len(b) > 0 {
		dt, n := binary.Varint(b)
		if n <= 0 {
			return fmt.Errorf("series: bad time")
		}
		b = b[n:]
		d, m := binary.Varint(b)
		if m <= 0 {
			return fmt.Errorf("series: bad duration")
		}
		b = b[m:]
		t += dt
		out = append(out, sample{T: time.UnixMilli(t).UTC(), D: time.Duration(d) * time.Millisecond})
	}
	*xs = out
	return nil
}
