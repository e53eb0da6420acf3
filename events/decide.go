package events

import (
	"context"
	"errors"
	"fmt"
)

// DecideAttempts is the one budget of every "load, decide, append" loop
// (Decide). A lost round means another writer's decision landed on the
// stream in between, so the next round decides on news; ten losses in a
// row mean the stream is hot, and the caller is better told to try again
// (409) than kept waiting.
const DecideAttempts = 10

// ContendedError is Decide's answer when every one of its attempts lost
// the race for the stream. It wraps ErrWrongRevision, so code that treats a
// lost race as a conflict treats this one the same.
type ContendedError struct {
	Stream   string
	Attempts int
}

func (e *ContendedError) Error() string {
	return fmt.Sprintf("events: %s changed concurrently %d times; try again", e.Stream, e.Attempts)
}

func (e *ContendedError) Unwrap() error { return ErrWrongRevision }

// AppendError is an append that Decide's round asked for and the store
// refused for another reason than a lost race (or whose outcome is unknown:
// it wraps the store's error, ErrOutcomeUnknown included). Callers tell it
// from their round's own errors with errors.As.
type AppendError struct {
	Stream string
	Err    error
}

func (e *AppendError) Error() string { return fmt.Sprintf("append to %s: %v", e.Stream, e.Err) }

func (e *AppendError) Unwrap() error { return e.Err }

// Round is one attempt of a Decide loop: load what the decision needs
// (again: on a retry the state has moved), decide, and return the events to
// append to the stream with the expected revision they were decided
// against. No events (or an error) ends the loop without appending.
type Round func(ctx context.Context) (ExpectedRevision, []EventData, error)

// Decide runs round and appends what it decides to stream with the
// expected revision round returned, until the append lands or
// DecideAttempts rounds have lost the race (ErrWrongRevision) to other
// writers. Every round loads afresh, so a retry decides on what the winner
// wrote.
//
// Returns round's own error unchanged, an *AppendError when the store
// refused the append otherwise, and a *ContendedError when the budget is
// spent. A context that ends between rounds ends the loop with its error.
func Decide(ctx context.Context, store Store, stream string, round Round) (AppendResult, error) {
	for range DecideAttempts {
		exp, evs, err := round(ctx)
		if err != nil || len(evs) == 0 {
			return AppendResult{}, err
		}
		res, err := store.Append(ctx, stream, exp, evs...)
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, ErrWrongRevision) {
			return AppendResult{}, &AppendError{Stream: stream, Err: err}
		}
		if cerr := ctx.Err(); cerr != nil {
			return AppendResult{}, cerr
		}
	}
	return AppendResult{}, &ContendedError{Stream: stream, Attempts: DecideAttempts}
}

// Expect is the condition to decide against for a stream that exists
// (at its revision) or does not (NoStream).
func Expect(exists bool, rev Revision) ExpectedRevision {
	if !exists {
		return NoStream()
	}
	return Exact(rev)
}
