package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/projections"
)

// runCLI runs one command in-process and returns its exit code and output.
func runCLI(args ...string) (int, string, string) {
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	code := runWith(context.Background(), args, noEnv, out, errb, nil)
	return code, out.String(), errb.String()
}

func login(t *testing.T, s *server, name, password string) (int, *http.Cookie) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "password": password})
	resp, err := http.Post(s.url()+"/api/auth/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "slotkeeper_session" {
			return resp.StatusCode, c
		}
	}
	return resp.StatusCode, nil
}

// TestAdminCLIAndDemoStart: accounts and tokens made with `slotkeeper
// admin` on a stopped server's data dir (printed once, only hashes in the
// store), then the loopback demo still seeds its pool (auth events are not
// slots) and signs loopback browsers in; the CLI's account signs in with
// its password, the viewer token reads but may not change anything.
func TestAdminCLIAndDemoStart(t *testing.T) {
	data := t.TempDir()
	code, out, errs := runCLI("admin", "create-user", "alice", "--role", "operator", "--data", data)
	pw := regexp.MustCompile(`(?m)^password: (\S+)$`).FindStringSubmatch(out)
	if code != 0 || pw == nil {
		t.Fatalf("create-user: %d %q %q", code, out, errs)
	}
	if code, _, errs := runCLI("admin", "create-user", "ALICE", "--role", "viewer", "--data", data); code != exitUsage || !strings.Contains(errs, "taken") {
		t.Fatalf("duplicate: %d %q", code, errs)
	}
	if code, _, errs := runCLI("admin", "create-token", "x", "--role", "root", "--data", data); code != exitUsage || !strings.Contains(errs, "--role") {
		t.Fatalf("bad role: %d %q", code, errs)
	}
	code, out, _ = runCLI("admin", "create-token", "--role", "viewer", "--expires", "1h", "--data", data, "ci")
	tok := regexp.MustCompile(`(?m)^token: (\S+)$`).FindStringSubmatch(out)
	if code != 0 || tok == nil {
		t.Fatalf("create-token (name after the flags): %d %q", code, out)
	}
	db, err := os.ReadFile(filepath.Join(data, "events.db"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(db, []byte(pw[1])) || bytes.Contains(db, []byte(tok[1])) {
		t.Fatal("the store holds a password or a token in clear")
	}

	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	if !strings.Contains(s.out.String(), "signs you in as demo-admin") {
		t.Fatalf("no demo sign-in notice: %s", s.out.String())
	}
	var list struct {
		Slots []projections.SlotView `json:"slots"`
	}
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 || len(list.Slots) != 8 {
		t.Fatalf("demo pool after auth events: %d, %d slots", code, len(list.Slots))
	}
	if code, ck := login(t, s, "alice", pw[1]); code != 200 || ck == nil || !ck.HttpOnly {
		t.Fatalf("alice signs in: %d %+v", code, ck)
	}
	if code, _ := login(t, s, "alice", pw[1]+"x"); code != 401 {
		t.Fatalf("wrong password: %d", code)
	}
	viewer := &server{addr: s.addr, token: tok[1]}
	if code := viewer.call(t, "GET", "/api/slots", nil, &list); code != 200 {
		t.Fatalf("viewer token reads: %d", code)
	}
	if code := viewer.call(t, "POST", "/api/slots/aurora/teardown", nil, nil); code != 403 {
		t.Fatalf("viewer token tears down: %d", code)
	}
	for _, secret := range []string{pw[1], tok[1], s.token} {
		if strings.Contains(s.err.String(), secret) {
			t.Fatal("a secret is in the server's log")
		}
	}
}

// TestFirstAdminWithoutAutoLogin: a start with no account and no loopback
// demo sign-in creates "admin", prints its password once and writes it to
// <data>/initial-admin-password (0600), removed at its first sign-in; a
// restart creates nothing more.
func TestFirstAdminWithoutAutoLogin(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0", "--demo-autologin=false")
	m := regexp.MustCompile(`sign in as "admin" with password (\S+)`).FindStringSubmatch(s.out.String())
	if m == nil {
		t.Fatalf("no first admin printed: %s", s.out.String())
	}
	p := filepath.Join(data, InitialPasswordFile)
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", p, err, st)
	}
	if b, _ := os.ReadFile(p); strings.TrimSpace(string(b)) != m[1] {
		t.Fatal("the file and the printed password differ")
	}
	if strings.Contains(s.err.String(), m[1]) {
		t.Fatal("the password is in the log")
	}
	if code, _ := login(t, s, "admin", m[1]); code != 200 {
		t.Fatalf("admin signs in: %d", code)
	}
	// The file is removed once the account has signed in (issue 25).
	s.err.waitFor(t, "removed the initial admin password file")
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the initial password file outlived the first sign-in: %v", err)
	}
	resp, err := http.Get(s.url() + "/api/auth/me")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"signed_in":false`) || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("no automatic sign-in with --demo-autologin=false: %d %s", resp.StatusCode, body)
	}
	s.stop(t)
	s = startServe(t, data, "127.0.0.1:0", "--workers", "0", "--demo-autologin=false")
	if strings.Contains(s.out.String(), "created the first account") {
		t.Fatal("a restart created another admin")
	}
}

func TestAuthConfigErrorsNameTheSetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--trusted-proxies", "10.0.0.0/99"}, "--trusted-proxies (SLOTKEEPER_TRUSTED_PROXIES)"},
		{[]string{"--oidc-role-map", "ops=boss"}, "--oidc-role-map (SLOTKEEPER_OIDC_ROLE_MAP)"},
		{[]string{"--oidc-issuer", "http://127.0.0.1:1/x"}, "--oidc-client-id"},
		{[]string{"--session-idle", "2h", "--session-max", "1h"}, "--session-max"},
	} {
		code, _, errs := runCLI(append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Fatalf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, errs, tc.want)
		}
	}
}
