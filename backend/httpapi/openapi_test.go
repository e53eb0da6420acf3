package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/schema_validation"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/reconcile"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// The contract tests. Adding a route: add its line to the route table
// (policy.go), then its operation under "paths" in openapi.json (path
// parameters as {name}, echo's * as {path}: query.go's echoPath and
// openapiPath; "x-permission" is the table's
// permission; list the error statuses it can answer as
// {"$ref": "#/components/responses/E<status>"}; "security": [] when it
// needs no subject), then a call in contractCore or contractFeatures that
// gets its success answer, and a new view's Go type in goTypes
// (openapi_types_test.go). There is no other copy of the document: docs
// link to this file (docs/api.md "The contract").

// openapiDocument is the embedded document as plain JSON, for the checks
// that need no validator.
type openapiDocument struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

type openapiOperation struct {
	Permission string            `json:"x-permission"`
	Security   *[]map[string]any `json:"security"` // nil: the document's default (a token or a session)
}

func loadOpenAPI(t *testing.T) openapiDocument {
	t.Helper()
	var d openapiDocument
	if err := json.Unmarshal(OpenAPI(), &d); err != nil {
		t.Fatalf("backend/httpapi/openapi.json is not JSON: %v", err)
	}
	return d
}

// everyRoute is the route table with every optional part switched on
// (simulators, OIDC), so the document must describe all of it.
func everyRoute(t *testing.T) []route {
	t.Helper()
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.Sim = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		d.OIDC = fakeOIDC{}
	}
	b.start(t, HubOptions{})
	return b.srv.Config.Handler.(*Server).routes()
}

// TestOpenAPICoversTheRouteTable fails, naming the method and path, when a
// route of the table is missing from the document, when the document has
// an operation no route serves, or when their permissions differ.
func TestOpenAPICoversTheRouteTable(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	inTable := map[string]bool{}
	for _, r := range everyRoute(t) {
		p, m := openapiPath(r.Path), strings.ToLower(r.Method)
		inTable[m+" "+p] = true
		raw, ok := doc.Paths[p][m]
		if !ok {
			t.Errorf("route %s %s (policy.go) is not in backend/httpapi/openapi.json: add paths[%q].%s", r.Method, r.Path, p, m)
			continue
		}
		var op openapiOperation
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatalf("%s %s: %v", m, p, err)
		}
		if op.Permission != string(r.Perm) {
			t.Errorf("route %s %s: the document's x-permission is %q, the route table's %q", r.Method, r.Path, op.Permission, r.Perm)
		}
		// authorize lets public and signed routes through without a
		// subject: the document must not ask for a token or session there,
		// and must everywhere else.
		open := r.Perm == auth.PermPublic || r.Perm == auth.PermSigned
		if none := op.Security != nil && len(*op.Security) == 0; none != open {
			t.Errorf("route %s %s (%s): the document's security is %v; want [] exactly when the route needs no subject", r.Method, r.Path, r.Perm, op.Security)
		}
	}
	var extra []string
	for p, item := range doc.Paths {
		for m := range item {
			if !inTable[m+" "+p] && m != "parameters" && m != "summary" && m != "description" {
				extra = append(extra, strings.ToUpper(m)+" "+p)
			}
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("openapi.json describes %s, which no route of the table (policy.go) serves", e)
	}
}

// newContractValidator builds the validator over the embedded document,
// after checking the document against the OpenAPI 3.1 schema.
func newContractValidator(t *testing.T) validator.Validator {
	t.Helper()
	d, err := libopenapi.NewDocument(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(d)
	if len(errs) > 0 {
		t.Fatalf("validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("openapi.json is not a valid OpenAPI 3.1 document: %s (%s)", e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("  %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
			}
		}
		t.FailNow()
	}
	return v
}

// TestOpenAPIDocumentIsValid: the document itself passes the OpenAPI 3.1
// schema.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	newContractValidator(t)
}

// contract drives real requests against a real server and validates each
// answer (status, content type, body) with the document.
type contract struct {
	b    *bundle
	v    validator.Validator
	doc  openapiDocument
	seen map[string]bool // "METHOD /path/template status"
}

