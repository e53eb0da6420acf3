package boltstore

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// The clean-close marker lets Open skip bbolt's full consistency check (a
// read of every page: about 1.7 s of a core at 1M events) when nothing can
// have damaged the free-page list since a check last vouched for it.
//
// Close writes it, holding the file's lock, after the store's last commit,
// and only when this process vouched for the file (its check passed, or it
// opened by a valid marker itself) and no check or commit failed since.
// It records what the file looked like then: bbolt's transaction id of the
// last commit (any later commit, by anyone, changes it), the file's size,
// inode and modification time, and a SHA-256 of both meta pages and the
// pages of the free-page list the newest meta names — what the check
// protects. Open reads it and removes it before anything else can write;
// it skips the check only if every field still matches.
//
// It is a file next to the data file (events.db.clean), not a key in the
// meta bucket: the commit that would store a key also writes a new
// free-page list and meta page, so no key can hold their digest. A marker
// that is lost, torn or stale only costs the check; a copy of the data file
// (a backup, a restore, cp) is a new inode and gets checked.
const markerSuffix = ".clean"

// markerFormat names the marker's layout; any other is not a marker.
const markerFormat = "slotkeeper-events-clean/1"

type cleanMarker struct {
	Format  string `json:"format"`
	TxID    int    `json:"txid"`
	Size    int64  `json:"size"`
	Inode   uint64 `json:"inode"`
	MtimeNS int64  `json:"mtime_ns"`
	Digest  string `json:"digest"`
}

// Offsets in bbolt's on-disk layout (bbolt v1.5, internal/common): a page
// starts with a 16-byte header {id u64, flags u16, count u16, overflow u32};
// a meta page's fields follow it: magic, version, page size, flags (u32
// each), root bucket {root, sequence}, freelist pgid, high-water pgid, txid,
// checksum (u64 each).
const (
	pageOverflowOff = 12
	metaFreelistOff = 16 + 32
	metaTxidOff     = 16 + 48
	noFreelist      = 0xffffffffffffffff
)

// fileState describes the file under db as it is now: what a marker
// vouches for. The caller holds the lock (db is open) and no write
// transaction runs.
func fileState(db *bolt.DB, path string) (cleanMarker, error) {
	var txid int
	if err := db.View(func(tx *bolt.Tx) error { txid = tx.ID(); return nil }); err != nil {
		return cleanMarker{}, err
	}
	f, err := os.Open(path)
	if err != nil {
		return cleanMarker{}, err
	}
	defer f.Close() // bbolt's lock is a flock on its own descriptor: unaffected
	fi, err := f.Stat()
	if err != nil {
		return cleanMarker{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return cleanMarker{}, errors.New("no inode")
	}
	psize := int64(db.Info().PageSize)
	metas := make([]byte, 2*psize)
	if _, err := f.ReadAt(metas, 0); err != nil {
		return cleanMarker{}, fmt.Errorf("meta pages: %w", err)
	}
	h := sha256.New()
	h.Write(metas)
	// The meta page bbolt uses is the one carrying its transaction id.
	var live []byte
	for _, m := range [][]byte{metas[:psize], metas[psize:]} {
		if binary.LittleEndian.Uint64(m[metaTxidOff:]) == uint64(txid) {
			live = m
			break
		}
	}
	if live == nil {
		return cleanMarker{}, fmt.Errorf("no meta page with txid %d", txid)
	}
	if fl := binary.LittleEndian.Uint64(live[metaFreelistOff:]); fl != noFreelist {
		if fl >= uint64(fi.Size()/psize) {
			return cleanMarker{}, fmt.Errorf("free list at page %d, past the end", fl)
		}
		hdr := make([]byte, 16)
		if _, err := f.ReadAt(hdr, int64(fl)*psize); err != nil {
			return cleanMarker{}, fmt.Errorf("free list: %w", err)
		}
		n := 1 + uint64(binary.LittleEndian.Uint32(hdr[pageOverflowOff:]))
		if fl+n > uint64(fi.Size()/psize) {
			return cleanMarker{}, fmt.Errorf("free list of %d pages at page %d, past the end", n, fl)
		}
		pages := make([]byte, int64(n)*psize)
		if _, err := f.ReadAt(pages, int64(fl)*psize); err != nil {
			return cleanMarker{}, fmt.Errorf("free list: %w", err)
		}
		h.Write(pages)
	}
	return cleanMarker{
		Format:  markerFormat,
		TxID:    txid,
		Size:    fi.Size(),
		Inode:   st.Ino,
		MtimeNS: fi.ModTime().UnixNano(),
		Digest:  hex.EncodeToString(h.Sum(nil)),
	}, nil
}

// writeMarker records that the file under db is sound as it is now. Not
// synced: a marker lost by a power cut only costs the next Open a check,
// and a torn one does not parse.
func writeMarker(db *bolt.DB, path string) error {
	m, err := fileState(db, path)
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := path + markerSuffix + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path+markerSuffix)
}

// takeMarker reports whether a valid marker vouches for the file under db,
// and removes the marker: from now on only this process can vouch for the
// file (at Close), and a kill leaves none behind.
func takeMarker(db *bolt.DB, path string) bool {
	b, err := os.ReadFile(path + markerSuffix)
	if err != nil {
		return false
	}
	// If the removal fails, the marker stays bound to this txid: the next
	// commit makes it stale.
	_ = os.Remove(path + markerSuffix)
	var m cleanMarker
	if json.Unmarshal(b, &m) != nil || m.Format != markerFormat {
		return false
	}
	now, err := fileState(db, path)
	return err == nil && now == m
}
