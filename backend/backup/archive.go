// Package backup writes and restores Slotkeeper backup archives: a consistent
// snapshot of the embedded event store (and, in demo mode, the simulators'
// state beside it) in one file that says what it holds and proves it is whole.
//
// The archive is a plain tar stream (so `tar tf` can list it) of:
//
//	slotkeeper-backup.json   header: format name and version, written first
//	events.db                the bbolt snapshot
//	sim/...                  the simulators' state (demo mode only)
//	MANIFEST.json            last: the head position and every file's size
//	                         and SHA-256
//
// The manifest comes last because the checksums are known only after the
// copy; a truncated archive therefore has none, and Restore refuses it.
// Restore writes into a staging directory and moves the result into place
// only when every checksum matched, so a bad archive writes nothing.
package backup

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Format and Version name the archive layout; Restore refuses any other.
const (
	Format  = "slotkeeper-backup"
	Version = 1

	headerName   = "slotkeeper-backup.json"
	manifestName = "MANIFEST.json"
	// EventsFile is the event store's entry (and file name when restored).
	EventsFile = "events.db"
	// SimDir is the prefix of the simulators' entries.
	SimDir = "sim"
)

// ErrBadArchive is wrapped by every refusal of Restore: a truncated archive,
// another format or version, a checksum mismatch, an unsafe entry name.
var ErrBadArchive = errors.New("backup: not a complete, intact slotkeeper backup")

// Header is the first entry.
type Header struct {
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Created time.Time `json:"created"`
}

// File is one entry of the manifest.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Manifest is the last entry: what the archive holds.
type Manifest struct {
	Format  string          `json:"format"`
	Version int             `json:"version"`
	Created time.Time       `json:"created"`
	Head    events.Position `json:"head"` // newest event position in events.db
	Files   []File          `json:"files"`
}

// Writer writes one archive. Begin an entry, Write its bytes, and Close
// with the snapshot's head. Not safe for concurrent use.
type Writer struct {
	tw      *tar.Writer
	created time.Time
	files   []File
	cur     *File
	h       hash.Hash
	written int64
}

// NewWriter starts an archive on w (writing its header entry).
func NewWriter(w io.Writer, now time.Time) (*Writer, error) {
	a := &Writer{tw: tar.NewWriter(w), created: now.UTC()}
	b, _ := json.Marshal(Header{Format: Format, Version: Version, Created: a.created})
	if err := a.tw.WriteHeader(a.tarHeader(headerName, int64(len(b)))); err != nil {
		return nil, err
	}
	if _, err := a.tw.Write(b); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Writer) tarHeader(name string, size int64) *tar.Header {
	return &tar.Header{Name: name, Size: size, Mode: 0o600, ModTime: a.created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
}

// Begin starts the entry name of exactly size bytes.
func (a *Writer) Begin(name string, size int64) error {
	if err := a.end(); err != nil {
		return err
	}
	if err := a.tw.WriteHeader(a.tarHeader(name, size)); err != nil {
		return err
	}
	a.cur = &File{Name: name, Size: size}
	a.h = sha256.New()
	a.written = 0
	return nil
}

// Write writes to the current entry.
func (a *Writer) Write(p []byte) (int, error) {
	if a.cur == nil {
		return 0, errors.New("backup: write outside an entry")
	}
	n, err := a.tw.Write(p)
	a.h.Write(p[:n])
	a.written += int64(n)
	return n, err
}

func (a *Writer) end() error {
	if a.cur == nil {
		return nil
	}
	if a.written != a.cur.Size {
		return fmt.Errorf("backup: %s: wrote %d bytes of %d", a.cur.Name, a.written, a.cur.Size)
	}
	a.cur.SHA256 = hex.EncodeToString(a.h.Sum(nil))
	a.files = append(a.files, *a.cur)
	a.cur = nil
	return nil
}

// AddDir adds every regular file under dir as prefix/<relative path>. Files
// are copied as they are; a file that changes size meanwhile fails the
// backup rather than storing a torn copy.
func (a *Writer) AddDir(ctx context.Context, dir, prefix string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if strings.HasSuffix(rel, ".tmp") {
			return nil // a half-written atomic replacement, not state
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if err := a.Begin(path.Join(prefix, filepath.ToSlash(rel)), fi.Size()); err != nil {
			return err
		}
		_, err = io.CopyN(a, f, fi.Size())
		return err
	})
}

