package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// token is a distinctive value that must never be printed.
const token = "tok-7f3c9e2a-DO-NOT-PRINT"

// TestConfigNeverEchoesAValue: a token pasted into the wrong setting — a
// URL flag, a number flag, an environment variable — gets an error naming
// the setting, and the token appears nowhere in the output.
func TestConfigNeverEchoesAValue(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--coolify-url", token, "--coolify-token", "x", "--bitbucket-url", "https://b.test", "--bitbucket-token", "y"}, nil, "--coolify-url (SLOTKEEPER_COOLIFY_URL)"},
		{[]string{"--workers", token}, nil, "--workers (SLOTKEEPER_WORKERS)"},
		{[]string{"--deadline-reset=" + token}, nil, "--deadline-reset (SLOTKEEPER_DEADLINE_RESET)"},
		{nil, map[string]string{"SLOTKEEPER_GRACE": token}, "SLOTKEEPER_GRACE"},
		{[]string{"--webhook-url", token}, nil, "--webhook-url (SLOTKEEPER_WEBHOOK_URL)"},
		{[]string{"--addr", token}, nil, "--addr (SLOTKEEPER_ADDR)"},
		{[]string{"--events", "mysql://" + token}, nil, "--events"},
		{[]string{"--read-model", token}, nil, "--read-model"},
		{[]string{"--sim", token}, nil, "--sim"},
		{[]string{"--log-level", token}, nil, "--log-level"},
		{[]string{"--coolify-projects", token}, nil, "--coolify-projects"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			code, stderr := runConfig(t, tc.args, tc.env)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 2 naming %q", code, stderr, tc.want)
			}
			if strings.Contains(stderr, "DO-NOT-PRINT") {
				t.Fatalf("stderr shows the value: %s", stderr)
			}
		})
	}
}

func runConfig(t *testing.T, args []string, env map[string]string) (int, string) {
	t.Helper()
	out, errb := newSyncBuffer(), newSyncBuffer()
	all := append([]string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}, args...)
	code := runWith(context.Background(), all, func(k string) string { return env[k] }, out, errb, nil)
	return code, errb.String() + out.String()
}

// TestSecretsFromFiles: every token setting reads from a file, by flag or
// by variable; giving both is an error; a missing or empty file names the
// setting; plain http:// provider URLs need --allow-insecure-http.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctok, btok := write("coolify", token+"\n"), write("bitbucket", "bb-"+token+"\r\n")
	wsec, wurl := write("secret", "whsec\n"), write("url", "https://hooks.test/services/X\n")
	c, err := parseServe([]string{
		"--coolify-url", "https://c.test/api/v1", "--coolify-token-file", ctok,
		"--bitbucket-url", "https://b.test", "--webhook-secret-file", wsec,
		"--coolify-projects", "*", "--bitbucket-projects", "*",
	}, func(k string) string {
		return map[string]string{"SLOTKEEPER_BITBUCKET_TOKEN_FILE": btok, "SLOTKEEPER_WEBHOOK_URL_FILE": wurl}[k]
	}, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if c.CoolifyToken != token || c.BitbucketToken != "bb-"+token || c.WebhookSecret != "whsec" || c.WebhookURL != "https://hooks.test/services/X" {
		t.Fatalf("read %q %q %q %q", c.CoolifyToken, c.BitbucketToken, c.WebhookSecret, c.WebhookURL)
	}
	real := []string{"--coolify-url", "https://c.test/api/v1", "--bitbucket-url", "https://b.test", "--bitbucket-token", "y"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"--coolify-token", "x", "--coolify-token-file", ctok}, real...), "--coolify-token-file (SLOTKEEPER_COOLIFY_TOKEN_FILE): give either"},
		{append([]string{"--coolify-token-file", filepath.Join(dir, "nope")}, real...), "--coolify-token-file (SLOTKEEPER_COOLIFY_TOKEN_FILE): cannot read"},
		{append([]string{"--coolify-token-file", write("empty", "\n")}, real...), "--coolify-token-file (SLOTKEEPER_COOLIFY_TOKEN_FILE): " + filepath.Join(dir, "empty") + " is empty"},
		{[]string{"--coolify-url", "http://c.test/api/v1", "--coolify-token-file", ctok, "--bitbucket-url", "https://b.test", "--bitbucket-token", "y"}, "--coolify-url (SLOTKEEPER_COOLIFY_URL): plain http://"},
	} {
		code, out := runConfig(t, tc.args, nil)
		if code != exitUsage || !strings.Contains(out, tc.want) || strings.Contains(out, "DO-NOT-PRINT") {
			t.Errorf("%v: exit %d, %q; want 2 and %q, no token", tc.args, code, out, tc.want)
		}
	}
	if _, err := parseServe([]string{"--allow-insecure-http", "--coolify-url", "http://c.test/api/v1", "--coolify-token", "x",
		"--bitbucket-url", "http://b.test", "--bitbucket-token", "y", "--coolify-projects", "*", "--bitbucket-projects", "*"}, noEnv, os.Stderr); err != nil {
		t.Errorf("with --allow-insecure-http: %v", err)
	}
}

