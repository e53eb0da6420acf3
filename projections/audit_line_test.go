package projections_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/english"
	"github.com/slotkeeper/slotkeeper/projections"
)

// filled is a payload of typ with every field set: strings to their
// field's name, numbers to n, flags to flag, times to a fixed instant, and
// two of every list's elements.
func filled(t *testing.T, typ string, flag bool) events.Payload {
	t.Helper()
	p, err := events.Decode(events.RecordedEvent{Type: typ, Data: []byte(`{}`)})
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	v := reflect.New(reflect.TypeOf(p)).Elem()
	fill(v, flag, typ, 3)
	return v.Interface().(events.Payload)
}

func fill(v reflect.Value, flag bool, name string, n int) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Bool:
		v.SetBool(flag)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(n))
	case reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(n))
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				fill(v.Field(i), flag, f.Name, n+i)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(s.Index(0), flag, name+"0", n)
		fill(s.Index(1), flag, name+"1", n+1)
		v.Set(s)
	}
}

// TestEveryEventTypeHasAnAuditLine: every event type is declared once in
// auditLines (or is a step result), its code and every variant it picks
// have English in events/english, and the English names nothing the line
// does not fill. The dashboard's side (audit.ev.<type> in both languages)
// is frontend/src/i18n/i18n.test.ts, over vocabulary.json's event types.
func TestEveryEventTypeHasAnAuditLine(t *testing.T) {
	used := map[string]bool{}
	for _, typ := range events.Types() {
		phases := []string{""}
		if typ == "WaitPhase" {
			phases = []string{events.WaitQueued, events.WaitBuilding, events.WaitStarting, events.WaitHealth, events.WaitDatabase, "other"}
		}
		for _, flag := range []bool{false, true} {
			for _, phase := range phases {
				p := filled(t, typ, flag)
				if phase != "" {
					w := p.(events.WaitPhase)
					w.Phase = phase
					p = w
				}
				code, _, summary := projections.AuditLine(p)
				if !english.Has(code) || english.Base(code) != code {
					t.Errorf("%s (flags %v): code %q has no English in events/english", typ, flag, code)
					continue
				}
				used[code] = true
				if summary == "" || strings.ContainsAny(summary, "{}[]") {
					t.Errorf("%s: English %q", typ, summary)
				}
			}
		}
	}
	// No English is left over from an event type that is gone.
	for _, c := range english.Codes() {
		if strings.HasPrefix(c, "audit.") && !used[english.Base(c)] {
			t.Errorf("English %q is no event's audit line", c)
		}
	}
}

// The audit's English is what it has always been: spot checks of lines
// with optional parts and variants.
func TestAuditLineEnglish(t *testing.T) {
	until := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, c := range []struct {
		p    events.Payload
		want string
	}{
		{events.StepFailed{Step: "deploy", HTTPStatus: 502, Uncertain: true, Error: "bad gateway"}, "deploy failed (HTTP 502), outcome uncertain: bad gateway"},
		{events.StepFailed{Step: "deploy", Error: "no"}, "deploy failed: no"},
		{events.DBDeleted{StepResult: events.StepResult{Step: "delete_db", AlreadyAbsent: true}}, "delete_db done (already absent)"},
		{events.OccupancyExtended{By: "mia", Until: until, Earlier: true}, "deadline moved earlier by mia to 2026-03-04 05:06 UTC"},
		{events.JobAccepted{Kind: "reset", JobID: "J1", Resumed: true}, "reset job J1 accepted again (resume)"},
		{events.WaitPhase{Step: "deploy", Phase: events.WaitQueued, Ahead: 2}, "deploy: queued in Coolify behind 2 other deployment(s)"},
		{events.WaitPhase{Step: "deploy", Phase: "later"}, "deploy: waiting (later)"},
		{events.WaitlistLeft{}, "left the waitlist"},
		{events.WaitlistJoined{Who: "ann", DurationSeconds: 5400}, "ann joined the waitlist for 1h30m0s"},
		{events.ReconcileFinished{State: "failed", Error: "boom"}, "reconcile run failed: boom"},
		{events.PRChanged{PR: events.PullRequest{Repo: events.RepoRef{Project: "P", Slug: "s"}, ID: 7, State: "OPEN", Head: "0123456789ab"}, EventKey: "pr:opened"},
			"Bitbucket: pull request P/s#7 open at 01234567 (pr:opened)"},
	} {
		if _, _, got := projections.AuditLine(c.p); got != c.want {
			t.Errorf("%T: %q, want %q", c.p, got, c.want)
		}
	}
}

