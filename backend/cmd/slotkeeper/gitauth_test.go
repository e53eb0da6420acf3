package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestGitAuthSettings: bearer is the default and sends no user name; basic
// needs the personal token owner's username; the old default user
// x-token-auth (a Bitbucket Cloud convention) is refused with the fix.
func TestGitAuthSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := parseServe(nil, env(nil), io.Discard)
	if err != nil || c.GitAuth != "bearer" || c.GitUser != "" {
		t.Fatalf("defaults: %q %q %v; want bearer without a user", c.GitAuth, c.GitUser, err)
	}
	c, err = parseServe([]string{"--git-auth", "basic", "--git-user", "alice"}, env(nil), io.Discard)
	if err != nil || c.GitAuth != "basic" || c.GitUser != "alice" {
		t.Fatalf("basic as alice: %q %q %v", c.GitAuth, c.GitUser, err)
	}
	for _, tc := range []struct {
		args    []string
		env     map[string]string
		setting string
		hint    string
	}{
		{[]string{"--git-auth", "token"}, nil, "--git-auth", "bearer or basic"},
		{[]string{"--git-auth", "basic"}, nil, "--git-user", "owner"},
		{[]string{"--git-auth", "basic", "--git-user", "x-token-auth"}, nil, "--git-user", "Bitbucket Cloud"},
		// A deployment that set the old default explicitly is told to drop it.
		{nil, map[string]string{"SLOTKEEPER_GIT_USER": "x-token-auth"}, "--git-user", "only with --git-auth basic"},
	} {
		_, err := parseServe(tc.args, env(tc.env), io.Discard)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Setting, tc.setting) || !strings.Contains(ce.Problem, tc.hint) {
			t.Errorf("%v %v: got %v; want %s naming %q", tc.args, tc.env, err, tc.setting, tc.hint)
		}
	}
}
