// Package storetest is the conformance suite every events.Store runs: the
// in-memory reference, the embedded bbolt store and the KurrentDB adapter.
//
// It uses only the events.Store interface. Every case opens its own store and
// names its streams with a unique prefix, and it never assumes positions are
// contiguous or start at 1, so it also runs against a store that already
// holds other data (a shared KurrentDB). Waits are bounded by WaitTimeout,
// which is generous enough for a store behind gRPC.
package storetest

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/events"
	"go.uber.org/goleak"
)

// WaitTimeout bounds every wait of the suite: for a subscription to deliver,
// for a cancelled subscription to return. A correct store needs milliseconds.
var WaitTimeout = 15 * time.Second

// Run runs every case against stores made by open. open must return a
// ready store and arrange for it to be closed when t ends (t.Cleanup);
// closing it twice must be harmless.
func Run(t *testing.T, open func(t *testing.T) events.Store) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s events.Store)
	}{
		{"ExpectedRevision", testExpectedRevision},
		{"ZeroEventAppend", testZeroEventAppend},
		{"ConcurrentSameRevisionOneWins", testConcurrentSameRevision},
		{"ConcurrentNoStreamOneWins", testConcurrentNoStream},
		{"RoundTrip", testRoundTrip},
		{"GlobalOrder", testGlobalOrder},
		{"ReadStream", testReadStream},
		{"ReadStreamNotFound", testReadStreamNotFound},
		{"SubscribeCatchUpThenLive", testSubscribeCatchUpThenLive},
		{"SubscribeExclusiveAfter", testSubscribeExclusiveAfter},
		{"SubscribeInvalidPosition", testSubscribeInvalidPosition},
		{"MultiEventAppendPositions", testMultiEventAppendPositions},
		{"DeliveredIsReadable", testDeliveredIsReadable},
		{"SubscribeFilter", testSubscribeFilter},
		{"SubscribeCancelLive", testSubscribeCancelLive},
		{"SubscribeCancelCatchUp", testSubscribeCancelCatchUp},
		{"SubscribeHandlerError", testSubscribeHandlerError},
		{"LargeAndEmptyPayloads", testLargeAndEmptyPayloads},
		{"OddStreamNames", testOddStreamNames},
		{"InvalidInputWritesNothing", testInvalidInput},
		{"Head", testHead},
		{"Close", testClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, open(t))
		})
	}
}

// ---- helpers ----

// prefix returns a stream-name prefix no other case or run uses.
func prefix(t *testing.T) string {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if i := strings.LastIndexByte(name, '-'); i >= 0 {
		name = name[i+1:]
	}
	return fmt.Sprintf("st%s-%s-", hex.EncodeToString(b[:]), name)
}

var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

// ev makes a small event of type typ whose payload carries n.
func ev(typ string, n int) events.EventData {
	return events.EventData{
		ID:   uuid.NewString(),
		Type: typ,
		Data: []byte(fmt.Sprintf(`{"n":%d}`, n)),
		Meta: events.Metadata{Actor: "storetest", CorrelationID: "corr-1", CausationID: "cause-1", Time: fixedTime, Schema: 1},
	}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func mustAppend(t *testing.T, s events.Store, stream string, exp events.ExpectedRevision, evs ...events.EventData) events.AppendResult {
	t.Helper()
	res, err := s.Append(ctxT(t), stream, exp, evs...)
	if err != nil {
		t.Fatalf("append %d events to %q (%s): %v", len(evs), stream, exp, err)
	}
	return res
}

func mustRead(t *testing.T, s events.Store, stream string, from events.Revision, max int, dir events.Direction) []events.RecordedEvent {
	t.Helper()
	got, err := s.ReadStream(ctxT(t), stream, from, max, dir)
	if err != nil {
		t.Fatalf("read %q from %d max %d dir %d: %v", stream, from, max, dir, err)
	}
	return got
}

func mustHead(t *testing.T, s events.Store) events.Position {
	t.Helper()
	h, err := s.Head(ctxT(t))
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	return h
}

func revisions(evs []events.RecordedEvent) []uint64 {
	out := make([]uint64, len(evs))
	for i, e := range evs {
		out[i] = e.Revision
	}
	return out
}

func expectWrongRevision(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: append succeeded, want ErrWrongRevision", what)
	}
	if !errors.Is(err, events.ErrWrongRevision) {
		t.Fatalf("%s: error %v does not wrap ErrWrongRevision", what, err)
	}
}

// streamLen is the number of events of stream (0 when it does not exist).
func streamLen(t *testing.T, s events.Store, stream string) int {
	t.Helper()
	got, err := s.ReadStream(ctxT(t), stream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return 0
	}
	if err != nil {
		t.Fatalf("read %q: %v", stream, err)
	}
	return len(got)
}

// sub is a running subscription that records what it receives.
type sub struct {
	mu     sync.Mutex
	got    []events.RecordedEvent
	signal chan struct{} // receives a value after each delivery (non-blocking)
	cancel context.CancelFunc
	done   chan error
}

// subscribe starts SubscribeAll in a goroutine. The subscription is cancelled
// and waited for when t ends.
func subscribe(t *testing.T, s events.Store, after events.Position, f events.Filter) *sub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sb := &sub{signal: make(chan struct{}, 1), cancel: cancel, done: make(chan error, 1)}
	go func() {
		sb.done <- s.SubscribeAll(ctx, after, f, func(_ context.Context, e events.RecordedEvent) error {
			sb.mu.Lock()
			sb.got = append(sb.got, e)
			sb.mu.Unlock()
			select {
			case sb.signal <- struct{}{}:
			default:
			}
			return nil
		})
	}()
	t.Cleanup(func() { sb.stop(t) })
	return sb
}

func (sb *sub) events() []events.RecordedEvent {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return append([]events.RecordedEvent(nil), sb.got...)
}

