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
// (0600, under --data) when it creates that account.
const InitialPasswordFile = "initial-admin-password"

// authSide is what serve wires into the API for sign-in.
type authSide struct {
	svc       *auth.Service
	autoLogin httpapi.AutoLogin
}

// openAuth opens the account directory on store and makes sure someone can
// sign in:
//   - the demo (simulators and demo pool) bound only to loopback signs
//     loopback browsers in as demo-admin, an account created once (its
//     password is never shown: it signs in only this way);
//   - otherwise, when no account exists but demo-admin, it creates "admin"
//     with a random password, prints it once and writes it to
//     <data>/initial-admin-password (0600).
func openAuth(ctx context.Context, c Config, store events.Store, demo bool, stdout io.Writer, log *slog.Logger) (authSide, error) {
	dir, err := auth.Open(ctx, store, auth.Options{Logger: log})
	if err != nil {
		return authSide{}, fmt.Errorf("open the account directory: %w", err)
	}
	side := authSide{svc: auth.NewService(dir, auth.Config{Sessions: auth.SessionOptions{Idle: c.Auth.SessionIdle, Absolute: c.Auth.SessionMax}})}
	if demo && c.Auth.DemoAutologin && loopbackOnly(c.Addr) {
		u, ok := dir.UserByName(DemoAdmin)
		if !ok {
			if u, _, err = dir.CreateUser(ctx, auth.SystemSubject("demo"), DemoAdmin, auth.RoleAdmin, ""); err != nil {
				return authSide{}, fmt.Errorf("create %s: %w", DemoAdmin, err)
			}
		}
		id := u.ID
		side.autoLogin = func(context.Context) (auth.User, bool) { return dir.User(id) }
		fmt.Fprintf(stdout, "slotkeeper: demo on loopback: the dashboard signs you in as %s (--demo-autologin=false to sign in with an account)\n", DemoAdmin)
		return side, nil
	}
	for _, u := range dir.Users() {
		if u.Name != DemoAdmin {
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
	where := ""
	if err := os.MkdirAll(c.Data, 0o700); err == nil {
		p := filepath.Join(c.Data, InitialPasswordFile)
		if err := os.WriteFile(p, []byte(pw+"\n"), 0o600); err == nil {
			where = " (also in " + p + ")"
		}
	}
	fmt.Fprintf(stdout, "slotkeeper: created the first account: sign in as %q with password %s%s\n", u.Name, pw, where)
	return side, nil
}
