package auth

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// readLog records from where the sessions stream is read, and can hide the
// checkpoints (a start that folds the stream from the beginning).
type readLog struct {
	events.Store
	hideCheckpoints bool
	sessionsFrom    []uint64
}

func (r *readLog) ReadStream(ctx context.Context, stream string, from events.Revision, max int, dir events.Direction) ([]events.RecordedEvent, error) {
	if stream == events.CheckpointStream(sessionsConsumer) && r.hideCheckpoints {
		return nil, events.ErrStreamNotFound
	}
	if stream == events.AuthSessionsStream && dir == events.Forward && max == 0 {
		r.sessionsFrom = append(r.sessionsFrom, from)
	}
	return r.Store.ReadStream(ctx, stream, from, max, dir)
}

// foldOf is a directory's session fold, comparable.
func foldOf(d *Directory) map[string]string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := map[string]string{}
	for h, s := range d.sessions {
		out[h] = fmt.Sprintf("%s %s %s %s %d", s.id, s.userID, s.created, s.expires, s.recorded.Load())
	}
	out["rev"] = fmt.Sprint(d.rev[events.AuthSessionsStream])
	return out
}

// waitCheckpoint waits until the sessions checkpoint stream holds n events.
func waitCheckpoint(t *testing.T, store events.Store, n int) events.RecordedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last events.RecordedEvent
	seen := 0
	err := store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.CheckpointStream(sessionsConsumer)}}, func(_ context.Context, ev events.RecordedEvent) error {
		if seen++; seen >= n {
			last = ev
			cancel()
		}
		return nil
	})
	if seen < n {
		t.Fatalf("%d sessions checkpoints, want %d (%v)", seen, n, err)
	}
	return last
}

// TestSessionsStartFromTheirCheckpoint: a start reads the auth-sessions
// stream only after the newest checkpoint, and its session fold equals one
// read from the stream's beginning: live sessions accepted with the same
// CSRF token, ended ones refused, activity kept. A checkpoint that does not
// match the stream is ignored.
func TestSessionsStartFromTheirCheckpoint(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New()
	defer store.Close()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg := Config{Now: clk.Now, Sessions: SessionOptions{Idle: time.Hour, Absolute: 24 * time.Hour}}
	dA, err := Open(ctx, store, Options{Argon2: testArgon2, Now: clk.Now, SessionsCheckpointEvery: 5})
	if err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- dA.Follow(ctx) }()
	if _, _, err := dA.CreateUser(ctx, admin, "bob", RoleOperator, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	a := NewService(dA, cfg)
	login := func() (sid, csrf string) {
		t.Helper()
		_, sid, csrf, err := a.Login(ctx, "bob", "correct horse battery", "10.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		return sid, csrf
	}
	var sids, csrfs []string
	for range 4 {
		sid, csrf := login()
		sids, csrfs = append(sids, sid), append(csrfs, csrf)
	}
	if err := a.Sessions.End(ctx, sids[0], "logout"); err != nil { // event 5: a checkpoint
		t.Fatal(err)
	}
	waitCheckpoint(t, store, 1)
	// After the checkpoint: activity, another end, a new session.
	clk.Add(20 * time.Minute)
	if _, _, ok := a.SessionSubject(ctx, sids[2]); !ok {
		t.Fatal("live session refused")
	}
	if err := a.Sessions.End(ctx, sids[1], "logout"); err != nil {
		t.Fatal(err)
	}
	sid, csrf := login()
	sids, csrfs = append(sids, sid), append(csrfs, csrf)

	check := func(t *testing.T, d *Directory) {
		t.Helper()
		s := NewService(d, cfg)
		for i, sid := range sids {
			_, sess, ok := s.SessionSubject(ctx, sid)
			if want := i > 1; ok != want || (ok && sess.CSRF != csrfs[i]) {
				t.Fatalf("session %d after a restart: accepted %v (want %v), csrf ok %v", i, ok, want, sess.CSRF == csrfs[i])
			}
		}
	}
	fromCP := &readLog{Store: store}
	dB, err := Open(ctx, fromCP, Options{Argon2: testArgon2, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	full := &readLog{Store: store, hideCheckpoints: true}
	dC, err := Open(ctx, full, Options{Argon2: testArgon2, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if len(fromCP.sessionsFrom) != 1 || fromCP.sessionsFrom[0] != 5 || full.sessionsFrom[0] != 0 {
		t.Fatalf("the sessions stream was read from %v with the checkpoint (want [5]) and from %v without", fromCP.sessionsFrom, full.sessionsFrom)
	}
	if b, c := foldOf(dB), foldOf(dC); fmt.Sprint(b) != fmt.Sprint(c) {
		t.Fatalf("fold from the checkpoint\n%v\nfold from the start\n%v", b, c)
	}
	check(t, dB)
	check(t, dC)

	// A checkpoint naming an event the stream does not hold at that
	// position (another log's) is ignored.
	if _, err := store.Append(ctx, events.CheckpointStream(sessionsConsumer), events.Any(), events.New(events.ConsumerCheckpointed{
		Consumer: sessionsConsumer, Position: 2, Version: sessionsVersion, State: `{"rev":3,"sessions":[]}`,
	}, events.Metadata{Actor: "system:test"})); err != nil {
		t.Fatal(err)
	}
	bad := &readLog{Store: store}
	dD, err := Open(ctx, bad, Options{Argon2: testArgon2, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if bad.sessionsFrom[0] != 0 {
		t.Fatalf("a checkpoint of another log was used: read from %v", bad.sessionsFrom)
	}
	check(t, dD)
	cancel()
	if err := <-followed; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
