package boltstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/slotkeeper/slotkeeper/events"
)

const crashAppenders = 4

// crashAppender is the child side of TestCrashKill9: crashAppenders
// goroutines append 1–3 events at a time to their own stream, fenced with
// Exact, and print one line per acknowledged append:
//
//	ACK <stream> <last revision> <position> <id>...
//
// It runs until it is killed.
func crashAppender(path string) {
	// A small flush interval, so that kills land before, during and after
	// the index is folded in, and the next Open rebuilds a tail.
	s, err := Open(path, Options{LockTimeout: 5 * time.Second, IndexFlushEvents: 50})
	if err != nil {
		fmt.Fprintln(os.Stderr, "crash child: open:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range crashAppenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("crash-%d", g)
			exp := events.NoStream()
			last, err := s.ReadStream(ctx, stream, math.MaxUint64, 1, events.Backward)
			switch {
			case err == nil:
				exp = events.Exact(last[0].Revision)
			case !errors.Is(err, events.ErrStreamNotFound):
				fmt.Fprintln(os.Stderr, "crash child: read:", err)
				os.Exit(2)
			}
			for i := 0; ; i++ {
				evs := make([]events.EventData, 1+i%3)
				ids := make([]string, len(evs))
				for j := range evs {
					ids[j] = uuid.NewString()
					evs[j] = events.EventData{ID: ids[j], Type: "Crashed", Data: []byte(fmt.Sprintf(`{"g":%d,"i":%d}`, g, i))}
				}
				res, err := s.Append(ctx, stream, exp, evs...)
				if err != nil {
					fmt.Fprintln(os.Stderr, "crash child: append:", err)
					os.Exit(2)
				}
				exp = events.Exact(res.NextExpected)
				line := fmt.Sprintf("ACK %s %d %d %s\n", stream, res.NextExpected, res.Position, strings.Join(ids, " "))
				out.Lock()
				os.Stdout.WriteString(line) // one write: a line is whole or absent
				out.Unlock()
			}
		}()
	}
	wg.Wait()
}

type ack struct {
	stream  string
	lastRev uint64
	pos     events.Position
	ids     []string
}

func parseAck(t *testing.T, line string) ack {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "ACK" {
		t.Fatalf("child printed %q", line)
	}
	rev, err1 := strconv.ParseUint(f[2], 10, 64)
	pos, err2 := strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("child printed %q", line)
	}
	return ack{stream: f[1], lastRev: rev, pos: events.Position(pos), ids: f[4:]}
}

// runAndKill starts the appender, SIGKILLs it after killAfter acknowledged
// appends and returns every acknowledgement it printed (complete lines only).
func runAndKill(t *testing.T, path string, killAfter int) []ack {
	t.Helper()
	cmd := child(t, "crash-appender", path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				// EOF: the process is gone. A line without its newline was
				// cut by the kill and acknowledged nothing.
				if err != io.EOF {
					t.Errorf("read child: %v", err)
				}
				return
			}
			lines <- l
		}
	}()
	var acks []ack
	deadline := time.After(60 * time.Second)
	killed := false
	for l := range lines {
		acks = append(acks, parseAck(t, l))
		if !killed && len(acks) >= killAfter {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			killed = true
		}
		select {
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("child acknowledged only %d appends in 60s", len(acks))
		default:
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited by itself after %d acks: %v", len(acks), err)
	}
	return acks
}

// TestCrashKill9 kills an appending process at random moments and checks
// after each kill that every acknowledged event survived, in order, that the
// log and the index agree, and that the store takes new appends.
func TestCrashKill9(t *testing.T) {
	path := t.TempDir() + "/events.db"
	const rounds = 20
	var acked []ack
	for round := range rounds {
		acks := runAndKill(t, path, 1+rand.IntN(120))
		acked = append(acked, acks...)

		s, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		verifyAfterCrash(t, s, acked)
		// Usable: a fenced append on top of whatever the child left. The
		// kill may land before crash-0's first append was committed (the
		// four appenders race; a kill after one acknowledgement may find
		// only another stream's): then the stream is new.
		exp, want := events.NoStream(), uint64(0)
		last, err := s.ReadStream(ctxT(t), "crash-0", math.MaxUint64, 1, events.Backward)
		switch {
		case err == nil:
			exp, want = events.Exact(last[0].Revision), last[0].Revision+1
		case errors.Is(err, events.ErrStreamNotFound):
			if slices.ContainsFunc(acked, func(a ack) bool { return a.stream == "crash-0" }) {
				t.Fatalf("round %d: crash-0 had acknowledged appends and is gone", round)
			}
		default:
			t.Fatalf("round %d: %v", round, err)
		}
		res, err := s.Append(ctxT(t), "crash-0", exp, events.EventData{Type: "AfterCrash", Data: []byte(`{}`)})
		if err != nil || res.NextExpected != want {
			t.Fatalf("round %d: append after crash: %+v %v", round, res, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d rounds, %d acknowledged appends survived", rounds, len(acked))
}

func verifyAfterCrash(t *testing.T, s *Store, acked []ack) {
	t.Helper()
	ctx := ctxT(t)
	head, err := s.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The whole log decodes, positions are 1..head without a hole, and each
	// stream's revisions count up from 0 in log order.
	byID := map[string]events.RecordedEvent{}
	nextRev := map[string]uint64{}
	want := events.Position(1)
	err = s.SubscribeAll(ctx, 0, events.Filter{}, func(_ context.Context, e events.RecordedEvent) error {
		if e.Position != want {
			return fmt.Errorf("position %d follows %d", e.Position, want-1)
		}
		if e.Revision != nextRev[e.Stream] {
			return fmt.Errorf("%s: revision %d at position %d, want %d", e.Stream, e.Revision, e.Position, nextRev[e.Stream])
		}
		nextRev[e.Stream]++
		byID[e.ID] = e
		want++
		if e.Position == head {
			return errDone
		}
		return nil
	})
	if head > 0 && !errors.Is(err, errDone) {
		t.Fatalf("scan of the log after a crash: %v", err)
	}
	// Every acknowledged event is there, where the acknowledgement said.
	for _, a := range acked {
		for j, id := range a.ids {
			e, ok := byID[id]
			if !ok {
				t.Fatalf("acknowledged event %s (%s@%d, position %d) lost", id, a.stream, a.lastRev, a.pos)
			}
			back := len(a.ids) - 1 - j
			if e.Stream != a.stream || e.Revision != a.lastRev-uint64(back) || e.Position != a.pos-events.Position(back) {
				t.Fatalf("acknowledged event %s at %s@%d pos %d, found at %s@%d pos %d", id, a.stream, a.lastRev-uint64(back), a.pos-events.Position(back), e.Stream, e.Revision, e.Position)
			}
		}
	}
	// The per-stream index agrees with the log.
	for stream, n := range nextRev {
		got, err := s.ReadStream(ctx, stream, 0, 0, events.Forward)
		if err != nil || uint64(len(got)) != n {
			t.Fatalf("%s: index holds %d events, log %d: %v", stream, len(got), n, err)
		}
		for _, e := range got {
			if byID[e.ID].Position != e.Position {
				t.Fatalf("%s@%d: index says position %d, log %d", stream, e.Revision, e.Position, byID[e.ID].Position)
			}
		}
	}
}

var errDone = errors.New("done")
