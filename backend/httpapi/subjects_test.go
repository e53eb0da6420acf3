package httpapi

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// signInAs signs an account in with its password and returns the headers
// of its cookie session (cookie and CSRF token, no bearer token).
func (b *bundle) signInAs(t *testing.T, name, password string) []string {
	t.Helper()
	a := b.do(t, "POST", "/api/auth/login", map[string]string{"name": name, "password": password}, "Authorization", "")
	if a.status != 200 {
		t.Fatalf("sign in %s: %d %s", name, a.status, a.body)
	}
	var in subjectAnswer
	a.decode(t, &in)
	return []string{"Authorization", "", "Cookie", strings.Split(a.header.Get("Set-Cookie"), ";")[0], HeaderCSRF, in.CSRF}
}

// TestOwnershipFollowsSubjectIDs (issue 25 item 5): a slot's occupant is a
// subject id; a token cannot take another subject's name; "occupy for
// someone else" names an existing subject; an occupant recorded by name
// only (an old log) is the account of that name, never a token.
func TestOwnershipFollowsSubjectIDs(t *testing.T) {
	b := setup(t, HubOptions{}) // the bundle's admin token is named "alice"
	ctx := context.Background()
	until := time.Now().Add(time.Hour)

	// Names are unique across accounts and tokens, tokens among themselves
	// included (two "ci" tokens used to be allowed).
	bearerAs(b.tokenFor(t, "ci", auth.RoleMember, time.Hour))
	h := b.head(t)
	b.refused(t, "a second token named ci", b.do(t, "POST", "/api/admin/tokens", map[string]any{"name": "ci", "role": "operator"}), h, 409, "")
	b.refused(t, "an account named like a token", b.do(t, "POST", "/api/admin/users", map[string]any{"name": "CI", "role": "member", "password": "long enough pw"}), h, 409, "")
	b.refused(t, "a token named like the admin token", b.do(t, "POST", "/api/admin/tokens", map[string]any{"name": "alice", "role": "member"}), h, 409, "")

	// Occupy for someone else: an existing subject, by id or by a name
	// that names one; a free name is refused and nothing is appended.
	carol, _, err := b.auth.Dir.CreateUser(ctx, auth.SystemSubject("test"), "carol", auth.RoleMember, "carol password 1")
	if err != nil {
		t.Fatal(err)
	}
	b.register(t, "s1")
	b.register(t, "s2")
	h = b.head(t)
	b.refused(t, "occupy for a free name", b.do(t, "POST", "/api/slots/s1/occupy", map[string]any{"by": "nobody-here", "until": until}), h, 400, "")
	b.refused(t, "occupy for an unknown id", b.do(t, "POST", "/api/slots/s1/occupy", map[string]any{"by_id": "user:no-such-id", "until": until}), h, 400, "")
	b.refused(t, "occupy with a name that is not the id's", b.do(t, "POST", "/api/slots/s1/occupy", map[string]any{"by_id": "user:" + carol.ID, "by": "ci", "until": until}), h, 400, "")
	a := b.do(t, "POST", "/api/slots/s1/occupy", map[string]any{"by_id": "user:" + carol.ID, "until": until})
	var v projections.SlotView
	a.decode(t, &v)
	if a.status != 200 || v.Occupant != "carol" || v.OccupantID != "user:"+carol.ID {
		t.Fatalf("occupy for carol by id: %d %s", a.status, a.body)
	}
	a = b.do(t, "POST", "/api/slots/s2/occupy", map[string]any{"by": "ci", "until": until})
	a.decode(t, &v)
	if a.status != 200 || v.OccupantID == "" || !strings.HasPrefix(v.OccupantID, "token:") {
		t.Fatalf("occupy for the token ci by name: %d %s", a.status, a.body)
	}

	// The list the dashboard chooses from: accounts and live tokens.
	var occ struct {
		Occupants []struct{ ID, Name, Kind string } `json:"occupants"`
	}
	a = b.do(t, "GET", "/api/occupants", nil)
	a.decode(t, &occ)
	kinds := map[string]string{}
	for _, o := range occ.Occupants {
		kinds[o.Name] = o.Kind + " " + o.ID
	}
	if kinds["carol"] != "user user:"+carol.ID || !strings.HasPrefix(kinds["ci"], "token token:") || !strings.HasPrefix(kinds["alice"], "token ") {
		t.Fatalf("occupants: %s", a.body)
	}
	member := bearerAs(b.tokenFor(t, "mia", auth.RoleMember, time.Hour))
	b.refused(t, "a member lists occupants", b.do(t, "GET", "/api/occupants", nil, member...), b.head(t), 403, auth.PermOccupyForOthers)

	// carol (her session) owns s1; the member token mia does not.
	carolSess := b.signInAs(t, "carol", "carol password 1")
	if a := b.do(t, "POST", "/api/slots/s1/extend", map[string]any{"until": until.Add(time.Hour)}, carolSess...); a.status != 200 {
		t.Fatalf("carol extends her slot: %d %s", a.status, a.body)
	}
	h = b.head(t)
	b.refused(t, "mia extends carol's slot", b.do(t, "POST", "/api/slots/s1/extend", map[string]any{"until": until.Add(2 * time.Hour)}, member...), h, 403, auth.PermExtendAny)
	b.refused(t, "mia releases carol's slot", b.do(t, "POST", "/api/slots/s1/release", nil, member...), h, 403, auth.PermReleaseAny)

	// An old log: occupants recorded by name only. "frank" has no account;
	// a member token named frank (allowed: no account holds the name) must
	// not own frank's slot. "carol" is an account: her slot stays hers.
	b.register(t, "old1")
	b.register(t, "old2")
	for slot, who := range map[string]string{"old1": "frank", "old2": "carol"} {
		if _, err := b.store.Append(ctx, events.SlotStream(slot), events.Any(),
			events.New(events.SlotOccupied{Slot: slot, By: who, Until: until}, events.Metadata{Actor: who, Time: time.Now()})); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.runner.WaitFor(ctx, b.head(t)); err != nil {
		t.Fatal(err)
	}
	frank := bearerAs(b.tokenFor(t, "frank", auth.RoleMember, time.Hour))
	h = b.head(t)
	b.refused(t, "a token named frank releases frank's (name-only) slot", b.do(t, "POST", "/api/slots/old1/release", nil, frank...), h, 403, auth.PermReleaseAny)
	b.refused(t, "a token named frank extends it", b.do(t, "POST", "/api/slots/old1/extend", map[string]any{"until": until.Add(time.Hour)}, frank...), h, 403, auth.PermExtendAny)
	if a := b.do(t, "POST", "/api/slots/old2/release", nil, carolSess...); a.status != 202 {
		t.Fatalf("carol releases her name-only slot: %d %s", a.status, a.body)
	}
}

// TestDemoSignInIsAnExplicitPost (issue 25 item 3): GET /api/auth/me never
// signs anyone in or appends (it used to start a session per cookieless
// request); the demo's sign-in is POST /api/auth/demo, same-origin JSON
// only, loopback only, and limited per address.
func TestDemoSignInIsAnExplicitPost(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.Security.ExtraHosts = []string{"slots.internal"}
		d.AutoLogin = func(ctx context.Context) (auth.User, bool) {
			return d.Auth.Dir.UserByName("demo-admin")
		}
	}
	b.start(t, HubOptions{})
	if _, _, err := b.auth.Dir.CreateUser(context.Background(), auth.SystemSubject("demo"), "demo-admin", auth.RoleAdmin, ""); err != nil {
		t.Fatal(err)
	}
	h := b.head(t)
	for i := 0; i < 50; i++ {
		a := b.do(t, "GET", "/api/auth/me", nil, "Authorization", "", "Host", "localhost:8080")
		// 200 "not signed in" (issue 27: no console error on a first visit).
		if a.status != 200 || a.header.Get("Set-Cookie") != "" || !strings.HasPrefix(string(a.body), `{"signed_in":false,`) {
			t.Fatalf("cookieless GET /api/auth/me %d: %d %s (a read signed in)", i, a.status, a.body)
		}
		if i == 0 && !strings.Contains(string(a.body), `"demo"`) {
			t.Fatalf("the answer does not offer the demo sign-in: %s", a.body)
		}
	}
	if after := b.head(t); after != h {
		t.Fatalf("50 reads appended %d events", after-h)
	}
	if a := b.do(t, "GET", "/api/auth/me", nil, "Authorization", "", "Host", "slots.internal"); strings.Contains(string(a.body), `"demo"`) {
		t.Fatalf("a non-loopback name is offered the demo: %s", a.body)
	}
	anon := []string{"Authorization", "", "Host", "localhost:8080"}
	b.refused(t, "demo sign-in by a non-loopback name", b.do(t, "POST", "/api/auth/demo", nil, "Authorization", "", "Host", "slots.internal"), h, 404, "")
	b.refused(t, "cross-site demo sign-in", b.do(t, "POST", "/api/auth/demo", nil, append(anon, "Sec-Fetch-Site", "cross-site")...), h, 403, "")
	b.refused(t, "foreign-origin demo sign-in", b.do(t, "POST", "/api/auth/demo", nil, append(anon, "Origin", "http://evil.example")...), h, 403, "")
	b.refused(t, "form-encoded demo sign-in", b.do(t, "POST", "/api/auth/demo", "", append(anon, "Content-Type", "text/plain")...), h, 415, "")
	b.refused(t, "a GET does not sign in", b.do(t, "GET", "/api/auth/demo", nil, anon...), h, 404, "")

	a := b.do(t, "POST", "/api/auth/demo", nil, append(anon, "Origin", "http://localhost:8080")...)
	var me subjectAnswer
	a.decode(t, &me)
	if a.status != 200 || me.Subject.Name != "demo-admin" || me.CSRF == "" || !strings.Contains(a.header.Get("Set-Cookie"), SessionCookie) {
		t.Fatalf("demo sign-in: %d %s", a.status, a.body)
	}
	cookie := strings.Split(a.header.Get("Set-Cookie"), ";")[0]
	if a := b.do(t, "GET", "/api/auth/me", nil, append(anon, "Cookie", cookie)...); a.status != 200 {
		t.Fatalf("me with the demo session: %d %s", a.status, a.body)
	}
	// Session starts are limited per address like failed sign-ins (20,
	// then one per 3 s): the 429 appends nothing.
	limited := false
	for i := 0; i < 30 && !limited; i++ {
		a := b.do(t, "POST", "/api/auth/demo", nil, anon...)
		switch a.status {
		case 200:
		case 429:
			limited = true
			if a.header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
			b.refused(t, "a limited demo sign-in", b.do(t, "POST", "/api/auth/demo", nil, anon...), b.head(t), 429, "")
		default:
			t.Fatalf("demo sign-in %d: %d %s", i, a.status, a.body)
		}
	}
	if !limited {
		t.Fatal("30 demo sign-ins from one address in a row were all accepted")
	}
}

