package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// The auth-sessions stream grows with every sign-in and every recorded
// activity (one SessionActive per active session per recording interval:
// about 30 a day per person), while what the directory keeps of it is only
// the live sessions. So that a start does not read the stream's whole
// history (issue 13), the directory checkpoints its session fold
// (backend/consumer; consumer "auth-sessions") every SessionsCheckpointEvery
// session events it applied, and Open reads the stream only after the
// newest usable checkpoint. Users and tokens are few and are read whole.
const (
	sessionsConsumer = "auth-sessions"
	sessionsVersion  = 1
	// DefaultSessionsCheckpointEvery is Options.SessionsCheckpointEvery's
	// default.
	DefaultSessionsCheckpointEvery = 1000
)

// sessionsCheckpoint is the session fold at the stream's revision Rev,
// the event at log position Position.
type sessionsCheckpoint struct {
	Rev      int64       `json:"rev"`
	Sessions []cpSession `json:"sessions"`
}

// cpSession is one session as the events alone say it: its last activity
// is the last one recorded (a local use not yet recorded is not in the
// log, so a fold from the start would not know it either).
type cpSession struct {
	Hash     string    `json:"hash"`
	ID       string    `json:"id"`
	UserID   string    `json:"user_id"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
	Recorded int64     `json:"recorded"`
}

// loadSessionsCheckpoint fills the session fold from the newest usable
// checkpoint. One that does not match the stream (the event at its
// revision is not at its position: another log, a restored store) is
// ignored and the stream is read from the start. Only a store that cannot
// be read is an error.
func (d *Directory) loadSessionsCheckpoint(ctx context.Context) error {
	var cp sessionsCheckpoint
	pos, ok, why, err := consumer.LoadCheckpoint(ctx, d.store, sessionsConsumer, sessionsVersion, &cp)
	if err != nil || (!ok && why == "") {
		return err
	}
	if ok && cp.Rev >= 0 {
		evs, err := d.store.ReadStream(ctx, events.AuthSessionsStream, uint64(cp.Rev), 1, events.Forward)
		switch {
		case err != nil && !errors.Is(err, events.ErrStreamNotFound):
			return fmt.Errorf("auth: read %s: %w", events.AuthSessionsStream, err)
		case len(evs) == 1 && evs[0].Revision == uint64(cp.Rev) && evs[0].Position == pos:
		default:
			ok, why = false, fmt.Sprintf("the stream has no event %d at position %d", cp.Rev, pos)
		}
	}
	if !ok {
		d.opt.Logger.Warn("auth: sessions checkpoint ignored, reading the stream from the start", "why", why)
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range cp.Sessions {
		s := &session{id: c.ID, userID: c.UserID, created: c.Created, expires: c.Expires}
		s.lastSeen.Store(c.Recorded)
		s.recorded.Store(c.Recorded)
		d.sessions[c.Hash] = s
		d.sessByID[c.ID] = c.Hash
	}
	d.rev[events.AuthSessionsStream] = cp.Rev
	d.sessPos = pos
	return nil
}

// noteSessionEvent counts a session event applied and wakes the saver
// once a checkpoint's worth accumulated. d.mu is held.
func (d *Directory) noteSessionEvent(pos events.Position) {
	d.sessPos = pos
	d.sessSince++
	if d.sessSince >= d.opt.SessionsCheckpointEvery {
		select {
		case d.saveSessions <- struct{}{}:
		default:
		}
	}
}

// saveSessionsCheckpoints writes a checkpoint each time noteSessionEvent
// asks, until ctx ends. It never holds d.mu while it appends.
func (d *Directory) saveSessionsCheckpoints(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.saveSessions:
		}
		d.mu.Lock()
		cp := sessionsCheckpoint{Rev: d.rev[events.AuthSessionsStream], Sessions: make([]cpSession, 0, len(d.sessions))}
		pos, since := d.sessPos, d.sessSince
		for h, s := range d.sessions {
			cp.Sessions = append(cp.Sessions, cpSession{Hash: h, ID: s.id, UserID: s.userID, Created: s.created, Expires: s.expires, Recorded: s.recorded.Load()})
		}
		d.sessSince = 0
		d.mu.Unlock()
		if pos == 0 {
			continue
		}
		if err := consumer.SaveCheckpoint(ctx, d.store, sessionsConsumer, sessionsVersion, pos, cp); err != nil {
			if ctx.Err() == nil {
				d.opt.Logger.Warn("auth: sessions checkpoint not written", "err", err)
			}
			d.mu.Lock()
			d.sessSince += since // try again with the next event
			d.mu.Unlock()
		}
	}
}

// runSaver runs saveSessionsCheckpoints for the duration of Follow.
func (d *Directory) runSaver(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); d.saveSessionsCheckpoints(ctx) }()
	return func() { cancel(); wg.Wait() }
}
