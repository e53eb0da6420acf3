package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// queryBundle is a server with every optional route switched on
// (simulators, OIDC) and one free slot s1.
func queryBundle(t *testing.T) (*bundle, *Server) {
	t.Helper()
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.Sim = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		d.OIDC = fakeOIDC{}
	}
	b.start(t, HubOptions{})
	b.register(t, "s1")
	return b, b.srv.Config.Handler.(*Server)
}

// refusedQuery asserts a's 400 names the query parameter ("query": the
// query string is not valid) and returns its payload.
func refusedQuery(t *testing.T, what string, a answer, param string) errorPayload {
	t.Helper()
	if a.status != http.StatusBadRequest {
		t.Fatalf("%s: status %d, want 400: %s", what, a.status, a.body)
	}
	e := a.apiError(t)
	if e.Code != CodeInvalid || e.Details["field"] != param || e.Args["field"] != param || (param != "query" && !strings.Contains(e.Message, fmt.Sprintf("%q", param))) {
		t.Fatalf("%s: the 400 does not name query parameter %q: %s", what, param, a.body)
	}
	return e
}

// TestEveryRouteRefusesAnUnknownQueryParameter walks the route table
// (every optional route on) with a query parameter no operation declares:
// each answers 400 naming it and listing the operation's parameters as
// openapi.json declares them, except the routes whose query is open (the
// dashboard's pages, the OIDC callback), and nothing is appended, the
// state changes included.
func TestEveryRouteRefusesAnUnknownQueryParameter(t *testing.T) {
	b, srv := queryBundle(t)
	before := b.head(t)
	open := map[string]bool{}
	for _, rt := range srv.routes() {
		key := rt.Method + " " + rt.Path
		rule, ok := srv.queries[key]
		if !ok {
			t.Errorf("%s: no operation in openapi.json", key)
			continue
		}
		path := strings.NewReplacer(":name", "s1", ":id", "nope", ":project", "P", ":slug", "r", "*", "faults").Replace(rt.Path)
		var body any
		if isStateChange(rt.Method) {
			body = "{}"
		}
		if rt.Path == streamRoute {
			// A refused stream is answered at once (an accepted one would
			// not end: TestSPARequestsAreAccepted).
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+path+"?zz_unknown=1", nil)
			req.Header.Set("Authorization", "Bearer "+b.token)
			resp, err := b.srv.Client().Do(req)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", key, resp.StatusCode)
			}
			resp.Body.Close()
			cancel()
			continue
		}
		a := b.do(t, rt.Method, path+"?zz_unknown=1", body)
		if rule.open {
			open[key] = true
			if a.status == http.StatusBadRequest && strings.Contains(string(a.body), "zz_unknown") {
				t.Errorf("%s: its query is open, yet: %s", key, a.body)
			}
			continue
		}
		if rt.Method == http.MethodHead {
			if a.status != http.StatusBadRequest {
				t.Errorf("%s: status %d, want 400", key, a.status)
			}
			continue
		}
		e := refusedQuery(t, key, a, "zz_unknown")
		accepted, _ := e.Details["accepted"].([]any)
		var got []string
		for _, x := range accepted {
			got = append(got, x.(string))
		}
		if !slices.Equal(got, rule.accepted) && !(len(got) == 0 && len(rule.accepted) == 0) {
			t.Errorf("%s: the 400 lists %v, openapi.json declares %v", key, got, rule.accepted)
		}
		if want := rt.Method + " " + openapiPath(rt.Path); e.Details["route"] != want {
			t.Errorf("%s: the 400 names the route %v, want %s as openapi.json names it", key, e.Details["route"], want)
		}
	}
	if after := b.head(t); after != before {
		t.Fatalf("refused requests appended: head %d → %d", before, after)
	}
	want := map[string]bool{"GET /*": true, "HEAD /*": true, "GET /api/auth/oidc/callback": true}
	for k := range want {
		if !open[k] {
			t.Errorf("%s: its query should be open (openapi.json declares a free-form parameter)", k)
		}
	}
	for k := range open {
		if !want[k] {
			t.Errorf("%s: its query is open; every API route declares its parameters", k)
		}
	}
}

