package main

import (
	"context"
	"flag"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slotkeeper/slotkeeper/backend/backup"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

// BackupConfig is serve's scheduled-backup settings (default off).
type BackupConfig struct {
	Dir   string
	Every time.Duration
	Keep  int
}

func backupFlags(fs *flag.FlagSet, c *BackupConfig) {
	fs.StringVar(&c.Dir, "backup-dir", "", "directory for scheduled backups of the embedded store (empty: none)")
	fs.DurationVar(&c.Every, "backup-every", 0, "interval of scheduled backups (0: off; needs --backup-dir)")
	fs.IntVar(&c.Keep, "backup-keep", 7, "scheduled backups kept (the newest)")
}

func (c BackupConfig) validate(embedded bool) error {
	switch {
	case c.Every < 0:
		return cfgErr("backup-every", "must not be negative")
	case c.Every > 0 && c.Every < time.Second:
		return cfgErr("backup-every", "must be at least 1s")
	case c.Every > 0 && c.Dir == "":
		return cfgErr("backup-dir", "is required with --backup-every")
	case c.Dir != "" && c.Every == 0:
		return cfgErr("backup-every", "is required with --backup-dir")
	case c.Every > 0 && c.Keep < 1:
		return cfgErr("backup-keep", "must be at least 1")
	case c.Every > 0 && !embedded:
		return cfgErr("backup-every", "backs up the embedded store only; with --events use KurrentDB's own backups (docs/backup.md)")
	}
	return nil
}

// backupMetrics are the scheduled backups' gauges and counter on reg.
type backupMetrics struct {
	lastSuccess, size, duration prometheus.Gauge
	failures                    prometheus.Counter
}

func newBackupMetrics(reg prometheus.Registerer) *backupMetrics {
	m := &backupMetrics{
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotkeeper_backup_last_success_timestamp_seconds", Help: "Unix time of the last successful scheduled backup."}),
		size:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotkeeper_backup_last_size_bytes", Help: "Size of the last successful scheduled backup."}),
		duration:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "slotkeeper_backup_last_duration_seconds", Help: "How long the last successful scheduled backup took."}),
		failures:    prometheus.NewCounter(prometheus.CounterOpts{Name: "slotkeeper_backup_failures_total", Help: "Scheduled backups that failed."}),
	}
	reg.MustRegister(m.lastSuccess, m.size, m.duration, m.failures)
	return m
}

func (m *backupMetrics) observe(r backup.Result) {
	if r.Err != nil {
		m.failures.Inc()
		return
	}
	m.lastSuccess.Set(float64(time.Now().Unix()))
	m.size.Set(float64(r.Size))
	m.duration.Set(r.Duration.Seconds())
}

// backupService is the backup scheduler when configured (nil otherwise).
// A failing backup is logged and counted; it never makes the server
// unready.
func backupService(c Config, store events.Store, reg prometheus.Registerer, log *slog.Logger) lifecycle.Service {
	st, ok := store.(*boltstore.Store)
	if !ok || c.Backup.Every == 0 {
		return nil
	}
	met := newBackupMetrics(reg)
	sch := &backup.Scheduler{Dir: c.Backup.Dir, Every: c.Backup.Every, Keep: c.Backup.Keep, Source: backupSource(st, simStateDir(c)), Log: log, Done: met.observe}
	return &lifecycle.Loop{Run: sch.Run}
}

// onlineBackup is GET /api/admin/backup's source (embedded store only).
func onlineBackup(c Config, store events.Store) httpapi.BackupFunc {
	st, ok := store.(*boltstore.Store)
	if !ok {
		return nil
	}
	return func(ctx context.Context, w io.Writer) error {
		_, err := backup.Write(ctx, w, backupSource(st, simStateDir(c)), time.Now())
		return err
	}
}
