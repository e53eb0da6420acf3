// Package consumer holds what the log's consumers (the deadline scheduler,
// the notifier, the waitlist) share: checkpoints, so that they start from
// where they got to instead of from position 0, and Loop, their
// wake-or-timer loop.
//
// A checkpoint is an event (events.ConsumerCheckpointed) on the consumer's
// own stream, checkpoint-<name>, in the event store itself: so it works the
// same on the embedded store and on KurrentDB (with PostgreSQL read models
// too), it is in every backup, and it cannot disagree with the log it
// summarises (it names a position of that log). Several processes may write
// one consumer's checkpoints: each is a pure summary of a prefix of the
// log, so the newest is as good as any.
//
// Checkpoints are never trusted blindly: LoadCheckpoint ignores one that is past the
// log's head (a store restored from an older backup, or another log), one of
// another version and one whose state does not decode, and the consumer
// folds the log from the start instead.
package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/slotkeeper/slotkeeper/events"
)

// Log is what checkpoints are read from and written to (an events.Store).
type Log interface {
	Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.EventData) (events.AppendResult, error)
	ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error)
	Head(ctx context.Context) (events.Position, error)
}

// LoadCheckpoint reads consumer's newest checkpoint of the given version into state
// and returns its position. ok is false when there is none that can be used
// (state is then untouched or partly written: start from an empty one);
// why says why a checkpoint was ignored ("" when there was none). err is
// only for a store that cannot be read.
func LoadCheckpoint(ctx context.Context, log Log, consumer string, version int, state any) (pos events.Position, ok bool, why string, err error) {
	evs, err := log.ReadStream(ctx, events.CheckpointStream(consumer), math.MaxUint64, 1, events.Backward)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && len(evs) == 0) {
		return 0, false, "", nil
	}
	if err != nil {
		return 0, false, "", err
	}
	p, err := events.Decode(evs[0])
	if err != nil {
		return 0, false, "undecodable: " + err.Error(), nil
	}
	c, isCP := p.(events.ConsumerCheckpointed)
	if !isCP {
		return 0, false, "not a checkpoint: " + evs[0].Type, nil
	}
	if c.Version != version {
		return 0, false, fmt.Sprintf("version %d, want %d", c.Version, version), nil
	}
	head, err := log.Head(ctx)
	if err != nil {
		return 0, false, "", err
	}
	if c.Position > head || c.Position >= evs[0].Position {
		return 0, false, fmt.Sprintf("position %d is not in this log (head %d)", c.Position, head), nil
	}
	if err := json.Unmarshal([]byte(c.State), state); err != nil {
		return 0, false, "state does not decode: " + err.Error(), nil
	}
	return c.Position, true, "", nil
}

// SaveCheckpoint appends consumer's checkpoint at pos with state (JSON-encoded).
func SaveCheckpoint(ctx context.Context, log Log, consumer string, version int, pos events.Position, state any) error {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("checkpoint %s: encode state: %w", consumer, err)
	}
	_, err = log.Append(ctx, events.CheckpointStream(consumer), events.Any(), events.New(events.ConsumerCheckpointed{
		Consumer: consumer, Position: pos, Version: version, State: string(b),
	}, events.Metadata{Actor: "system:" + consumer}))
	return err
}
