package memory

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"unique"

	sjson "github.com/segmentio/encoding/json"
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
// the body> audit=<entries> jobs=<index entries>" (the counts size the
// decoder's slices) and a JSON body. It is written to a temporary file, synced and
// renamed, so a crash leaves the old snapshot or the new one.
//
// Version 2 holds only the listed slots (archived ones are named), the
// per-job refs as columns over a table of their distinct strings (complete:
// version 1 lost the filter fields and the all-jobs index), and is decoded
// with segmentio/encoding (several times faster than encoding/json). A
// version 1 file is ignored: the read model is rebuilt from the log.
//
// Version 3 writes the audit entries' args as flat key, value lists
// (snapshotAudit): segmentio/encoding makes every decoded map with room
// for 64 entries, and clearing those for the 20,000 entries of the audit
// window took most of a load. Older versions are ignored.
//
// Version 4 adds the pull requests (PullRequests); a version 3 file has
// none, so it is ignored and the read model rebuilt with them.
//
// Version 5 holds only the pull requests memory keeps (closed ones leave,
// Limits.ClosedPRs): the same body, but a binary that kept every PR and
// folds none back would miss a PR that left and changed again, so it must
// not load one (it ignores it and rebuilds). A version 4 file, every PR,
// loads as it is and the limits drop what they do not keep.
const snapshotVersion = 5

// oldestLoaded is the oldest snapshot version LoadSnapshot still reads.
const oldestLoaded = 4

const snapshotMagic = "slotkeeper-readmodel"

type snapshotBody struct {
	Position events.Position `json:"position"`
	// EventID is the id of the event at Position: it ties the snapshot to
	// this log (a restored or replaced store has other ids). EventStream
	// and EventRevision find that event again (ReadStream), since a
	// position is never computed to subscribe from.
	EventID       string          `json:"event_id"`
	EventStream   string          `json:"event_stream,omitempty"`
	EventRevision events.Revision `json:"event_revision,omitempty"`
	// AuditMarks are the audit log's marks (auditLog.marks).
	AuditMarks []events.Position       `json:"audit_marks,omitempty"`
	Slots      []*projections.SlotView `json:"slots"`
	// Archived names the slots whose views left memory.
	Archived     []string               `json:"archived"`
	Jobs         []*projections.JobView `json:"jobs"`
	Refs         snapshotRefs           `json:"refs"`
	Finished     []string               `json:"finished"`
	Audit        []snapshotAudit        `json:"audit"`
	AuditDropped bool                   `json:"audit_dropped"`
	PullRequests []*projections.PRView  `json:"pull_requests,omitempty"`
}

// snapshotAudit is an audit entry with its args as a flat list (key,
// value, key, value, … in key order): the outer Args hides the entry's map
// in JSON.
type snapshotAudit struct {
	projections.AuditEntry
	Args []string `json:"args,omitempty"`
}

func flatArgs(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k, m[k])
	}
	return out
}

