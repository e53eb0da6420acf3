package kurrentfake_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
)

// These check the fake's claims about KurrentDB through the real client,
// without the adapter (each claim's source is cited in fake.go).

func client(t *testing.T) (*kurrentfake.Server, *esdb.Client) {
	t.Helper()
	f, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cfg, err := esdb.ParseConnectionString(f.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(esdb.LogLevel, string, ...any) {}
	c, err := esdb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return f, c
}

func evd(id uuid.UUID) esdb.EventData {
	return esdb.EventData{EventID: id, EventType: "E", ContentType: esdb.ContentTypeJson, Data: []byte(`{}`)}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestSelfCommittedPositionsAndAnswer(t *testing.T) {
	_, c := client(t)
	wr, err := c.AppendToStream(ctx(t), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, evd(uuid.New()), evd(uuid.New()), evd(uuid.New()))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := c.ReadStream(ctx(t), "s", esdb.ReadStreamOptions{From: esdb.Start{}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var last esdb.Position
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := ev.OriginalEvent().Position
		if p.Commit != p.Prepare || p.Commit <= last.Commit {
			t.Fatalf("position %v after %v: want (p, p), growing", p, last)
		}
		last = p
	}
	if wr.CommitPosition != last.Commit || wr.PreparePosition != last.Prepare {
		t.Fatalf("append answered %d/%d, the last event is at %v", wr.CommitPosition, wr.PreparePosition, last)
	}
}

func TestInvalidAndBeyondEndPositions(t *testing.T) {
	_, c := client(t)
	wr, err := c.AppendToStream(ctx(t), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.NoStream{}}, evd(uuid.New()))
	if err != nil {
		t.Fatal(err)
	}
	p := wr.CommitPosition
	sub, err := c.SubscribeToAll(ctx(t), esdb.SubscribeToAllOptions{From: esdb.Position{Commit: p - 1, Prepare: p - 1}})
	if err != nil {
		t.Fatal(err)
	}
	ev := sub.Recv()
	if ev.SubscriptionDropped == nil || status.Code(ev.SubscriptionDropped.Error) != codes.InvalidArgument ||
		!strings.Contains(ev.SubscriptionDropped.Error.Error(), "Trying to read from an invalid position.") {
		t.Fatalf("subscription from inside a record: %+v, want InvalidArgument", ev)
	}
	sub.Close()

	// Beyond the end: live at once, and events up to the start are skipped
	// without a word; the first delivered is the first one past it.
	far := p + 4096
	sub, err = c.SubscribeToAll(ctx(t), esdb.SubscribeToAllOptions{From: esdb.Position{Commit: far, Prepare: far}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if ev := sub.Recv(); ev.CaughtUp == nil {
		t.Fatalf("first message %+v, want caught-up", ev)
	}
	big := evd(uuid.New())
	big.Data = []byte(`"` + strings.Repeat("x", 5000) + `"`)
	var past esdb.Position
	for _, e := range []esdb.EventData{evd(uuid.New()), big, evd(uuid.New())} {
		wr, err := c.AppendToStream(ctx(t), "s", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, e)
		if err != nil {
			t.Fatal(err)
		}
		past = esdb.Position{Commit: wr.CommitPosition, Prepare: wr.PreparePosition}
	}
	if past.Commit <= far {
		t.Fatalf("the last event at %v is not past the start %d", past, far)
	}
	for {
		ev := sub.Recv()
		if ev.SubscriptionDropped != nil {
			t.Fatal(ev.SubscriptionDropped.Error)
		}
		if ev.EventAppeared != nil {
			if got := ev.EventAppeared.OriginalEvent().Position; got != past {
				t.Fatalf("first delivered at %v, want the first past the start, %v", got, past)
			}
			break
		}
	}
}

func TestAnyIdempotencyIsLostOnRestart(t *testing.T) {
	f, c := client(t)
	id := uuid.New()
	opts := esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}
	for range 2 {
		if _, err := c.AppendToStream(ctx(t), "any", opts, evd(id)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.Len(); n != 1 {
		t.Fatalf("a re-sent Any append wrote %d events, want 1 (the id cache)", n)
	}
	exact := uuid.New()
	if _, err := c.AppendToStream(ctx(t), "any", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(0)}, evd(exact)); err != nil {
		t.Fatal(err)
	}
	f.Stop()
	if err := f.Restart(); err != nil {
		t.Fatal(err)
	}
	// The client reconnects by itself after a restart only on a new call;
	// a failed first call is fine here. Each call waits for the client's
	// own reconnection (with its delay), so the calls themselves are the
	// wait: no sleep, and a bound only a node that never comes back
	// reaches (before: 50 tries 20 ms apart, a second a loaded machine's
	// reconnection could overrun).
	var err error
	tries := 0
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		tries++
		if _, err = c.AppendToStream(ctx(t), "any", opts, evd(id)); err == nil {
			break
		}
	}
	t.Logf("appended again after %d tries", tries)
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Len(); n != 3 {
		t.Fatalf("after a restart the re-sent Any append left %d events, want 3 (written again)", n)
	}
	// Exact finds its copy at any depth, restart or not.
	if _, err := c.AppendToStream(ctx(t), "any", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Revision(0)}, evd(exact)); err != nil {
		t.Fatalf("re-sent Exact append: %v", err)
	}
	if n := f.Len(); n != 3 {
		t.Fatalf("the re-sent Exact append wrote again: %d events", n)
	}
}

func TestSizeLimitsOfTheClaimedVersion(t *testing.T) {
	f, c := client(t)
	big := evd(uuid.New())
	big.Data = []byte(`"` + strings.Repeat("x", 1<<20) + `"`)
	if _, err := c.AppendToStream(ctx(t), "big", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, big); err != nil {
		t.Fatalf("1 MiB on 26.1: %v", err)
	}
	f.SetVersion(kurrentfake.V25_0)
	big.EventID = uuid.New()
	_, err := c.AppendToStream(ctx(t), "big", esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, big)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Maximum Append Size of 1048576 Exceeded.") {
		t.Fatalf("1 MiB on 25.0: %v, want InvalidArgument Maximum Append Size", err)
	}
}
