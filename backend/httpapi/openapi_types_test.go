package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/insights"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// goTypes names the Go type each schema of components/schemas describes:
// the view a handler answers, or the body it decodes. TestOpenAPIMatchesGoTypes
// holds each schema's properties to the type's JSON fields (and their
// nested structs, through $refs and inline objects), both ways, and asks
// that a field Go always writes (no omitempty) is required. Every schema
// is here or in notGoTypes.
var goTypes = map[string]any{
	"AdoptPlan":         AdoptPlan{},
	"AsOf":              projections.AsOf{},
	"Attempt":           projections.Attempt{},
	"AuditEntry":        projections.AuditEntry{},
	"ChangeFrame":       projections.Change{},
	"CreatedUser":       createdUser{},
	"Deployed":          projections.Deployed{},
	"EventRecord":       eventDTO{},
	"Finding":           events.ReconcileFinding{},
	"Freshness":         freshness{},
	"HookOutcome":       pullrequests.Outcome{},
	"Insights":          insights.Series{},
	"IssuedToken":       issuedToken{},
	"JobAccepted":       slots.JobAcceptedResult{},
	"JobLimits":         JobLimits{},
	"JobPage":           projections.Page{},
	"JobRef":            projections.JobRef{},
	"JobView":           projections.JobView{},
	"JobViewAt":         jobAt{},
	"NotSignedIn":       notSignedIn{},
	"PendingDelete":     projections.PendingDelete{},
	"PRView":            projections.PRView{},
	"Plan":              slots.Plan{},
	"ProviderLinks":     ProviderLinks{},
	"ReconcileReport":   ReconcileReport{},
	"Recovery":          projections.Recovery{},
	"RemainingResource": projections.RemainingResource{},
	"RepoRef":           events.RepoRef{},
	"Resource":          events.Resource{},
	"SlotChange":        projections.SlotChange{},
	"SlotTemplate":      events.SlotTemplate{},
	"SlotView":          projections.SlotView{},
	"SlotPR":            projections.SlotPR{},
	"SlotViewAt":        slotAt{},
	"StepView":          projections.StepView{},
	"StepWait":          projections.WaitView{},
	"Subject":           auth.Subject{},
	"SubjectAnswer":     subjectAnswer{},
	"TargetCheck":       slots.TargetCheck{},
	"Token":             tokenView{},
	"User":              auth.User{},
	"Waitlist":          WaitlistAnswer{},
	"WaitlistEntry":     waitlist.EntryView{},
	"Error":             errorBody{},
}

// goBodyTypes names the Go type each request body schema is decoded into
// (decodeBody refuses unknown fields: a documented field the type lacks
// is a 400). A body's required list is the client's duty, not compared.
var goBodyTypes = map[string]any{
	"CreateUserBody":   createUserBody{},
	"DeadlineCmd":      slots.DeadlineCmd{},
	"ExtendCmd":        slots.ExtendCmd{},
	"IssueTokenBody":   issueTokenBody{},
	"JoinWaitlistBody": waitlist.JoinCmd{},
	"LoginBody":        loginBody{},
	"OccupyCmd":        slots.OccupyCmd{},
	"OrphanActionBody": adoptRequest{},
	"PasswordBody":     passwordBody{},
	"PromoteCmd":       slots.PromoteCmd{},
	"RegisterCmd":      slots.RegisterCmd{},
	"ReleaseBody":      releaseBody{},
	"RoleBody":         roleBody{},
}

// notGoTypes: schemas no Go struct is marshalled from, and where they are
// checked instead.
var notGoTypes = map[string]string{
	"SnapshotFrame":     "written byte by byte in sse.go (snapshotLocked); streamFrames validates real frames",
	"HeartbeatFrame":    "written byte by byte in sse.go (heartbeatFrame); streamFrames validates real frames",
	"DeliveriesFrame":   "written byte by byte in server.go (the OnDelivery notice); TestDeliveriesNotice reads real frames",
	"CommandRecorded":   "a map in handlers.go (recorded); the contract walk validates it (read model down)",
	"Empty":             "a body of no fields (noBody)",
	"LeaveWaitlistBody": "DELETE /api/waitlist/{id} reads no body fields; kept for documentation",
	"ReorderBody":       "an inline struct in reorderWaitlist; the contract walk sends it",
}

// goField is one JSON field of a Go struct.
type goField struct {
	typ       reflect.Type
	omitempty bool
}

// jsonFields lists the JSON fields of struct type t as encoding/json
// writes them (embedded structs flattened, "-" left out).
func jsonFields(t reflect.Type) map[string]goField {
	out := map[string]goField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, has := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, shadowed := out[k]; !shadowed {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if !has || name == "" {
			name = f.Name
		}
		out[name] = goField{typ: f.Type, omitempty: strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")}
	}
	return out
}

// schemaNode is the part of a JSON Schema the comparison reads.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Type                 any                    `json:"type"`
	Properties           map[string]*schemaNode `json:"properties"`
	Required             []string               `json:"required"`
	Items                *schemaNode            `json:"items"`
	AdditionalProperties json.RawMessage        `json:"additionalProperties"`
	OneOf                []*schemaNode          `json:"oneOf"`
	AnyOf                []*schemaNode          `json:"anyOf"`
	AllOf                []*schemaNode          `json:"allOf"`
}

type typeCheck struct {
	schemas map[string]*schemaNode
	errs    []string
	done    map[string]bool
	body    bool // a request body: required-ness not compared
}

func (c *typeCheck) errorf(at, format string, args ...any) {
	c.errs = append(c.errs, at+": "+fmt.Sprintf(format, args...))
}