// waitFor waits until cond holds for the received events.
func (sb *sub) waitFor(t *testing.T, what string, cond func([]events.RecordedEvent) bool) []events.RecordedEvent {
	t.Helper()
	deadline := time.NewTimer(WaitTimeout)
	defer deadline.Stop()
	for {
		got := sb.events()
		if cond(got) {
			return got
		}
		select {
		case <-sb.signal:
		case err := <-sb.done:
			sb.done <- err
			t.Fatalf("waiting for %s: subscription ended early: %v (received %d events)", what, err, len(got))
		case <-deadline.C:
			t.Fatalf("waiting for %s: timed out after %s (received %d events)", what, WaitTimeout, len(got))
		}
	}
}

func (sb *sub) waitCount(t *testing.T, n int) []events.RecordedEvent {
	t.Helper()
	return sb.waitFor(t, fmt.Sprintf("%d events", n), func(got []events.RecordedEvent) bool { return len(got) >= n })
}

// stop cancels the subscription and returns what SubscribeAll returned.
func (sb *sub) stop(t *testing.T) error {
	t.Helper()
	sb.cancel()
	select {
	case err := <-sb.done:
		sb.done <- err // keep it for a second stop
		return err
	case <-time.After(WaitTimeout):
		t.Fatalf("SubscribeAll did not return within %s of cancel", WaitTimeout)
		return nil
	}
}

func checkIncreasing(t *testing.T, evs []events.RecordedEvent) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Position <= evs[i-1].Position {
			t.Fatalf("positions not strictly increasing at %d: %d then %d", i, evs[i-1].Position, evs[i].Position)
		}
	}
}

// ---- cases ----

func testExpectedRevision(t *testing.T, s events.Store) {
	p := prefix(t)
	ctx := ctxT(t)

	// no-stream
	ns := p + "nostream"
	res := mustAppend(t, s, ns, events.NoStream(), ev("A", 0), ev("A", 1))
	if res.NextExpected != 1 {
		t.Fatalf("no-stream on new: NextExpected %d, want 1", res.NextExpected)
	}
	_, err := s.Append(ctx, ns, events.NoStream(), ev("A", 2))
	expectWrongRevision(t, err, "no-stream on existing stream")

	// stream-exists
	se := p + "exists"
	_, err = s.Append(ctx, se, events.StreamExists(), ev("A", 0))
	expectWrongRevision(t, err, "stream-exists on new stream")
	if n := streamLen(t, s, se); n != 0 {
		t.Fatalf("failed stream-exists append created %d events", n)
	}
	mustAppend(t, s, se, events.NoStream(), ev("A", 0))
	if res := mustAppend(t, s, se, events.StreamExists(), ev("A", 1)); res.NextExpected != 1 {
		t.Fatalf("stream-exists: NextExpected %d, want 1", res.NextExpected)
	}

	// any
	an := p + "any"
	if res := mustAppend(t, s, an, events.Any(), ev("A", 0)); res.NextExpected != 0 {
		t.Fatalf("any on new: NextExpected %d, want 0", res.NextExpected)
	}
	if res := mustAppend(t, s, an, events.Any(), ev("A", 1), ev("A", 2)); res.NextExpected != 2 {
		t.Fatalf("any on existing: NextExpected %d, want 2", res.NextExpected)
	}

	// exact
	ex := p + "exact"
	_, err = s.Append(ctx, ex, events.Exact(0), ev("A", 0))
	expectWrongRevision(t, err, "exact(0) on new stream")
	mustAppend(t, s, ex, events.NoStream(), ev("A", 0), ev("A", 1), ev("A", 2)) // at revision 2
	for _, wrong := range []uint64{0, 1, 3, 100} {
		_, err = s.Append(ctx, ex, events.Exact(wrong), ev("A", 9))
		expectWrongRevision(t, err, fmt.Sprintf("exact(%d) on stream at 2", wrong))
	}
	if n := streamLen(t, s, ex); n != 3 {
		t.Fatalf("failed exact appends changed the stream: %d events, want 3", n)
	}
	res = mustAppend(t, s, ex, events.Exact(2), ev("A", 3))
	if res.NextExpected != 3 {
		t.Fatalf("exact(2): NextExpected %d, want 3", res.NextExpected)
	}
	// The result chains: Exact(NextExpected) is the next fence.
	res = mustAppend(t, s, ex, events.Exact(res.NextExpected), ev("A", 4), ev("A", 5))
	if res.NextExpected != 5 {
		t.Fatalf("exact(3): NextExpected %d, want 5", res.NextExpected)
	}
	got := mustRead(t, s, ex, 0, 0, events.Forward)
	if !slices.Equal(revisions(got), []uint64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("revisions %v, want 0..5", revisions(got))
	}
	if got[5].Position != res.Position {
		t.Fatalf("AppendResult.Position %d, last event's position %d", res.Position, got[5].Position)
	}
	// WrongRevisionError carries the detail for stores that have it.
	_, err = s.Append(ctx, ex, events.Exact(1), ev("A", 9))
	var wre *events.WrongRevisionError
	if errors.As(err, &wre) && (!wre.Exists || wre.Actual != 5) {
		t.Fatalf("WrongRevisionError says exists=%v actual=%d, want true/5", wre.Exists, wre.Actual)
	}
}

func testZeroEventAppend(t *testing.T, s events.Store) {
	p := prefix(t)
	ctx := ctxT(t)
	st := p + "zero"
	if _, err := s.Append(ctx, st, events.NoStream()); err != nil {
		t.Fatalf("zero events, no-stream on new stream: %v", err)
	}
	if n := streamLen(t, s, st); n != 0 {
		t.Fatalf("zero-event append wrote %d events", n)
	}
	_, err := s.Append(ctx, st, events.StreamExists())
	expectWrongRevision(t, err, "zero events, stream-exists on new stream")
	mustAppend(t, s, st, events.NoStream(), ev("A", 0))
	_, err = s.Append(ctx, st, events.NoStream())
	expectWrongRevision(t, err, "zero events, no-stream on existing")
	_, err = s.Append(ctx, st, events.Exact(5))
	expectWrongRevision(t, err, "zero events, wrong exact")
	if _, err := s.Append(ctx, st, events.Exact(0)); err != nil {
		t.Fatalf("zero events, right exact: %v", err)
	}
	if n := streamLen(t, s, st); n != 1 {
		t.Fatalf("zero-event appends changed the stream: %d events, want 1", n)
	}
}

