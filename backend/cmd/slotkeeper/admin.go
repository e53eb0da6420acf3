package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
)

const adminUsage = `usage: slotkeeper admin <command> NAME [flags]

commands (on a stopped server's store: --data, or --events for KurrentDB):
  create-user NAME --role ROLE     create a local account; prints its password once
  create-token NAME --role ROLE [--expires 720h]
                                   create an API token; prints it once

Roles: viewer, member, operator, admin. Only hashes are stored.
`

// adminCmd runs `slotkeeper admin …`: account and token bootstrap without
// a browser, on the store the flags name, while the server is stopped (the
// embedded store admits one process; with KurrentDB a running server picks
// the new account up from the log).
func adminCmd(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, adminUsage)
		return nil
	}
	sub, args := args[0], args[1:]
	if sub != "create-user" && sub != "create-token" {
		return &usageError{fmt.Sprintf("admin: unknown command %q\n\n%s", sub, adminUsage)}
	}
	// NAME may come before or after the flags.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	var c Config
	fs := flag.NewFlagSet("admin "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Data, "data", "./data", "data directory of the embedded event store")
	fs.StringVar(&c.Events, "events", "", "event store: empty for the embedded store under --data, or kurrentdb://…")
	role := fs.String("role", "", "viewer, member, operator or admin (required)")
	expires := fs.Duration("expires", 720*time.Hour, "create-token: how long the token is valid")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if fs.NArg() > 0 || name == "" {
		return &usageError{fmt.Sprintf("admin %s takes one NAME\n\n%s", sub, adminUsage)}
	}
	if err := applyEnv(fs, env); err != nil {
		return err
	}
	r, err := auth.ParseRole(*role)
	if err != nil {
		return cfgErr("role", "%v", err)
	}
	if err := auth.CheckName(name); err != nil {
		return &usageError{strings.TrimPrefix(err.Error(), "auth: invalid input: ")}
	}
	full := Config{Addr: "localhost:0", Data: c.Data, Events: c.Events, ReadModel: "memory", Sim: "auto",
		StepTimeout: time.Second, JobTimeout: time.Second, Lease: time.Second, Heartbeat: time.Second,
		SSEWriteTimeout: time.Second, SSEResumeWait: time.Second, ShutdownTimeout: time.Second, SSEMaxClients: 1, SSEHistory: 16,
		ReadyInterval: time.Second,
		LogLevel:      "warn", LogFormat: "text", Auth: AuthConfig{SessionIdle: time.Hour, SessionMax: time.Hour}}
	if err := full.validate(); err != nil {
		return err
	}
	store, _, err := openStore(ctx, full, newLogger(full, stderr))
	if err != nil {
		return err
	}
	defer store.Close()
	dir, err := auth.Open(ctx, store, auth.Options{})
	if err != nil {
		return err
	}
	by := auth.SystemSubject("cli")
	switch sub {
	case "create-user":
		u, pw, err := dir.CreateUser(ctx, by, name, r, "")
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "created user %s (role %s, id %s)\npassword: %s\n(shown once; only its hash is stored)\n", u.Name, u.Role, u.ID, pw)
	case "create-token":
		t, secret, err := dir.IssueToken(ctx, by, name, r, *expires)
		if err != nil {
			return adminErr(err)
		}
		fmt.Fprintf(stdout, "created token %s (role %s, id %s, expires %s)\ntoken: %s\n(shown once; only its hash is stored)\n",
			t.Name, t.Role, t.ID, t.ExpiresAt.Format(time.RFC3339), secret)
	}
	return nil
}

func adminErr(err error) error {
	if errors.Is(err, auth.ErrInvalid) || errors.Is(err, auth.ErrExists) {
		return &usageError{strings.TrimPrefix(strings.TrimPrefix(err.Error(), "auth: invalid input: "), "auth: ")}
	}
	return err
}
