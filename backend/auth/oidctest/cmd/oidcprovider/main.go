// Command oidcprovider is a real OpenID Connect provider on loopback for
// the browser tests (e2e/tests/oidc.test.js): github.com/oauth2-proxy/mockoidc
// on 127.0.0.1, a random port. It is a test tool, not part of slotkeeper.
//
// On start it prints one JSON line to stdout:
//
//	{"issuer":"http://127.0.0.1:PORT/oidc","client_id":"…","client_secret":"…"}
//
// Then each JSON line on stdin names the user the next sign-in returns,
//
//	{"sub":"s-1","preferred_username":"sam","email":"sam@x","groups":["sre"]}
//
// and is answered with {"queued":"<sub>"} once queued (the provider answers
// its authorization request at once, without a login form, with the next
// queued user). It stops at the end of stdin or on SIGINT/SIGTERM.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/oauth2-proxy/mockoidc"
)

type user struct {
	Sub               string   `json:"sub"`
	PreferredUsername string   `json:"preferred_username"`
	Email             string   `json:"email"`
	Groups            []string `json:"groups"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := m.Start(ln, nil); err != nil {
		return err
	}
	defer func() { _ = m.Shutdown() }()
	cfg := m.Config()
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(map[string]string{"issuer": cfg.Issuer, "client_id": cfg.ClientID, "client_secret": cfg.ClientSecret}); err != nil {
		return err
	}

	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			var u user
			if err := json.Unmarshal(line, &u); err != nil || u.Sub == "" {
				_ = out.Encode(map[string]string{"error": "want a JSON line with at least \"sub\""})
				continue
			}
			m.QueueUser(&mockoidc.MockUser{Subject: u.Sub, PreferredUsername: u.PreferredUsername, Email: u.Email, EmailVerified: u.Email != "", Groups: u.Groups})
			if err := out.Encode(map[string]string{"queued": u.Sub}); err != nil {
				return err
			}
		}
	}
}
