package insights

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
)

// Checkpoints of the read model (backend/consumer): its whole fold, which is
// bounded (see fold), at the position of the last event folded. The fold
// only summarises the log, so any process may write one.
const (
	checkpointConsumer = "insights"
	checkpointVersion  = 1
)

// options are the Runner's: the whole fold, packed, every CheckpointEvery
// events at most once per CheckpointGap, or after CheckpointAfter, and at
// stop.
func options(cfg Config) consumer.Options {
	return consumer.Options{Packed: true, Logger: cfg.Logger,
		Save: consumer.SavePolicy{Every: cfg.CheckpointEvery, Gap: cfg.CheckpointGap, After: cfg.CheckpointAfter}}
}

// Run starts from the newest usable checkpoint (else from position 0) and
// follows the log until ctx ends (consumer.Runner).
func (s *Service) Run(ctx context.Context) error { return s.r.Run(ctx) }

// CaughtUp is closed once Run has folded the log up to its head as it was
// when Run started. It stays open if Run ends first.
func (s *Service) CaughtUp() <-chan struct{} { return s.r.CaughtUp() }

// Name implements consumer.Fold.
func (m *model) Name() string { return checkpointConsumer }

// Version implements consumer.Fold.
func (m *model) Version() int { return checkpointVersion }

// Snapshot implements consumer.Fold: the whole fold.
func (m *model) Snapshot() (any, error) { return m.f, nil }

// Restore implements consumer.Fold.
func (m *model) Restore(state []byte) error {
	var f fold
	if err := json.Unmarshal(state, &f); err != nil {
		return err
	}
	m.f = f.complete()
	return nil
}

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
