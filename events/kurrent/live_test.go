package kurrent_test

import (
	"context"
	"errors"
	"flag"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/storetest"
)

// live is set by `make test-live-kurrent`: the live tests then fail, not
// skip, when SLOTKEEPER_LIVE_KURRENTDB is unset.
var live = flag.Bool("live", false, "require a real KurrentDB node (SLOTKEEPER_LIVE_KURRENTDB)")

// liveConn is the connection string of a real node, or the test ends.
func liveConn(t *testing.T) string {
	t.Helper()
	c := os.Getenv("SLOTKEEPER_LIVE_KURRENTDB")
	switch {
	case c == "" && *live:
		t.Fatal("SLOTKEEPER_LIVE_KURRENTDB is not set: name a KurrentDB node (docs/kurrent.md, The live suite)")
	case c == "":
		t.Skip("SLOTKEEPER_LIVE_KURRENTDB not set (make test-live-kurrent runs this against a real node)")
	}
	return c
}

// The store conformance suite against a real KurrentDB node: the same cases
// as for bolt, memory and the fake, on a node that may hold other data.
func TestLiveConformance(t *testing.T) {
	conn := liveConn(t)
	storetest.Run(t, func(t *testing.T) events.Store {
		return openConn(t, conn, kurrent.Options{Logger: quiet})
	})
}

// When the connection string names the server's append limit
// (maxAppendSize) and it is small enough to exceed within one Slotkeeper
// append, an adapter that does not know it still reports the server's
// mid-stream refusal as ErrEventTooLarge, at once.
func TestLiveServerSizeRefusal(t *testing.T) {
	conn := liveConn(t)
	base, query, _ := strings.Cut(conn, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	limit := 0
	for k, v := range q {
		if strings.EqualFold(k, "maxAppendSize") {
			limit, _ = strconv.Atoi(v[0])
			delete(q, k)
		}
	}
	if limit == 0 || limit > events.MaxAppendSize/2 {
		t.Skipf("maxAppendSize %d: not set, or beyond what one Slotkeeper append can exceed", limit)
	}
	unknowing := base
	if len(q) > 0 {
		unknowing += "?" + q.Encode()
	}
	s := openConn(t, unknowing, kurrent.Options{Logger: quiet})
	n := limit/(512<<10) + 2
	evs := make([]events.EventData, n)
	for i := range evs {
		evs[i] = ev("Big", i)
		evs[i].Data = []byte(`"` + strings.Repeat("x", 512<<10) + `"`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	stream := "live-big-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := s.Append(ctx, stream, events.NoStream(), evs...); !errors.Is(err, events.ErrEventTooLarge) {
		t.Fatalf("%d × 512 KiB over the server's %d: %v, want ErrEventTooLarge", n, limit, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the refusal took %s", d)
	}
	if _, err := s.ReadStream(ctx, stream, 0, 0, events.Forward); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("the refused append wrote something: %v", err)
	}
}
