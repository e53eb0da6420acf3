package kurrent_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
)

// openConn opens the adapter on connString with opts (quiet unless given a
// logger) and closes it when t ends.
func openConn(t *testing.T, connString string, opts kurrent.Options) *kurrent.Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := kurrent.Open(ctxT(t), connString, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// subscribeErr runs SubscribeAll for at most d and returns what it returned
// and how many events it delivered.
func subscribeErr(s events.Store, after events.Position, d time.Duration) (error, int) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	n := 0
	err := s.SubscribeAll(ctx, after, events.Filter{}, func(context.Context, events.RecordedEvent) error { n++; return nil })
	return err, n
}

// Item 1: a start that is not an event's position used to make the
// resubscribe loop retry the server's InvalidArgument forever; a start
// beyond the end (a checkpoint from a wiped log) was silently skipped to by
// a real node. Both now fail at once with ErrInvalidPosition.
func TestSubscribeFromInventedPositionFails(t *testing.T) {
	f := mustFake(t)
	opts := testOptions()
	opts.RetryTimeout = 300 * time.Millisecond // how long "beyond the end" may be a follower's lag
	s := openConn(t, f.ConnString(), opts)
	res, err := s.Append(ctxT(t), "slot-a", events.NoStream(), ev("A", 0), ev("A", 1))
	if err != nil {
		t.Fatal(err)
	}
	for what, after := range map[string]events.Position{
		"inside the last event": res.Position - 1,
		"beyond the end":        res.Position + 1<<30,
	} {
		// The error is the proof: a retry forever ends on the caller's
		// bound with its deadline instead. That bound is generous, so a
		// loaded machine never reaches it first (issue 36 item 7).
		err, n := subscribeErr(s, after, 30*time.Second)
		if !errors.Is(err, events.ErrInvalidPosition) || !errors.Is(err, events.ErrPermanent) || n != 0 {
			t.Fatalf("%s (%d): %v after %d events, want ErrInvalidPosition", what, after, err, n)
		}
	}
	// A bad start is the caller's: the process is not refused.
	if err := s.Refused(); err != nil {
		t.Fatalf("Refused() = %v, want nil", err)
	}
}

