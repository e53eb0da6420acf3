package kurrent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
	"github.com/slotkeeper/slotkeeper/events/storetest"
)

// quiet keeps the client's and the adapter's log lines out of test output.
var quiet = slog.New(slog.DiscardHandler)

func testOptions() kurrent.Options {
	return kurrent.Options{Logger: quiet, RetryTimeout: 10 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

// mustFake starts a fake node that stops when t ends.
func mustFake(t testing.TB) *kurrentfake.Server {
	t.Helper()
	f, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// mustOpen opens the adapter on f and closes it when t ends.
func mustOpen(t testing.TB, f *kurrentfake.Server) *kurrent.Store {
	t.Helper()
	return mustOpenWith(t, f, quiet)
}

func mustOpenWith(t testing.TB, f *kurrentfake.Server, log *slog.Logger) *kurrent.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts := testOptions()
	opts.Logger = log
	s, err := kurrent.Open(ctx, f.ConnString(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		return mustOpen(t, mustFake(t))
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ev(typ string, n int) events.EventData {
	return events.EventData{ID: uuid.NewString(), Type: typ, Data: fmt.Appendf(nil, `{"n":%d}`, n), Meta: events.Metadata{Actor: "test"}}
}

// recorder is a subscription handler that keeps what it gets and signals.
type recorder struct {
	mu     sync.Mutex
	got    []events.RecordedEvent
	signal chan struct{}
}

func newRecorder() *recorder { return &recorder{signal: make(chan struct{}, 1)} }

func (r *recorder) handle(_ context.Context, e events.RecordedEvent) error {
	r.mu.Lock()
	r.got = append(r.got, e)
	r.mu.Unlock()
	select {
	case r.signal <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) events() []events.RecordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]events.RecordedEvent(nil), r.got...)
}

func (r *recorder) waitCount(t *testing.T, n int, done <-chan error) []events.RecordedEvent {
	t.Helper()
	timeout := time.NewTimer(15 * time.Second)
	defer timeout.Stop()
	for {
		if got := r.events(); len(got) >= n {
			return got
		}
		select {
		case <-r.signal:
		case err := <-done:
			t.Fatalf("subscription ended early with %v after %d events", err, len(r.events()))
		case <-timeout.C:
			t.Fatalf("timed out with %d of %d events", len(r.events()), n)
		}
	}
}

// checkExactlyOnce asserts got holds exactly the events with ids want, in
// increasing position order: no gap, no duplicate.
func checkExactlyOnce(t *testing.T, got []events.RecordedEvent, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i] {
			t.Fatalf("event %d is %s, want %s", i, got[i].ID, want[i])
		}
		if i > 0 && got[i].Position <= got[i-1].Position {
			t.Fatalf("positions not increasing at %d: %d after %d", i, got[i].Position, got[i-1].Position)
		}
	}
}

// The node dies while a subscriber is live and comes back with its data: the
// subscriber resubscribes on its own from the last delivered event, and the
// events written before, during (none can be) and after the outage arrive
// exactly once, in order.
func TestSubscriptionResumesAfterNodeRestart(t *testing.T) {
	f := mustFake(t)
	dropped := &signalHandler{msg: "subscription dropped, resubscribing", ch: make(chan struct{}, 16)}
	s := mustOpenWith(t, f, slog.New(dropped))
	ctx := ctxT(t)

	var want []string
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			e := ev("Step", i)
			if _, err := s.Append(ctx, "job-1", anyOrExact(i), e); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			want = append(want, e.ID)
		}
	}
	appendN(0, 5)

	rec := newRecorder()
	subCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.SubscribeAll(subCtx, 0, events.Filter{StreamPrefixes: []string{"job-"}}, rec.handle) }()
	rec.waitCount(t, 5, done)
	subsBefore := f.Subscriptions()

	f.Stop()
	waitSignal(t, dropped.ch, "the subscription to notice the node is gone")
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	appendN(5, 5)
	got := rec.waitCount(t, 10, done)
	// One more after the rest: a duplicate would show up before it.
	appendN(10, 1)
	got = rec.waitCount(t, 11, done)
	checkExactlyOnce(t, got, want)
	if f.Subscriptions() <= subsBefore {
		t.Fatalf("the node saw %d subscriptions before and %d after: no resubscription happened", subsBefore, f.Subscriptions())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription ended with %v, want context.Canceled", err)
	}
}