// TestAttackPassQueryParameters: the fifth attack pass's examples (as-of
// asked of lists that have none) are 400s naming at and what the route
// accepts; a parameter given twice where one value is read, and a query
// that is not valid URL encoding, are 400s too.
func TestAttackPassQueryParameters(t *testing.T) {
	b, _ := queryBundle(t)
	for _, path := range []string{"/api/slots", "/api/jobs", "/api/audit", "/api/slots/s1/jobs"} {
		e := refusedQuery(t, path, b.do(t, "GET", path+"?at=1", nil), "at")
		if path == "/api/slots" && !strings.Contains(e.Message, "accepts none") {
			t.Errorf("%s: the message does not say it accepts none: %s", path, e.Message)
		}
		if path == "/api/audit" && !strings.Contains(e.Message, "after, before") {
			t.Errorf("%s: the message does not list the accepted parameters: %s", path, e.Message)
		}
	}
	// As-of where there is one still answers.
	if a := b.do(t, "GET", fmt.Sprintf("/api/slots/s1?at=%d", b.head(t)), nil); a.status != http.StatusOK {
		t.Fatalf("GET /api/slots/s1?at=<head>: %d %s", a.status, a.body)
	}
	e := refusedQuery(t, "at twice", b.do(t, "GET", "/api/slots/s1?at=1&at=2", nil), "at")
	if e.Details["count"] != float64(2) {
		t.Errorf("at twice: details %v", e.Details)
	}
	refusedQuery(t, "limit twice", b.do(t, "GET", "/api/audit?limit=1&limit=2", nil), "limit")
	refusedQuery(t, "bad escape", b.do(t, "GET", "/api/audit?limit=%zz", nil), "query")
	refusedQuery(t, "semicolon", b.do(t, "GET", "/api/audit?limit=1;at=2", nil), "query")
	refusedQuery(t, "empty name", b.do(t, "GET", "/api/slots?=1", nil), "")
}

// TestQueryRefusalChangesNothing: a state change with an unknown query
// parameter is refused before its handler: the log does not move and the
// slot is as it was.
func TestQueryRefusalChangesNothing(t *testing.T) {
	b, _ := queryBundle(t)
	before := b.head(t)
	refusedQuery(t, "register", b.do(t, "POST", "/api/slots?dry_run=1", registerCmd("s2")), "dry_run")
	refusedQuery(t, "occupy", b.do(t, "POST", "/api/slots/s1/occupy?for=bob", map[string]any{"until": time.Now().Add(time.Hour)}), "for")
	refusedQuery(t, "hook", b.do(t, "POST", "/api/hooks/bitbucket?project=P", "{}"), "project")
	if after := b.head(t); after != before {
		t.Fatalf("refused commands appended: head %d → %d", before, after)
	}
	if a := b.do(t, "GET", "/api/slots/s2", nil); a.status != http.StatusNotFound {
		t.Fatalf("s2 after a refused register: %d %s", a.status, a.body)
	}
	var s1 struct {
		Occupant any `json:"occupant"`
	}
	b.do(t, "GET", "/api/slots/s1", nil).decode(t, &s1)
	if s1.Occupant != nil {
		t.Fatalf("s1 occupied by a refused command: %v", s1.Occupant)
	}
}

