package httpapi

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// Query parameters are checked against the contract in one place: every
// route accepts exactly the query parameters its operation in openapi.json
// declares, read from the document when the server starts (there is no
// second list in Go). An undeclared name, or a declared one given twice
// when its schema is not an array (the handlers read one value), is a 400
// naming the parameter and listing the accepted ones, before the handler
// runs, so nothing changes. Otherwise a typo, or ?at= on a list that has
// no as-of answer, got the live answer as if it had been understood.
//
// An operation whose query is open declares a free-form parameter (schema
// type object, style form, explode: every name is one of its properties,
// OpenAPI 3.1 §4.8.12): the dashboard's own pages, whose links may carry
// anything, and the OIDC callback, to which identity providers add
// parameters of their own (docs/api.md "Query parameters").

// queryRule is what one operation accepts in its query.
type queryRule struct {
	op       string          // "METHOD /path/{template}", as the document names it
	accepted []string        // the declared names, sorted
	repeat   map[string]bool // declared name → may be given more than once (array schema)
	open     bool            // a free-form parameter: any name
}

// queryRules reads the operations' query parameters from an OpenAPI
// document: "METHOD /echo/path" → rule (echoPath turns the templates into
// echo's paths).
func queryRules(doc []byte) (map[string]queryRule, error) {
	type param struct {
		Ref    string `json:"$ref"`
		Name   string `json:"name"`
		In     string `json:"in"`
		Schema struct {
			Type any `json:"type"` // a string, or a list in OpenAPI 3.1
		} `json:"schema"`
	}
	var d struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	resolve := func(p param) (param, error) {
		if p.Ref == "" {
			return p, nil
		}
		name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/")
		r, found := d.Components.Parameters[name]
		if !ok || !found {
			return p, fmt.Errorf("openapi.json: unresolved parameter %s", p.Ref)
		}
		return r, nil
	}
	rules := map[string]queryRule{}
	for path, item := range d.Paths {
		var common []param
		if raw, ok := item["parameters"]; ok {
			if err := json.Unmarshal(raw, &common); err != nil {
				return nil, fmt.Errorf("openapi.json %s parameters: %w", path, err)
			}
		}
		for method, raw := range item {
			switch method {
			case "get", "head", "post", "put", "patch", "delete", "options":
			default:
				continue
			}
			var op struct {
				Parameters []param `json:"parameters"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				return nil, fmt.Errorf("openapi.json %s %s: %w", method, path, err)
			}
			rule := queryRule{op: strings.ToUpper(method) + " " + path, accepted: []string{}, repeat: map[string]bool{}}
			for _, p := range append(append([]param{}, common...), op.Parameters...) {
				p, err := resolve(p)
				if err != nil {
					return nil, err
				}
				if p.In != "query" {
					continue
				}
				switch schemaType(p.Schema.Type) {
				case "object":
					rule.open = true
				case "array":
					rule.repeat[p.Name] = true
					rule.accepted = append(rule.accepted, p.Name)
				default:
					rule.accepted = append(rule.accepted, p.Name)
				}
			}
			sort.Strings(rule.accepted)
			rules[strings.ToUpper(method)+" "+echoPath(path)] = rule
		}
	}
	return rules, nil
}

// schemaType is a schema's type: "type": "x", or the one non-null type of
// "type": ["x", "null"].
func schemaType(t any) string {
	switch t := t.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	return ""
}

// Route paths are written two ways: echo's in the route table
// (/api/slots/:name, a trailing * for the rest of the path) and the
// document's path templates (/api/slots/{name}, {path} for echo's *). The
// two functions below are the whole convention, inverse of each other; a
// path parameter must therefore never be named "path" in the route table.
// TestRoutePathsRoundTrip holds them to every route and every document
// path.

// echoPath turns the document's path template into echo's route path.
func echoPath(template string) string {
	segs := strings.Split(template, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			if name == "path" {
				segs[i] = "*"
			} else {
				segs[i] = ":" + name
			}
		}
	}
	return strings.Join(segs, "/")
}

// openapiPath turns an echo route path into the document's path template
// (the inverse of echoPath).
func openapiPath(route string) string {
	segs := strings.Split(route, "/")
	for i, s := range segs {
		switch {
		case strings.HasPrefix(s, ":"):
			segs[i] = "{" + s[1:] + "}"
		case s == "*":
			segs[i] = "{path}"
		}
	}
	return strings.Join(segs, "/")
}

// checkQuery refuses a query the route's operation does not declare (see
// the top of this file). It runs after authorize: a caller who may not use
// the route learns nothing about its parameters. Requests that matched no
// route (echo's 404 and 405) pass on to echo.
func (s *Server) checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw := c.Request().URL.RawQuery
		if raw == "" {
			return next(c)
		}
		rule, ok := s.queries[c.Request().Method+" "+c.Path()]
		if !ok || rule.open {
			return next(c)
		}
		if err := rule.check(raw); err != nil {
			return err
		}
		return next(c)
	}
}

// check holds one raw query to the rule.
func (r queryRule) check(raw string) error {
	q, err := url.ParseQuery(raw)
	if err != nil {
		// url.Values would drop the bad pair silently; the handler would
		// answer as if it had not been sent.
		e := invalidField("query", "the query string is not valid: "+err.Error())
		return e
	}
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := slices.BinarySearch(r.accepted, n); !ok {
			msg := fmt.Sprintf("unknown query parameter %q: %s accepts ", n, r.op)
			if len(r.accepted) == 0 {
				msg += "none"
			} else {
				msg += strings.Join(r.accepted, ", ")
			}
			e := invalidField(n, msg)
			e.Details["parameter"], e.Details["accepted"], e.Details["route"] = n, r.accepted, r.op
			return e
		}
		if vs := q[n]; len(vs) > 1 && !r.repeat[n] {
			e := invalidField(n, fmt.Sprintf("query parameter %q is given %d times: %s reads one value", n, len(vs), r.op))
			e.Details["parameter"], e.Details["count"], e.Details["route"] = n, len(vs), r.op
			return e
		}
	}
	return nil
}

// contractQueries are the embedded document's rules, read once.
var contractQueries = sync.OnceValues(func() (map[string]queryRule, error) { return queryRules(openapiDoc) })