func anyOrExact(i int) events.ExpectedRevision {
	if i == 0 {
		return events.NoStream()
	}
	return events.Exact(events.Revision(i - 1))
}

// The node stays down for a while mid-subscription (several failed
// resubscriptions and reconnects), then comes back: still no gap, no duplicate.
func TestSubscriptionSurvivesLongOutage(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	var want []string
	for i := range 3 {
		e := ev("A", i)
		if _, err := s.Append(ctx, "slot-a", anyOrExact(i), e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.ID)
	}
	rec := newRecorder()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.SubscribeAll(subCtx, 0, events.Filter{}, rec.handle) }()
	rec.waitCount(t, 3, done)

	f.Stop()
	subs := f.Subscriptions()
	// While the node is down, a call fails within its retry budget with
	// ErrUnavailable, never with a wrong answer.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := s.Head(short)
	cancelShort()
	if err == nil {
		t.Fatal("Head succeeded with the node down")
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		e := ev("A", i)
		if _, err := s.Append(ctx, "slot-a", anyOrExact(i), e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e.ID)
	}
	checkExactlyOnce(t, rec.waitCount(t, 6, done), want)
	if f.Subscriptions() <= subs {
		t.Fatal("no resubscription reached the node")
	}
}

// The node is down when the process starts: Open keeps trying and returns
// once the node is up; the client the library closed for good after the first
// failed connection is replaced.
func TestOpenRetriesUntilNodeIsUp(t *testing.T) {
	f := mustFake(t)
	f.Stop()
	ctx := ctxT(t)
	type result struct {
		s   *kurrent.Store
		err error
	}
	failed := &signalHandler{msg: "cannot connect to KurrentDB", ch: make(chan struct{}, 16)}
	opts := testOptions()
	opts.Logger = slog.New(failed)
	opened := make(chan result, 1)
	go func() {
		s, err := kurrent.Open(ctx, f.ConnString(), opts)
		opened <- result{s, err}
	}()
	// Wait until Open has failed to connect three times (three clients
	// built and closed by the library), still without returning.
	for i := range 3 {
		select {
		case r := <-opened:
			t.Fatalf("Open returned (%v) while the node was down", r.err)
		case <-failed.ch:
		case <-ctx.Done():
			t.Fatalf("no failed connection attempt %d reported", i+1)
		}
	}
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	r := <-opened
	if r.err != nil {
		t.Fatalf("Open after the node came up: %v", r.err)
	}
	defer r.s.Close()
	if _, err := r.s.Append(ctx, "slot-x", events.NoStream(), ev("X", 0)); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	if f.Appends() != 1 {
		t.Fatalf("node saw %d appends, want 1", f.Appends())
	}
}

// With the node down for good, Open gives up after RetryTimeout with
// ErrUnavailable instead of hanging.
func TestOpenGivesUp(t *testing.T) {
	f := mustFake(t)
	f.Stop()
	opts := testOptions()
	opts.RetryTimeout = 300 * time.Millisecond
	_, err := kurrent.Open(ctxT(t), f.ConnString(), opts)
	if !errors.Is(err, kurrent.ErrUnavailable) {
		t.Fatalf("Open with no node: %v, want ErrUnavailable", err)
	}
}

// A call in progress when the node goes away is retried once it is back.
func TestAppendRetriesAcrossRestart(t *testing.T) {
	f := mustFake(t)
	lost := &signalHandler{msg: "KurrentDB connection lost, reconnecting", ch: make(chan struct{}, 16)}
	s := mustOpenWith(t, f, slog.New(lost))
	ctx := ctxT(t)
	if _, err := s.Append(ctx, "job-r", events.NoStream(), ev("A", 0)); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, "job-r", events.Exact(0), ev("A", 1))
		appended <- err
	}()
	// The append has hit the dead node and is now retrying.
	waitSignal(t, lost.ch, "the append to fail against the stopped node")
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; err != nil {
		t.Fatalf("append across a restart: %v", err)
	}
	got, err := s.ReadStream(ctx, "job-r", 0, 0, events.Forward)
	if err != nil || len(got) != 2 {
		t.Fatalf("read back %d events, %v; want 2", len(got), err)
	}
}

