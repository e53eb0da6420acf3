package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// bundle is a whole API on real pieces: the in-memory event store, the
// in-memory read model kept up by a projections.Runner, the slots service,
// and the hub following the runner's feed. No job engine runs, so accepted
// jobs stay queued.
type bundle struct {
	spa    fs.FS
	stop   func()
	store  *memstore.Store
	runner *projections.Runner
	hub    *Hub
	srv    *httptest.Server
	tr     *http.Transport
	// bodyTimeout, when set before start, is the server's BodyReadTimeout.
	bodyTimeout time.Duration
	auth        *auth.Service
	// token is an admin API token named "alice", sent by do unless a test
	// overrides the Authorization header ("" removes it).
	token string
	// deps, if set, adjusts the server's dependencies before New.
	deps func(*Deps)
	// mw, if set, is added to the server's middleware last (just before
	// the handler).
	mw echo.MiddlewareFunc
}

// testArgon2 makes password hashes cheap in tests (the default costs
// about 30 ms each).
var testArgon2 = auth.Argon2Params{Time: 1, MemoryKiB: 64, Threads: 1}

func setup(t testing.TB, opt HubOptions) *bundle {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // first registered, runs last
	store := memstore.New()
	b := &bundle{store: store}
	b.start(t, opt)
	return b
}

// start runs read model, runner, hub and HTTP server on b.store (on addr
// if given); b.stop (also run at cleanup) stops them, the store stays: a
// restart calls start again.
func (b *bundle) start(t testing.TB, opt HubOptions, addr ...string) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	rm := memory.New(b.store)
	b.runner = projections.NewRunner(b.store, rm, projections.RunnerOptions{})
	met := NewMetrics()
	b.hub = NewHub(opt, met, log)
	started := make(chan struct{})
	followed := make(chan error, 1)
	go func() { followed <- b.hub.Follow(ctx, b.runner, rm, started) }()
	<-started
	ran := make(chan error, 1)
	go func() { ran <- b.runner.Run(ctx) }()
	head, _ := b.store.Head(ctx)
	if err := b.runner.WaitFor(ctx, head); err != nil {
		t.Fatal(err)
	}
	svc := slots.NewService(b.store, slots.Config{Grace: time.Hour, Logger: log})
	dir, err := auth.Open(ctx, b.store, auth.Options{Argon2: testArgon2})
	if err != nil {
		t.Fatal(err)
	}
	b.auth = auth.NewService(dir, auth.Config{})
	dirFollowed := make(chan error, 1)
	go func() { dirFollowed <- dir.Follow(ctx) }() // as serve does: another process's sign-ins and logouts apply here
	if b.token == "" {
		_, b.token, err = dir.IssueToken(ctx, auth.SystemSubject("test"), "alice", auth.RoleAdmin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.runner.WaitFor(ctx, b.head(t)); err != nil {
			t.Fatal(err)
		}
	}
	d := Deps{Commands: svc, Reads: rm, Log: b.store, Waiter: b.runner, Hub: b.hub, Logger: log, SPA: b.spa,
		Ready: func(context.Context) error { return nil }, Auth: b.auth, CommandsPerSecond: -1, BodyReadTimeout: b.bodyTimeout}
	if b.deps != nil {
		b.deps(&d)
	}
	s, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	if b.mw != nil {
		s.Echo().Use(b.mw)
	}
	b.srv = httptest.NewUnstartedServer(s)
	if len(addr) > 0 {
		b.srv.Listener.Close()
		l, err := net.Listen("tcp", addr[0])
		if err != nil {
			t.Fatal(err)
		}
		b.srv.Listener = l
	}
	b.srv.Config.ConnContext = ConnContext
	b.srv.Start()
	b.tr = &http.Transport{}
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			b.hub.Close()
			b.srv.Close()
			b.tr.CloseIdleConnections()
			cancel()
			<-followed
			<-ran
			<-dirFollowed
		})
	}
	t.Cleanup(b.stop)
}