// race starts n appenders at once with the same condition and returns how
// many succeeded; every failure must be ErrWrongRevision.
func race(t *testing.T, s events.Store, stream string, exp events.ExpectedRevision, n int) int {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Append(ctxT(t), stream, exp, ev("Raced", i), ev("Raced", i))
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	wins := 0
	for err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, events.ErrWrongRevision):
			t.Fatalf("losing append failed with %v, want ErrWrongRevision", err)
		}
	}
	return wins
}

func testConcurrentSameRevision(t *testing.T, s events.Store) {
	p := prefix(t)
	for round := range 3 {
		st := fmt.Sprintf("%sraced-%d", p, round)
		mustAppend(t, s, st, events.NoStream(), ev("A", 0))
		if wins := race(t, s, st, events.Exact(0), 16); wins != 1 {
			t.Fatalf("round %d: %d appenders with Exact(0) succeeded, want exactly 1", round, wins)
		}
		got := mustRead(t, s, st, 0, 0, events.Forward)
		if !slices.Equal(revisions(got), []uint64{0, 1, 2}) {
			t.Fatalf("round %d: revisions %v, want [0 1 2]", round, revisions(got))
		}
		// Both events of the winning append are adjacent: appends are atomic.
		if !bytes.Equal(got[1].Data, got[2].Data) {
			t.Fatalf("round %d: winner's two events were split: %s / %s", round, got[1].Data, got[2].Data)
		}
	}
}

func testConcurrentNoStream(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "created"
	if wins := race(t, s, st, events.NoStream(), 16); wins != 1 {
		t.Fatalf("%d appenders with NoStream succeeded, want exactly 1", wins)
	}
	if n := streamLen(t, s, st); n != 2 {
		t.Fatalf("stream holds %d events, want 2", n)
	}
}

func testRoundTrip(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "rt"
	in := ev("Typed.Event-v2_x", 7)
	in.Data = []byte(`{"b":[1,2,{"c":null}],"a":"ünï \"q\""}`)
	in.Meta.ActorID, in.Meta.ClientRequestID = "user:u-1", "client-7"
	noID := events.EventData{Type: "NoID", Data: []byte(`{}`)} // no id, no time
	before := time.Now().Add(-time.Minute)
	mustAppend(t, s, st, events.NoStream(), in, noID)
	got := mustRead(t, s, st, 0, 0, events.Forward)
	if len(got) != 2 {
		t.Fatalf("read %d events, want 2", len(got))
	}
	g := got[0]
	if g.ID != in.ID || g.Stream != st || g.Revision != 0 || g.Type != in.Type || !bytes.Equal(g.Data, in.Data) {
		t.Fatalf("round trip: got id=%q stream=%q rev=%d type=%q data=%s\nwant id=%q stream=%q rev=0 type=%q data=%s",
			g.ID, g.Stream, g.Revision, g.Type, g.Data, in.ID, st, in.Type, in.Data)
	}
	if g.Meta.Actor != in.Meta.Actor || g.Meta.ActorID != in.Meta.ActorID || g.Meta.ClientRequestID != in.Meta.ClientRequestID ||
		g.Meta.CorrelationID != in.Meta.CorrelationID ||
		g.Meta.CausationID != in.Meta.CausationID || !g.Meta.Time.Equal(in.Meta.Time) || g.Meta.Schema != in.Meta.Schema {
		t.Fatalf("metadata: got %+v, want %+v", g.Meta, in.Meta)
	}
	if g.Position == 0 {
		t.Fatal("recorded event has position 0 (reserved for 'before the first event')")
	}
	n := got[1]
	if n.ID == "" {
		t.Fatal("store did not fill an empty event id")
	}
	if n.Meta.Time.IsZero() || n.Meta.Time.Before(before) {
		t.Fatalf("store did not fill a zero time with now: %v", n.Meta.Time)
	}
	if n.Position <= g.Position || n.Revision != 1 {
		t.Fatalf("second event at rev %d pos %d, first at pos %d", n.Revision, n.Position, g.Position)
	}
}

