package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// TestWriteTimeoutAndClosedPRFlags: --write-timeout, --closed-prs and
// --closed-pr-age default to the packages' defaults, read a flag or their
// variable, and refuse a value outside their range with an error naming
// the setting and the range, before anything is opened.
func TestWriteTimeoutAndClosedPRFlags(t *testing.T) {
	c, err := parseServe(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.WriteTimeout != httpapi.DefaultWriteTimeout || c.ClosedPRs != memory.DefaultClosedPRs || c.ClosedPRAge != memory.DefaultClosedPRAge {
		t.Fatalf("defaults: write %s, closed %d within %s", c.WriteTimeout, c.ClosedPRs, c.ClosedPRAge)
	}
	c, err = parseServe([]string{"--write-timeout", "90s", "--closed-prs", "50"}, func(k string) string {
		return map[string]string{"SLOTKEEPER_CLOSED_PR_AGE": "48h", "SLOTKEEPER_CLOSED_PRS": "999"}[k]
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.WriteTimeout != 90*time.Second || c.ClosedPRs != 50 || c.ClosedPRAge != 48*time.Hour {
		t.Fatalf("set: write %s, closed %d within %s", c.WriteTimeout, c.ClosedPRs, c.ClosedPRAge)
	}
	// The admin command validates the config replay and verify build.
	off := offlineConfig(t.TempDir(), "", "memory", "warn")
	if err := off.validate(); err != nil {
		t.Fatalf("offline config: %v", err)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--write-timeout", "59s"}, nil, "--write-timeout (SLOTKEEPER_WRITE_TIMEOUT): use 1m..1h"},
		{[]string{"--write-timeout", "0s"}, nil, "--write-timeout (SLOTKEEPER_WRITE_TIMEOUT): use 1m..1h"},
		{[]string{"--write-timeout", "61m"}, nil, "--write-timeout (SLOTKEEPER_WRITE_TIMEOUT): use 1m..1h"},
		{[]string{"--write-timeout", "soon"}, nil, "--write-timeout (SLOTKEEPER_WRITE_TIMEOUT)"},
		{[]string{"--closed-prs", "49"}, nil, "--closed-prs (SLOTKEEPER_CLOSED_PRS): use 50..1000000"},
		{[]string{"--closed-prs", "-1"}, nil, "--closed-prs (SLOTKEEPER_CLOSED_PRS): use 50..1000000"},
		{nil, map[string]string{"SLOTKEEPER_CLOSED_PRS": "1000001"}, "--closed-prs (SLOTKEEPER_CLOSED_PRS): use 50..1000000"},
		{nil, map[string]string{"SLOTKEEPER_CLOSED_PRS": "many"}, "SLOTKEEPER_CLOSED_PRS"},
		{[]string{"--closed-pr-age", "59m"}, nil, "--closed-pr-age (SLOTKEEPER_CLOSED_PR_AGE): use 1h..8760h"},
		{[]string{"--closed-pr-age", "8761h"}, nil, "--closed-pr-age (SLOTKEEPER_CLOSED_PR_AGE): use 1h..8760h"},
		{[]string{"--closed-pr-age", "7d"}, nil, "--closed-pr-age (SLOTKEEPER_CLOSED_PR_AGE)"},
	} {
		t.Run(strings.Join(tc.args, " ")+strings.Join(mapKeys(tc.env), ""), func(t *testing.T) {
			data := t.TempDir()
			errb := newSyncBuffer()
			args := append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, tc.args...)
			code := runWith(context.Background(), args, func(k string) string { return tc.env[k] }, io.Discard, errb, nil)
			if code != exitUsage || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %q", code, errb.String(), tc.want)
			}
			// Nothing was started: no store was created in --data.
			if ents, err := os.ReadDir(data); err != nil || len(ents) > 0 {
				t.Fatalf("--data holds %v (%v) after a refused configuration", ents, err)
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// TestClosedPRLimitsReachTheReadModel: the memory read model serve opens
// keeps the closed pull requests the flags say; a Config built in code
// (replay's, 0) has the defaults.
func TestClosedPRLimitsReachTheReadModel(t *testing.T) {
	c, err := parseServe([]string{"--closed-prs", "75", "--closed-pr-age", "48h"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	for _, tc := range []struct {
		c        Config
		prs      int
		age      time.Duration
		readSide bool
	}{
		{c, 75, 48 * time.Hour, false},
		{c, 75, 48 * time.Hour, true},
		{Config{ReadModel: "memory"}, memory.DefaultClosedPRs, memory.DefaultClosedPRAge, false},
	} {
		var rm any
		if tc.readSide {
			rs, err := openReadSide(context.Background(), tc.c, store, func(error) {})
			if err != nil {
				t.Fatal(err)
			}
			rm = rs.feedView
		} else {
			target, closeRM, err := openReadModel(context.Background(), tc.c, store)
			if err != nil {
				t.Fatal(err)
			}
			defer closeRM()
			rm = target
		}
		m, ok := rm.(*memory.Store)
		if !ok {
			t.Fatalf("read model %T, want the memory one", rm)
		}
		if l := m.Limits(); l.ClosedPRs != tc.prs || l.ClosedPRAge != tc.age {
			t.Fatalf("read model keeps %d closed PRs within %s, want %d within %s", l.ClosedPRs, l.ClosedPRAge, tc.prs, tc.age)
		}
	}
}

// TestWriteTimeoutReachesTheServer: --write-timeout is the HTTP server's
// WriteTimeout and the API's (the backup download's per-write deadline).
// The cut itself is httpapi's TestUnreadAnswerIsCutAtTheWriteDeadline.
func TestWriteTimeoutReachesTheServer(t *testing.T) {
	c, err := parseServe([]string{"--data", t.TempDir(), "--addr", "127.0.0.1:0", "--write-timeout", "90s",
		"--drain-delay", "0s", "--warn-before", "", "--workers", "0"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ server, api time.Duration }
	got := make(chan seen, 1)
	c.serving = func(l *httpapi.Listener, d httpapi.Deps) { got <- seen{l.WriteTimeout(), d.WriteTimeout} }
	ctx, cancel := context.WithCancel(context.Background())
	ready, exit := make(chan string, 1), make(chan error, 1)
	errb := newSyncBuffer()
	go func() { exit <- serve(ctx, c, io.Discard, errb, ready) }()
	defer func() {
		cancel()
		select {
		case err := <-exit:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop:\n%s", errb.String())
		}
	}()
	select {
	case <-ready:
	case err := <-exit:
		t.Fatalf("serve stopped during start: %v\n%s", err, errb.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve not ready:\n%s", errb.String())
	}
	if s := <-got; s.server != 90*time.Second || s.api != 90*time.Second {
		t.Fatalf("server WriteTimeout %s, API WriteTimeout %s; want 90s both", s.server, s.api)
	}
}
