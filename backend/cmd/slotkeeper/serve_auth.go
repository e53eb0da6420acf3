package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/httpapi"
	"github.com/slotkeeper/slotkeeper/events"
)

// DemoAdmin is the account the loopback demo signs browsers in as.
const DemoAdmin = "demo-admin"

// InitialPasswordFile is where serve writes the first admin's password
// (0600, under --data) when it creates that account on the embedded store.
// It is removed once that account has signed in or changed its password.
const InitialPasswordFile = "initial-admin-password"

// authSide is what serve wires into the API for sign-in.
type authSide struct {
	svc       *auth.Service
	autoLogin httpapi.AutoLogin
}

// openAuth opens the account directory on store and makes sure someone can
// sign in:
//   - the demo (simulators and demo pool) bound only to loopback offers
//     loopback browsers a sign-in as demo-admin without a password
//     ("Continue as demo-admin", POST /api/auth/demo), an account created
//     once (its password is never shown: it signs in only this way);
//   - otherwise, when no account exists but demo-admin, it creates "admin"
//     with a random password and prints it once on stdout. On the embedded
//     store (one process owns --data) it also writes it to
//     <data>/initial-admin-password (0600) and removes the file once the
//     account has signed in or changed its password. On a shared store
//     (--events) no file is written: the other processes' --data would not
//     have it, so the password is only on the stdout of the process that
//     created the account (or create the account first with
//     `slotkeeper admin create-user`).
func openAuth(ctx context.Context, c Config, store events.Store, demo bool, stdout io.Writer, log *slog.Logger) (authSide, error) {
	dir, err := auth.Open(ctx, store, auth.Options{Logger: log})
	if err != nil {
		return authSide{}, fmt.Errorf("open the account directory: %w", err)
	}
	side := authSide{svc: auth.NewService(dir, auth.Config{Sessions: auth.SessionOptions{Idle: c.Auth.SessionIdle, Absolute: c.Auth.SessionMax, OIDCRecheck: c.Auth.OIDCRecheck}})}
	if demo && c.Auth.DemoAutologin && loopbackOnly(c.Addr) {
		u, ok := dir.UserByName(DemoAdmin)
		if !ok {
			if u, _, err = dir.CreateUser(ctx, auth.SystemSubject("demo"), DemoAdmin, auth.RoleAdmin, ""); err != nil {
				return authSide{}, fmt.Errorf("create %s: %w", DemoAdmin, err)
			}
		}
		id := u.ID
		side.autoLogin = func(context.Context) (auth.User, bool) { return dir.User(id) }
		fmt.Fprintf(stdout, "slotkeeper: demo on loopback: the dashboard signs you in as %s with one click (--demo-autologin=false to sign in with an account)\n", DemoAdmin)
		return side, nil
	}
	pwFile := filepath.Join(c.Data, InitialPasswordFile)
	for _, u := range dir.Users() {
		if u.Name != DemoAdmin {
			if _, err := os.Stat(pwFile); err == nil && u.Name == "admin" && u.CreatedBy == auth.SystemSubject("bootstrap").Name && c.Events == "" {
				go removeWhenUsed(ctx, dir, u.ID, pwFile, log) // a file from an earlier start
			}
			return side, nil
		}
	}
	u, pw, err := dir.CreateUser(ctx, auth.SystemSubject("bootstrap"), "admin", auth.RoleAdmin, "")
	if errors.Is(err, auth.ErrExists) {
		return side, nil // another process sharing the log created it first
	}
	if err != nil {
		return authSide{}, fmt.Errorf("create the first admin: %w", err)
	}
	where := " (shown only here: this store is shared, so no file is written)"
	if c.Events == "" {
		where = ""
		if err := os.MkdirAll(c.Data, 0o700); err == nil {
			if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err == nil {
				where = " (also in " + pwFile + " until it signs in or changes the password)"
				go removeWhenUsed(ctx, dir, u.ID, pwFile, log)
			}
		}
	}
	fmt.Fprintf(stdout, "slotkeeper: created the first account: sign in as %q with password %s%s\n", u.Name, pw, where)
	return side, nil
}

// removeWhenUsed removes the initial password file once account id has
// signed in or changed its password (the directory follows the log, so a
// sign-in is seen the moment it is applied), or when ctx ends first, not
// at all. A file already gone is fine.
func removeWhenUsed(ctx context.Context, dir *auth.Directory, id, file string, log *slog.Logger) {
	for {
		changed := dir.Changed()
		if dir.Used(id) {
			err := os.Remove(file)
			switch {
			case err == nil:
				log.Info("removed the initial admin password file: the account has signed in or changed its password", slog.String("file", file))
			case !errors.Is(err, os.ErrNotExist):
				log.Warn("cannot remove the initial admin password file", slog.String("file", file), slog.String("error", err.Error()))
			}
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