// The fence: the loser of an exact-revision race gets ErrWrongRevision with
// the stream's real revision, and writes nothing.
func TestWrongRevisionIsTranslated(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	if _, err := s.Append(ctx, "job-f", events.NoStream(), ev("A", 0), ev("A", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Append(ctx, "job-f", events.Exact(0), ev("A", 2))
	var w *events.WrongRevisionError
	if !errors.Is(err, events.ErrWrongRevision) || !errors.As(err, &w) {
		t.Fatalf("stale append: %v, want a WrongRevisionError", err)
	}
	if !w.Exists || w.Actual != 1 {
		t.Fatalf("WrongRevisionError says stream at %d (exists %v), want 1", w.Actual, w.Exists)
	}
	_, err = s.Append(ctx, "job-none", events.Exact(3), ev("A", 0))
	if !errors.As(err, &w) || w.Exists {
		t.Fatalf("append to missing stream with exact: %v", err)
	}
	if got, _ := s.ReadStream(ctx, "job-f", 0, 0, events.Forward); len(got) != 2 {
		t.Fatalf("the losing append wrote: stream has %d events", len(got))
	}
}

// KurrentDB writes its own events into $all; they never reach a subscriber
// and never count as the head.
func TestSystemEventsAreSkipped(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	res, err := s.Append(ctx, "slot-s", events.NoStream(), ev("A", 0))
	if err != nil {
		t.Fatal(err)
	}
	for range 100 { // more than one Head page
		f.AppendSystemEvent("$stats-127.0.0.1:2113", "$statsCollected")
	}
	if h, err := s.Head(ctx); err != nil || h != res.Position {
		t.Fatalf("Head = %d, %v; want %d (the last non-system event)", h, err, res.Position)
	}
	last, err := s.Append(ctx, "slot-s", events.Exact(0), ev("A", 1))
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.SubscribeAll(subCtx, 0, events.Filter{}, rec.handle) }()
	got := rec.waitCount(t, 2, done)
	if len(got) != 2 || got[1].Position != last.Position {
		t.Fatalf("subscription delivered %+v", got)
	}
}

// A filter on both stream prefix and event type (which KurrentDB cannot do in
// one server filter) delivers only what matches both.
func TestFilterOnStreamAndType(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	var want []string
	for i := range 12 {
		stream := []string{"job-1", "slot-1", "job-2"}[i%3]
		typ := []string{"JobClaimed", "JobClaimedX", "StepStarted", "JobClaimed"}[i%4]
		e := ev(typ, i)
		if _, err := s.Append(ctx, stream, events.Any(), e); err != nil {
			t.Fatal(err)
		}
		if stream != "slot-1" && typ == "JobClaimed" {
			want = append(want, e.ID)
		}
	}
	end := ev("JobClaimed", 99)
	if _, err := s.Append(ctx, "job-end", events.NoStream(), end); err != nil {
		t.Fatal(err)
	}
	want = append(want, end.ID)
	rec := newRecorder()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(subCtx, 0, events.Filter{StreamPrefixes: []string{"job-"}, EventTypes: []string{"JobClaimed"}}, rec.handle)
	}()
	got := rec.waitCount(t, len(want), done)
	checkExactlyOnce(t, got, want)
}

// Ids that are not UUIDs survive the round trip; re-sending the same append
// (as a retry after a lost answer would) is not written twice.
func TestIdsAndIdempotentRetry(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	e := ev("A", 0)
	e.ID = "req-42/step-1"
	if _, err := s.Append(ctx, "job-i", events.NoStream(), e); err != nil {
		t.Fatal(err)
	}
	// The same event again with the same condition: KurrentDB (and the
	// fake) treat it as the same write.
	if _, err := s.Append(ctx, "job-i", events.NoStream(), e); err != nil {
		t.Fatalf("idempotent re-append: %v", err)
	}
	got, err := s.ReadStream(ctx, "job-i", math.MaxUint64, 0, events.Backward)
	if err != nil || len(got) != 1 || got[0].ID != e.ID {
		t.Fatalf("read back %+v, %v", got, err)
	}
}