// call sends a request like bundle.do and validates the answer. A request
// the server accepts (2xx) is validated against the document too — its
// query parameters and body — so the examples below are also the
// document's.
func (k *contract) call(t *testing.T, wantStatus int, method, path string, body any, hdr ...string) answer {
	t.Helper()
	a := k.b.do(t, method, path, body, hdr...)
	if a.status != wantStatus {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, a.status, wantStatus, a.body)
	}
	var sent []byte
	switch v := body.(type) {
	case nil:
	case string:
		sent = []byte(v)
	default:
		sent, _ = json.Marshal(v)
	}
	req, err := http.NewRequest(method, k.b.srv.URL+path, bytes.NewReader(sent))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+k.b.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else if hdr[i] != "Host" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	// Not validated: a hook's signature header (the document names it, the
	// validator cannot check an HMAC), and "/", the dashboard's root, which
	// echo's /* serves but an OpenAPI path parameter ({path}) cannot be
	// empty.
	if wantStatus/100 == 2 && path != "/" {
		if ok, errs := k.v.ValidateHttpRequest(req); !ok {
			for _, e := range errs {
				t.Errorf("%s %s: the server accepted a request openapi.json does not describe: %s (%s)", method, path, e.Message, e.Reason)
				for _, se := range e.SchemaValidationErrors {
					t.Errorf("    %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
				}
			}
			t.FailNow()
		}
		req.Body = io.NopCloser(bytes.NewReader(sent))
	}
	resp := &http.Response{StatusCode: a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body)), Request: req}
	if ok, errs := k.v.ValidateHttpResponse(req, resp); !ok {
		for _, e := range errs {
			t.Errorf("%s %s → %d: the answer is not what openapi.json describes: %s (%s)", method, path, a.status, e.Message, e.Reason)
			for _, se := range e.SchemaValidationErrors {
				t.Errorf("    %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
			}
		}
		t.FailNow()
	}
	k.seen[fmt.Sprintf("%s %s %d", method, k.template(t, path), a.status)] = true
	return a
}

// template is the document's path template that path matches (the most
// literal one: /api/slots/{name}/jobs/latest before /{path}).
func (k *contract) template(t *testing.T, path string) string {
	t.Helper()
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	best, bestLit := "", -1
	for tpl := range k.doc.Paths {
		ts := strings.Split(tpl, "/")
		if len(ts) > len(segs) || (len(ts) < len(segs) && ts[len(ts)-1] != "{path}") {
			continue
		}
		lit, ok := 0, true
		for i, x := range ts {
			switch {
			case x == "{path}" && i == len(ts)-1:
			case strings.HasPrefix(x, "{"):
				ok = ok && segs[i] != ""
			case x == segs[i]:
				lit++
			default:
				ok = false
			}
		}
		if ok && lit > bestLit {
			best, bestLit = tpl, lit
		}
	}
	if best == "" {
		t.Fatalf("%s matches no path of openapi.json", path)
	}
	return best
}

// TestOpenAPIContract answers, success and error alike, are what the
// document says: every status declared for the operation, every body of
// its schema (the views are closed: a field the document lacks fails).
// Every success status of every operation is validated here at least
// once, or named in notWalked with the reason and the test that covers it
// instead.
func TestOpenAPIContract(t *testing.T) {
	v := newContractValidator(t)
	doc := loadOpenAPI(t)
	seen := map[string]bool{}
	queries := &queryLog{read: map[string]map[string]bool{}, any: map[string]bool{}}
	t.Run("core", func(t *testing.T) {
		b := &bundle{store: memstore.New(), mw: queries.middleware}
		t.Cleanup(func() { goleak.VerifyNone(t) })
		b.start(t, HubOptions{Heartbeat: 50 * time.Millisecond})
		contractCore(t, &contract{b: b, v: v, doc: doc, seen: seen})
	})
	t.Run("features", func(t *testing.T) {
		contractFeatures(t, &contract{v: v, doc: doc, seen: seen}, queries.middleware)
	})
	if t.Failed() {
		return
	}
	queries.check(t, doc)
	statuses, validated := 0, 0
	for p, item := range doc.Paths {
		for m, raw := range item {
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if m == "parameters" || json.Unmarshal(raw, &op) != nil {
				continue
			}
			for st := range op.Responses {
				key := strings.ToUpper(m) + " " + p + " " + st
				if !strings.HasPrefix(st, "2") {
					continue
				}
				statuses++
				if seen[key] {
					validated++
				}
				_, excused := notWalked[key]
				switch {
				case seen[key] && excused:
					t.Errorf("%s is validated now: take it out of notWalked", key)
				case !seen[key] && !excused:
					t.Errorf("no answer %s was validated against openapi.json: add a call to contractCore or contractFeatures", key)
				}
			}
		}
	}
	for key := range notWalked {
		m, rest, _ := strings.Cut(key, " ")
		p, st, _ := strings.Cut(rest, " ")
		var op struct {
			Responses map[string]json.RawMessage `json:"responses"`
		}
		if raw, ok := doc.Paths[p][strings.ToLower(m)]; !ok || json.Unmarshal(raw, &op) != nil || op.Responses[st] == nil {
			t.Errorf("notWalked names %s, which openapi.json does not declare", key)
		}
	}
	t.Logf("%d success statuses of %d operations: %d validated, %d not walked (notWalked)", statuses, operations(doc), validated, len(notWalked))
}