// Item 2: PermissionDenied (a user without $all read) and Unauthenticated
// stop SubscribeAll with a permanent error, logged once however many
// consumers hit it, and Refused names it for readiness.
func TestPermanentRefusalStopsSubscriptions(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated} {
		t.Run(code.String(), func(t *testing.T) {
			f := mustFake(t)
			logs := &capture{}
			s := openConn(t, f.ConnString(), kurrent.Options{Logger: slog.New(logs), RetryTimeout: 2 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
			f.Deny(code)
			subs := f.Subscriptions()
			for range 3 {
				err, _ := subscribeErr(s, 0, 30*time.Second)
				var pe *events.PermanentError
				if !errors.Is(err, events.ErrPermanent) || !errors.As(err, &pe) {
					t.Fatalf("SubscribeAll: %v, want a permanent error", err)
				}
			}
			if n := f.Subscriptions() - subs; n > 3 {
				t.Fatalf("the node got %d subscriptions for 3 SubscribeAll calls: the refusal was retried", n)
			}
			if err := s.Refused(); !errors.Is(err, events.ErrPermanent) {
				t.Fatalf("Refused() = %v", err)
			}
			logs.mu.Lock()
			errorsLogged := 0
			for _, r := range logs.recs {
				if r.Level == slog.LevelError {
					errorsLogged++
				}
			}
			logs.mu.Unlock()
			if errorsLogged != 1 {
				t.Fatalf("%d error lines for the refusal, want 1", errorsLogged)
			}
		})
	}
}

// Item 3: on a follower that has not applied a write, a multi-event append
// used to read its last event back and report the committed write as
// failed. The position now comes from the answer; a load that sees a stale
// revision costs a retry (ErrWrongRevision, nothing written), never a wrong
// decision.
func TestFollowerReads(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	if _, err := s.Append(ctx, "slot-f", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	f.Lag()
	res, err := s.Append(ctx, "slot-f", events.Exact(0), ev("A", 1), ev("A", 2), ev("A", 3))
	if err != nil {
		t.Fatalf("multi-event append on a lagging follower: %v", err)
	}
	// A load now sees revision 0 and decides on it: the fence refuses.
	stale, err := s.ReadStream(ctx, "slot-f", 0, 0, events.Forward)
	if err != nil || len(stale) != 1 {
		t.Fatalf("follower read: %d events, %v (want the stale 1)", len(stale), err)
	}
	if _, err := s.Append(ctx, "slot-f", events.Exact(stale[0].Revision), ev("B", 0)); !errors.Is(err, events.ErrWrongRevision) {
		t.Fatalf("append on a stale revision: %v, want ErrWrongRevision", err)
	}
	f.CatchUp()
	got, err := s.ReadStream(ctx, "slot-f", 0, 0, events.Forward)
	if err != nil || len(got) != 4 {
		t.Fatalf("after catch-up: %d events, %v (want 4: the stale append wrote nothing)", len(got), err)
	}
	if res.NextExpected != 3 || res.Position != got[3].Position {
		t.Fatalf("append answered rev %d pos %d, the last event is rev 3 pos %d", res.NextExpected, res.Position, got[3].Position)
	}
	// The retry, on a fresh load, succeeds.
	if _, err := s.Append(ctx, "slot-f", events.Exact(got[3].Revision), ev("B", 0)); err != nil {
		t.Fatal(err)
	}
}

// Item 4: KurrentDB 25.0 caps a whole append at 1 MiB. An append over it
// used to be cut off mid-stream, its io.EOF read as a lost connection and
// retried for RetryTimeout, then reported as ErrUnavailable. With the limit
// known (maxAppendSize) the adapter refuses before sending; without it the
// server's refusal is still ErrEventTooLarge, at once, and nothing is
// written.
func TestAppendOverServerSizeLimit(t *testing.T) {
	f := mustFake(t)
	f.SetVersion(kurrentfake.V25_0)
	big := func(n int) []events.EventData {
		out := make([]events.EventData, n)
		for i := range out {
			out[i] = ev("Big", i)
			out[i].Data = []byte(`"` + strings.Repeat("x", 700<<10) + `"`)
		}
		return out
	}
	for name, c := range map[string]struct {
		conn string
		n    int
	}{
		"limit known":   {f.ConnString() + "&maxAppendSize=1048576", 3},
		"limit unknown": {f.ConnString(), 3},
		// Large enough that gRPC flow control holds the client's sends
		// when the server ends the call: the send sees io.EOF.
		"limit unknown, cut off mid-stream": {f.ConnString(), 20},
	} {
		conn := c.conn
		t.Run(name, func(t *testing.T) {
			s := openConn(t, conn, testOptions())
			ctx := ctxT(t)
			stream := "import-" + strings.NewReplacer(" ", "-", ",", "").Replace(name)
			before := f.Appends()
			start := time.Now()
			_, err := s.Append(ctx, stream, events.NoStream(), big(c.n)...)
			if !errors.Is(err, events.ErrEventTooLarge) {
				t.Fatalf("%d × 700 KiB on a 1 MiB server: %v, want ErrEventTooLarge", c.n, err)
			}
			// Not retried: the append once, and at most the probe of no
			// events that asks why the server ended it mid-stream.
			if d := time.Since(start); d >= testOptions().RetryTimeout {
				t.Fatalf("took %s: the refusal was retried", d)
			}
			sent, want := f.Appends()-before, int64(2)
			if name == "limit known" {
				want = 0 // refused before sending
			}
			if sent > want {
				t.Fatalf("the node got %d appends, want at most %d", sent, want)
			}
			if _, err := s.ReadStream(ctx, stream, 0, 0, events.Forward); !errors.Is(err, events.ErrStreamNotFound) {
				t.Fatalf("refused append wrote something: %v", err)
			}
			// One event under the limit still goes through.
			if _, err := s.Append(ctx, stream+"-ok", events.NoStream(), big(1)...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Item 5: an append whose answer was lost. Exact and NoStream appends are
// re-sent with the same ids and land once; Any appends are not re-sent and
// say the outcome is unknown; a call whose own deadline ends it says so too.
func TestAppendOutcomeUnknown(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	count := func(stream string) int {
		got, err := s.ReadStream(ctx, stream, 0, 0, events.Forward)
		if errors.Is(err, events.ErrStreamNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for _, c := range []struct {
		name   string
		commit bool
	}{{"committed", true}, {"dropped", false}} {
		f.FailAppend(c.commit, kurrentfake.ServerTimeout)
		stream := "job-nostream-" + c.name
		if _, err := s.Append(ctx, stream, events.NoStream(), ev("A", 0), ev("A", 1)); err != nil {
			t.Fatalf("NoStream append after a %s timeout: %v", c.name, err)
		}
		f.FailAppend(c.commit, kurrentfake.ServerTimeout)
		res, err := s.Append(ctx, stream, events.Exact(1), ev("A", 2))
		if err != nil {
			t.Fatalf("Exact append after a %s timeout: %v", c.name, err)
		}
		if n := count(stream); n != 3 || res.NextExpected != 2 {
			t.Fatalf("%s: %d events, next %d; want 3 written once", c.name, n, res.NextExpected)
		}
	}

	// Any: never re-sent blindly.
	f.FailAppend(true, kurrentfake.ServerTimeout)
	before := f.Appends()
	_, err := s.Append(ctx, "audit-any", events.Any(), ev("A", 0))
	if !errors.Is(err, events.ErrOutcomeUnknown) {
		t.Fatalf("Any append after a timeout: %v, want ErrOutcomeUnknown", err)
	}
	if n := f.Appends() - before; n != 1 {
		t.Fatalf("Any append was sent %d times", n)
	}
	if n := count("audit-any"); n != 1 {
		t.Fatalf("audit-any has %d events, want the 1 that landed", n)
	}

	// The caller's deadline ends a call the node never answers, after it
	// committed: unknown, not a plain deadline error. The deadline passes
	// once the node holds the event: a real 300 ms one could pass on a
	// loaded machine before the append was sent, which is a plain deadline
	// error (nothing sent), and the hang then waited for the next append.
	f.FailAppend(true, kurrentfake.Hang)
	held := f.Len()
	short := expireWhen(ctx, func() { _ = f.Wait(ctx, held+1) })
	_, err = s.Append(short, "job-nostream-committed", events.Exact(2), ev("A", 3))
	if !errors.Is(err, events.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append past its deadline: %v, want ErrOutcomeUnknown and DeadlineExceeded", err)
	}
	// The caller finds out by retrying the same write: it landed once.
	if _, err := s.Append(ctx, "job-nostream-committed", events.Exact(2), ev("A", 3)); !errors.Is(err, events.ErrWrongRevision) {
		t.Fatalf("a new event on the old revision: %v, want ErrWrongRevision", err)
	}
	if n := count("job-nostream-committed"); n != 4 {
		t.Fatalf("%d events, want 4", n)
	}
}

// expireWhen returns a context whose deadline passes when reached returns
// (in its own goroutine; clock.ExpireWhen says why).
func expireWhen(parent context.Context, reached func()) context.Context {
	ctx, expire := clock.ExpireWhen(parent)
	go func() { reached(); expire() }()
	return ctx
}
