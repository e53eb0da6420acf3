package auth

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// BenchmarkLookup resolves a bearer token and a session cookie in a
// directory of 1,000 tokens and 1,000 sessions (of 100 accounts), in the
// same run: the token lookup is the baseline (one hash, one map access);
// the session lookup adds the expiry check and marking it used. Neither
// reads the log.
func BenchmarkLookup(b *testing.B) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	store := memstore.New()
	d, err := Open(ctx, store, Options{Argon2: testArgon2, Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	svc := NewService(d, Config{Now: clk.Now})
	var tok, sid string
	for i := 0; i < 1000; i++ {
		if _, tok, err = d.IssueToken(ctx, admin, "t"+strconv.Itoa(i), RoleViewer, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if _, _, err := d.CreateUser(ctx, admin, "u"+strconv.Itoa(i), RoleMember, "a long password"); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ {
		u, _ := d.UserByName("u" + strconv.Itoa(i%100))
		if sid, _, err = svc.StartSession(ctx, u.ID, "password"); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("token", func(b *testing.B) {
		for b.Loop() {
			if _, ok := svc.TokenSubject(tok); !ok {
				b.Fatal("token refused")
			}
		}
	})
	b.Run("session", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := svc.SessionSubject(ctx, sid); !ok {
				b.Fatal("session refused")
			}
		}
	})
}