// notWalked: the success answers the walks above do not produce, each with
// where its shape is checked instead.
var notWalked = map[string]string{
	"GET /api/sim/{path} 2XX":    "the simulators' own API (backend/providers/sim), not Slotkeeper's; described as opaque",
	"POST /api/sim/{path} 2XX":   "as GET",
	"PUT /api/sim/{path} 2XX":    "as GET",
	"PATCH /api/sim/{path} 2XX":  "as GET",
	"DELETE /api/sim/{path} 2XX": "as GET",
	"POST /api/waitlist/{id}/accept 200": "needs an offer, made only once a reset job succeeded (no job engine runs here); " +
		"the answer is the Waitlist of GET and POST /api/waitlist, validated here, and the offer's fields are held to waitlist.OfferView by TestOpenAPIMatchesGoTypes",
	"POST /api/waitlist/{id}/decline 200": "as accept",
	"POST /api/jobs/{id}/resume 202":      "needs a job that failed (no job engine runs here); the answer is the JobAccepted of release, teardown, promote and adopt, validated here",
}

// contractCore walks the API of a server with no optional features.
func contractCore(t *testing.T, k *contract) {
	until := map[string]any{"until": time.Now().Add(time.Hour).UTC()}
	later := map[string]any{"until": time.Now().Add(2 * time.Hour).UTC()}

	// The document itself.
	a := k.call(t, 200, "GET", "/api/openapi.json", nil)
	if !bytes.Equal(a.body, OpenAPI()) {
		t.Fatal("GET /api/openapi.json is not the embedded document")
	}
	k.call(t, 401, "GET", "/api/openapi.json", nil, "Authorization", "")

	// Slots.
	k.call(t, 201, "POST", "/api/slots", registerCmd("s1"))
	k.call(t, 201, "POST", "/api/slots", registerCmd("s2"))
	k.call(t, 409, "POST", "/api/slots", registerCmd("s1"))
	same := registerCmd("s3")
	same.TemplateRepo = same.Repo
	k.call(t, 422, "POST", "/api/slots", same)
	k.call(t, 400, "POST", "/api/slots", `{"name":"s4","surprise":1}`)
	k.call(t, 400, "POST", "/api/slots", `null`)
	k.call(t, 415, "POST", "/api/slots", `{}`, "Content-Type", "text/plain")
	k.call(t, 413, "POST", "/api/slots", `{"name":"`+strings.Repeat("x", MaxBodyBytes)+`"}`)
	k.call(t, 200, "GET", "/api/slots", nil)
	k.call(t, 200, "GET", "/api/slots/s1", nil)
	k.call(t, 404, "GET", "/api/slots/nope", nil)
	k.call(t, 400, "GET", "/api/slots/..%2Fetc", nil)
	k.call(t, 421, "GET", "/api/slots", nil, "Host", "evil.example")

	viewer := k.b.tokenFor(t, "vera", auth.RoleViewer, time.Hour)
	k.call(t, 403, "POST", "/api/slots/s1/occupy", until, bearerAs(viewer)...)
	k.call(t, 401, "GET", "/api/slots", nil, "Authorization", "")
	k.call(t, 200, "POST", "/api/slots/s1/occupy", until)
	k.call(t, 409, "POST", "/api/slots/s1/occupy", until)
	k.call(t, 400, "POST", "/api/slots/s2/occupy", map[string]any{"until": "yesterday"})
	k.call(t, 200, "POST", "/api/slots/s1/extend", later)
	k.call(t, 409, "POST", "/api/slots/s1/extend", until)
	k.call(t, 400, "POST", "/api/slots/s1/deadline", map[string]any{"deadline": time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)})
	k.call(t, 200, "POST", "/api/slots/s1/deadline", map[string]any{"deadline": time.Now().Add(90 * time.Minute).UTC().Format(time.RFC3339), "confirm_earlier": true})
	k.call(t, 200, "GET", "/api/slots/s1/plan?kind=reset", nil)
	k.call(t, 200, "GET", "/api/slots/s1/plan?kind=promote&project=NEW&name=copy", nil)
	k.call(t, 400, "GET", "/api/slots/s1/plan?kind=explode", nil)
	var rel slots.JobAcceptedResult
	k.call(t, 202, "POST", "/api/slots/s1/release", map[string]any{}).decode(t, &rel)
	k.call(t, 409, "POST", "/api/slots/s1/teardown", nil)
	k.call(t, 200, "GET", "/api/slots/s1/jobs", nil)
	k.call(t, 200, "GET", "/api/slots/s1/jobs?kind=reset&limit=5", nil)
	k.call(t, 200, "GET", "/api/jobs", nil)
	k.call(t, 200, "GET", "/api/jobs?state=running&kind=reset&slot=s1&limit=5", nil)
	k.call(t, 400, "GET", "/api/jobs?state=exploded", nil)
	k.call(t, 400, "GET", "/api/slots/s1/jobs?cursor=garbage", nil)
	k.call(t, 200, "GET", "/api/slots/s1/jobs/latest?kind=reset", nil)
	k.call(t, 404, "GET", "/api/slots/s2/jobs/latest?kind=reset", nil)
	k.call(t, 200, "GET", "/api/jobs/"+rel.JobID, nil)
	k.call(t, 404, "GET", "/api/jobs/no-such-job", nil)
	k.call(t, 200, "GET", "/api/jobs/"+rel.JobID+"/events", nil)
	k.call(t, 200, "GET", "/api/jobs/"+rel.JobID+"/events?after=0", nil)
	k.call(t, 400, "GET", "/api/jobs/"+rel.JobID+"/events?after=-1", nil)
	// Audit by replay (issue 28).
	var s1 struct {
		Position uint64 `json:"position"`
	}
	k.call(t, 200, "GET", "/api/slots/s1", nil).decode(t, &s1)
	k.call(t, 200, "GET", fmt.Sprintf("/api/slots/s1?at=%d", s1.Position), nil)
	k.call(t, 200, "GET", "/api/slots/s1?at="+time.Now().UTC().Format(time.RFC3339Nano), nil)
	k.call(t, 404, "GET", "/api/slots/s2?at=1", nil)
	k.call(t, 400, "GET", "/api/slots/s1?at=yesterday", nil)
	k.call(t, 200, "GET", "/api/jobs/"+rel.JobID+"?at=999999", nil)
	k.call(t, 404, "GET", "/api/jobs/"+rel.JobID+"?at=1", nil)
	k.call(t, 400, "GET", "/api/jobs/"+rel.JobID+"?at=0", nil)
	k.call(t, 200, "GET", "/api/slots/s1/changes", nil)
	k.call(t, 200, "GET", "/api/slots/s1/changes?from=1&to="+time.Now().UTC().Format(time.RFC3339Nano), nil)
	k.call(t, 400, "GET", "/api/slots/s1/changes?from=-3", nil)
	k.call(t, 404, "GET", "/api/slots/nope/changes", nil)
	k.call(t, 200, "GET", "/api/freshness", nil)
	k.call(t, 200, "GET", "/api/freshness?position=1", nil)
	k.call(t, 400, "GET", "/api/freshness?position=x", nil)
	k.call(t, 409, "POST", "/api/jobs/"+rel.JobID+"/resume", nil)
	k.call(t, 202, "POST", "/api/jobs/"+rel.JobID+"/cancel", nil)
	k.call(t, 409, "POST", "/api/jobs/"+rel.JobID+"/cancel", nil)
	k.call(t, 202, "POST", "/api/slots/s2/promote", map[string]any{"project": "NEW", "name": "copy"})
	k.call(t, 201, "POST", "/api/slots", registerCmd("s5"))
	k.call(t, 202, "POST", "/api/slots/s5/teardown", nil)
	k.call(t, 200, "GET", "/api/audit", nil)
	k.call(t, 200, "GET", "/api/audit?slot=s1&kind=SlotOccupied&limit=10&after=1&since=2020-01-01T00:00:00Z", nil)
	k.call(t, 400, "GET", "/api/audit?since=yesterday", nil)
	k.call(t, 200, "GET", "/api/resources/remaining", nil)

	// Features this server runs without: 404 in the error shape.
	k.call(t, 404, "GET", "/api/waitlist", nil)
	k.call(t, 404, "POST", "/api/waitlist", map[string]any{"duration": "1h"})
	k.call(t, 404, "GET", "/api/insights", nil)
	k.call(t, 404, "GET", "/api/reconcile", nil)
	k.call(t, 404, "POST", "/api/reconcile/run", nil)
	k.call(t, 404, "GET", "/api/admin/backup", nil)

	// Who is asking; accounts and tokens.
	k.call(t, 200, "GET", "/api/auth/me", nil)
	k.call(t, 401, "POST", "/api/auth/login", map[string]any{"name": "nobody", "password": "wrong"})
	var created struct {
		ID       string `json:"id"`
		Password string `json:"password"`
	}
	k.call(t, 201, "POST", "/api/admin/users", map[string]any{"name": "olga", "role": "operator"}).decode(t, &created)
	k.call(t, 409, "POST", "/api/admin/users", map[string]any{"name": "olga", "role": "operator"})
	k.call(t, 200, "GET", "/api/admin/users", nil)
	k.call(t, 200, "PUT", "/api/admin/users/"+created.ID+"/role", map[string]any{"role": "member"})
	k.call(t, 400, "PUT", "/api/admin/users/"+created.ID+"/role", map[string]any{"role": "pope"})
	k.call(t, 200, "POST", "/api/auth/login", map[string]any{"name": "olga", "password": created.Password})
	k.call(t, 403, "GET", "/api/admin/users", nil, bearerAs(viewer)...)
	var issued struct {
		ID string `json:"id"`
	}
	k.call(t, 201, "POST", "/api/admin/tokens", map[string]any{"name": "ci", "role": "operator", "expires": "1h"}).decode(t, &issued)
	k.call(t, 400, "POST", "/api/admin/tokens", map[string]any{"name": "ci2", "role": "operator", "expires": "soon"})
	k.call(t, 200, "GET", "/api/admin/tokens", nil)
	k.call(t, 204, "DELETE", "/api/admin/tokens/"+issued.ID, nil)
	k.call(t, 204, "POST", "/api/auth/logout", nil)

	// Operations and the dashboard.
	k.call(t, 200, "GET", "/healthz", nil)
	k.call(t, 200, "HEAD", "/healthz", nil)
	k.call(t, 200, "GET", "/readyz", nil)
	k.call(t, 200, "HEAD", "/readyz", nil)
	k.call(t, 200, "GET", "/metrics", nil)
	k.call(t, 200, "GET", "/", nil)
	k.call(t, 200, "GET", "/slots", nil)

	// The live stream: its frames against the document's frame schemas.
	k.streamFrames(t)
	k.call(t, 400, "GET", "/api/stream?last_event_id=abc", nil)
}

