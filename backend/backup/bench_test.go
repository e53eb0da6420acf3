package backup_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/backup"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/ndjson"
)

// benchStore is a store of n events in 200-event appends (payloads of the
// size real step events have).
func benchStore(b *testing.B, n int) (*boltstore.Store, string) {
	b.Helper()
	dir := b.TempDir()
	s, err := boltstore.Open(dir, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	batch := make([]events.EventData, 200)
	for i := 0; i < n/len(batch); i++ {
		for j := range batch {
			batch[j] = events.EventData{Type: "StepStarted", Data: []byte(fmt.Sprintf(`{"job_id":"0b9f0f3e-6c1e-4f7e-9a5e-%012d","step":"delete_db","attempt":1,"n":%d}`, i, j)),
				Meta: events.Metadata{Actor: "worker:host-1:3", CorrelationID: "req-0123456789"}}
		}
		if _, err := s.Append(context.Background(), fmt.Sprintf("job-%d", i), events.NoStream(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	return s, filepath.Join(dir, boltstore.FileName)
}

// BenchmarkBackupVsCopy: MB/s of a backup archive written to disk (with
// fsync) against a plain copy of the same file (with fsync) in the same run.
func BenchmarkBackupVsCopy(b *testing.B) {
	s, path := benchStore(b, 200_000)
	fi, _ := os.Stat(path)
	mb := float64(fi.Size()) / 1e6
	out := b.TempDir()
	var tCopy, tBackup time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		in, _ := os.Open(path)
		dst, _ := os.Create(filepath.Join(out, "copy"))
		if _, err := io.Copy(dst, in); err != nil {
			b.Fatal(err)
		}
		dst.Sync()
		dst.Close()
		in.Close()
		tCopy += time.Since(t0)
		t0 = time.Now()
		if _, _, err := backup.WriteFile(context.Background(), filepath.Join(out, fmt.Sprintf("b%d.skbak", i)), backup.Source{Snapshot: func(ctx context.Context, w io.Writer, size func(int64) error) (events.Position, error) {
			info, err := s.Snapshot(ctx, w, size)
			return info.Head, err
		}}, time.Now()); err != nil {
			b.Fatal(err)
		}
		tBackup += time.Since(t0)
		os.Remove(filepath.Join(out, fmt.Sprintf("b%d.skbak", i)))
	}
	b.ReportMetric(mb, "file-MB")
	b.ReportMetric(mb*float64(b.N)/tCopy.Seconds(), "copy-MB/s")
	b.ReportMetric(mb*float64(b.N)/tBackup.Seconds(), "backup-MB/s")
	b.ReportMetric(tCopy.Seconds()/tBackup.Seconds(), "x-copy")
}

// BenchmarkExportVsCatchUp: events/s of an NDJSON export against a bare
// catch-up subscription over the same log in the same run.
func BenchmarkExportVsCatchUp(b *testing.B) {
	const n = 200_000
	s, _ := benchStore(b, n)
	stop := errors.New("stop")
	var tCU, tEx time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		err := s.SubscribeAll(context.Background(), 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
			if ev.Position >= n {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) {
			b.Fatal(err)
		}
		tCU += time.Since(t0)
		t0 = time.Now()
		if _, err := ndjson.Export(context.Background(), s, io.Discard, ndjson.ExportOptions{}); err != nil {
			b.Fatal(err)
		}
		tEx += time.Since(t0)
	}
	b.ReportMetric(float64(n*b.N)/tCU.Seconds(), "catchup-events/s")
	b.ReportMetric(float64(n*b.N)/tEx.Seconds(), "export-events/s")
	b.ReportMetric(tCU.Seconds()/tEx.Seconds(), "x-catchup")
}
