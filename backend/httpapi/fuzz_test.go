package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// fuzzRoutes are the routes whose request decoding and query parsing the
// fuzzer drives: {name} is the fuzzed path name, the query and the body
// are fuzzed too. The stream is not served here (it would block); its one
// query parser is called directly.
var fuzzRoutes = []struct{ method, path string }{
	{http.MethodGet, "/api/slots"},
	{http.MethodGet, "/api/slots/{name}"},
	{http.MethodGet, "/api/slots/{name}/jobs"},
	{http.MethodGet, "/api/slots/{name}/jobs/latest"},
	{http.MethodGet, "/api/slots/{name}/plan"},
	{http.MethodGet, "/api/jobs/{name}"},
	{http.MethodGet, "/api/jobs/{name}/events"},
	{http.MethodGet, "/api/audit"},
	{http.MethodGet, "/api/resources/remaining"},
	{http.MethodPost, "/api/slots"},
	{http.MethodPost, "/api/slots/{name}/occupy"},
	{http.MethodPost, "/api/slots/{name}/extend"},
	{http.MethodPost, "/api/slots/{name}/release"},
	{http.MethodPost, "/api/slots/{name}/teardown"},
	{http.MethodPost, "/api/slots/{name}/promote"},
	{http.MethodPost, "/api/jobs/{name}/cancel"},
	{http.MethodPost, "/api/jobs/{name}/resume"},
}

// FuzzRequestEdges: whatever the path name, query and body, the API
// answers below 500 — bad input is the client's mistake, never the
// server's. The seed corpus is in testdata/fuzz/FuzzRequestEdges.
// Run: go test -run '^$' -fuzz FuzzRequestEdges ./backend/httpapi
func FuzzRequestEdges(f *testing.F) {
	b := &bundle{store: memstore.New()}
	b.start(f, HubOptions{})
	h := b.srv.Config.Handler
	reg, _ := json.Marshal(registerCmd("alpha"))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/slots", bytes.NewReader(reg))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Host = "127.0.0.1"
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		f.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	f.Add(uint8(2), "alpha", "cursor=garbage", []byte(nil))
	f.Add(uint8(10), "alpha", "", []byte(`{"until":"2999-01-01T00:00:00Z"}`))
	f.Add(uint8(9), "x", "", reg)
	f.Fuzz(func(t *testing.T, route uint8, name, query string, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		path := r.path
		if i := bytes.Index([]byte(path), []byte("{name}")); i >= 0 {
			path = path[:i] + url.PathEscape(name) + path[i+len("{name}"):]
		}
		u, err := url.Parse(path)
		if err != nil {
			return
		}
		u.RawQuery = query
		req := &http.Request{
			Method: r.method, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + b.token}},
			Host:   "127.0.0.1", RemoteAddr: "192.0.2.1:1234", RequestURI: u.RequestURI(),
			Body: http.NoBody,
		}
		if body != nil {
			req.Body = httpBody(body)
			req.ContentLength = int64(len(body))
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s?%s body %q: %d %s", r.method, path, query, body, rec.Code, rec.Body)
		}
		// The stream's resume parser, on the same query.
		if _, err := parseLastEventID(req); err != nil {
			if ae := toAPIError(err); statusOf[ae.Code] >= 500 {
				t.Fatalf("last_event_id %q: %v", query, err)
			}
		}
	})
}

type bodyReader struct{ *bytes.Reader }

func (bodyReader) Close() error { return nil }

func httpBody(b []byte) bodyReader { return bodyReader{bytes.NewReader(b)} }
