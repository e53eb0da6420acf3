package boltstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// openWant opens path and fails unless Open vouched for the file as want
// says and ran exactly checks full checks doing so.
func openWant(t *testing.T, path string, opts Options, want OpenCheck, checks uint64) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	if got := s.OpenCheck(); got != want {
		t.Fatalf("open vouched by %v, want %v", got, want)
	}
	if want != OpenFullCheck || opts.CheckMaxBytes == 0 {
		// Inline or none: known when Open returns. (Background checks are
		// counted once the first append went through; see appendOne.)
		if got := s.Stats().Checks; got != checks {
			t.Fatalf("%d full checks at open, want %d", got, checks)
		}
	}
	return s
}

func appendOne(t *testing.T, s *Store, stream string) {
	t.Helper()
	if _, err := s.Append(ctxT(t), stream, events.Any(), ev("A", 0)); err != nil {
		t.Fatalf("append: %v", err)
	}
}

func markerExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path + markerSuffix)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A store that closed cleanly is reopened without a check, small file or
// big, and the next clean close vouches again; the first open of a file
// (no marker) checks it.
func TestCleanCloseSkipsCheck(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{}, OpenFullCheck, 1)
	path := s.Path()
	for i := range 10 {
		appendOne(t, s, fmt.Sprintf("slot-%d", i%3))
	}
	if markerExists(t, path) {
		t.Fatal("marker while the store is open")
	}
	s.Close()
	if !markerExists(t, path) {
		t.Fatal("no marker after a clean close")
	}
	s = openWant(t, dir, Options{}, OpenMarker, 0)
	if markerExists(t, path) {
		t.Fatal("Open left the marker in place: a kill now would leave it behind")
	}
	appendOne(t, s, "slot-0")
	if st := s.Stats(); st.Checks != 0 || st.Commits != 1 {
		t.Fatalf("after an append: %+v, want 1 commit and no check", st)
	}
	s.Close()
	// Too big to check inline (anything over 1 byte): without the marker
	// the writer would wait for a background check; with it, none runs.
	s = openWant(t, dir, Options{CheckMaxBytes: 1}, OpenMarker, 0)
	appendOne(t, s, "slot-1")
	if st := s.Stats(); st.Checks != 0 {
		t.Fatalf("a background check ran: %+v", st)
	}
	s.Close()
	// Opened by marker with no check configured: still vouched for.
	s = openWant(t, dir, Options{CheckMaxBytes: -1}, OpenMarker, 0)
	s.Close()
	s = openWant(t, dir, Options{}, OpenMarker, 0)
	if n, err := s.Head(ctxT(t)); err != nil || n != 12 {
		t.Fatalf("head %d %v, want 12", n, err)
	}
}

// A store that did not check its file and had no marker leaves none: the
// next Open checks.
func TestUncheckedStoreLeavesNoMarker(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{CheckMaxBytes: -1}, OpenUnchecked, 0)
	appendOne(t, s, "slot-0")
	s.Close()
	if markerExists(t, s.Path()) {
		t.Fatal("marker from a store that never checked its file")
	}
	openWant(t, dir, Options{}, OpenFullCheck, 1)
}

// After a commit failed (an I/O error mid-commit may leave pages of it
// behind), Close leaves no marker.
func TestFailedCommitLeavesNoMarker(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{}, OpenFullCheck, 1)
	appendOne(t, s, "slot-0")
	s.failCommit = func() error { return errors.New("injected: fdatasync: input/output error") }
	if _, err := s.Append(ctxT(t), "slot-0", events.Any(), ev("A", 1)); err == nil {
		t.Fatal("append with a failing commit succeeded")
	}
	s.failCommit = nil
	appendOne(t, s, "slot-0")
	s.Close()
	if markerExists(t, s.Path()) {
		t.Fatal("marker after a failed commit")
	}
	openWant(t, dir, Options{}, OpenFullCheck, 1)
}