// TestAuditLeavesOutPlumbing: checkpoints and demo sign-ins stay in the
// log but are not audit rows unless asked (?plumbing=true); entries carry
// the actor's subject id and kind, so workers and the system are not
// offered as people, and ?actor_id filters by subject.
func TestAuditLeavesOutPlumbing(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.AutoLogin = func(ctx context.Context) (auth.User, bool) { return d.Auth.Dir.UserByName("demo-admin") }
	}
	b.start(t, HubOptions{})
	ctx := context.Background()
	if _, _, err := b.auth.Dir.CreateUser(ctx, auth.SystemSubject("demo"), "demo-admin", auth.RoleAdmin, ""); err != nil {
		t.Fatal(err)
	}
	if a := b.do(t, "POST", "/api/auth/demo", nil, "Authorization", "", "Host", "localhost"); a.status != 200 {
		t.Fatalf("demo sign-in: %d %s", a.status, a.body)
	}
	if err := consumer.SaveCheckpoint(ctx, b.store, "deadlines", 1, b.head(t), map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	b.register(t, "s1")
	b.occupy(t, "s1")
	if err := b.runner.WaitFor(ctx, b.head(t)); err != nil {
		t.Fatal(err)
	}
	list := func(q string) []projections.AuditEntry {
		t.Helper()
		a := b.do(t, "GET", "/api/audit"+q, nil)
		if a.status != 200 {
			t.Fatalf("audit%s: %d %s", q, a.status, a.body)
		}
		var out struct {
			Entries []projections.AuditEntry `json:"entries"`
		}
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Entries
	}
	types := func(es []projections.AuditEntry) map[string]int {
		m := map[string]int{}
		for _, e := range es {
			m[e.Type]++
		}
		return m
	}
	def := types(list(""))
	if def["ConsumerCheckpointed"] != 0 || def["SessionStarted"] != 0 {
		t.Fatalf("plumbing in the default audit: %v", def)
	}
	if def["SlotRegistered"] != 1 || def["SlotOccupied"] != 1 {
		t.Fatalf("decisions missing from the audit: %v", def)
	}
	all := types(list("?plumbing=true"))
	if all["ConsumerCheckpointed"] != 1 || all["SessionStarted"] != 1 {
		t.Fatalf("?plumbing=true: %v", all)
	}
	var tokenID string
	for _, e := range list("") {
		if e.Type == "SlotOccupied" {
			if e.ActorKind != "token" || !strings.HasPrefix(e.ActorID, "token:") {
				t.Fatalf("the occupy's actor: %+v", e)
			}
			tokenID = e.ActorID
		}
	}
	mine := list("?actor_id=" + tokenID)
	if len(mine) == 0 {
		t.Fatal("?actor_id found nothing")
	}
	for _, e := range mine {
		if e.ActorID != tokenID {
			t.Fatalf("?actor_id=%s answered %+v", tokenID, e)
		}
	}
	h := b.head(t)
	b.refused(t, "a bad actor_id", b.do(t, "GET", "/api/audit?actor_id=root", nil), h, 400, "")
	b.refused(t, "a bad plumbing flag", b.do(t, "GET", "/api/audit?plumbing=yes", nil), h, 400, "")
	if a := b.do(t, "GET", "/api/audit?plumbing=true", nil); a.status == 200 {
		var out struct {
			Entries []projections.AuditEntry `json:"entries"`
		}
		_ = json.Unmarshal(a.body, &out)
		for _, e := range out.Entries {
			if e.Type == "ConsumerCheckpointed" && (e.ActorKind != "system" || !e.Plumbing) {
				t.Fatalf("the checkpoint's entry: %+v", e)
			}
		}
	}
}