func argsMap(kv []string) (map[string]string, error) {
	if len(kv) == 0 {
		return nil, nil
	}
	if len(kv)%2 != 0 {
		return nil, errors.New("audit args: odd list")
	}
	m := make(map[string]string, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m, nil
}

// snapshotRefs is every job's ref as columns, oldest job first (by queued
// position): one id per job is the only string that is not shared, so the
// file is small and loading allocates each slot, kind, state and requester
// once.
type snapshotRefs struct {
	// Strings are the distinct slot, kind, state and requester values;
	// Slot, Kind, State and By index them.
	Strings []string `json:"strings"`
	IDs     []string `json:"ids"`
	// Queued is each job's queued position minus the previous job's.
	Queued    []uint64 `json:"queued"`
	Slot      []uint32 `json:"slot"`
	Kind      []uint32 `json:"kind"`
	State     []uint32 `json:"state"`
	By        []uint32 `json:"by"`
	Uncertain []int    `json:"uncertain"` // indexes of the jobs with an uncertain step
}

// refsOf packs the refs of ids (in queued order); a job in memory gives its
// view's filter fields, which are newer than its ref's.
func refsOf(ids []string, refs map[string]jobRef, jobs map[string]*projections.JobView) snapshotRefs {
	out := snapshotRefs{IDs: ids, Queued: make([]uint64, len(ids)), Slot: make([]uint32, len(ids)),
		Kind: make([]uint32, len(ids)), State: make([]uint32, len(ids)), By: make([]uint32, len(ids)), Uncertain: []int{}}
	index := map[string]uint32{}
	str := func(v string) uint32 {
		i, ok := index[v]
		if !ok {
			i = uint32(len(out.Strings))
			index[v] = i
			out.Strings = append(out.Strings, v)
		}
		return i
	}
	var prev events.Position
	for i, id := range ids {
		r := refs[id]
		if v := jobs[id]; v != nil {
			r = refOf(v)
		}
		out.Queued[i] = uint64(r.queued - prev)
		prev = r.queued
		out.Slot[i], out.Kind[i], out.State[i], out.By[i] = str(r.slot.Value()), str(r.kind.Value()), str(r.state.Value()), str(r.requestedBy.Value())
		if r.uncertain {
			out.Uncertain = append(out.Uncertain, i)
		}
	}
	return out
}

// unpack checks the columns agree and returns the refs in order.
func (c snapshotRefs) unpack() ([]jobRef, error) {
	n := len(c.IDs)
	if len(c.Queued) != n || len(c.Slot) != n || len(c.Kind) != n || len(c.State) != n || len(c.By) != n {
		return nil, errors.New("refs: columns of different lengths")
	}
	handles := make([]unique.Handle[string], len(c.Strings))
	for i, v := range c.Strings {
		handles[i] = unique.Make(v)
	}
	str := func(i uint32) (unique.Handle[string], error) {
		if int(i) >= len(handles) {
			return unique.Handle[string]{}, fmt.Errorf("refs: string %d of %d", i, len(c.Strings))
		}
		return handles[i], nil
	}
	out := make([]jobRef, n)
	var q events.Position
	for i := range n {
		q += events.Position(c.Queued[i])
		r := jobRef{queued: q}
		var err [4]error
		r.slot, err[0] = str(c.Slot[i])
		r.kind, err[1] = str(c.Kind[i])
		r.state, err[2] = str(c.State[i])
		r.requestedBy, err[3] = str(c.By[i])
		if e := errors.Join(err[:]...); e != nil {
			return nil, e
		}
		out[i] = r
	}
	for _, i := range c.Uncertain {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("refs: uncertain job %d of %d", i, n)
		}
		out[i].uncertain = true
	}
	return out, nil
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
	b := snapshotBody{Position: pos, EventID: s.at.ID, EventStream: s.at.Stream, EventRevision: s.at.Revision,
		AuditDropped: s.audit.dropped, AuditMarks: slices.Clone(s.audit.marks), Finished: slices.Clone(s.finished[s.fhead:]),
		Archived: make([]string, 0, len(s.archived)), Refs: refsOf(slices.Clone(s.all), s.refs, s.jobs)}
	for _, v := range s.slots {
		b.Slots = append(b.Slots, v)
	}
	for name := range s.archived {
		b.Archived = append(b.Archived, name) // with a log (a snapshot needs one), the view left memory
	}
	for _, v := range s.jobs {
		b.Jobs = append(b.Jobs, v)
	}
	for _, v := range s.prs {
		b.PullRequests = append(b.PullRequests, v)
	}
	b.Audit = make([]snapshotAudit, 0, s.audit.n)
	for i := 0; i < s.audit.n; i++ {
		a := s.audit.at(i)
		b.Audit = append(b.Audit, snapshotAudit{AuditEntry: *a, Args: flatArgs(a.Args)})
	}
	// Views are never modified once stored, so they can be encoded after
	// the lock is released.
	s.mu.RUnlock()
	if s.log == nil {
		return 0, errors.New("memory: a snapshot needs the log")
	}
	body, err := sjson.Marshal(b)
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
	fmt.Fprintf(w, "%s %d sha256=%s audit=%d jobs=%d\n", snapshotMagic, snapshotVersion, hex.EncodeToString(sum[:]), len(b.Audit), len(b.Refs.IDs))
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

// eventAt returns the event a snapshot names, read from its stream (a
// position is never computed to subscribe from: events.Store.SubscribeAll).
func eventAt(ctx context.Context, log projections.Log, at eventRef) (events.RecordedEvent, error) {
	if log == nil {
		return events.RecordedEvent{}, errors.New("memory: a snapshot needs the log")
	}
	if at.Stream == "" {
		return events.RecordedEvent{}, errNoEvent // written before snapshots named it
	}
	got, err := log.ReadStream(ctx, at.Stream, at.Revision, 1, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) || (err == nil && (len(got) == 0 || got[0].Revision != at.Revision)) {
		return events.RecordedEvent{}, errNoEvent
	}
	if err != nil {
		return events.RecordedEvent{}, err
	}
	return got[0], nil
}

// eventRef names one event: its id and where it is.
type eventRef struct {
	ID       string
	Stream   string
	Revision events.Revision
}

// LoadSnapshot fills an empty read model from the snapshot at path. It
// returns the position loaded, or 0 and the reason the snapshot was not
// used: missing, damaged (header, checksum, JSON), of another version, or
// not of this log (its position past the head, or the event there has
// another id). Only a log that cannot be read is an error. The read model
// must be new (nothing applied).
func (s *Store) LoadSnapshot(ctx context.Context, path string) (events.Position, string, error) {
	// One read of the whole file, sized by it (io.ReadAll's growing
	// buffer cost a fifth of a load).
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, "no snapshot", nil
	}
	if err != nil {
		return 0, "cannot read: " + err.Error(), nil
	}
	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return 0, "damaged: no header", nil
	}
	header, body := string(data[:nl+1]), data[nl+1:]
	var sumHex string
	var version, nAudit, nJobs int
	if _, err := fmt.Sscanf(header, snapshotMagic+" %d sha256=%s", &version, &sumHex); err != nil {
		return 0, "damaged: bad header", nil
	}
	if version < oldestLoaded || version > snapshotVersion {
		return 0, fmt.Sprintf("version %d, want %d to %d", version, oldestLoaded, snapshotVersion), nil
	}
	if _, err := fmt.Sscanf(header, snapshotMagic+" %d sha256=%s audit=%d jobs=%d\n", &version, &sumHex, &nAudit, &nJobs); err != nil {
		return 0, "damaged: bad header", nil
	}
	sum := sha256.Sum256(body)
	if want, err := hex.DecodeString(sumHex); err != nil || !bytes.Equal(want, sum[:]) {
		return 0, "damaged: checksum mismatch", nil
	}
	// The header's counts (not covered by the checksum, so only trusted as
	// far as the body could hold them) size the big slices up front: the
	// decoder appends into their room instead of growing them by copies.
	hint := func(n int) int { return max(0, min(n, len(body)/8)) }
	b := snapshotBody{Audit: make([]snapshotAudit, 0, hint(nAudit))}
	n := hint(nJobs)
	b.Refs = snapshotRefs{IDs: make([]string, 0, n), Queued: make([]uint64, 0, n), Slot: make([]uint32, 0, n),
		Kind: make([]uint32, 0, n), State: make([]uint32, 0, n), By: make([]uint32, 0, n)}
	if err := sjson.Unmarshal(body, &b); err != nil {
		return 0, "damaged: " + err.Error(), nil
	}
	audit := make([]projections.AuditEntry, len(b.Audit))
	for i, sa := range b.Audit {
		audit[i] = sa.AuditEntry
		if audit[i].Args, err = argsMap(sa.Args); err != nil {
			return 0, "damaged: " + err.Error(), nil
		}
	}
	b.Audit = nil
	b.shrinkMaps()
	refs, err := b.Refs.unpack()
	if err != nil {
		return 0, "damaged: " + err.Error(), nil
	}
	at := eventRef{ID: b.EventID, Stream: b.EventStream, Revision: b.EventRevision}
	got, err := eventAt(ctx, s.log, at)
	if errors.Is(err, errNoEvent) {
		return 0, fmt.Sprintf("stale: the log has no event %s/%d of its position %d", b.EventStream, b.EventRevision, b.Position), nil
	}
	if err != nil {
		return 0, "", err
	}
	if got.ID != b.EventID || got.Position != b.Position {
		return 0, fmt.Sprintf("not of this log: the event %s/%d is %s at %d, the snapshot says %s at %d",
			b.EventStream, b.EventRevision, got.ID, got.Position, b.EventID, b.Position), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos != 0 {
		return 0, "", errors.New("memory: LoadSnapshot into a read model that is not empty")
	}
	for _, v := range b.Slots {
		s.slots[v.Name] = v
		if projections.Idle(*v) {
			s.idle[v.Name] = struct{}{}
		}
	}
	for _, name := range b.Archived {
		s.archived[name] = nil
	}
	for _, v := range b.Jobs {
		s.jobs[v.ID] = v
	}
	// The closed PRs' marks go in the order they last changed.
	slices.SortFunc(b.PullRequests, func(x, y *projections.PRView) int { return cmp.Compare(x.Position, y.Position) })
	for _, v := range b.PullRequests {
		s.PutPR(v)
		if v.UpdatedAt.After(s.newest) {
			s.newest = v.UpdatedAt // a lower bound of the log's clock until the next event
		}
	}
	// The refs come oldest first, which is the order of the indexes.
	s.refs = make(map[string]jobRef, len(b.Refs.IDs))
	s.all = b.Refs.IDs
	for i, id := range b.Refs.IDs {
		r := refs[i]
		s.refs[id] = r
		slot := r.slot.Value()
		s.bySlot[slot] = append(s.bySlot[slot], id)
		s.latest[slot+"\x00"+r.kind.Value()] = id
	}
	s.finished = b.Finished
	for _, a := range audit {
		s.audit.add(a)
	}
	s.audit.dropped = b.AuditDropped
	s.pos, s.at = b.Position, at
	s.audit.marks = b.AuditMarks
	s.dropClosedPRs() // a version 4 file holds every PR
	return b.Position, "", nil
}

// shrinkMaps copies the small maps of the decoded views (audit args, job
// params, a slot's latest jobs) into maps of their size: segmentio/encoding
// allocates decoded maps with room for many entries, which for the audit
// window's args alone cost several times the snapshot's size in heap.
func (b *snapshotBody) shrinkMaps() {
	shrink := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		maps.Copy(out, m)
		return out
	}
	for _, v := range b.Jobs {
		v.Params = shrink(v.Params)
	}
	for _, v := range b.Slots {
		if v.LatestJobs != nil {
			m := make(map[string]projections.JobRef, len(v.LatestJobs))
			maps.Copy(m, v.LatestJobs)
			v.LatestJobs = m
		}
	}
}