// TestAuditLineOfUndecodedData: an event of a known type whose data did not
// decode arrives as events.Unknown; its audit line names the type and does
// not panic (a damaged store must not stop the read model).
func TestAuditLineOfUndecodedData(t *testing.T) {
	code, args, summary := projections.AuditLine(events.Unknown{Type: "OccupancyExtended", Data: []byte(`{"until":`)})
	if code != "OccupancyExtended" || args != nil || summary != "OccupancyExtended" {
		t.Fatalf("got %q %v %q", code, args, summary)
	}
}

// TestAuditLineCarriesTheFailureCode: a step's failure reaches the audit
// as its code and parts, so the dashboard words it in the reader's
// language; the English line stays the provider's words.
func TestAuditLineCarriesTheFailureCode(t *testing.T) {
	p := events.StepFailed{Step: "delete_db", HTTPStatus: 403, Error: "coolify.DeleteDatabase d1: forbidden (HTTP 403): no",
		ErrorCode: events.FailureProvider, ErrorArgs: map[string]string{"provider": "coolify", "problem": "forbidden", "target": "d1"}}
	_, args, summary := projections.AuditLine(p)
	want := map[string]string{"step": "delete_db", "status": "403", "error": p.Error, "error_code": "provider", "provider": "coolify", "problem": "forbidden", "target": "d1"}
	if !maps.Equal(args, want) {
		t.Errorf("args %v, want %v", args, want)
	}
	if summary != "delete_db failed (HTTP 403): "+p.Error {
		t.Errorf("English %q", summary)
	}
	_, args, _ = projections.AuditLine(events.JobFailed{Reason: "x", ReasonCode: events.FailureNotReady, ReasonArgs: map[string]string{"bound": "600"}})
	if want := map[string]string{"reason": "x", "error_code": "not_ready", "bound": "600"}; !maps.Equal(args, want) {
		t.Errorf("JobFailed args %v, want %v", args, want)
	}
}

// TestAuditLineCarriesWebhookAndReconcileCodes: a webhook attempt's and a
// reconcile run's failure reach the audit as their code and parts, a
// refused post on a pull request as a Bitbucket failure of its code; an
// event written before the codes carries none (the dashboard then folds
// its English under "the reason is in the original message").
func TestAuditLineCarriesWebhookAndReconcileCodes(t *testing.T) {
	cases := []struct {
		p    events.Payload
		want map[string]string
	}{
		{events.NotificationFailed{Attempt: 2, Status: 0, Error: "timed out: context deadline exceeded", ErrorCode: events.FailureWebhookTimeout, ErrorArgs: map[string]string{"bound": "10s"}},
			map[string]string{"attempt": "2", "error": "timed out: context deadline exceeded", "error_code": "webhook_timeout", "bound": "10s"}},
		{events.NotificationFailed{Attempt: 1, Status: 410, Error: "HTTP 410", Final: true, ErrorCode: events.FailureWebhookRefused},
			map[string]string{"attempt": "1", "status": "410", "error": "HTTP 410", "final": "true", "error_code": "webhook_refused"}},
		{events.NotificationFailed{Attempt: 1, Status: 503, Error: "HTTP 503"}, // before the codes
			map[string]string{"attempt": "1", "status": "503", "error": "HTTP 503"}},
		{events.ReconcileFinished{State: "failed", Error: "context deadline exceeded", ErrorCode: events.FailureReconcileTimeout, ErrorArgs: map[string]string{"bound": "5m0s"}},
			map[string]string{"state": "failed", "error": "context deadline exceeded", "error_code": "reconcile_timeout", "bound": "5m0s"}},
		{events.ReconcileFinished{State: "failed", Error: "abandoned: the run did not finish"}, // before the codes
			map[string]string{"state": "failed", "error": "abandoned: the run did not finish"}},
		{events.ReconcileFinding{Class: "unknown", Provider: "coolify", Kind: "project", ID: "p1", Detail: "could not check: …", ErrorCode: events.FailureProvider, ErrorArgs: map[string]string{"provider": "coolify", "problem": "server", "status": "502"}},
			map[string]string{"class": "unknown", "provider": "coolify", "resource_kind": "project", "resource_id": "p1", "error_code": "provider", "problem": "server", "status": "502"}},
		{events.PRReportFailed{Phase: "ready", Call: "bitbucket.AddComment", Code: "unauthorized", Reason: "no"},
			map[string]string{"phase": "ready", "call": "bitbucket.AddComment", "code": "unauthorized", "error_code": "provider", "provider": "bitbucket", "problem": "unauthorized"}},
	}
	for _, tc := range cases {
		if _, args, _ := projections.AuditLine(tc.p); !maps.Equal(args, tc.want) {
			t.Errorf("%s args %v, want %v", tc.p.EventType(), args, tc.want)
		}
	}
}
