package boltstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/slotkeeper/slotkeeper/events"
	bolt "go.etcd.io/bbolt"
)

// SnapshotInfo describes a snapshot written by Snapshot.
type SnapshotInfo struct {
	// Head is the newest position in the snapshot: it holds exactly the
	// events up to and including Head.
	Head events.Position
	// Size is the number of bytes written (the bbolt file's size).
	Size int64
}

// Snapshot writes a consistent copy of the whole data file to w while the
// store keeps accepting appends: one read transaction (bbolt's Tx.WriteTo)
// sees exactly the commits before it began, so the copy is never torn and
// opens as a store whose log is a prefix of the live one. size, if not nil,
// is called with the copy's exact length before the first byte is written
// (an archive header needs it). ctx ends a long copy between writes.
//
// Appends go on during the copy; only a writer that must grow the file's
// mapping waits for it (Options.InitialMmapSize makes that rare).
func (s *Store) Snapshot(ctx context.Context, w io.Writer, size func(int64) error) (info SnapshotInfo, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketLog).Cursor().Last(); len(k) == 8 {
			info.Head = events.Position(binary.BigEndian.Uint64(k))
		}
		if size != nil {
			if err := size(tx.Size()); err != nil {
				return err
			}
		}
		n, err := tx.WriteTo(ctxWriter{ctx, w})
		info.Size = n
		return err
	})
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("boltstore: snapshot of %s: %w", s.path, err)
	}
	return info, nil
}

// ctxWriter fails writes once ctx is done, so a cancelled backup stops
// between pages rather than copying the rest of a large file.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
