package memory

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// A snapshot is the read model's memory written to a file with the
// position it is exact at, so that a restart loads it and catches up from
// there instead of replaying the whole log. It is a cache: LoadSnapshot
// checks it against the log and a damaged, foreign or stale one is
// ignored (the caller starts empty and replays, as without one).
//
// The file is a header line "slotkeeper-readmodel <version> sha256=<hex of
// the body>" and a JSON body. It is written to a temporary file, synced and
// renamed, so a crash leaves the old snapshot or the new one.
const snapshotVersion = 1

const snapshotMagic = "slotkeeper-readmodel"

type snapshotBody struct {
	Position events.Position `json:"position"`
	// EventID is the id of the event at Position: it ties the snapshot to
	// this log (a restored or replaced store has other ids).
	EventID      string                   `json:"event_id"`
	Slots        []*projections.SlotView  `json:"slots"`
	Jobs         []*projections.JobView   `json:"jobs"`
	Refs         []snapshotRef            `json:"refs"`
	Finished     []string                 `json:"finished"`
	Audit        []projections.AuditEntry `json:"audit"`
	AuditDropped bool                     `json:"audit_dropped"`
}

type snapshotRef struct {
	ID     string          `json:"id"`
	Slot   string          `json:"slot"`
	Kind   string          `json:"kind"`
	Queued events.Position `json:"queued"`
}

// WriteSnapshot writes the read model to path (atomically: a temporary
// file beside it, synced, then renamed) and returns the position it holds.
// An empty read model writes nothing.
func (s *Store) WriteSnapshot(ctx context.Context, path string) (events.Position, error) {
	s.mu.RLock()
	pos := s.pos
	if pos == 0 {
		s.mu.RUnlock()
		return 0, nil
	}
	b := snapshotBody{Position: pos, AuditDropped: s.audit.dropped, Finished: slices.Clone(s.finished[s.fhead:])}
	for _, v := range s.slots {
		b.Slots = append(b.Slots, v)
	}
	for _, v := range s.jobs {
		b.Jobs = append(b.Jobs, v)
	}
	for id, r := range s.refs {
		b.Refs = append(b.Refs, snapshotRef{ID: id, Slot: r.slot, Kind: r.kind, Queued: r.queued})
	}
	b.Audit = make([]projections.AuditEntry, 0, s.audit.n)
	for i := 0; i < s.audit.n; i++ {
		b.Audit = append(b.Audit, *s.audit.at(i))
	}
	// Views are never modified once stored, so they can be encoded after
	// the lock is released.
	s.mu.RUnlock()
	id, err := eventIDAt(ctx, s.log, pos)
	if err != nil {
		return 0, err
	}
	b.EventID = id
	body, err := json.Marshal(b)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256(body)
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriter(tmp)
	fmt.Fprintf(w, "%s %d sha256=%s\n", snapshotMagic, snapshotVersion, hex.EncodeToString(sum[:]))
	_, _ = w.Write(body)
	if err := w.Flush(); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return pos, nil
}

// errNoEvent says the log has no event at a snapshot's position.
var errNoEvent = errors.New("no event at that position")

// eventIDAt returns the id of the event at position pos.
func eventIDAt(ctx context.Context, log projections.Log, pos events.Position) (string, error) {
	if log == nil {
		return "", errors.New("memory: a snapshot needs the log")
	}
	head, err := log.Head(ctx)
	if err != nil {
		return "", err
	}
	if pos == 0 || pos > head {
		return "", errNoEvent
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	id := ""
	err = log.SubscribeAll(ctx, pos-1, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		if ev.Position == pos {
			id = ev.ID
		}
		cancel()
		return nil
	})
	if id != "" {
		return id, nil
	}
	if err == nil || errors.Is(err, context.Canceled) {
		return "", errNoEvent
	}
	return "", err
}

// LoadSnapshot fills an empty read model from the snapshot at path. It
// returns the position loaded, or 0 and the reason the snapshot was not
// used: missing, damaged (header, checksum, JSON), of another version, or
// not of this log (its position past the head, or the event there has
// another id). Only a log that cannot be read is an error. The read model
// must be new (nothing applied).
func (s *Store) LoadSnapshot(ctx context.Context, path string) (events.Position, string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "no snapshot", nil
	}
	if err != nil {
		return 0, "cannot open: " + err.Error(), nil
	}
	defer f.Close()
	r := bufio.NewReader(f)
	header, err := r.ReadString('\n')
	if err != nil {
		return 0, "damaged: no header", nil
	}
	var sumHex string
	var version int
	if _, err := fmt.Sscanf(header, snapshotMagic+" %d sha256=%s\n", &version, &sumHex); err != nil {
		return 0, "damaged: bad header", nil
	}
	if version != snapshotVersion {
		return 0, fmt.Sprintf("version %d, want %d", version, snapshotVersion), nil
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return 0, "cannot read: " + err.Error(), nil
	}
	sum := sha256.Sum256(body)
	if want, err := hex.DecodeString(sumHex); err != nil || !bytes.Equal(want, sum[:]) {
		return 0, "damaged: checksum mismatch", nil
	}
	var b snapshotBody
	if err := json.Unmarshal(body, &b); err != nil {
		return 0, "damaged: " + err.Error(), nil
	}
	id, err := eventIDAt(ctx, s.log, b.Position)
	if errors.Is(err, errNoEvent) {
		return 0, fmt.Sprintf("stale: the log has no event at its position %d", b.Position), nil
	}
	if err != nil {
		return 0, "", err
	}
	if id != b.EventID {
		return 0, fmt.Sprintf("not of this log: the event at %d is %s, the snapshot says %s", b.Position, id, b.EventID), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos != 0 {
		return 0, "", errors.New("memory: LoadSnapshot into a read model that is not empty")
	}
	for _, v := range b.Slots {
		s.slots[v.Name] = v
	}
	for _, v := range b.Jobs {
		s.jobs[v.ID] = v
	}
	sort.Slice(b.Refs, func(i, j int) bool { return b.Refs[i].Queued < b.Refs[j].Queued })
	for _, r := range b.Refs {
		s.refs[r.ID] = jobRef{slot: r.Slot, kind: r.Kind, queued: r.Queued}
		s.bySlot[r.Slot] = append(s.bySlot[r.Slot], r.ID)
		s.latest[r.Slot+"\x00"+r.Kind] = r.ID
	}
	s.finished = b.Finished
	for _, a := range b.Audit {
		s.audit.add(a)
	}
	s.audit.dropped = b.AuditDropped
	s.pos = b.Position
	return b.Position, "", nil
}