// TestRealProvidersNeedAScope: with real providers serve does not start
// without --coolify-projects and --bitbucket-projects, naming the missing
// one; "*" is the explicit "any", and stands alone. Before, an empty
// --bitbucket-projects let a slot name any repository (PROD/prod-repo → 201,
// and its reset would force-push the template over it). The simulators
// (embedded or --sim-url) keep empty as any.
func TestRealProvidersNeedAScope(t *testing.T) {
	real := []string{"--coolify-url", "https://c.test/api/v1", "--coolify-token", "x", "--bitbucket-url", "https://b.test", "--bitbucket-token", "y"}
	with := func(extra ...string) []string { return append(append([]string(nil), real...), extra...) }
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{with(), nil, "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): required with real providers"},
		{with("--coolify-projects", "abc1234"), nil, "--bitbucket-projects (SLOTKEEPER_BITBUCKET_PROJECTS): required with real providers"},
		{with("--bitbucket-projects", "PROJ"), nil, "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): required"},
		{with("--coolify-projects", " , ", "--bitbucket-projects", "PROJ"), nil, "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): required"},
		{with("--coolify-projects", "*"), map[string]string{"SLOTKEEPER_BITBUCKET_PROJECTS": ""}, "--bitbucket-projects (SLOTKEEPER_BITBUCKET_PROJECTS): required"},
		{with("--coolify-projects", "*,abc1234", "--bitbucket-projects", "PROJ"), nil, "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): * (any project) stands alone"},
		{[]string{"--sim", "off", "--coolify-url", "https://c.test/api/v1", "--coolify-token", "x", "--bitbucket-url", "https://b.test", "--bitbucket-token", "y", "--coolify-projects", "*"}, nil, "--bitbucket-projects"},
	} {
		// parseServe, not a run: were the check missing, serve would start
		// on the real (unreachable) providers instead of failing.
		_, err := parseServe(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: %v; want a config error saying %q", tc.args, tc.env, err, tc.want)
		}
	}
	for _, args := range [][]string{
		with("--coolify-projects", "*", "--bitbucket-projects", "*"),
		with("--coolify-projects", "abc1234,def5678", "--bitbucket-projects", "PROJ, OTHER"),
		{}, // the embedded simulators: empty is any (the demo)
		{"--sim-url", "http://127.0.0.1:9", "--coolify-token", "x", "--bitbucket-token", "y"},
	} {
		if _, err := parseServe(args, noEnv, os.Stderr); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if got := scopeList("*"); got != nil {
		t.Errorf("scopeList(*) = %v, want none (any)", got)
	}
}

// Issue 33 item 6: --sim-url skipped the real-provider checks whatever it
// pointed at, so --sim-url https://coolify.example.com (a real provider)
// ran without a scope, and http://… sent the tokens in the clear. Off
// loopback, the same rules as for real providers apply: https (or
// --allow-insecure-http) and both scopes. On loopback nothing changes.
func TestSimURLOffLoopbackMeetsTheRealProviderChecks(t *testing.T) {
	toks := []string{"--coolify-token", "x", "--bitbucket-token", "y"}
	args := func(url string, extra ...string) []string {
		return append(append([]string{"--sim-url", url}, toks...), extra...)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args("http://sim:9090", "--coolify-projects", "*", "--bitbucket-projects", "*"), "--sim-url (SLOTKEEPER_SIM_URL): plain http:// would send the token unencrypted"},
		{args("http://10.0.0.5:9090", "--coolify-projects", "*", "--bitbucket-projects", "*"), "plain http://"},
		{args("https://coolify.example.com"), "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): required"},
		{args("https://coolify.example.com", "--coolify-projects", "*"), "--bitbucket-projects (SLOTKEEPER_BITBUCKET_PROJECTS): required"},
		{args("http://sim:9090", "--allow-insecure-http"), "--coolify-projects (SLOTKEEPER_COOLIFY_PROJECTS): required"},
		{args("http://localhost.example.com:9090", "--coolify-projects", "*", "--bitbucket-projects", "*"), "plain http://"},
	} {
		_, err := parseServe(tc.args, noEnv, io.Discard)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a config error saying %q", tc.args, err, tc.want)
		}
	}
	for _, a := range [][]string{
		args("http://127.0.0.1:9"),
		args("http://localhost:9"),
		args("http://[::1]:9"),
		args("https://sim.example.com", "--coolify-projects", "*", "--bitbucket-projects", "*"),
		args("http://sim:9090", "--allow-insecure-http", "--coolify-projects", "*", "--bitbucket-projects", "PROJ"),
	} {
		if _, err := parseServe(a, noEnv, io.Discard); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
}