// resolve follows $refs and drops the null branch of a nullable oneOf/anyOf;
// it returns nil for a union of several non-null schemas (not compared).
func (c *typeCheck) resolve(s *schemaNode) *schemaNode {
	for s != nil {
		switch {
		case s.Ref != "":
			s = c.schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
		case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
			var nonNull []*schemaNode
			for _, b := range append(slices.Clone(s.OneOf), s.AnyOf...) {
				if r := c.resolve(b); r != nil && r.Type != "null" {
					nonNull = append(nonNull, r)
				}
			}
			if len(nonNull) != 1 {
				return nil
			}
			return nonNull[0]
		default:
			return s
		}
	}
	return nil
}

var (
	timeType      = reflect.TypeOf(time.Time{})
	rawType       = reflect.TypeOf(json.RawMessage{})
	marshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
)

// compare holds schema s to Go type t at path at.
func (c *typeCheck) compare(at string, s *schemaNode, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s != nil && s.Ref != "" {
		name := strings.TrimPrefix(s.Ref, "#/components/schemas/")
		key := name + " " + t.String()
		if c.done[key] {
			return
		}
		c.done[key] = true
	}
	s = c.resolve(s)
	if s == nil || t == timeType || t == rawType || t.Kind() == reflect.Interface || t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if len(s.AllOf) > 0 {
			merged := &schemaNode{Properties: map[string]*schemaNode{}}
			for _, b := range s.AllOf {
				if r := c.resolve(b); r != nil {
					for k, v := range r.Properties {
						merged.Properties[k] = v
					}
					merged.Required = append(merged.Required, r.Required...)
				}
			}
			for k, v := range s.Properties {
				merged.Properties[k] = v
			}
			merged.Required = append(merged.Required, s.Required...)
			s = merged
		}
		fields := jsonFields(t)
		if s.Properties == nil {
			c.errorf(at, "the schema lists no properties; Go type %s has %d fields", t, len(fields))
			return
		}
		for _, name := range sortedKeys(fields) {
			f := fields[name]
			p, ok := s.Properties[name]
			if !ok {
				c.errorf(at, "Go type %s has field %q, which the schema lacks", t, name)
				continue
			}
			req := slices.Contains(s.Required, name)
			switch {
			case c.body:
			case f.omitempty && req:
				c.errorf(at+"."+name, "required, but %s omits it when empty (omitempty)", t)
			case !f.omitempty && !req:
				c.errorf(at+"."+name, "%s always writes it: add it to required", t)
			}
			c.compare(at+"."+name, p, f.typ)
		}
		for _, name := range sortedKeys(s.Properties) {
			if _, ok := fields[name]; !ok {
				c.errorf(at, "the schema documents %q, which Go type %s has no field for", name, t)
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return
		}
		if s.Items == nil {
			c.errorf(at, "Go type %s is a list; the schema has no items", t)
			return
		}
		c.compare(at+"[]", s.Items, t.Elem())
	case reflect.Map:
		var ap schemaNode
		if string(s.AdditionalProperties) == "true" && t.Elem().Kind() == reflect.Interface {
			return // any value
		}
		if len(s.AdditionalProperties) == 0 || json.Unmarshal(s.AdditionalProperties, &ap) != nil {
			c.errorf(at, "Go type %s is a map; the schema has no additionalProperties schema", t)
			return
		}
		c.compare(at+"{}", &ap, t.Elem())
	default:
		want := map[reflect.Kind]string{reflect.String: "string", reflect.Bool: "boolean", reflect.Float32: "number", reflect.Float64: "number"}[t.Kind()]
		if t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64 {
			want = "integer"
		}
		if want != "" && s.Type != nil && !typeHas(s.Type, want) {
			c.errorf(at, "Go type %s is a JSON %s; the schema says %v", t, want, s.Type)
		}
	}
}

func typeHas(st any, want string) bool {
	switch v := st.(type) {
	case string:
		return v == want || (want == "integer" && v == "number")
	case []any:
		for _, x := range v {
			if typeHas(x, want) {
				return true
			}
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestOpenAPIMatchesGoTypes: each schema of the document has the JSON
// fields of the Go type it describes, no more and no fewer, and requires
// what Go always writes. The contract walk (TestOpenAPIContract) catches
// a field the answers have and the document lacks; this catches the
// reverse too, on fields no walk happens to fill.
func TestOpenAPIMatchesGoTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]*schemaNode `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	c := &typeCheck{schemas: doc.Components.Schemas, done: map[string]bool{}}
	for _, name := range sortedKeys(doc.Components.Schemas) {
		v, isGo := goTypes[name]
		b, isBody := goBodyTypes[name]
		_, notGo := notGoTypes[name]
		switch n := btoi(isGo) + btoi(isBody) + btoi(notGo); {
		case n > 1:
			t.Errorf("schema %s is named more than once in goTypes, goBodyTypes and notGoTypes", name)
		case n == 0:
			t.Errorf("schema %s: name its Go type in goTypes or goBodyTypes (or why it has none in notGoTypes)", name)
		case isGo:
			c.body = false
			c.compare(name, &schemaNode{Ref: "#/components/schemas/" + name}, reflect.TypeOf(v))
		case isBody:
			c.body = true
			c.compare(name, &schemaNode{Ref: "#/components/schemas/" + name}, reflect.TypeOf(b))
		}
	}
	for _, m := range []map[string]any{goTypes, goBodyTypes} {
		for name := range m {
			if doc.Components.Schemas[name] == nil {
				t.Errorf("goTypes or goBodyTypes names schema %s, which openapi.json lacks", name)
			}
		}
	}
	for name := range notGoTypes {
		if doc.Components.Schemas[name] == nil {
			t.Errorf("notGoTypes names schema %s, which openapi.json lacks", name)
		}
	}
	for _, e := range c.errs {
		t.Error(e)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
