package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/backup"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/events/ndjson"
)

// backupSource is what a backup of the embedded store copies: the store's
// consistent snapshot and, with the simulators keeping state beside it,
// their directory.
func backupSource(st *boltstore.Store, simDir string) backup.Source {
	return backup.Source{
		Snapshot: func(ctx context.Context, w io.Writer, size func(int64) error) (events.Position, error) {
			info, err := st.Snapshot(ctx, w, size)
			return info.Head, err
		},
		SimDir: simDir,
	}
}

// backupCmd writes a backup archive of a stopped --data, or of a running
// server (--server, an admin token).
func backupCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	to := fs.String("to", "", "archive file to write (required; written atomically)")
	data := fs.String("data", "./data", "data directory of a stopped server's embedded store")
	server := fs.String("server", "", "base URL of a running server: back it up through its admin endpoint")
	token := fs.String("token", "", "admin API token for --server (or SLOTKEEPER_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("backup takes no arguments, got %q", fs.Args())}
	}
	if *to == "" {
		return &usageError{"backup needs --to FILE"}
	}
	if _, err := os.Stat(*to); err == nil {
		return &usageError{fmt.Sprintf("--to %s exists; choose a new file", *to)}
	}
	if *server != "" {
		return backupOnline(ctx, *server, cmpOr(*token, env("SLOTKEEPER_TOKEN")), *to, stdout)
	}
	st, err := boltstore.Open(*data, boltstore.Options{})
	if err != nil {
		if errors.Is(err, events.ErrLocked) {
			return &usageError{fmt.Sprintf("%s is in use by a running server: back it up with --server URL --token T", *data)}
		}
		return fmt.Errorf("open %s: %w", *data, err)
	}
	defer st.Close()
	m, size, err := backup.WriteFile(ctx, *to, backupSource(st, filepath.Join(*data, "sim")), time.Now())
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "backed up %s up to position %d into %s (%d bytes, %d files)\n", *data, m.Head, *to, size, len(m.Files))
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// backupOnline streams GET /api/admin/backup into the file, atomically, and
// checks the result the way restore would (without writing anything else).
func backupOnline(ctx context.Context, base, token, to string, stdout io.Writer) error {
	if token == "" {
		return &usageError{"--server needs an admin token: --token or SLOTKEEPER_TOKEN"}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/admin/backup", nil)
	if err != nil {
		return &usageError{fmt.Sprintf("--server: %v", err)}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("backup from %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return fmt.Errorf("backup from %s: HTTP %d: %s", base, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	dir := filepath.Dir(to)
	f, err := os.CreateTemp(dir, "."+filepath.Base(to)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	n, err := io.Copy(f, resp.Body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("backup from %s: %w", base, err)
	}
	// Prove the copy is whole before it takes the name.
	check, err := os.MkdirTemp("", "slotkeeper-backup-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(check)
	in, err := os.Open(f.Name())
	if err != nil {
		return err
	}
	m, err := backup.Restore(ctx, in, filepath.Join(check, "data"))
	in.Close()
	if err != nil {
		return fmt.Errorf("backup from %s is not whole: %w", base, err)
	}
	if err := os.Rename(f.Name(), to); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s up to position %d into %s (%d bytes, %d files)\n", base, m.Head, to, n, len(m.Files))
	return nil
}

// restoreCmd restores an archive into an empty --data and proves the result
// with the same check as `verify`.
func restoreCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	from := fs.String("from", "", "archive file to restore (required)")
	data := fs.String("data", "", "data directory to restore into: must not exist or be empty (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("restore takes no arguments, got %q", fs.Args())}
	}
	if *from == "" || *data == "" {
		return &usageError{"restore needs --from FILE and --data DIR"}
	}
	f, err := os.Open(*from)
	if err != nil {
		return &usageError{fmt.Sprintf("--from: %v", err)}
	}
	defer f.Close()
	m, err := backup.Restore(ctx, f, *data)
	if err != nil {
		return fmt.Errorf("restore %s: %w", *from, err)
	}
	fmt.Fprintf(stdout, "restored %s into %s: events up to position %d, %d files\n", *from, *data, m.Head, len(m.Files))
	return verifyCmd(ctx, []string{"--data", *data}, func(string) string { return "" }, stdout, stderr)
}

// exportCmd writes the log as NDJSON.
func exportCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://…")
	from := fs.String("from", "0", "export events after this position (exclusive; resume with the last position written)")
	to := fs.String("to", "", "export up to this position (inclusive; default the head at start)")
	stream := fs.String("stream", "", "only streams starting with this prefix (e.g. slot-, job-)")
	format := fs.String("format", "ndjson", "output format (ndjson)")
	out := fs.String("out", "", "file to write (default standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("export takes no arguments, got %q", fs.Args())}
	}
	if *format != "ndjson" {
		return &usageError{fmt.Sprintf("--format: only ndjson is supported, got %q", *format)}
	}
	var o ndjson.ExportOptions
	var err error
	if o.From, err = parsePos("--from", *from); err != nil {
		return err
	}
	if *to != "" {
		if o.To, err = parsePos("--to", *to); err != nil {
			return err
		}
		if o.To == 0 || o.To < o.From {
			return &usageError{fmt.Sprintf("--to %d must be a position after --from %d", o.To, o.From)}
		}
	}
	if *stream != "" {
		if err := events.ValidateStream(*stream + "x"); err != nil {
			return &usageError{fmt.Sprintf("--stream: %v", err)}
		}
		o.StreamPrefix = *stream
	}
	w := stdout
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return &usageError{fmt.Sprintf("--out: %v", err)}
		}
		defer f.Close()
		w = f
	}
	st, _, err := openStore(ctx, fillStoreDefaults(c), newLogger(Config{LogLevel: "warn"}, stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := ndjson.Export(ctx, st, w, o)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(stderr, "exported %d events; last position %d\n", res.Events, res.Last)
	return nil
}

// importCmd loads an NDJSON export into an empty store.
func importCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c Config
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store (must be empty)")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://…")
	in := fs.String("in", "", "export file to read (default standard input)")
	renumber := fs.Bool("renumber", false, "accept positions the target numbers differently (moving between the embedded store and KurrentDB)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("import takes no arguments, got %q", fs.Args())}
	}
	// Every line is checked against the catalogue before anything is
	// written (a consumer that cannot apply an event parks it; better that
	// none gets in): so the export is read twice, standard input from a
	// private temporary copy.
	var r io.ReadSeeker
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			return &usageError{fmt.Sprintf("--in: %v", err)}
		}
		defer f.Close()
		r = f
	} else {
		tmp, err := os.CreateTemp("", "slotkeeper-import-*")
		if err != nil {
			return fmt.Errorf("import: spool standard input: %w", err)
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		if _, err := io.Copy(tmp, os.Stdin); err != nil {
			return fmt.Errorf("import: spool standard input: %w", err)
		}
		r = tmp
	}
	st, desc, err := openStore(ctx, fillStoreDefaults(c), newLogger(Config{LogLevel: "warn"}, stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	if h, err := st.Head(ctx); err != nil {
		return fmt.Errorf("import into %s: %w", desc, err)
	} else if h != 0 {
		return fmt.Errorf("import into %s: %w (head %d)", desc, ndjson.ErrNotEmpty, h)
	}
	// Names and ids as the command side checks them (issue 33): an event
	// of stream slot-../../etc used to import.
	opts := ndjson.ImportOptions{Renumber: *renumber, CheckEvent: slots.ValidateImported}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := ndjson.Check(r, opts); err != nil {
		return fmt.Errorf("import refused, nothing written: %w", err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return err
	}
	res, err := ndjson.Import(ctx, st, r, opts)
	if err != nil {
		return fmt.Errorf("import into %s: %w", desc, err)
	}
	fmt.Fprintf(stdout, "imported %d events in %d appends into %s\n", res.Events, res.Appends, desc)
	return nil
}

func fillStoreDefaults(c Config) Config {
	c.LogLevel, c.LogFormat = "warn", "text"
	return c
}

func parsePos(name, s string) (events.Position, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &usageError{fmt.Sprintf("%s: %q is not a position (a whole number ≥ 0)", name, s)}
	}
	return events.Position(v), nil
}
