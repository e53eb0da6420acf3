package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// BenchmarkAuthOverhead measures what authentication costs on GET
// /api/slots and on a command (extend), against the same call on a server
// with authentication off, in the same run: each iteration sends one
// request to each server, alternating, and the benchmark reports both
// times and their ratio (target ≤ 1.1). The directory holds 1,000 tokens,
// 100 accounts and 1,000 browser sessions, so a lookup that scanned them,
// or read the log, would show. "slots" and "command" authenticate with a
// bearer token, "slots-session" with a session cookie (a session lookup:
// one hash and one map access; its coarse activity record does not fall
// inside a run, the recording interval being 15 minutes).
func BenchmarkAuthOverhead(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newBenchPipeline(ctx)
	log, store, rm, runner, hub := p.log, p.store, p.rm, p.runner, p.hub
	dir, err := auth.Open(ctx, store, auth.Options{Argon2: testArgon2})
	if err != nil {
		b.Fatal(err)
	}
	sys := auth.SystemSubject("bench")
	for i := 0; i < 1000; i++ {
		if _, _, err := dir.IssueToken(ctx, sys, "t"+strings.Repeat("x", i%7)+itoa(i), auth.RoleViewer, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if _, _, err := dir.CreateUser(ctx, sys, "u"+itoa(i), auth.RoleMember, "a long password"); err != nil {
			b.Fatal(err)
		}
	}
	_, tok, err := dir.IssueToken(ctx, sys, "bench", auth.RoleAdmin, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	authSvc := auth.NewService(dir, auth.Config{})
	var cookie string
	for i := 0; i < 1000; i++ {
		u, _ := dir.UserByName("u" + itoa(i%100))
		sid, _, err := authSvc.StartSession(ctx, u.ID, "password")
		if err != nil {
			b.Fatal(err)
		}
		cookie = SessionCookie + "=" + sid
	}
	svc := slots.NewService(store, slots.Config{Logger: log})
	base := Deps{Commands: svc, Reads: rm, Log: store, Waiter: runner, Hub: hub, Logger: log,
		Ready: func(context.Context) error { return nil }, CommandsPerSecond: -1}
	withAuth, noAuth := base, base
	withAuth.Auth = authSvc
	noAuth.NoAuth = true
	sa, err := New(withAuth)
	if err != nil {
		b.Fatal(err)
	}
	sn, err := New(noAuth)
	if err != nil {
		b.Fatal(err)
	}
	// authed: "" none, "token" bearer, "cookie" session.
	send := func(h http.Handler, method, path, body string, authed string) time.Duration {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, rd)
		if method != http.MethodGet {
			req.Header.Set("Content-Type", "application/json")
		}
		switch authed {
		case "token":
			req.Header.Set("Authorization", "Bearer "+tok)
		case "cookie":
			req.Header.Set("Cookie", cookie)
		}
		w := httptest.NewRecorder()
		t0 := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(t0)
		if w.Code >= 300 {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return d
	}
	for _, n := range []string{"s1", "s2", "s3", "s4"} {
		send(sn, "POST", "/api/slots", `{"name":"`+n+`","project_uuid":"p-`+n+`","app_uuid":"a-`+n+`","db_uuid":"d-`+n+`","repo":{"project":"SLOT","slug":"slot-`+n+`"},"template_repo":{"project":"TPL","slug":"template"},"template_ref":"main"}`, "")
		send(sn, "POST", "/api/slots/"+n+"/occupy", `{"until":"`+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)+`"}`, "")
	}
	for _, bc := range []struct{ name, method, path, authed string }{
		{"slots", "GET", "/api/slots", "token"},
		{"command", "POST", "/api/slots/s1/extend", "token"},
		{"slots-session", "GET", "/api/slots", "cookie"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ta, tn time.Duration
			for i := 0; b.Loop(); i++ {
				body := ""
				if bc.method == "POST" {
					body = `{"until":"` + time.Now().Add(time.Hour+time.Duration(i)*time.Second).UTC().Format(time.RFC3339Nano) + `"}`
				}
				if i%2 == 0 {
					ta += send(sa, bc.method, bc.path, body, bc.authed)
					tn += send(sn, bc.method, bc.path, body, "")
				} else {
					tn += send(sn, bc.method, bc.path, body, "")
					ta += send(sa, bc.method, bc.path, body, bc.authed)
				}
			}
			b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "auth-ns/op")
			b.ReportMetric(float64(tn.Nanoseconds())/float64(b.N), "noauth-ns/op")
			b.ReportMetric(float64(ta)/float64(tn), "ratio")
		})
	}
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