func testGlobalOrder(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	const writers, perWriter = 4, 25
	streams := []string{p + "a", p + "b", p + "c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]events.Position{} // event id -> acknowledged position (last of its append)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				e := ev("Ordered", w*1000+i)
				res, err := s.Append(ctxT(t), streams[(w+i)%len(streams)], events.Any(), e)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				acked[e.ID] = res.Position
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := 0
	byID := map[string]events.RecordedEvent{}
	for _, st := range streams {
		got := mustRead(t, s, st, 0, 0, events.Forward)
		total += len(got)
		for i, e := range got {
			if e.Revision != uint64(i) {
				t.Fatalf("%s: event %d has revision %d", st, i, e.Revision)
			}
			if e.Stream != st {
				t.Fatalf("%s: event says stream %q", st, e.Stream)
			}
			byID[e.ID] = e
		}
		checkIncreasing(t, got)
	}
	if total != writers*perWriter {
		t.Fatalf("streams hold %d events, want %d", total, writers*perWriter)
	}
	for id, pos := range acked {
		if e, ok := byID[id]; !ok || e.Position != pos {
			t.Fatalf("acknowledged event %s at %d: read back %+v", id, pos, e)
		}
	}
	// The global order as a subscription sees it agrees with the streams.
	sb := subscribe(t, s, h0, events.Filter{StreamPrefixes: []string{p}})
	all := sb.waitCount(t, total)
	checkIncreasing(t, all)
	for _, e := range all {
		if r, ok := byID[e.ID]; !ok || r.Position != e.Position || r.Revision != e.Revision {
			t.Fatalf("subscription delivered %s@%d pos %d, stream read says %+v", e.Stream, e.Revision, e.Position, r)
		}
	}
	if h := mustHead(t, s); h < all[len(all)-1].Position {
		t.Fatalf("Head %d is before the last event %d", h, all[len(all)-1].Position)
	}
}

func testReadStream(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "ten"
	evs := make([]events.EventData, 10)
	for i := range evs {
		evs[i] = ev("R", i)
	}
	mustAppend(t, s, st, events.NoStream(), evs[:4]...)
	mustAppend(t, s, p+"other", events.NoStream(), ev("R", 99)) // interleave another stream
	mustAppend(t, s, st, events.Exact(3), evs[4:]...)
	for _, c := range []struct {
		from uint64
		max  int
		dir  events.Direction
		want []uint64
	}{
		{0, 0, events.Forward, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{0, -1, events.Forward, []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{3, 4, events.Forward, []uint64{3, 4, 5, 6}},
		{8, 5, events.Forward, []uint64{8, 9}},
		{9, 1, events.Forward, []uint64{9}},
		{10, 0, events.Forward, []uint64{}},
		{math.MaxUint64, 3, events.Backward, []uint64{9, 8, 7}},
		{math.MaxUint64, 0, events.Backward, []uint64{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
		{5, 0, events.Backward, []uint64{5, 4, 3, 2, 1, 0}},
		{5, 2, events.Backward, []uint64{5, 4}},
		{0, 0, events.Backward, []uint64{0}},
	} {
		got := mustRead(t, s, st, c.from, c.max, c.dir)
		if !slices.Equal(revisions(got), c.want) {
			t.Fatalf("from %d max %d dir %d: revisions %v, want %v", c.from, c.max, c.dir, revisions(got), c.want)
		}
		for _, e := range got {
			if !bytes.Equal(e.Data, evs[e.Revision].Data) || e.ID != evs[e.Revision].ID {
				t.Fatalf("revision %d holds %s (%s), want %s", e.Revision, e.Data, e.ID, evs[e.Revision].Data)
			}
		}
		if c.dir == events.Forward {
			checkIncreasing(t, got)
		}
	}
}

func testReadStreamNotFound(t *testing.T, s events.Store) {
	p := prefix(t)
	mustAppend(t, s, p+"exists", events.NoStream(), ev("A", 0))
	for _, dir := range []events.Direction{events.Forward, events.Backward} {
		_, err := s.ReadStream(ctxT(t), p+"missing", 0, 0, dir)
		if !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatalf("dir %d: read of a missing stream: %v, want ErrStreamNotFound", dir, err)
		}
		// A stream whose name extends an existing one is still missing.
		_, err = s.ReadStream(ctxT(t), p+"exists2", 0, 0, dir)
		if !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatalf("dir %d: read of %q: %v, want ErrStreamNotFound", dir, p+"exists2", err)
		}
		_, err = s.ReadStream(ctxT(t), p+"exist", 0, 0, dir)
		if !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatalf("dir %d: read of %q: %v, want ErrStreamNotFound", dir, p+"exist", err)
		}
	}
	_, err := s.ReadStream(ctxT(t), "", 0, 0, events.Forward)
	if !errors.Is(err, events.ErrInvalidStream) {
		t.Fatalf("read of an empty stream name: %v, want ErrInvalidStream", err)
	}
}

func testSubscribeCatchUpThenLive(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	var mu sync.Mutex
	acked := map[string]bool{}
	record := func(evs ...events.EventData) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range evs {
			acked[e.ID] = true
		}
	}
	// Stored before the subscription starts: caught up.
	for i := range 30 {
		e := ev("Before", i)
		mustAppend(t, s, fmt.Sprintf("%spre-%d", p, i%3), events.Any(), e)
		record(e)
	}
	// Appended while the subscription starts and runs: the catch-up/live
	// hand-over happens somewhere in the middle of these.
	const writers, perWriter = 4, 40
	sb := subscribe(t, s, h0, events.Filter{StreamPrefixes: []string{p}})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; {
				batch := []events.EventData{ev("During", i)}
				if i%3 == 0 && i+1 < perWriter {
					batch = append(batch, ev("During", i+1))
				}
				if _, err := s.Append(ctxT(t), fmt.Sprintf("%slive-%d", p, w), events.Any(), batch...); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				record(batch...)
				i += len(batch)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	total := 30 + writers*perWriter
	sb.waitCount(t, total)
	// One more, after everything: if anything were duplicated it would show
	// up before this one.
	end := ev("End", 0)
	mustAppend(t, s, p+"end", events.NoStream(), end)
	got := sb.waitFor(t, "the end event", func(got []events.RecordedEvent) bool {
		return len(got) > 0 && got[len(got)-1].ID == end.ID
	})
	if len(got) != total+1 {
		t.Fatalf("received %d events, want %d (duplicates or strays)", len(got), total+1)
	}
	checkIncreasing(t, got)
	seen := map[string]bool{}
	for _, e := range got[:total] {
		if seen[e.ID] {
			t.Fatalf("event %s delivered twice", e.ID)
		}
		seen[e.ID] = true
		if !acked[e.ID] {
			t.Fatalf("delivered event %s (%s@%d) was never appended here", e.ID, e.Stream, e.Revision)
		}
	}
	if len(seen) != len(acked) {
		t.Fatalf("delivered %d distinct events, %d were acknowledged (a gap)", len(seen), len(acked))
	}
}

// testDeliveredIsReadable: a subscriber that acts on an event (the job engine
// re-reads the job's stream before a conditional append) must find it through
// ReadStream and Head — a store may not deliver an event its reads do not yet
// show. Checked inside the handler, under concurrent appends.
func testDeliveredIsReadable(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	const writers, perWriter = 4, 50
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	done := make(chan error, 1)
	var delivered int
	go func() {
		done <- s.SubscribeAll(ctx, h0, events.Filter{StreamPrefixes: []string{p}}, func(ctx context.Context, e events.RecordedEvent) error {
			got, err := s.ReadStream(ctx, e.Stream, e.Revision, 1, events.Forward)
			if err != nil || len(got) != 1 || got[0].ID != e.ID {
				return fmt.Errorf("delivered %s@%d (position %d) but ReadStream gives %d events, err %v", e.Stream, e.Revision, e.Position, len(got), err)
			}
			if h, err := s.Head(ctx); err != nil || h < e.Position {
				return fmt.Errorf("delivered position %d but Head is %d (err %v)", e.Position, h, err)
			}
			if delivered++; delivered == writers*perWriter {
				return errAllSeen
			}
			return nil
		})
	}()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := s.Append(ctx, fmt.Sprintf("%sw-%d", p, w), events.Any(), ev("Seen", i)); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := <-done; !errors.Is(err, errAllSeen) {
		t.Fatalf("subscription ended with %v after %d events", err, delivered)
	}
}

var errAllSeen = errors.New("all seen")

func testSubscribeExclusiveAfter(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "x"
	var pos []events.Position
	for i := range 10 {
		pos = append(pos, mustAppend(t, s, st, events.Any(), ev("X", i)).Position)
	}
	f := events.Filter{StreamPrefixes: []string{p}}
	sb := subscribe(t, s, pos[4], f)
	got := sb.waitCount(t, 5)
	if got[0].Position != pos[5] || got[0].Revision != 5 {
		t.Fatalf("after %d: first delivered is rev %d pos %d, want rev 5 pos %d", pos[4], got[0].Revision, got[0].Position, pos[5])
	}
	// From the newest position: nothing until something new arrives.
	tail := subscribe(t, s, pos[9], f)
	last := mustAppend(t, s, st, events.Exact(9), ev("X", 10))
	for _, b := range []*sub{sb, tail} {
		got := b.waitFor(t, "the new event", func(got []events.RecordedEvent) bool {
			return len(got) > 0 && got[len(got)-1].Position == last.Position
		})
		if got[0].Revision < 5 {
			t.Fatalf("delivered rev %d, before the start", got[0].Revision)
		}
		checkIncreasing(t, got)
	}
	if got := sb.events(); len(got) != 6 {
		t.Fatalf("subscription after rev 4 received %d events, want 6", len(got))
	}
	if got := tail.events(); len(got) != 1 || got[0].Revision != 10 {
		t.Fatalf("subscription after the head received %v, want only rev 10", revisions(got))
	}
}

// testSubscribeInvalidPosition: a start that is not an event's position
// fails at once with ErrInvalidPosition (a permanent error), instead of
// hanging or silently skipping: beyond the end (a checkpoint from a wiped
// log) and, where positions are not contiguous, between two events.
func testSubscribeInvalidPosition(t *testing.T, s events.Store) {
	p := prefix(t)
	res := mustAppend(t, s, p+"x", events.NoStream(), ev("X", 0), ev("X", 1), ev("X", 2))
	got := mustRead(t, s, p+"x", 0, 0, events.Forward)
	starts := map[string]events.Position{"beyond the end": res.Position + 1<<40}
	if got[1].Position-got[0].Position > 1 {
		starts["between two events"] = got[0].Position + 1
	}
	for what, after := range starts {
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		delivered := 0
		err := s.SubscribeAll(ctx, after, events.Filter{}, func(context.Context, events.RecordedEvent) error {
			delivered++
			return nil
		})
		cancel()
		if !errors.Is(err, events.ErrInvalidPosition) || !errors.Is(err, events.ErrPermanent) {
			t.Fatalf("subscribe from %s (%d): %v after %d events, want ErrInvalidPosition (and ErrPermanent)", what, after, err, delivered)
		}
		if delivered != 0 {
			t.Fatalf("subscribe from %s delivered %d events before failing", what, delivered)
		}
	}
	// Every event's own position is a valid start.
	for i, e := range got[:2] {
		sb := subscribe(t, s, e.Position, events.Filter{StreamPrefixes: []string{p}})
		if first := sb.waitCount(t, 2-i)[0]; first.Revision != uint64(i+1) {
			t.Fatalf("after rev %d: first delivered is rev %d", i, first.Revision)
		}
	}
}

// testMultiEventAppendPositions: every event of a multi-event append has a
// position of its own (KurrentDB gives one append's events a shared commit
// position; a store must not hand that out as the event's position), the
// positions increase strictly, an append's result is its last event's
// position, and subscribing after any one of them resumes exactly after it:
// the SSE hub, Last-Event-ID and the projectors' checkpoints rely on that.
func testMultiEventAppendPositions(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	appends := []struct {
		stream string
		n      int
	}{{p + "a", 1}, {p + "b", 3}, {p + "a", 1}, {p + "c", 2}, {p + "b", 4}, {p + "a", 1}}
	var ids []string
	var results []events.AppendResult
	for i, a := range appends {
		evs := make([]events.EventData, a.n)
		for j := range evs {
			evs[j] = ev("Multi", i*10+j)
			ids = append(ids, evs[j].ID)
		}
		results = append(results, mustAppend(t, s, a.stream, events.Any(), evs...))
	}
	sb := subscribe(t, s, h0, events.Filter{StreamPrefixes: []string{p}})
	all := sb.waitCount(t, len(ids))
	if len(all) != len(ids) {
		t.Fatalf("subscription delivered %d events, want %d", len(all), len(ids))
	}
	seen := map[events.Position]string{}
	for i, e := range all {
		if e.ID != ids[i] {
			t.Fatalf("event %d is %s, want %s (append order)", i, e.ID, ids[i])
		}
		if e.Position <= h0 {
			t.Fatalf("event %d at position %d, not after the head %d before the appends", i, e.Position, h0)
		}
		if other, dup := seen[e.Position]; dup {
			t.Fatalf("events %s and %s share position %d", other, e.ID, e.Position)
		}
		seen[e.Position] = e.ID
	}
	checkIncreasing(t, all)
	// An append's result is the position of its last event.
	k := 0
	for i, a := range appends {
		k += a.n
		if last := all[k-1]; results[i].Position != last.Position {
			t.Fatalf("append %d (%d events) answered position %d, its last event is at %d", i, a.n, results[i].Position, last.Position)
		}
	}
	// Stream reads report the same positions.
	for _, st := range []string{p + "a", p + "b", p + "c"} {
		for _, e := range mustRead(t, s, st, 0, 0, events.Forward) {
			if id, ok := seen[e.Position]; !ok || id != e.ID {
				t.Fatalf("%s@%d read at position %d, the subscription delivered %q there", st, e.Revision, e.Position, id)
			}
		}
	}
	if h := mustHead(t, s); h < all[len(all)-1].Position {
		t.Fatalf("Head %d is before the last event %d", h, all[len(all)-1].Position)
	}
	// Resuming after each position delivers exactly the events after it.
	for i := range all[:len(all)-1] {
		from := subscribe(t, s, all[i].Position, events.Filter{StreamPrefixes: []string{p}})
		want := len(all) - i - 1
		got := from.waitCount(t, want)
		for j, e := range got {
			if j >= want || e.ID != all[i+1+j].ID {
				t.Fatalf("after position %d (event %d): delivered %d events starting with %s@%d pos %d, want %d starting with %s@%d pos %d",
					all[i].Position, i, len(got), got[0].Stream, got[0].Revision, got[0].Position, want, all[i+1].Stream, all[i+1].Revision, all[i+1].Position)
			}
		}
		if err := from.stop(t); !errors.Is(err, context.Canceled) {
			t.Fatalf("subscription after %d ended with %v", all[i].Position, err)
		}
		if got := from.events(); len(got) != want {
			t.Fatalf("after position %d: %d events, want %d", all[i].Position, len(got), want)
		}
	}
}

func testSubscribeFilter(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	streams := []string{"slot-1", "job-1", "other-1", "slot-2", "job-2"}
	// Streams under p+"slot-", p+"job-" and p+"other-"; types Keep and Drop.
	appendAll := func() {
		for i, st := range streams {
			typ := "Keep"
			if i%2 == 1 {
				typ = "Drop"
			}
			mustAppend(t, s, p+st, events.Any(), ev(typ, i), ev("Keep", i))
		}
	}
	appendAll() // stored before the subscriptions start
	cases := []struct {
		name  string
		f     events.Filter
		match func(e events.RecordedEvent) bool
	}{
		{"prefix", events.Filter{StreamPrefixes: []string{p + "slot-"}},
			func(e events.RecordedEvent) bool { return strings.HasPrefix(e.Stream, p+"slot-") }},
		{"two prefixes", events.Filter{StreamPrefixes: []string{p + "slot-", p + "job-"}},
			func(e events.RecordedEvent) bool {
				return strings.HasPrefix(e.Stream, p+"slot-") || strings.HasPrefix(e.Stream, p+"job-")
			}},
		{"type and prefix", events.Filter{StreamPrefixes: []string{p}, EventTypes: []string{"Drop", "End"}},
			func(e events.RecordedEvent) bool { return e.Type == "Drop" || e.Type == "End" }},
		{"prefix and type", events.Filter{StreamPrefixes: []string{p + "job-"}, EventTypes: []string{"Keep"}},
			func(e events.RecordedEvent) bool { return strings.HasPrefix(e.Stream, p+"job-") && e.Type == "Keep" }},
	}
	subs := make([]*sub, len(cases))
	for i, c := range cases {
		subs[i] = subscribe(t, s, h0, c.f)
	}
	appendAll() // delivered live
	// Markers last, so that every filter has a final event to wait for.
	end := events.EventData{ID: uuid.NewString(), Type: "End", Data: []byte(`{}`)}
	mustAppend(t, s, p+"slot-end", events.Any(), end, ev("Keep", 0))
	end.ID = uuid.NewString()
	mustAppend(t, s, p+"job-end", events.Any(), end, ev("Keep", 0))
	streams = append(streams, "slot-end", "job-end")

	var all []events.RecordedEvent
	for _, st := range streams {
		all = append(all, mustRead(t, s, p+st, 0, 0, events.Forward)...)
	}
	slices.SortFunc(all, func(a, b events.RecordedEvent) int { return cmp.Compare(a.Position, b.Position) })
	for i, c := range cases {
		var want []string
		for _, e := range all {
			if c.match(e) {
				want = append(want, e.ID)
			}
		}
		last := want[len(want)-1]
		got := subs[i].waitFor(t, c.name+": its last matching event", func(got []events.RecordedEvent) bool {
			return len(got) > 0 && got[len(got)-1].ID == last
		})
		ids := make([]string, len(got))
		for j, e := range got {
			ids[j] = e.ID
			if !c.match(e) {
				t.Fatalf("%s: delivered %s %s which the filter excludes", c.name, e.Stream, e.Type)
			}
		}
		if !slices.Equal(ids, want) {
			t.Fatalf("%s: delivered %d events, want exactly the %d matching ones in order", c.name, len(ids), len(want))
		}
	}
}

// settle gives the store's own background goroutines (writer loops, gRPC
// connections) a chance to exist before a leak check snapshots them.
func settle(t *testing.T, s events.Store, stream string) {
	t.Helper()
	mustAppend(t, s, stream, events.Any(), ev("Warm", 0))
	mustHead(t, s)
	sb := subscribe(t, s, 0, events.Filter{StreamPrefixes: []string{stream}})
	sb.waitCount(t, 1)
	sb.stop(t)
}

func testSubscribeCancelLive(t *testing.T, s events.Store) {
	p := prefix(t)
	settle(t, s, p+"warm")
	ignore := goleak.IgnoreCurrent()

	h := mustHead(t, s)
	sb := subscribe(t, s, h, events.Filter{StreamPrefixes: []string{p}})
	mustAppend(t, s, p+"live", events.NoStream(), ev("L", 0))
	sb.waitCount(t, 1) // now it is live, waiting for commits
	start := time.Now()
	err := sb.stop(t)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled live subscription returned %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > WaitTimeout/3 {
		t.Fatalf("cancelled live subscription took %s to return", d)
	}
	goleak.VerifyNone(t, ignore)
}

func testSubscribeCancelCatchUp(t *testing.T, s events.Store) {
	p := prefix(t)
	settle(t, s, p+"warm")
	h0 := mustHead(t, s)
	batch := make([]events.EventData, 100)
	for i := range batch {
		batch[i] = ev("C", i)
	}
	mustAppend(t, s, p+"many", events.NoStream(), batch...)
	ignore := goleak.IgnoreCurrent()

	// The handler cancels at the 5th event; none may follow.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls, afterCancel := 0, 0
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(ctx, h0, events.Filter{StreamPrefixes: []string{p + "many"}}, func(context.Context, events.RecordedEvent) error {
			calls++
			if ctx.Err() != nil {
				afterCancel++
			}
			if calls == 5 {
				cancel()
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("subscription cancelled during catch-up returned %v, want context.Canceled", err)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("subscription cancelled during catch-up did not return")
	}
	if afterCancel != 0 {
		t.Fatalf("handler was called %d times after the context was cancelled", afterCancel)
	}

	// Already cancelled: returns at once without delivering.
	delivered := 0
	err := s.SubscribeAll(ctx, h0, events.Filter{}, func(context.Context, events.RecordedEvent) error { delivered++; return nil })
	if !errors.Is(err, context.Canceled) || delivered != 0 {
		t.Fatalf("subscription with a cancelled context: %v after %d events, want context.Canceled after 0", err, delivered)
	}
	goleak.VerifyNone(t, ignore)
}

func testSubscribeHandlerError(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	for i := range 10 {
		mustAppend(t, s, p+"h", events.Any(), ev("H", i))
	}
	boom := errors.New("handler boom")
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- s.SubscribeAll(context.Background(), h0, events.Filter{StreamPrefixes: []string{p}}, func(_ context.Context, e events.RecordedEvent) error {
			calls++
			if e.Revision == 3 {
				return fmt.Errorf("at 3: %w", boom)
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, boom) {
			t.Fatalf("subscription returned %v, want the handler's error", err)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("subscription did not end on the handler's error")
	}
	if calls != 4 {
		t.Fatalf("handler called %d times, want 4 (none after its error)", calls)
	}
}

// largeData is a JSON string payload of exactly n bytes.
func largeData(n int) []byte {
	b := bytes.Repeat([]byte("x"), n)
	b[0], b[n-1] = '"', '"'
	return b
}

func testLargeAndEmptyPayloads(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "big"
	big := ev("Big", 0)
	big.Meta = events.Metadata{Actor: "a"}
	big.Data = largeData(events.MaxEventSize - 1024)
	empty := ev("Empty", 0)
	empty.Data = nil
	emptyObj := ev("EmptyObject", 0)
	emptyObj.Data = []byte(`{}`)
	// One large event per append: KurrentDB's default append limit is 1 MiB.
	big2 := big
	big2.ID = uuid.NewString()
	start := mustHead(t, s) // an event's position (or 0): never computed
	res := mustAppend(t, s, st, events.NoStream(), big)
	res = mustAppend(t, s, st, events.Exact(res.NextExpected), empty, emptyObj)
	mustAppend(t, s, st, events.Exact(res.NextExpected), big2)
	got := mustRead(t, s, st, 0, 0, events.Forward)
	if len(got) != 4 {
		t.Fatalf("read %d events, want 4", len(got))
	}
	if !bytes.Equal(got[0].Data, big.Data) || !bytes.Equal(got[3].Data, big.Data) {
		t.Fatalf("large payload changed: %d bytes back, %d in", len(got[0].Data), len(big.Data))
	}
	if len(got[1].Data) != 0 {
		t.Fatalf("empty payload came back as %q", got[1].Data)
	}
	if string(got[2].Data) != `{}` {
		t.Fatalf("{} came back as %q", got[2].Data)
	}
	sb := subscribe(t, s, start, events.Filter{StreamPrefixes: []string{st}})
	sub := sb.waitCount(t, 4)
	if !bytes.Equal(sub[0].Data, big.Data) || len(sub[1].Data) != 0 {
		t.Fatal("subscription changed the large or the empty payload")
	}
	// Just over the limit: rejected, nothing written.
	h := mustHead(t, s)
	over := ev("Big", 1)
	over.Data = largeData(events.MaxEventSize + 1)
	_, err := s.Append(ctxT(t), st, events.Any(), over)
	if !errors.Is(err, events.ErrEventTooLarge) {
		t.Fatalf("oversize event: %v, want ErrEventTooLarge", err)
	}
	if n := streamLen(t, s, st); n != 4 || mustHead(t, s) != h {
		t.Fatalf("rejected oversize event changed the store: %d events", n)
	}
}

func testOddStreamNames(t *testing.T, s events.Store) {
	p := prefix(t)
	names := []string{
		p + "with spaces in it",
		p + "ünïcødé-流-🎉",
		p + "a/b/c",
		p + "a/b",
		p + "a",
		p + `quote"d'and\back`,
		p + "semi;colon,comma:colon?q=1&x#h%20",
		p + "../../etc/passwd",
		p + strings.Repeat("n", events.MaxStreamNameLen-len(p)),
	}
	for i, n := range names {
		mustAppend(t, s, n, events.NoStream(), ev("Odd", i), ev("Odd", i+100))
	}
	for i, n := range names {
		got := mustRead(t, s, n, 0, 0, events.Forward)
		if len(got) != 2 {
			t.Fatalf("%q: read %d events, want 2 (names that prefix each other must not mix)", n, len(got))
		}
		for _, e := range got {
			if e.Stream != n {
				t.Fatalf("%q came back as %q", n, e.Stream)
			}
		}
		if string(got[0].Data) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("%q holds %s", n, got[0].Data)
		}
		back := mustRead(t, s, n, math.MaxUint64, 1, events.Backward)
		if len(back) != 1 || back[0].Revision != 1 || back[0].Stream != n {
			t.Fatalf("%q backward: %+v", n, back)
		}
	}
	sb := subscribe(t, s, 0, events.Filter{StreamPrefixes: []string{p + "a"}})
	got := sb.waitCount(t, 6)
	for _, e := range got {
		if e.Stream != p+"a/b/c" && e.Stream != p+"a/b" && e.Stream != p+"a" {
			t.Fatalf("prefix %q delivered stream %q", p+"a", e.Stream)
		}
	}
}

func testInvalidInput(t *testing.T, s events.Store) {
	p := prefix(t)
	st := p + "valid"
	mustAppend(t, s, st, events.NoStream(), ev("A", 0))
	h := mustHead(t, s)
	ctx := ctxT(t)
	badType := func(typ string) []events.EventData {
		e := ev("A", 1)
		e.Type = typ
		return []events.EventData{ev("A", 1), e} // the valid first one must not be written either
	}
	badData := ev("A", 1)
	badData.Data = []byte(`{"n":`)
	tooMany := make([]events.EventData, events.MaxAppendEvents+1)
	for i := range tooMany {
		tooMany[i] = ev("A", i)
	}
	// Each event within MaxEventSize, together over MaxAppendSize (the
	// events share one payload, so this costs half a MiB).
	half := ev("A", 0)
	half.Data = largeData(events.MaxEventSize / 2)
	tooBig := make([]events.EventData, events.MaxAppendSize/(events.MaxEventSize/2)+1)
	for i := range tooBig {
		tooBig[i] = half
	}
	cases := []struct {
		name   string
		stream string
		evs    []events.EventData
		want   error
	}{
		{"empty stream", "", []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"system stream", "$all", []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"too long stream", p + strings.Repeat("x", events.MaxStreamNameLen), []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"invalid utf8", p + "\xff\xfe", []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"newline", p + "a\nb", []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"nul", p + "a\x00b", []events.EventData{ev("A", 1)}, events.ErrInvalidStream},
		{"empty type", st, badType(""), events.ErrInvalidEventType},
		{"digit first", st, badType("1Thing"), events.ErrInvalidEventType},
		{"space in type", st, badType("A Thing"), events.ErrInvalidEventType},
		{"unicode type", st, badType("Thïng"), events.ErrInvalidEventType},
		{"too long type", st, badType(strings.Repeat("T", events.MaxEventTypeLen+1)), events.ErrInvalidEventType},
		{"invalid json", st, []events.EventData{ev("A", 1), badData}, events.ErrInvalidData},
		{"too many events", st, tooMany, events.ErrEventTooLarge},
		{"append too large", st, tooBig, events.ErrEventTooLarge},
	}
	for _, c := range cases {
		for _, exp := range []events.ExpectedRevision{events.Any(), events.Exact(0)} {
			_, err := s.Append(ctx, c.stream, exp, c.evs...)
			if !errors.Is(err, c.want) {
				t.Fatalf("%s (%s): %v, want %v", c.name, exp, err, c.want)
			}
		}
	}
	if got := mustHead(t, s); got != h {
		t.Fatalf("rejected appends moved the head from %d to %d", h, got)
	}
	if n := streamLen(t, s, st); n != 1 {
		t.Fatalf("rejected appends changed %q: %d events, want 1", st, n)
	}
	_, err := s.ReadStream(ctx, "$all", 0, 0, events.Forward)
	if !errors.Is(err, events.ErrInvalidStream) {
		t.Fatalf("ReadStream of a system stream: %v, want ErrInvalidStream", err)
	}
}

func testHead(t *testing.T, s events.Store) {
	p := prefix(t)
	h0 := mustHead(t, s)
	res := mustAppend(t, s, p+"h", events.NoStream(), ev("H", 0), ev("H", 1))
	if res.Position <= h0 {
		t.Fatalf("append landed at %d, not after the head %d", res.Position, h0)
	}
	h1 := mustHead(t, s)
	if h1 < res.Position {
		t.Fatalf("Head %d is before the acknowledged append at %d", h1, res.Position)
	}
	if h0 == 0 && h1 != res.Position {
		// A store that was empty holds only our events.
		t.Fatalf("Head %d, want the last append's position %d", h1, res.Position)
	}
	res2 := mustAppend(t, s, p+"h", events.Exact(1), ev("H", 2))
	if h2 := mustHead(t, s); h2 < res2.Position || res2.Position <= res.Position {
		t.Fatalf("Head %d after appends at %d then %d", h2, res.Position, res2.Position)
	}
}

func testClose(t *testing.T, s events.Store) {
	p := prefix(t)
	mustAppend(t, s, p+"c", events.NoStream(), ev("C", 0))
	sb := subscribe(t, s, 0, events.Filter{StreamPrefixes: []string{p}})
	sb.waitCount(t, 1)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case err := <-sb.done:
		sb.done <- err
		if !errors.Is(err, events.ErrClosed) {
			t.Fatalf("subscription ended with %v at close, want ErrClosed", err)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("subscription did not end at close")
	}
	if _, err := s.Append(ctxT(t), p+"c", events.Any(), ev("C", 1)); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}