func (b *bundle) head(t testing.TB) events.Position {
	t.Helper()
	p, err := b.store.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type answer struct {
	status int
	body   []byte
	header http.Header
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
}

func (a answer) apiError(t *testing.T) errorPayload {
	t.Helper()
	var e errorBody
	a.decode(t, &e)
	return e.Error
}

// do sends a request; body may be a string (sent as is) or a value (JSON).
func (b *bundle) do(t *testing.T, method, path string, body any, hdr ...string) answer {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case chunked:
		rd = io.MultiReader(strings.NewReader(string(v))) // no length: sent chunked
	default:
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil || isStateChange(method) {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+b.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Transport: b.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: data, header: resp.Header}
}

func registerCmd(name string) slots.RegisterCmd {
	return slots.RegisterCmd{
		Name: name, ProjectUUID: "p-" + name, AppUUID: "a-" + name, DBUUID: "d-" + name,
		Repo:         events.RepoRef{Project: "SLOT", Slug: "slot-" + name},
		TemplateRepo: events.RepoRef{Project: "TPL", Slug: "template"}, TemplateRef: "main",
	}
}

func (b *bundle) register(t *testing.T, name string) projections.SlotView {
	t.Helper()
	a := b.do(t, http.MethodPost, "/api/slots", registerCmd(name))
	if a.status != http.StatusCreated {
		t.Fatalf("register %s: %d %s", name, a.status, a.body)
	}
	var v projections.SlotView
	a.decode(t, &v)
	return v
}

func (b *bundle) occupy(t *testing.T, name string) {
	t.Helper()
	a := b.do(t, http.MethodPost, "/api/slots/"+name+"/occupy", map[string]any{"until": time.Now().Add(time.Hour)})
	if a.status != http.StatusOK {
		t.Fatalf("occupy %s: %d %s", name, a.status, a.body)
	}
}

func TestCommandsReadTheirWrites(t *testing.T) {
	b := setup(t, HubOptions{})
	v := b.register(t, "s1")
	if v.Name != "s1" || v.Lifecycle != projections.LifecycleVacant || v.AppUUID != "a-s1" {
		t.Fatalf("register answered %+v", v)
	}

	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	a := b.do(t, http.MethodPost, "/api/slots/s1/occupy", map[string]any{"until": until})
	if a.status != http.StatusOK {
		t.Fatalf("occupy: %d %s", a.status, a.body)
	}
	a.decode(t, &v)
	if v.Lifecycle != projections.LifecycleOccupied || v.Occupant != "alice" || v.Deadline == nil || !v.Deadline.Equal(until) {
		t.Fatalf("occupy answered %+v", v)
	}
	if a.header.Get(HeaderRequestID) == "" {
		t.Fatal("no X-Request-Id")
	}

	a = b.do(t, http.MethodPost, "/api/slots/s1/release", nil, HeaderRequestID, "req-release-1")
	if a.status != http.StatusAccepted {
		t.Fatalf("release: %d %s", a.status, a.body)
	}
	var res slots.JobAcceptedResult
	a.decode(t, &res)
	if res.JobID == "" || res.Kind != events.KindReset || res.Slot != "s1" {
		t.Fatalf("release answered %+v", res)
	}
	// The correlation id is the server's; the caller's X-Request-Id is kept
	// apart as client_request_id.
	releaseID := a.header.Get(HeaderRequestID)
	if releaseID == "req-release-1" || releaseID == "" {
		t.Fatalf("the server took the caller's request id %q as its own", releaseID)
	}
	// Read-your-writes: the job is there at once.
	a = b.do(t, http.MethodGet, "/api/jobs/"+res.JobID, nil)
	var j projections.JobView
	a.decode(t, &j)
	if a.status != http.StatusOK || j.ID != res.JobID || j.State != projections.JobQueued || j.CorrelationID != releaseID {
		t.Fatalf("job after release: %d %+v (correlation id should be %s)", a.status, j, releaseID)
	}
	a = b.do(t, http.MethodGet, "/api/slots/s1/jobs/latest?kind=reset", nil)
	a.decode(t, &j)
	if a.status != http.StatusOK || j.ID != res.JobID {
		t.Fatalf("latest reset: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/slots/s1/jobs?kind=reset&limit=5", nil)
	var page projections.Page
	a.decode(t, &page)
	if a.status != http.StatusOK || len(page.Jobs) != 1 {
		t.Fatalf("jobs page: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/jobs/"+res.JobID+"/events", nil)
	var evs struct {
		Events []eventDTO `json:"events"`
	}
	a.decode(t, &evs)
	if a.status != http.StatusOK || len(evs.Events) != 1 || evs.Events[0].Type != "JobQueued" || evs.Events[0].Meta.Actor != "alice" ||
		!strings.HasPrefix(evs.Events[0].Meta.ActorID, "token:") || evs.Events[0].Meta.ClientRequestID != "req-release-1" ||
		evs.Events[0].Meta.CorrelationID != releaseID {
		t.Fatalf("job events: %d %s", a.status, a.body)
	}

	// A second release is refused and names the blocking job.
	before := b.head(t)
	a = b.do(t, http.MethodPost, "/api/slots/s1/release", nil)
	e := a.apiError(t)
	if a.status != http.StatusConflict || e.Code != CodeConflict || e.Details["blocking_job"] != res.JobID {
		t.Fatalf("second release: %d %s", a.status, a.body)
	}
	if after := b.head(t); after != before {
		t.Fatalf("a refused command appended: head %d → %d", before, after)
	}

	// A forged X-Slotkeeper-Actor changes nothing: the actor is the
	// authenticated subject.
	a = b.do(t, http.MethodPost, "/api/slots", registerCmd("s4"), HeaderActor, "mallory")
	if a.status != http.StatusCreated {
		t.Fatalf("register with a forged actor header: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/audit?slot=s4", nil)
	if !strings.Contains(string(a.body), `"actor":"alice"`) || strings.Contains(string(a.body), "mallory") {
		t.Fatalf("audit after a forged actor header: %s", a.body)
	}

	// Cancel frees the slot; the audit names who did what.
	a = b.do(t, http.MethodPost, "/api/jobs/"+res.JobID+"/cancel", nil)
	if a.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/jobs/"+res.JobID, nil)
	a.decode(t, &j)
	if j.State != projections.JobCancelled {
		t.Fatalf("job after cancel: %+v", j)
	}
	a = b.do(t, http.MethodGet, "/api/audit?slot=s1&actor=alice&limit=50", nil)
	var audit struct {
		Entries []projections.AuditEntry `json:"entries"`
	}
	a.decode(t, &audit)
	if a.status != http.StatusOK || len(audit.Entries) < 3 {
		t.Fatalf("audit: %d %s", a.status, a.body)
	}
	oldest := audit.Entries
	audit.Entries = nil // decode into a fresh slice: oldest keeps its own
	a = b.do(t, http.MethodGet, "/api/audit?slot=s1&actor=alice&order=newest&limit=2", nil)
	a.decode(t, &audit)
	if a.status != http.StatusOK || len(audit.Entries) != 2 || audit.Entries[0].Position != oldest[len(oldest)-1].Position ||
		audit.Entries[1].Position != oldest[len(oldest)-2].Position {
		t.Fatalf("audit newest first: %d %s", a.status, a.body)
	}
	audit.Entries = nil
	a = b.do(t, http.MethodGet, fmt.Sprintf("/api/audit?slot=s1&actor=alice&order=newest&before=%d", oldest[1].Position), nil)
	a.decode(t, &audit)
	if a.status != http.StatusOK || len(audit.Entries) != 1 || audit.Entries[0].Position != oldest[0].Position {
		t.Fatalf("audit newest first before %d: %d %s", oldest[1].Position, a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/slots", nil)
	var list struct {
		Slots    []projections.SlotView `json:"slots"`
		Position events.Position        `json:"position"`
	}
	a.decode(t, &list)
	if a.status != http.StatusOK || len(list.Slots) != 2 || list.Position != b.head(t) {
		t.Fatalf("list: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/resources/remaining", nil)
	if a.status != http.StatusOK || !strings.Contains(string(a.body), `"resources"`) {
		t.Fatalf("remaining: %d %s", a.status, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/slots/s1/plan?kind=promote&project=NEW&name=s1-copy", nil)
	var plan slots.Plan
	a.decode(t, &plan)
	if a.status != http.StatusOK || plan.Kind != events.KindPromote || len(plan.Steps) == 0 {
		t.Fatalf("plan: %d %s", a.status, a.body)
	}
}

// TestBadInputAppendsNothing sends every endpoint bad input and checks the
// answer's status and code, and that the log's head did not move.
func TestBadInputAppendsNothing(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.register(t, "s2")
	b.occupy(t, "s2")
	b.register(t, "s3")
	b.occupy(t, "s3") // deadline in an hour
	a := b.do(t, http.MethodPost, "/api/slots/s2/release", nil)
	var queued slots.JobAcceptedResult
	a.decode(t, &queued)

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	big := `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`
	for _, tc := range []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		code               Code
	}{
		// register
		{"register no body", "POST", "/api/slots", nil, nil, 400, CodeInvalid},
		{"register malformed", "POST", "/api/slots", `{"name":`, nil, 400, CodeInvalid},
		{"register unknown field", "POST", "/api/slots", `{"name":"s3","nmae":"x"}`, nil, 400, CodeInvalid},
		{"register two values", "POST", "/api/slots", `{"name":"s3"} {}`, nil, 400, CodeInvalid},
		{"register wrong type", "POST", "/api/slots", `{"name":3}`, nil, 400, CodeInvalid},
		{"register traversal", "POST", "/api/slots", withName("../etc"), nil, 400, CodeInvalid},
		{"register slash", "POST", "/api/slots", withName("a/b"), nil, 400, CodeInvalid},
		{"register fullwidth", "POST", "/api/slots", withName("ｓｌｏｔ"), nil, 400, CodeInvalid},
		{"register bidi", "POST", "/api/slots", withName("slot\u202e1"), nil, 400, CodeInvalid},
		{"register zero width", "POST", "/api/slots", withName("slo\u200bt"), nil, 400, CodeInvalid},
		{"register uppercase", "POST", "/api/slots", withName("Slot"), nil, 400, CodeInvalid},
		{"register bad repo", "POST", "/api/slots", withRepo("../x"), nil, 400, CodeInvalid},
		{"register duplicate", "POST", "/api/slots", registerCmd("s1"), nil, 409, CodeConflict},
		{"register oversized", "POST", "/api/slots", big, nil, 413, CodeTooLarge},
		{"register oversized chunked", "POST", "/api/slots", chunked(big), nil, 413, CodeTooLarge},
		{"register text body", "POST", "/api/slots", `name=s3`, []string{"Content-Type", "text/plain"}, 415, CodeUnsupportedMedia},
		{"register null body", "POST", "/api/slots", "null", nil, 400, CodeInvalid},
		{"register array body", "POST", "/api/slots", "[]", nil, 400, CodeInvalid},
		{"release null body", "POST", "/api/slots/s1/release", "null", nil, 400, CodeInvalid},
		{"release without Content-Type", "POST", "/api/slots/s2/release", nil, []string{"Content-Type", ""}, 415, CodeUnsupportedMedia},
		// occupy
		{"occupy unknown slot", "POST", "/api/slots/nope/occupy", map[string]any{"until": future}, nil, 404, CodeNotFound},
		{"occupy encoded traversal", "POST", "/api/slots/..%2Fs1/occupy", map[string]any{"until": future}, nil, 400, CodeInvalid},
		{"occupy encoded slash", "POST", "/api/slots/s1%2Fx/occupy", map[string]any{"until": future}, nil, 400, CodeInvalid},
		{"occupy unicode", "POST", "/api/slots/s%C4%B1/occupy", map[string]any{"until": future}, nil, 400, CodeInvalid},
		{"occupy bad time", "POST", "/api/slots/s1/occupy", `{"until":"tomorrow"}`, nil, 400, CodeInvalid},
		{"occupy past", "POST", "/api/slots/s1/occupy", map[string]any{"until": time.Now().Add(-time.Hour)}, nil, 400, CodeInvalid},
		{"occupy unknown field", "POST", "/api/slots/s1/occupy", `{"until":"` + future + `","for":"x"}`, nil, 400, CodeInvalid},
		{"occupy occupied", "POST", "/api/slots/s2/occupy", map[string]any{"until": future}, nil, 409, CodeConflict},
		{"occupy no body", "POST", "/api/slots/s1/occupy", nil, nil, 400, CodeInvalid},
		// extend
		{"extend vacant", "POST", "/api/slots/s1/extend", map[string]any{"until": future}, nil, 409, CodeConflict},
		{"extend unknown", "POST", "/api/slots/nope/extend", map[string]any{"until": future}, nil, 404, CodeNotFound},
		{"extend bad body", "POST", "/api/slots/s1/extend", `[]`, nil, 400, CodeInvalid},
		{"extend earlier", "POST", "/api/slots/s3/extend", map[string]any{"until": time.Now().Add(30 * time.Minute)}, nil, 409, CodeConflict},
		// deadline (earlier only, confirmed)
		{"deadline unconfirmed", "POST", "/api/slots/s3/deadline", map[string]any{"deadline": time.Now().Add(30 * time.Minute)}, nil, 400, CodeInvalid},
		{"deadline later", "POST", "/api/slots/s3/deadline", map[string]any{"deadline": time.Now().Add(3 * time.Hour), "confirm_earlier": true}, nil, 409, CodeConflict},
		{"deadline past", "POST", "/api/slots/s3/deadline", map[string]any{"deadline": time.Now().Add(-time.Minute), "confirm_earlier": true}, nil, 400, CodeInvalid},
		{"deadline missing", "POST", "/api/slots/s3/deadline", map[string]any{"confirm_earlier": true}, nil, 400, CodeInvalid},
		{"deadline bad time", "POST", "/api/slots/s3/deadline", `{"deadline":"soon","confirm_earlier":true}`, nil, 400, CodeInvalid},
		{"deadline unknown field", "POST", "/api/slots/s3/deadline", `{"until":"` + future + `","confirm_earlier":true}`, nil, 400, CodeInvalid},
		{"deadline vacant", "POST", "/api/slots/s1/deadline", map[string]any{"deadline": time.Now().Add(30 * time.Minute), "confirm_earlier": true}, nil, 409, CodeConflict},
		{"deadline unknown slot", "POST", "/api/slots/nope/deadline", map[string]any{"deadline": time.Now().Add(30 * time.Minute), "confirm_earlier": true}, nil, 404, CodeNotFound},
		// release / teardown / promote
		{"release vacant", "POST", "/api/slots/s1/release", nil, nil, 409, CodeConflict},
		{"release unknown", "POST", "/api/slots/nope/release", nil, nil, 404, CodeNotFound},
		{"release body field", "POST", "/api/slots/s1/release", `{"force":true}`, nil, 400, CodeInvalid},
		{"release locked", "POST", "/api/slots/s2/release", nil, nil, 409, CodeConflict},
		{"teardown locked", "POST", "/api/slots/s2/teardown", nil, nil, 409, CodeConflict},
		{"teardown bad name", "POST", "/api/slots/.hidden/teardown", nil, nil, 400, CodeInvalid},
		{"promote bad project", "POST", "/api/slots/s1/promote", map[string]string{"project": "../X", "name": "new"}, nil, 400, CodeInvalid},
		{"promote bad repo", "POST", "/api/slots/s1/promote", map[string]string{"project": "NEW", "name": "a/b"}, nil, 400, CodeInvalid},
		{"promote cyrillic name", "POST", "/api/slots/s1/promote", map[string]string{"project": "NEW", "name": "rep\u043e"}, nil, 400, CodeInvalid},
		{"promote traversal name", "POST", "/api/slots/s1/promote", map[string]string{"project": "NEW", "name": "a..b"}, nil, 400, CodeInvalid},
		{"register cyrillic repo", "POST", "/api/slots", withRepo("slot-\u0430"), nil, 400, CodeInvalid},
		{"promote unknown field", "POST", "/api/slots/s1/promote", `{"project":"NEW","name":"n","force":1}`, nil, 400, CodeInvalid},
		// jobs
		{"cancel unknown job", "POST", "/api/jobs/4f9c3c1e-1111-4c3e-9c1e-111111111111/cancel", nil, nil, 404, CodeNotFound},
		{"cancel bad id", "POST", "/api/jobs/..%2F..%2Fx/cancel", nil, nil, 400, CodeInvalid},
		{"resume queued", "POST", "/api/jobs/" + queued.JobID + "/resume", nil, nil, 409, CodeConflict},
		{"resume unknown job", "POST", "/api/jobs/4f9c3c1e-1111-4c3e-9c1e-111111111111/resume", nil, nil, 404, CodeNotFound},
		{"resume body", "POST", "/api/jobs/" + queued.JobID + "/resume", `{"from":"x"}`, nil, 400, CodeInvalid},
		// reads
		{"get unknown slot", "GET", "/api/slots/nope", nil, nil, 404, CodeNotFound},
		{"get bad slot", "GET", "/api/slots/a%00b", nil, nil, 400, CodeInvalid},
		{"get unknown job", "GET", "/api/jobs/nope", nil, nil, 404, CodeNotFound},
		{"job events unknown", "GET", "/api/jobs/nope/events", nil, nil, 404, CodeNotFound},
		{"jobs bad kind", "GET", "/api/slots/s1/jobs?kind=nuke", nil, nil, 400, CodeInvalid},
		{"jobs bad limit", "GET", "/api/slots/s1/jobs?limit=0", nil, nil, 400, CodeInvalid},
		{"jobs unknown slot", "GET", "/api/slots/nope/jobs", nil, nil, 404, CodeNotFound},
		{"latest no kind", "GET", "/api/slots/s1/jobs/latest", nil, nil, 400, CodeInvalid},
		{"latest none", "GET", "/api/slots/s1/jobs/latest?kind=promote", nil, nil, 404, CodeNotFound},
		{"plan bad kind", "GET", "/api/slots/s1/plan?kind=x", nil, nil, 400, CodeInvalid},
		{"plan wrong state", "GET", "/api/slots/s1/plan?kind=reset", nil, nil, 409, CodeConflict},
		{"all jobs bad state", "GET", "/api/jobs?state=exploded", nil, nil, 400, CodeInvalid},
		{"all jobs bad kind", "GET", "/api/jobs?kind=nuke", nil, nil, 400, CodeInvalid},
		{"all jobs bad slot", "GET", "/api/jobs?slot=../x", nil, nil, 400, CodeInvalid},
		{"all jobs bad actor", "GET", "/api/jobs?actor=%E2%80%AEbob", nil, nil, 400, CodeInvalid},
		{"all jobs bad cursor", "GET", "/api/jobs?cursor=abc", nil, nil, 400, CodeInvalid},
		{"all jobs bad limit", "GET", "/api/jobs?limit=101", nil, nil, 400, CodeInvalid},
		{"audit bad since", "GET", "/api/audit?since=yesterday", nil, nil, 400, CodeInvalid},
		{"audit bad after", "GET", "/api/audit?after=-1", nil, nil, 400, CodeInvalid},
		{"audit bad before", "GET", "/api/audit?before=x", nil, nil, 400, CodeInvalid},
		{"audit bad order", "GET", "/api/audit?order=random", nil, nil, 400, CodeInvalid},
		{"audit bad limit", "GET", "/api/audit?limit=100000", nil, nil, 400, CodeInvalid},
		{"audit bad slot", "GET", "/api/audit?slot=../x", nil, nil, 400, CodeInvalid},
		{"stream bad id", "GET", "/api/stream?last_event_id=-3", nil, nil, 400, CodeInvalid},
		// routing
		{"unknown route", "GET", "/api/nope", nil, nil, 404, CodeNotFound},
		{"wrong method", "DELETE", "/api/slots/s1", nil, nil, 405, CodeMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.head(t)
			a := b.do(t, tc.method, tc.path, tc.body, tc.hdr...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			e := a.apiError(t)
			if e.Code != tc.code || e.Message == "" {
				t.Fatalf("error %+v, want code %s", e, tc.code)
			}
			if after := b.head(t); after != before {
				t.Fatalf("bad input appended: head %d → %d", before, after)
			}
		})
	}
}

func withName(n string) slots.RegisterCmd { return registerCmd(n) }

// chunked is a body sent without Content-Length.
type chunked string

func withRepo(slug string) slots.RegisterCmd {
	c := registerCmd("s9")
	c.Repo.Slug = slug
	return c
}

func TestHealthMetricsAndSPA(t *testing.T) {
	b := setup(t, HubOptions{})
	if a := b.do(t, "GET", "/healthz", nil); a.status != 200 {
		t.Fatalf("healthz %d", a.status)
	}
	if a := b.do(t, "GET", "/readyz", nil); a.status != 200 {
		t.Fatalf("readyz %d %s", a.status, a.body)
	}
	b.register(t, "m1")
	a := b.do(t, "GET", "/metrics", nil)
	for _, want := range []string{"slotkeeper_http_requests_total", "slotkeeper_sse_clients", "go_goroutines"} {
		if !strings.Contains(string(a.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	b.hub.Close() // shutting down: not ready any more, so balancers drain
	if a := b.do(t, "GET", "/readyz", nil); a.status != 503 {
		t.Fatalf("readyz while shutting down: %d %s", a.status, a.body)
	}
	a = b.do(t, "GET", "/slots/m1", nil)
	if a.status != 200 || !strings.Contains(string(a.body), "<html") && !strings.Contains(string(a.body), "<!doctype") {
		t.Fatalf("SPA fallback: %d %s", a.status, a.body)
	}
}

// TestStreamAcrossRestart follows the live stream while commands append
// concurrently and the server (read model, runner, hub, HTTP) restarts on
// the same log and address: the client resumes with Last-Event-ID and sees
// every position exactly once, with no second snapshot.
func TestStreamAcrossRestart(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.occupy(t, "s1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watch(ctx, t, b.srv.URL+"/api/stream", b.authHeader())
	snap := w.next(t, "snapshot")
	var sf snapshotFrame
	// The hub may trail the read model by a moment: the snapshot can
	// predate the occupy (its change then follows), so only its shape is
	// checked here.
	if err := json.Unmarshal(snap.Data, &sf); err != nil || len(sf.Slots) != 1 {
		t.Fatalf("snapshot %s (%v)", snap.Data, err)
	}
	pos := sf.Position

	svc := slots.NewService(b.store, slots.Config{})
	const n = 300
	halfway, appended := make(chan struct{}), make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if i == n/3 {
				close(halfway)
			}
			until := time.Now().Add(time.Hour + time.Duration(i)*time.Second)
			if err := svc.Extend(ctx, slots.Actor{Name: "bob", CorrelationID: "c" + strconv.Itoa(i)}, "s1", slots.ExtendCmd{Until: until}); err != nil {
				appended <- err
				return
			}
		}
		appended <- nil
	}()
	<-halfway
	addr := b.srv.Listener.Addr().String()
	b.stop()
	b.start(t, HubOptions{}, addr)
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	head := b.head(t)
	for want := pos + 1; want <= head; want++ {
		ev := w.next(t, "change")
		if string(ev.ID) != strconv.FormatUint(uint64(want), 10) {
			t.Fatalf("got change %s, want %d (gap or duplicate)", ev.ID, want)
		}
	}
	cancel()
	<-w.done
}

func TestSPAFallback(t *testing.T) {
	b := &bundle{store: memstore.New(), spa: fstest.MapFS{
		"index.html":         {Data: []byte("<!doctype html><title>board</title>")},
		"assets/app-1a2b.js": {Data: []byte("console.log(1)")},
	}}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.start(t, HubOptions{})
	for _, tc := range []struct {
		path, want, cache string
		status            int
	}{
		{"/", "<title>board</title>", "no-cache", 200},
		{"/slots/aurora", "<title>board</title>", "no-cache", 200}, // a client-side route
		{"/jobs/1234", "<title>board</title>", "no-cache", 200},
		{"/assets/app-1a2b.js", "console.log(1)", "public, max-age=31536000, immutable", 200},
		{"/api/nothing-here", `"code":"not_found"`, "", 404},
		{"/assets/..%2F..%2Fetc/passwd", `"code":"invalid"`, "", 400},
	} {
		a := b.do(t, "GET", tc.path, nil)
		if a.status != tc.status || !strings.Contains(string(a.body), tc.want) || a.header.Get("Cache-Control") != tc.cache {
			t.Errorf("GET %s: %d %q cache %q", tc.path, a.status, a.body, a.header.Get("Cache-Control"))
		}
	}
}

// authHeader is the Authorization header of the bundle's admin token.
func (b *bundle) authHeader() map[string]string {
	return map[string]string{"Authorization": "Bearer " + b.token}
}

// TestPromotePlanNamesTheTarget: the promote plan answers with the target
// repository and what the lookup found (issue 14); without a git host the
// answer is "unknown" with the reason, never "free".
func TestPromotePlanNamesTheTarget(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	a := b.do(t, http.MethodGet, "/api/slots/s1/plan?kind=promote&project=NEW&name=copy", nil)
	if a.status != http.StatusOK {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	var p slots.Plan
	a.decode(t, &p)
	if p.Target == nil || p.Target.Repo != (events.RepoRef{Project: "NEW", Slug: "copy"}) || p.Target.State != slots.TargetUnknown || p.Target.Error == "" {
		t.Fatalf("target %+v in %s", p.Target, a.body)
	}
	a = b.do(t, http.MethodGet, "/api/slots/s1/plan?kind=teardown", nil)
	if strings.Contains(string(a.body), `"target"`) {
		t.Fatalf("a teardown plan names a target: %s", a.body)
	}
}

// TestJobEventsAfter: ?after=<revision> answers only the job's later events,
// so the job page applies changes without refetching the history (issue 14).
func TestJobEventsAfter(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.occupy(t, "s1")
	var queued slots.JobAcceptedResult
	b.do(t, http.MethodPost, "/api/slots/s1/release", nil).decode(t, &queued)
	b.do(t, http.MethodPost, "/api/jobs/"+queued.JobID+"/cancel", nil)
	type evs struct {
		Events []struct {
			Revision uint64 `json:"revision"`
			Type     string `json:"type"`
		} `json:"events"`
	}
	var all, later evs
	b.do(t, http.MethodGet, "/api/jobs/"+queued.JobID+"/events", nil).decode(t, &all)
	if len(all.Events) < 2 {
		t.Fatalf("events %+v", all)
	}
	first := all.Events[0].Revision
	b.do(t, http.MethodGet, "/api/jobs/"+queued.JobID+"/events?after="+strconv.FormatUint(first, 10), nil).decode(t, &later)
	if len(later.Events) != len(all.Events)-1 || later.Events[0].Revision != first+1 {
		t.Fatalf("after %d: %+v of %+v", first, later, all)
	}
	if a := b.do(t, http.MethodGet, "/api/jobs/"+queued.JobID+"/events?after=x", nil); a.status != http.StatusBadRequest {
		t.Fatalf("after=x: %d", a.status)
	}
	if a := b.do(t, http.MethodGet, "/api/jobs/nope/events?after=3", nil); a.status != http.StatusNotFound {
		t.Fatalf("unknown job: %d", a.status)
	}
}

// TestListJobsAcrossSlots: GET /api/jobs finds a job without its slot,
// filters by state, kind, slot and person, pages newest first, and names
// the offending parameter of a bad query.
func TestListJobsAcrossSlots(t *testing.T) {
	b := setup(t, HubOptions{})
	for _, n := range []string{"s1", "s2", "s3"} {
		b.register(t, n)
		b.occupy(t, n)
	}
	var ids []string
	for _, n := range []string{"s1", "s2", "s3"} {
		a := b.do(t, http.MethodPost, "/api/slots/"+n+"/release", nil)
		var res slots.JobAcceptedResult
		a.decode(t, &res)
		ids = append(ids, res.JobID)
	}
	list := func(query string) projections.Page {
		t.Helper()
		a := b.do(t, http.MethodGet, "/api/jobs"+query, nil)
		if a.status != http.StatusOK {
			t.Fatalf("GET /api/jobs%s: %d %s", query, a.status, a.body)
		}
		var p projections.Page
		a.decode(t, &p)
		return p
	}
	got := func(p projections.Page) []string {
		out := []string{}
		for _, j := range p.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	for query, want := range map[string][]string{
		"":                               {ids[2], ids[1], ids[0]},
		"?slot=s2":                       {ids[1]},
		"?state=queued&kind=reset":       {ids[2], ids[1], ids[0]},
		"?actor=alice&slot=s1":           {ids[0]},
		"?state=failed":                  {},
		"?state=uncertain":               {},
		"?kind=teardown":                 {},
		"?actor=nobody":                  {},
		"?slot=s9":                       {},
		"?limit=2&state=queued":          {ids[2], ids[1]},
		"?cursor=" + strconv.Itoa(1<<40): {ids[2], ids[1], ids[0]},
	} {
		if g := got(list(query)); !slices.Equal(g, want) {
			t.Errorf("GET /api/jobs%s = %v, want %v", query, g, want)
		}
	}
	p1 := list("?limit=2")
	if p1.NextCursor == "" {
		t.Fatal("page 1 of 3 jobs in pages of 2 has no cursor")
	}
	if p2 := list("?limit=2&cursor=" + p1.NextCursor); !slices.Equal(got(p2), []string{ids[0]}) || p2.NextCursor != "" {
		t.Fatalf("page 2 = %v cursor %q", got(p2), p2.NextCursor)
	}
	for query, field := range map[string]string{
		"?state=done": "state", "?kind=x": "kind", "?slot=a%2Fb": "slot", "?actor=%20x": "actor",
		"?cursor=0": "cursor", "?limit=0": "limit",
	} {
		a := b.do(t, http.MethodGet, "/api/jobs"+query, nil)
		if e := a.apiError(t); a.status != http.StatusBadRequest || e.Details["field"] != field {
			t.Errorf("GET /api/jobs%s: %d %+v, want 400 naming %q", query, a.status, e, field)
		}
	}
}

// TestSetEarlierDeadlineOverHTTP: the occupant (a member) moves their own
// deadline earlier; another member may not; the answer is the slot with the
// new deadline and the audit feed says what happened.
func TestSetEarlierDeadlineOverHTTP(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	mia := bearerAs(b.tokenFor(t, "mia", auth.RoleMember, time.Hour))
	noah := bearerAs(b.tokenFor(t, "noah", auth.RoleMember, time.Hour))
	if a := b.do(t, http.MethodPost, "/api/slots/s1/occupy", map[string]any{"until": time.Now().Add(30 * time.Hour)}, mia...); a.status != http.StatusOK {
		t.Fatalf("occupy: %d %s", a.status, a.body)
	}
	sooner := time.Now().Add(90 * time.Minute).UTC().Truncate(time.Second)
	body := map[string]any{"deadline": sooner, "confirm_earlier": true}
	before := b.head(t)
	b.refused(t, "another member", b.do(t, http.MethodPost, "/api/slots/s1/deadline", body, noah...), before, http.StatusForbidden, auth.PermExtendAny)

	a := b.do(t, http.MethodPost, "/api/slots/s1/deadline", body, mia...)
	if a.status != http.StatusOK {
		t.Fatalf("set deadline: %d %s", a.status, a.body)
	}
	var v projections.SlotView
	a.decode(t, &v)
	if v.Deadline == nil || !v.Deadline.Equal(sooner) || v.Occupant != "mia" {
		t.Fatalf("answer %+v, want deadline %s", v, sooner)
	}
	a = b.do(t, http.MethodGet, "/api/audit?slot=s1&kind=OccupancyExtended", nil)
	var feed struct{ Entries []projections.AuditEntry }
	a.decode(t, &feed)
	if len(feed.Entries) != 1 || !strings.HasPrefix(feed.Entries[0].Summary, "deadline moved earlier by mia") {
		t.Fatalf("audit = %+v", feed.Entries)
	}
}
