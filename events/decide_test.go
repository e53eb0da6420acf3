package events_test

import (
	"context"
	"errors"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// readRev is the stream's state as a round loads it: whether it exists and
// its last revision.
func readRev(t *testing.T, st events.Store, stream string) events.ExpectedRevision {
	t.Helper()
	evs, err := st.ReadStream(context.Background(), stream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return events.NoStream()
	}
	if err != nil {
		t.Fatal(err)
	}
	return events.Exact(evs[len(evs)-1].Revision)
}

// A round that loses the race is run again on the stream as the winner
// left it, and its append then lands once.
func TestDecideRetriesOnTheWinnersState(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	rounds := 0
	res, err := events.Decide(ctx, st, "slot-a", func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		rounds++
		exp := readRev(t, st, "slot-a")
		if rounds == 1 {
			// Another writer gets in between this round's load and append.
			if _, err := st.Append(ctx, "slot-a", exp, slot("a")); err != nil {
				t.Fatal(err)
			}
		}
		return exp, []events.EventData{slot("a")}, nil
	})
	if err != nil || rounds != 2 {
		t.Fatalf("Decide: %v after %d rounds, want success after 2", err, rounds)
	}
	if evs, _ := st.ReadStream(ctx, "slot-a", 0, 0, events.Forward); len(evs) != 2 || res.NextExpected != 1 {
		t.Fatalf("stream has %d events (next expected %d), want the winner's and this round's", len(evs), res.NextExpected)
	}
}

// Losing every round ends after exactly DecideAttempts rounds with a
// ContendedError that still reads as a lost race.
func TestDecideBudget(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	rounds := 0
	_, err := events.Decide(ctx, st, "slot-a", func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		rounds++
		exp := readRev(t, st, "slot-a")
		if _, err := st.Append(ctx, "slot-a", exp, slot("a")); err != nil {
			t.Fatal(err)
		}
		return exp, []events.EventData{slot("a")}, nil
	})
	var ce *events.ContendedError
	if !errors.As(err, &ce) || ce.Stream != "slot-a" || ce.Attempts != events.DecideAttempts || !errors.Is(err, events.ErrWrongRevision) {
		t.Fatalf("Decide after a lost race every round: %v, want a ContendedError of slot-a after %d", err, events.DecideAttempts)
	}
	if rounds != events.DecideAttempts {
		t.Fatalf("%d rounds, want %d", rounds, events.DecideAttempts)
	}
}

// A round's own refusal, or a decision to write nothing, appends nothing;
// a store failure comes back as an AppendError, never as a retry.
func TestDecideEndsWithoutRetry(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	defer st.Close()
	refused := errors.New("slot is retired")
	_, err := events.Decide(ctx, st, "slot-a", func(context.Context) (events.ExpectedRevision, []events.EventData, error) {
		return events.NoStream(), []events.EventData{slot("a")}, refused
	})
	if err != refused {
		t.Fatalf("round's error: got %v", err)
	}
	_, err = events.Decide(ctx, st, "slot-a", func(context.Context) (events.ExpectedRevision, []events.EventData, error) {
		return events.NoStream(), nil, nil
	})
	if err != nil {
		t.Fatalf("nothing to write: %v", err)
	}
	if h, _ := st.Head(ctx); h != 0 {
		t.Fatalf("head %d, want nothing appended", h)
	}
	rounds := 0
	_, err = events.Decide(ctx, failing{st}, "slot-a", func(context.Context) (events.ExpectedRevision, []events.EventData, error) {
		rounds++
		return events.NoStream(), []events.EventData{slot("a")}, nil
	})
	var ae *events.AppendError
	if !errors.As(err, &ae) || !errors.Is(err, events.ErrOutcomeUnknown) || rounds != 1 {
		t.Fatalf("failed append: %v after %d rounds, want one AppendError wrapping the store's error", err, rounds)
	}
}

// failing is a store whose appends end with an unknown outcome.
type failing struct{ events.Store }

func (failing) Append(context.Context, string, events.ExpectedRevision, ...events.EventData) (events.AppendResult, error) {
	return events.AppendResult{}, events.ErrOutcomeUnknown
}