// streamFrames reads the live stream until it has seen a snapshot, a
// change and a heartbeat, and validates each frame's data with the schema
// the document's x-sse-events names for its kind.
func (k *contract) streamFrames(t *testing.T) {
	t.Helper()
	var raw struct {
		Paths map[string]map[string]struct {
			Events map[string]struct {
				Data struct {
					Ref string `json:"$ref"`
				} `json:"data"`
			} `json:"x-sse-events"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &raw); err != nil {
		t.Fatal(err)
	}
	kinds := raw.Paths["/api/stream"]["get"].Events
	if len(kinds) == 0 {
		t.Fatal("the document describes no frame kinds of /api/stream (x-sse-events)")
	}
	d, err := libopenapi.NewDocument(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	m, err := d.BuildV3Model()
	if err != nil {
		t.Fatal(err)
	}
	sv := schema_validation.NewSchemaValidator()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", k.b.srv.URL+"/api/stream", nil)
	req.Header.Set("Authorization", "Bearer "+k.b.token)
	resp, err := (&http.Client{Transport: k.b.tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	kind := ""
	for sc.Scan() && !(seen["snapshot"] && seen["change"] && seen["heartbeat"]) {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			spec, ok := kinds[kind]
			if !ok {
				t.Fatalf("the stream sent a %q frame the document does not describe", kind)
			}
			name := strings.TrimPrefix(spec.Data.Ref, "#/components/schemas/")
			proxy := m.Model.Components.Schemas.GetOrZero(name)
			if proxy == nil {
				t.Fatalf("x-sse-events %s names schema %q, which the document lacks", kind, name)
			}
			if ok, errs := sv.ValidateSchemaString(proxy.Schema(), strings.TrimPrefix(line, "data: ")); !ok {
				for _, e := range errs {
					t.Errorf("%s frame is not %s: %s", kind, name, e.Message)
					for _, se := range e.SchemaValidationErrors {
						t.Errorf("    %s: %s", se.FieldPath+" "+se.KeywordLocation, se.Reason)
					}
				}
				t.FailNow()
			}
			if kind == "snapshot" && !seen["snapshot"] {
				// A change to follow the snapshot (its frames wait in
				// the connection's buffers meanwhile).
				if a := k.b.do(t, "POST", "/api/slots", registerCmd("s9")); a.status != http.StatusCreated {
					t.Fatalf("register s9: %d %s", a.status, a.body)
				}
			}
			seen[kind] = true
		}
	}
	if !(seen["snapshot"] && seen["change"] && seen["heartbeat"]) {
		t.Fatalf("stream ended after %v: %v", seen, sc.Err())
	}
	k.seen["GET /api/stream 200"] = true
}

// contractFeatures walks the routes of the optional parts on a server that
// runs them: the waitlist, insights, the pull-request flow, the consumers'
// report, backups, the loopback demo's sign-in, and a password change.
func contractFeatures(t *testing.T, k *contract, mw echo.MiddlewareFunc) {
	b := &bundle{store: memstore.New(), mw: mw}
	k.b = b
	t.Cleanup(func() { goleak.VerifyNone(t) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	readsDown := &atomic.Bool{}
	health := consumer.NewHealth(slog.New(slog.NewTextHandler(io.Discard, nil)))
	health.Park("deadlines", events.RecordedEvent{Stream: "slot-a", Type: "OccupancyExtended", Position: 7, Revision: 2, ID: "e1"}, errors.New("does not decode"))
	b.deps = func(d *Deps) {
		wl := waitlist.New(b.store, d.Commands.(*slots.Service), waitlist.Config{Logger: d.Logger})
		go func() { defer close(done); _ = wl.Run(ctx) }()
		d.Waitlist = wl
		d.Insights = insights.New(b.store, nil, insights.Config{})
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
		// The simulators' presence is what serves the simulated delivery.
		d.Sim = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
		d.Consumers = health.Report
		d.Backup = func(ctx context.Context, w io.Writer) error { _, err := w.Write([]byte("tar")); return err }
		d.AutoLogin = func(ctx context.Context) (auth.User, bool) { return d.Auth.Dir.UserByName("demo-admin") }
		d.Links = ProviderLinks{Coolify: "https://coolify.example", Bitbucket: "https://bitbucket.example"}
		d.Limits = JobLimits{StepTimeoutMS: 120_000, JobTimeoutMS: 900_000}
		d.Reconcile = fakeReconciler{}
		d.ReconcileActions = reconcile.Actions{Slots: d.Commands.(*slots.Service), Orphans: fakeReconciler{}}
		d.Reads = flakyReads{ReadModel: d.Reads, down: readsDown}
	}
	b.start(t, HubOptions{})
	t.Cleanup(func() { cancel(); <-done })
	bg := context.Background()
	if _, _, err := b.auth.Dir.CreateUser(bg, auth.SystemSubject("demo"), "demo-admin", auth.RoleAdmin, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.auth.Dir.CreateUser(bg, auth.SystemSubject("test"), "paula", auth.RoleMember, "paula password 1"); err != nil {
		t.Fatal(err)
	}

	// Signing in: the demo's, and a password change (a cookie session).
	k.call(t, 200, "GET", "/api/auth/me", nil, "Authorization", "", "Host", "localhost")
	k.call(t, 200, "POST", "/api/auth/demo", nil, "Authorization", "", "Host", "localhost")
	paula := b.signInAs(t, "paula", "paula password 1")
	k.call(t, 200, "GET", "/api/auth/me", nil, paula...)
	k.call(t, 200, "POST", "/api/auth/password", map[string]string{"current": "paula password 1", "new": "paula password 2"}, paula...)

	// The waitlist.
	bob := bearerAs(b.tokenFor(t, "bob", auth.RoleMember, time.Hour))
	carol := bearerAs(b.tokenFor(t, "carol", auth.RoleMember, time.Hour))
	var w WaitlistAnswer
	k.call(t, 201, "POST", "/api/waitlist", map[string]any{"duration": "2h", "note": "demo at 3"}, bob...).decode(t, &w)
	k.call(t, 201, "POST", "/api/waitlist", map[string]any{"duration": "1h"}, carol...).decode(t, &w)
	k.call(t, 200, "GET", "/api/waitlist", nil)
	k.call(t, 200, "POST", "/api/waitlist/"+w.Entries[1].ID+"/reorder", map[string]any{"position": 1, "reason": "demo first"})
	k.call(t, 200, "DELETE", "/api/waitlist/"+w.Entries[1].ID, nil, carol...)
	k.call(t, 409, "POST", "/api/waitlist/"+w.Entries[0].ID+"/accept", nil, bob...)

	// Insights, occupants, the consumers' report, a backup.
	k.call(t, 200, "GET", "/api/insights", nil)
	k.call(t, 200, "GET", "/api/insights?range=30d", nil)
	k.call(t, 200, "GET", "/api/occupants", nil)
	k.call(t, 200, "GET", "/api/admin/consumers", nil)
	k.call(t, 200, "GET", "/api/admin/backup", nil)

	// The pull-request flow.
	k.call(t, 201, "POST", "/api/pr-repos", map[string]string{"repo": "APPS/shop"})
	k.call(t, 200, "GET", "/api/pr-repos", nil)
	body := `{"eventKey":"pr:opened","date":"` + time.Now().Format(time.RFC3339) + `","pullRequest":{"id":1,"state":"OPEN","fromRef":{"displayId":"f","latestCommit":"` +
		strings.Repeat("a", 40) + `","repository":{"slug":"other","project":{"key":"X"}}},"toRef":{"repository":{"slug":"other","project":{"key":"X"}}}}}`
	k.call(t, 202, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-1", "X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	k.call(t, 401, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-2")
	k.call(t, 200, "GET", "/api/hooks/bitbucket/deliveries", nil)
	k.call(t, 201, "POST", "/api/pr-repos", map[string]string{"repo": "X/other"})
	k.call(t, 202, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-3", "X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	k.call(t, 200, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-3", "X-Hub-Signature", webhook.Sign("k3y", []byte(body)))
	k.call(t, 200, "GET", "/api/hooks/bitbucket/deliveries", nil)
	simulated := map[string]any{"id": 1, "head": strings.Repeat("a", 40), "event_key": "pr:opened", "request_id": "r-4", "payload": json.RawMessage(strings.Replace(body, `"id":1`, `"id":2`, 1))}
	k.call(t, 202, "POST", "/api/hooks/bitbucket/simulated", simulated)
	k.call(t, 200, "POST", "/api/hooks/bitbucket/simulated", simulated)
	k.call(t, 200, "GET", "/api/pull-requests", nil)
	k.call(t, 200, "GET", "/api/pull-requests?state=open", nil)
	k.call(t, 400, "GET", "/api/pull-requests?state=sleeping", nil)
	k.call(t, 204, "DELETE", "/api/pr-repos/APPS/shop", nil)

	// Reconciliation: the report of a run, and acting on its orphan.
	k.call(t, 201, "POST", "/api/slots", registerCmd("s1"))
	k.call(t, 200, "GET", "/api/reconcile", nil)
	k.call(t, 202, "POST", "/api/reconcile/run", nil)
	orphan := "?slot=s1&provider=coolify&kind=application&id=a-orphan"
	k.call(t, 200, "GET", "/api/reconcile/adopt/plan"+orphan, nil)
	k.call(t, 200, "GET", "/api/reconcile/delete/plan"+orphan, nil)
	k.call(t, 202, "POST", "/api/reconcile/adopt", map[string]string{"slot": "s1", "provider": "coolify", "kind": "application", "id": "a-orphan"})
	k.call(t, 201, "POST", "/api/slots", registerCmd("s2"))
	k.call(t, 202, "POST", "/api/reconcile/delete", map[string]string{"slot": "s2", "provider": "coolify", "kind": "application", "id": "a-orphan"})

	// HEAD answers.
	k.call(t, 200, "HEAD", "/", nil)
	k.call(t, 200, "HEAD", "/metrics", nil)

	// The read model down: commands are recorded and answer 202 without
	// a view (TestReadModelOutage).
	k.call(t, 201, "POST", "/api/slots", registerCmd("s3"))
	readsDown.Store(true)
	k.call(t, 202, "POST", "/api/slots", registerCmd("s4"))
	k.call(t, 202, "POST", "/api/slots/s3/occupy", map[string]any{"until": time.Now().Add(time.Hour).UTC()})
	k.call(t, 202, "POST", "/api/slots/s3/extend", map[string]any{"until": time.Now().Add(2 * time.Hour).UTC()})
	k.call(t, 202, "POST", "/api/slots/s3/deadline", map[string]any{"deadline": time.Now().Add(90 * time.Minute).UTC(), "confirm_earlier": true})
}

// fakeReconciler stands in for reconcile.Reconciler, which needs the
// providers' inventories: its report is the real Go type with one finding
// of each class, and the orphan it knows is a-orphan.
type fakeReconciler struct{}

var reconcileSince = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (fakeReconciler) finding(class, id string) events.ReconcileFinding {
	return events.ReconcileFinding{RunID: "run-1", Class: class, Provider: "coolify", Kind: "application", ID: id, Name: "shop",
		Scope: "coolify:p-1", Detail: "why", Since: reconcileSince}
}

func (f fakeReconciler) LatestReport(context.Context) (ReconcileReport, error) {
	ended := reconcileSince.Add(time.Minute)
	drift := f.finding("drift", "a-drift")
	drift.Slot = "s1"
	return ReconcileReport{Links: ProviderLinks{Coolify: "https://coolify.example"}, Report: reconcile.Report{
		Run:      &reconcile.RunView{ID: "run-1", State: "done", StartedAt: reconcileSince, EndedAt: &ended, Scope: []string{"coolify:p-1"}, Counts: map[string]int{"orphan": 1}},
		Findings: []events.ReconcileFinding{f.finding("orphan", "a-orphan"), drift, f.finding("unknown", "a-unknown"), f.finding("resolved", "a-gone")},
		Position: 7,
	}}, nil
}

func (fakeReconciler) Trigger(context.Context) error { return nil }

func (f fakeReconciler) CurrentOrphan(_ context.Context, provider, kind, id string) (events.ReconcileFinding, error) {
	if id != "a-orphan" {
		return events.ReconcileFinding{}, reconcile.ErrStale
	}
	return f.finding("orphan", id), nil
}

// operations counts the document's operations.
func operations(doc openapiDocument) int {
	n := 0
	for _, item := range doc.Paths {
		for m := range item {
			if m != "parameters" && m != "summary" && m != "description" {
				n++
			}
		}
	}
	return n
}

// queryLog records the query parameters each route's handler reads
// during the walks (through echo.Context.QueryParam), so that check can
// hold them to the parameters the document lists.
type queryLog struct {
	mu   sync.Mutex
	read map[string]map[string]bool // "METHOD /echo/path" → names read
	any  map[string]bool            // routes that read c.QueryParams() whole
}

type queryRecorder struct {
	echo.Context
	log   *queryLog
	route string
}

func (q queryRecorder) QueryParam(name string) string {
	q.log.mu.Lock()
	if q.log.read[q.route] == nil {
		q.log.read[q.route] = map[string]bool{}
	}
	q.log.read[q.route][name] = true
	q.log.mu.Unlock()
	return q.Context.QueryParam(name)
}

// QueryParams hands out the whole map: which key the handler looks up
// is not seen (queryAt), so such a route is spared the "documented but
// never read" half of the check.
func (q queryRecorder) QueryParams() url.Values {
	q.log.mu.Lock()
	q.log.any[q.route] = true
	q.log.mu.Unlock()
	return q.Context.QueryParams()
}

func (l *queryLog) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		route := c.Request().Method + " " + c.Path()
		l.mu.Lock()
		if l.read[route] == nil {
			l.read[route] = map[string]bool{}
		}
		l.mu.Unlock()
		return next(queryRecorder{Context: c, log: l, route: route})
	}
}

// readsURL: parameters read from the http.Request, below echo, so the
// recorder cannot see them; the walk's 400 for a bad value shows they are.
var readsURL = map[string]bool{
	"GET /api/stream last_event_id": true, // lastEventID (sse.go), shared with the hub's own resume path
}

// check: every query parameter a handler read is documented for its
// operation, and every documented one was read by some request of the
// walks (a parameter the server ignores is a lie to its clients).
func (l *queryLog) check(t *testing.T, doc openapiDocument) {
	t.Helper()
	for _, route := range sortedKeys(l.read) {
		method, path, _ := strings.Cut(route, " ")
		raw, ok := doc.Paths[openapiPath(path)][strings.ToLower(method)]
		if !ok || path == "/*" || strings.HasPrefix(path, "/api/sim/") {
			continue // the route-table test names a missing operation; the SPA and simulators read none
		}
		var op struct {
			Parameters []struct {
				Name   string `json:"name"`
				In     string `json:"in"`
				Schema struct {
					Type any `json:"type"`
				} `json:"schema"`
			} `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			t.Fatal(err)
		}
		documented := map[string]bool{}
		for _, p := range op.Parameters {
			// A free-form parameter (type object) opens the query; its
			// name is never sent (query.go).
			if p.In == "query" && schemaType(p.Schema.Type) != "object" {
				documented[p.Name] = true
			}
		}
		for _, name := range sortedKeys(l.read[route]) {
			if !documented[name] {
				t.Errorf("%s reads query parameter %q, which openapi.json does not list", route, name)
			}
		}
		for _, name := range sortedKeys(documented) {
			if !l.read[route][name] && !l.any[route] && !readsURL[route+" "+name] {
				t.Errorf("openapi.json lists query parameter %q of %s, which its handler never read in the walks", name, route)
			}
		}
	}
}