// A process killed with SIGKILL leaves no marker (Open took the one its
// predecessor left), so the next Open runs the check.
func TestKilledStoreIsChecked(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{}, OpenFullCheck, 1)
	path := s.Path()
	appendOne(t, s, "slot-0")
	s.Close()
	if !markerExists(t, path) {
		t.Fatal("no marker after a clean close")
	}
	runAndKill(t, path, 20)
	if markerExists(t, path) {
		t.Fatal("a marker survived the killed process")
	}
	s = openWant(t, dir, Options{}, OpenFullCheck, 1)
	appendOne(t, s, "slot-0")
	s.Close()
	// Killed again, and this time the file is checked in the background.
	runAndKill(t, path, 20)
	s = openWant(t, dir, Options{CheckMaxBytes: 1}, OpenFullCheck, 0)
	appendOne(t, s, "slot-0") // waits for the background check
	if st := s.Stats(); st.Checks != 1 || s.Err() != nil {
		t.Fatalf("after the first append: %+v %v, want 1 check that passed", st, s.Err())
	}
}

// A marker made stale by a later commit of anyone (here bbolt itself,
// without the store, so nothing removed the marker) is not trusted.
func TestStaleMarkerIsNotTrusted(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{}, OpenFullCheck, 1)
	path := s.Path()
	appendOne(t, s, "slot-0")
	s.Close()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, FreelistType: bolt.FreelistMapType})
	if err != nil {
		t.Fatal(err)
	}
	var txid int
	err = db.Update(func(tx *bolt.Tx) error {
		txid = tx.ID()
		return tx.Bucket(bucketMeta).Put([]byte("probe"), []byte("x"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path + markerSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(fmt.Sprintf(`"txid":%d,`, txid-1))) {
		t.Fatalf("marker %s does not name the commit before %d", b, txid)
	}
	openWant(t, dir, Options{}, OpenFullCheck, 1)
}

// A free-page list damaged after a clean close (size, inode and
// modification time kept, so only the digest can tell) is found at Open,
// inline or before the first write of a big file, exactly as without the
// marker; the store that found it leaves no marker.
func TestDamagedFreelistAfterCleanClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{IndexFlushEvents: 3})
	if err != nil {
		t.Fatal(err)
	}
	path := s.Path()
	for i := range 20 {
		appendOne(t, s, fmt.Sprintf("slot-%d", i%4))
	}
	s.Close()
	if !markerExists(t, path) {
		t.Fatal("no marker after a clean close")
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	damageFreelist(t, path)
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	marker, err := os.ReadFile(path + markerSuffix)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, events.ErrCorrupt) || !strings.Contains(err.Error(), "reachable freed") {
		t.Fatalf("open with a damaged free list after a clean close: %v", err)
	}
	// Again, the marker back in place, for a file checked in the background.
	if err := os.WriteFile(path+markerSuffix, marker, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{CheckMaxBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.OpenCheck(); got != OpenFullCheck {
		t.Fatalf("damaged file vouched for by %v", got)
	}
	if _, err := s.Append(ctxT(t), "slot-0", events.Any(), ev("A", 21)); !errors.Is(err, events.ErrCorrupt) {
		t.Fatalf("append to a file whose free list is damaged: %v", err)
	}
	s.Close()
	if markerExists(t, path) {
		t.Fatal("marker after the check found damage")
	}
}

// A copy of the file is a new file: the marker next to the original does
// not vouch for it, even byte for byte the same, with the same
// modification time and the marker copied too. A backup (Snapshot) restored elsewhere carries no marker; the
// original keeps its own.
func TestMarkerDoesNotVouchForACopy(t *testing.T) {
	dir := t.TempDir()
	s := openWant(t, dir, Options{}, OpenFullCheck, 1)
	path := s.Path()
	for range 5 {
		appendOne(t, s, "slot-0")
	}
	s.Close()
	cp := filepath.Join(t.TempDir(), "copy.db")
	for _, name := range []string{"", markerSuffix} {
		b, err := os.ReadFile(path + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cp+name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Same modification time too (cp -p): only the inode tells.
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(cp, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	c := openWant(t, cp, Options{}, OpenFullCheck, 1)
	c.Close()

	s = openWant(t, dir, Options{}, OpenMarker, 0)
	restored := t.TempDir() + "/restored.db"
	f, err := os.Create(restored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctxT(t), f, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r := openWant(t, restored, Options{}, OpenFullCheck, 1)
	if n, err := r.Head(ctxT(t)); err != nil || n != 5 {
		t.Fatalf("restored head %d %v", n, err)
	}
	r.Close()
	openWant(t, dir, Options{}, OpenMarker, 0)
}
