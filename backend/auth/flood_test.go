package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// holdHashes makes every password hash announce itself on arrived and
// wait until release is called, so a test sees how many hashes a burst of
// concurrent sign-ins started, without timing.
func holdHashes(t *testing.T) (arrived <-chan struct{}, release func()) {
	t.Helper()
	ch := make(chan struct{}, 1000)
	gate := make(chan struct{})
	hashing = func() {
		ch <- struct{}{}
		<-gate
	}
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(func() { release(); hashing = nil })
	return ch, release
}

// Issue 33 item 1: 100 wrong passwords for one account from one address,
// sent at once, used to be hashed all (the limiter was checked before the
// hash and charged after it). Now an attempt holds its limiter token before
// hashing, so at most the account's burst (5) hash; the rest are refused
// without hashing.
func TestConcurrentFailedSignInsHashAtMostTheBurst(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, memstore.New(), clk)
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleViewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	s := NewService(d, Config{Now: clk.Now, HashConcurrency: 8})
	arrived, release := holdHashes(t)
	const n = 100
	results := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			_, _, _, err := s.Login(ctx, "bob", "wrong password!", "10.0.0.2")
			results <- err
		}()
	}
	// Every attempt either returns at once (refused) or waits in its hash.
	var refused []error
	inHash := 0
	for len(refused)+inHash < n {
		select {
		case err := <-results:
			refused = append(refused, err)
		case <-arrived:
			inHash++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d returned, %d hashing, of %d", len(refused), inHash, n)
		}
	}
	if got := inHash; got > 5 {
		t.Fatalf("%d password hashes ran at once; want at most the account's burst (5)", got)
	}
	var limited, busy int
	for _, err := range refused {
		var le *LimitedError
		var be *BusyError
		switch {
		case errors.As(err, &le):
			limited++
		case errors.As(err, &be):
			busy++
		default:
			t.Fatalf("refused attempt: %v", err)
		}
	}
	release()
	bad := 0
	for i := 0; i < inHash; i++ {
		if err := <-results; errors.Is(err, ErrBadCredentials) {
			bad++
		} else {
			t.Fatalf("hashed attempt: %v", err)
		}
	}
	if bad != 5 || busy != 0 || limited != n-5 {
		t.Fatalf("hashed %d, busy %d, limited %d: the account's burst is 5", bad, busy, limited)
	}
	// The failures were charged: the right password now waits too.
	var le *LimitedError
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.2"); !errors.As(err, &le) {
		t.Fatalf("after the flood: %v", err)
	}
}

// Beyond HashConcurrency a sign-in is refused with BusyError at once (503
// with Retry-After), its limiter tokens given back: it did not hash.
func TestSignInBeyondHashConcurrencyIsBusy(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, memstore.New(), clk)
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleViewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	s := NewService(d, Config{Now: clk.Now, HashConcurrency: 2})
	arrived, release := holdHashes(t)
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func(i int) {
			_, _, _, err := s.Login(ctx, fmt.Sprintf("user%d", i), "x", fmt.Sprintf("10.0.1.%d", i))
			done <- err
		}(i)
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			t.Fatalf("returned before its hash: %v", err)
		case <-arrived:
		}
	}
	third := make(chan error, 1)
	go func() {
		_, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.3")
		third <- err
	}()
	var be *BusyError
	select {
	case <-arrived:
		t.Fatal("a third password hash started beyond HashConcurrency (2)")
	case err := <-third:
		if !errors.As(err, &be) || be.RetryAfter <= 0 {
			t.Fatalf("third concurrent sign-in: %v", err)
		}
	}
	release()
	<-done
	<-done
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.3"); err != nil {
		t.Fatalf("after the others finished: %v", err)
	}
}

// Correct sign-ins are bounded per source too (each hashes and appends
// SessionStarted): 20 at once, then one per 3 s; another source is not
// affected.
func TestSuccessfulSignInsAreLimitedPerSource(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := newDir(t, memstore.New(), clk)
	if _, _, err := d.CreateUser(ctx, admin, "bob", RoleViewer, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	s := NewService(d, Config{Now: clk.Now})
	for i := 0; i < 20; i++ {
		if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1"); err != nil {
			t.Fatalf("sign-in %d: %v", i, err)
		}
	}
	var le *LimitedError
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1"); !errors.As(err, &le) {
		t.Fatalf("21st sign-in from one source: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.4"); err != nil {
		t.Fatalf("another source: %v", err)
	}
	clk.Add(3 * time.Second)
	if _, _, _, err := s.Login(ctx, "bob", "correct horse battery", "10.0.0.1"); err != nil {
		t.Fatalf("after 3 s: %v", err)
	}
}
