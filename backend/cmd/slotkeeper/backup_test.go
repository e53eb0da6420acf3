package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	out, errb := newSyncBuffer(), newSyncBuffer()
	code := runWith(context.Background(), args, noEnv, out, errb, nil)
	return code, out.String(), errb.String()
}

// TestBackupRestoreExportImport runs the commands a person runs after a
// demo: back up the stopped --data, restore it elsewhere (verify passes on
// the result, and the simulators' state came along), export both logs
// (equal), import an export into an empty store (equal again).
func TestBackupRestoreExportImport(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	if code := s.stop(t); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	dir := t.TempDir()
	archive := filepath.Join(dir, "b.skbak")
	if code, out, errs := run(t, "backup", "--data", data, "--to", archive); code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup: %d %q %q", code, out, errs)
	}
	restored := filepath.Join(dir, "restored")
	code, out, errs := run(t, "restore", "--from", archive, "--data", restored)
	if code != 0 || !strings.Contains(out, "equals a rebuild") {
		t.Fatalf("restore: %d %q %q", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(restored, "sim", "state.json")); err != nil {
		t.Fatalf("the simulators' state did not come along: %v", err)
	}
	exp1, exp2 := filepath.Join(dir, "1.ndjson"), filepath.Join(dir, "2.ndjson")
	if code, _, errs := run(t, "export", "--data", data, "--out", exp1); code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	if code, _, errs := run(t, "export", "--data", restored, "--out", exp2); code != 0 {
		t.Fatalf("export: %d %s", code, errs)
	}
	a, _ := os.ReadFile(exp1)
	b, _ := os.ReadFile(exp2)
	if len(a) == 0 || string(a) != string(b) {
		t.Fatalf("the restored log differs from the original (%d vs %d bytes)", len(a), len(b))
	}
	imported := filepath.Join(dir, "imported")
	if code, out, errs := run(t, "import", "--data", imported, "--in", exp1); code != 0 || !strings.Contains(out, "imported") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	exp3 := filepath.Join(dir, "3.ndjson")
	run(t, "export", "--data", imported, "--out", exp3)
	if c, _ := os.ReadFile(exp3); string(c) != string(a) {
		t.Fatal("export → import → export differs")
	}
}

// TestBackupCommandsRefuseBadInput: each refusal is a clear error and
// writes nothing.
func TestBackupCommandsRefuseBadInput(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	s.stop(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "b.skbak")
	if code, _, errs := run(t, "backup", "--data", data, "--to", archive); code != 0 {
		t.Fatal(errs)
	}
	good, _ := os.ReadFile(archive)
	trunc := filepath.Join(dir, "t.skbak")
	os.WriteFile(trunc, good[:len(good)*2/3], 0o600)
	nonEmpty := t.TempDir()
	os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o600)
	for _, c := range []struct {
		args []string
		code int
		say  string
	}{
		{[]string{"restore", "--from", trunc, "--data", filepath.Join(dir, "r1")}, 1, "not a complete, intact"},
		{[]string{"restore", "--from", archive, "--data", nonEmpty}, 1, "not empty"},
		{[]string{"restore", "--from", filepath.Join(dir, "missing"), "--data", filepath.Join(dir, "r2")}, 2, "--from"},
		{[]string{"backup", "--data", data, "--to", archive}, 2, "exists"},
		{[]string{"backup", "--data", data}, 2, "--to"},
		{[]string{"export", "--data", data, "--from", "garbage"}, 2, "not a position"},
		{[]string{"export", "--data", data, "--from", "-1"}, 2, "not a position"},
		{[]string{"export", "--data", data, "--from", "99999999999999999999999"}, 2, "not a position"},
		{[]string{"export", "--data", data, "--from", "5", "--to", "3"}, 2, "after --from"},
		{[]string{"export", "--data", data, "--format", "csv"}, 2, "ndjson"},
		{[]string{"import", "--data", data, "--in", archive}, 1, "not empty"},
	} {
		code, _, errs := run(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.say) {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, errs, c.say)
		}
	}
	for _, d := range []string{"r1", "r2"} {
		if _, err := os.Stat(filepath.Join(dir, d)); !os.IsNotExist(err) {
			t.Errorf("a refused restore created %s", d)
		}
	}
	if ents, _ := os.ReadDir(nonEmpty); len(ents) != 1 {
		t.Error("restore wrote into a non-empty directory")
	}
}

// TestScheduledBackupWhileServing: serve with --backup-every writes a
// backup while it runs (told by its log line), and that backup restores
// and verifies.
func TestScheduledBackupWhileServing(t *testing.T) {
	data, dir := t.TempDir(), t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0", "--backup-dir", dir, "--backup-every", "1s", "--backup-keep", "2")
	s.err.waitFor(t, "backup written")
	s.stop(t)
	files, _ := filepath.Glob(filepath.Join(dir, "slotkeeper-*.skbak"))
	if len(files) == 0 || len(files) > 2 {
		t.Fatalf("backups: %v", files)
	}
	if code, out, errs := run(t, "restore", "--from", files[0], "--data", filepath.Join(t.TempDir(), "r")); code != 0 || !strings.Contains(out, "equals a rebuild") {
		t.Fatalf("restore of a scheduled backup: %d %q %q", code, out, errs)
	}
	if code, _, errs := run(t, "serve", "--backup-dir", dir); code != 2 || !strings.Contains(errs, "--backup-every") {
		t.Fatalf("--backup-dir without --backup-every: %d %q", code, errs)
	}
}

// TestOnlineBackupFromARunningServer: `slotkeeper backup --server` streams a
// consistent archive from a serving process (admin token), checks it whole
// before it takes its name, and it restores and verifies; without an admin
// token the server refuses (401) and no file is written; the route is
// admin-only in the policy table (TestPolicyCoversEveryRouteAndRole).
func TestOnlineBackupFromARunningServer(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	dir := t.TempDir()
	archive := filepath.Join(dir, "online.skbak")
	code, out, errs := run(t, "backup", "--server", s.url(), "--token", s.token, "--to", archive)
	if code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("online backup: %d %q %q", code, out, errs)
	}
	// Without a valid token: 401, and nothing written.
	viewer := filepath.Join(dir, "viewer.skbak")
	if code, _, errs := run(t, "backup", "--server", s.url(), "--token", "skt_not-a-token", "--to", viewer); code == 0 || !strings.Contains(errs, "401") {
		t.Fatalf("backup with a bad token: %d %q", code, errs)
	}
	if _, err := os.Stat(viewer); !os.IsNotExist(err) {
		t.Fatal("a refused backup left a file")
	}
	s.stop(t)
	code, out, errs = run(t, "restore", "--from", archive, "--data", filepath.Join(dir, "restored"))
	if code != 0 || !strings.Contains(out, "equals a rebuild") {
		t.Fatalf("restore of an online backup: %d %q %q", code, out, errs)
	}
}