func TestConnStrings(t *testing.T) {
	good := []string{
		"esdb://127.0.0.1:2113?tls=false",
		"kurrentdb://127.0.0.1:2113?tls=false",
		"kurrentdb+discover://admin:changeit@cluster.local:2113",
		"esdb://admin:changeit@a:2113,b:2113,c:2113?nodePreference=leader",
		"kdb://localhost:2113?tls=false&keepAliveTimeout=10000",
	}
	for _, s := range good {
		if _, err := kurrent.ParseConnString(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	bad := map[string]string{
		"admin:changeit with tls=false": "kurrentdb://admin:changeit@127.0.0.1:2113?tls=false",
		"unknown setting":               "esdb://127.0.0.1:2113?tsl=false",
		"wrong scheme":                  "postgres://127.0.0.1:2113",
		"no scheme":                     "127.0.0.1:2113",
		"bad tls value":                 "esdb://127.0.0.1:2113?tls=maybe",
	}
	for what, s := range bad {
		_, err := kurrent.ParseConnString(s)
		if !errors.Is(err, kurrent.ErrConfig) {
			t.Errorf("%s (%s): %v, want ErrConfig", what, s, err)
		}
		if err != nil && containsSecret(err.Error()) {
			t.Errorf("%s: error leaks the password: %v", what, err)
		}
	}
	if _, err := kurrent.Open(context.Background(), "kurrentdb://u:p@127.0.0.1:1?tls=false", testOptions()); !errors.Is(err, kurrent.ErrConfig) {
		t.Fatalf("Open with credentials and tls=false: %v, want ErrConfig", err)
	}
}

func containsSecret(s string) bool { return strings.Contains(s, "changeit") }

// signalHandler is a slog handler that reports each record with a given
// message on a channel, so a test can wait for "the adapter tried and failed"
// instead of sleeping.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func waitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// capture is a slog handler that keeps records.
type capture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }
func (c *capture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recs = append(c.recs, r)
	return nil
}
func (c *capture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *capture) WithGroup(string) slog.Handler      { return c }

// The client library prints to the standard logger by default; the adapter
// sends its lines to slog instead, so nothing reaches stderr unasked.
func TestClientLoggingGoesToSlog(t *testing.T) {
	var std bytes.Buffer
	log.SetOutput(&std)
	defer log.SetOutput(os.Stderr)

	f := mustFake(t)
	f.Stop()
	c := &capture{}
	opts := testOptions()
	opts.Logger = slog.New(c)
	opts.RetryTimeout = 200 * time.Millisecond
	if _, err := kurrent.Open(ctxT(t), f.ConnString(), opts); !errors.Is(err, kurrent.ErrUnavailable) {
		t.Fatalf("Open with the node down: %v", err)
	}
	if std.Len() > 0 {
		t.Fatalf("the client wrote to the standard logger: %q", std.String())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fromLib := 0
	for _, r := range c.recs {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "lib" && a.Value.String() == "esdb-client" {
				fromLib++
			}
			return true
		})
	}
	if fromLib == 0 {
		t.Fatalf("no client log line reached slog (%d records)", len(c.recs))
	}
}

// The suite again, with every case on one node that keeps the earlier cases'
// events, as a shared KurrentDB would.
func TestConformanceSharedNode(t *testing.T) {
	f := mustFake(t)
	storetest.Run(t, func(t *testing.T) events.Store { return mustOpen(t, f) })
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The node dies in the middle of a long catch-up (stopped from inside the
// handler, so the drop lands between two deliveries, with more events already
// buffered by gRPC): the resubscription continues after the last delivered
// event, and all events arrive exactly once, in order.
func TestSubscriptionDropDuringCatchUp(t *testing.T) {
	f := mustFake(t)
	s := mustOpen(t, f)
	ctx := ctxT(t)
	const total = 2000
	var want []string
	batch := make([]events.EventData, 100)
	for i := 0; i < total; i += len(batch) {
		for j := range batch {
			batch[j] = ev("Step", i+j)
			want = append(want, batch[j].ID)
		}
		if _, err := s.Append(ctx, fmt.Sprintf("job-c%d", i/500), events.Any(), batch...); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder()
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	restarted := make(chan error, 1)
	n := 0
	go func() {
		done <- s.SubscribeAll(subCtx, 0, events.Filter{StreamPrefixes: []string{"job-c"}}, func(ctx context.Context, e events.RecordedEvent) error {
			n++
			// 450: in the middle of a 100-event append (its events are
			// self-committed, each at its own (p, p), as KurrentDB writes
			// gRPC appends); the resubscription must resume after the
			// 450th, not after the whole append.
			if n == 450 {
				f.Stop()
				restarted <- f.Restart()
			}
			return rec.handle(ctx, e)
		})
	}()
	got := rec.waitCount(t, total, done)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, got, want)
	if f.Subscriptions() < 2 {
		t.Fatalf("node saw %d subscriptions: the drop did not happen mid catch-up", f.Subscriptions())
	}
}