// TestSPARequestsAreAccepted sends the queries the dashboard sends
// (frontend/src/services, frontend/src/live/stream.ts): none is refused
// for its query. (frontend/src/services/contract.test.ts holds the SPA's
// requests to openapi.json; this holds the server to the same document.)
func TestSPARequestsAreAccepted(t *testing.T) {
	b, _ := queryBundle(t)
	now := url.QueryEscape(time.Now().UTC().Format(time.RFC3339))
	for _, path := range []string{
		"/api/slots/s1?at=1",
		"/api/slots/s1?at=" + now,
		"/api/jobs/nope?at=1",
		"/api/freshness?position=1",
		"/api/insights?range=7d",
		"/api/waitlist?after=1",
		"/api/audit?slot=s1&job=j&actor=alice&kind=slot.registered&since=" + now + "&after=1&limit=50",
		"/api/audit?before=5&order=newest&limit=50",
		"/api/jobs?state=queued&kind=reset&slot=s1&actor=alice&cursor=x&limit=20",
		"/api/slots/s1/jobs?kind=reset&cursor=x&limit=20",
		"/api/jobs/nope/events?after=1",
		"/api/slots/s1/changes?from=1&to=2&order=newest",
		"/api/slots/s1/plan?kind=promote&project=P&name=n",
		"/api/reconcile/adopt/plan?slot=s1&provider=coolify&kind=application&id=x",
		"/api/reconcile/delete/plan?slot=s1&provider=coolify&kind=application&id=x",
		"/api/pull-requests?state=waiting",
		"/api/sim/requests?after=" + now,
		"/slots/s1?tab=history", // a dashboard page with its own query
		"/api/auth/oidc/callback?code=c&state=s&iss=https%3A%2F%2Fidp&session_state=x",
	} {
		a := b.do(t, "GET", path, nil)
		if a.status == http.StatusBadRequest {
			if e := a.apiError(t); strings.Contains(e.Message, "query parameter") || e.Details["field"] == "query" {
				t.Errorf("GET %s: refused for its query: %s", path, a.body)
			}
		}
	}
	// The stream resumed from a position (live/stream.ts) is served.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.srv.URL+"/api/stream?last_event_id=1", nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/stream?last_event_id=1: %d", resp.StatusCode)
	}
}

// TestQueryRulesFromTheDocument: the rules are the document's, path
// templates turned into echo's.
func TestQueryRulesFromTheDocument(t *testing.T) {
	rules, err := queryRules(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][]string{
		"GET /api/slots":                      {},
		"GET /api/slots/:name":                {"at"},
		"GET /api/stream":                     {"last_event_id"},
		"GET /api/jobs/:id/events":            {"after"},
		"GET /api/sim/*":                      {"after"},
		"POST /api/hooks/bitbucket":           {},
		"DELETE /api/pr-repos/:project/:slug": {},
	} {
		r, ok := rules[key]
		if !ok || !slices.Equal(r.accepted, want) || r.open {
			t.Errorf("%s: %+v, want %v", key, r, want)
		}
	}
	if _, err := queryRules([]byte(`{"paths":{"/x":{"get":{"parameters":[{"$ref":"#/components/parameters/Nope"}]}}}}`)); err == nil {
		t.Error("an unresolved $ref was taken")
	}
}

// TestRoutePathsRoundTrip: echoPath and openapiPath are one convention
// read both ways. Each is the other's inverse on every route of the table
// (with every optional part on) and on every path of the document, so the
// query rules (keyed by echoPath of the document) and the contract tests
// (which look routes up by openapiPath) name the same routes.
func TestRoutePathsRoundTrip(t *testing.T) {
	routes := everyRoute(t)
	if len(routes) < 50 {
		t.Fatalf("only %d routes in the table", len(routes))
	}
	for _, r := range routes {
		if back := echoPath(openapiPath(r.Path)); back != r.Path {
			t.Errorf("route %s %s → document %s → echo %s", r.Method, r.Path, openapiPath(r.Path), back)
		}
	}
	paths := loadOpenAPI(t).Paths
	for p := range paths {
		if back := openapiPath(echoPath(p)); back != p {
			t.Errorf("document %s → echo %s → document %s", p, echoPath(p), back)
		}
	}
	// What breaks the convention, so that the checks above can fail: a
	// route parameter named "path" comes back as the rest of the path.
	if back := echoPath(openapiPath("/api/x/:path")); back == "/api/x/:path" {
		t.Errorf("a parameter named path survived the round trip as %s", back)
	}
	for _, tc := range []struct{ echo, doc string }{
		{"/api/slots/:name/jobs/latest", "/api/slots/{name}/jobs/latest"},
		{"/api/sim/*", "/api/sim/{path}"},
		{"/*", "/{path}"},
		{"/healthz", "/healthz"},
	} {
		if got := openapiPath(tc.echo); got != tc.doc {
			t.Errorf("openapiPath(%s) = %s, want %s", tc.echo, got, tc.doc)
		}
		if got := echoPath(tc.doc); got != tc.echo {
			t.Errorf("echoPath(%s) = %s, want %s", tc.doc, got, tc.echo)
		}
	}
}
