package ndjson_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/kurrent"
	"github.com/slotkeeper/slotkeeper/events/kurrent/kurrentfake"
	"github.com/slotkeeper/slotkeeper/events/ndjson"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func openBolt(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "events.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openKurrent(t *testing.T) events.Store {
	t.Helper()
	f, err := kurrentfake.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := kurrent.Open(ctxT(t), f.ConnString(), kurrent.Options{Logger: quiet, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fill appends a history of several interleaved streams, some appends
// carrying several events, with metadata and an empty payload among them.
func fill(t *testing.T, s events.Store, n int) {
	t.Helper()
	ctx := ctxT(t)
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	revs := map[string]int{}
	for i := 0; i < n; i++ {
		stream := fmt.Sprintf("slot-s%d", i%3)
		if i%5 == 0 {
			stream = fmt.Sprintf("job-%d", i)
		}
		k := 1 + i%3
		evs := make([]events.EventData, k)
		for j := range evs {
			data := json.RawMessage(fmt.Sprintf(`{"i":%d,"j":%d,"s":"안녕 <&>"}`, i, j))
			if (i+j)%7 == 0 {
				data = nil
			}
			evs[j] = events.EventData{Type: "TestEvent", Data: data, Meta: events.Metadata{Actor: "alice", CorrelationID: fmt.Sprintf("req-%d", i), Time: at.Add(time.Duration(i) * time.Second), Schema: 1}}
		}
		exp := events.NoStream()
		if n := revs[stream]; n > 0 {
			exp = events.Exact(events.Revision(n - 1))
		}
		if _, err := s.Append(ctx, stream, exp, evs...); err != nil {
			t.Fatal(err)
		}
		revs[stream] += k
	}
}

func export(t *testing.T, s events.Store, o ndjson.ExportOptions) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := ndjson.Export(ctxT(t), s, &b, o); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestExportImportExportIsByteIdentical(t *testing.T) {
	src := openBolt(t)
	fill(t, src, 60)
	first := export(t, src, ndjson.ExportOptions{})
	if got := bytes.Count(first, []byte("\n")); got < 100 {
		t.Fatalf("export has %d lines", got)
	}
	dst := openBolt(t)
	res, err := ndjson.Import(ctxT(t), dst, bytes.NewReader(first), ndjson.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if second := export(t, dst, ndjson.ExportOptions{}); !bytes.Equal(first, second) {
		t.Fatalf("export → import → export differs (%d events imported)", res.Events)
	}
}

func TestExportIsResumableAndFiltered(t *testing.T) {
	s := openBolt(t)
	fill(t, s, 30)
	all := export(t, s, ndjson.ExportOptions{})
	lines := strings.SplitAfter(string(all), "\n")
	lines = lines[:len(lines)-1]
	var mid ndjson.Line
	json.Unmarshal([]byte(lines[20]), &mid)
	head := export(t, s, ndjson.ExportOptions{To: mid.Position})
	rest := export(t, s, ndjson.ExportOptions{From: mid.Position})
	if string(head)+string(rest) != string(all) {
		t.Fatal("an export up to P followed by an export from P is not the whole export")
	}
	for _, l := range strings.Split(strings.TrimSpace(string(export(t, s, ndjson.ExportOptions{StreamPrefix: "job-"}))), "\n") {
		if !strings.Contains(l, `"stream":"job-`) {
			t.Fatalf("--stream job- exported %s", l)
		}
	}
	if _, err := ndjson.Export(ctxT(t), s, io.Discard, ndjson.ExportOptions{From: 10, To: 5}); !errors.Is(err, ndjson.ErrBadRange) {
		t.Fatalf("from > to: %v", err)
	}
}

func TestImportRefusesWhatItCannotReproduce(t *testing.T) {
	s := openBolt(t)
	fill(t, s, 10)
	all := export(t, s, ndjson.ExportOptions{})
	if _, err := ndjson.Import(ctxT(t), s, bytes.NewReader(all), ndjson.ImportOptions{}); !errors.Is(err, ndjson.ErrNotEmpty) {
		t.Fatalf("import into a non-empty store: %v", err)
	}
	// A filtered export has gaps: without --renumber the positions cannot be kept.
	jobs := export(t, s, ndjson.ExportOptions{StreamPrefix: "job-"})
	if _, err := ndjson.Import(ctxT(t), openBolt(t), bytes.NewReader(jobs), ndjson.ImportOptions{}); !errors.Is(err, ndjson.ErrMismatch) {
		t.Fatalf("gapped positions without renumber: %v", err)
	}
	if _, err := ndjson.Import(ctxT(t), openBolt(t), bytes.NewReader(jobs), ndjson.ImportOptions{Renumber: true}); err != nil {
		t.Fatalf("gapped positions with renumber: %v", err)
	}
	// A revision that does not follow.
	var l ndjson.Line
	json.Unmarshal(all[:bytes.IndexByte(all, '\n')], &l)
	l.Revision = 3
	bad, _ := json.Marshal(l)
	if _, err := ndjson.Import(ctxT(t), openBolt(t), bytes.NewReader(append(bad, '\n')), ndjson.ImportOptions{Renumber: true}); !errors.Is(err, ndjson.ErrMismatch) {
		t.Fatalf("revision gap: %v", err)
	}
	if _, err := ndjson.Import(ctxT(t), openBolt(t), strings.NewReader("{\"position\":1,\n"), ndjson.ImportOptions{}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("malformed line: %v", err)
	}
}

// TestMoveThroughKurrentAndBack moves a log from the embedded store into
// KurrentDB (the gRPC fake the real client talks to) and back: order,
// streams, revisions, payloads and metadata survive; positions are
// renumbered by each store and come back equal on the embedded store.
func TestMoveThroughKurrentAndBack(t *testing.T) {
	src := openBolt(t)
	fill(t, src, 25)
	first := export(t, src, ndjson.ExportOptions{})
	k := openKurrent(t)
	if _, err := ndjson.Import(ctxT(t), k, bytes.NewReader(first), ndjson.ImportOptions{}); !errors.Is(err, ndjson.ErrMismatch) {
		t.Fatalf("positions cannot be kept across store kinds, want ErrMismatch: %v", err)
	}
	k = openKurrent(t)
	if _, err := ndjson.Import(ctxT(t), k, bytes.NewReader(first), ndjson.ImportOptions{Renumber: true}); err != nil {
		t.Fatal(err)
	}
	viaK := export(t, k, ndjson.ExportOptions{})
	back := openBolt(t)
	if _, err := ndjson.Import(ctxT(t), back, bytes.NewReader(viaK), ndjson.ImportOptions{Renumber: true}); err != nil {
		t.Fatal(err)
	}
	if again := export(t, back, ndjson.ExportOptions{}); !bytes.Equal(first, again) {
		t.Fatal("bolt → kurrent → bolt changed the log")
	}
}