// Close ends the last entry and writes the manifest naming head.
func (a *Writer) Close(head events.Position) (Manifest, error) {
	if err := a.end(); err != nil {
		return Manifest{}, err
	}
	m := Manifest{Format: Format, Version: Version, Created: a.created, Head: head, Files: a.files}
	b, _ := json.MarshalIndent(m, "", "  ")
	if err := a.tw.WriteHeader(a.tarHeader(manifestName, int64(len(b)))); err != nil {
		return Manifest{}, err
	}
	if _, err := a.tw.Write(b); err != nil {
		return Manifest{}, err
	}
	return m, a.tw.Close()
}

// Restore reads an archive from r into dir, which must not exist or be
// empty. Every entry is checked against the manifest; on any refusal
// (wrapping ErrBadArchive) or I/O error nothing is left in dir.
func Restore(ctx context.Context, r io.Reader, dir string) (Manifest, error) {
	if err := mustBeEmpty(dir); err != nil {
		return Manifest{}, err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return Manifest{}, err
	}
	stage, err := os.MkdirTemp(parent, ".slotkeeper-restore-")
	if err != nil {
		return Manifest{}, err
	}
	defer os.RemoveAll(stage)
	m, err := extract(ctx, r, stage)
	if err != nil {
		return Manifest{}, err
	}
	// Move into place: dir is absent or empty (checked above).
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return Manifest{}, err
	}
	if err := os.Rename(stage, dir); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

func mustBeEmpty(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("backup: restore target %s is not empty (restore refuses to mix a backup with other data)", dir)
	}
	return nil
}

func bad(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadArchive}, a...)...)
}

// extract writes the entries under stage and checks them against the manifest.
func extract(ctx context.Context, r io.Reader, stage string) (Manifest, error) {
	tr := tar.NewReader(r)
	got := map[string]File{}
	var m *Manifest
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return Manifest{}, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, bad("truncated or damaged archive (%v)", err)
		}
		if m != nil {
			return Manifest{}, bad("entry %q after the manifest", h.Name)
		}
		switch {
		case i == 0:
			if h.Name != headerName || h.Size > 4096 {
				return Manifest{}, bad("no %s header: not a slotkeeper backup", headerName)
			}
			var hd Header
			if err := json.NewDecoder(io.LimitReader(tr, 4096)).Decode(&hd); err != nil {
				return Manifest{}, bad("unreadable header (%v)", err)
			}
			if hd.Format != Format || hd.Version != Version {
				return Manifest{}, bad("format %q version %d; this binary reads %s version %d", hd.Format, hd.Version, Format, Version)
			}
		case h.Name == manifestName:
			if h.Size > 16<<20 {
				return Manifest{}, bad("manifest of %d bytes", h.Size)
			}
			m = new(Manifest)
			if err := json.NewDecoder(tr).Decode(m); err != nil {
				return Manifest{}, bad("unreadable manifest (%v)", err)
			}
		default:
			name, ok := safeName(h.Name)
			if !ok || h.Typeflag != tar.TypeReg {
				return Manifest{}, bad("unsafe entry %q", h.Name)
			}
			f, err := writeEntry(tr, filepath.Join(stage, filepath.FromSlash(name)))
			if err != nil {
				return Manifest{}, err
			}
			f.Name = name
			got[name] = f
		}
	}
	if m == nil {
		return Manifest{}, bad("no manifest: the archive is truncated")
	}
	if m.Format != Format || m.Version != Version {
		return Manifest{}, bad("manifest format %q version %d", m.Format, m.Version)
	}
	if len(m.Files) != len(got) {
		return Manifest{}, bad("manifest lists %d files, archive holds %d", len(m.Files), len(got))
	}
	for _, want := range m.Files {
		f, ok := got[want.Name]
		if !ok {
			return Manifest{}, bad("%s is listed but missing", want.Name)
		}
		if f.Size != want.Size || f.SHA256 != want.SHA256 {
			return Manifest{}, bad("%s fails its checksum", want.Name)
		}
	}
	if _, ok := got[EventsFile]; !ok {
		return Manifest{}, bad("no %s", EventsFile)
	}
	return *m, syncDir(stage)
}

// safeName accepts only relative, clean slash paths inside the archive.
func safeName(n string) (string, bool) {
	if n == "" || strings.HasPrefix(n, "/") || strings.Contains(n, "\\") || strings.ContainsRune(n, 0) {
		return "", false
	}
	c := path.Clean(n)
	if c != n || c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	if c != EventsFile && !strings.HasPrefix(c, SimDir+"/") {
		return "", false
	}
	return c, true
}

func writeEntry(r io.Reader, dst string) (File, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return File{}, err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return File{}, bad("truncated entry %s (%v)", filepath.Base(dst), err)
	}
	if err := f.Sync(); err != nil {
		return File{}, err
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
