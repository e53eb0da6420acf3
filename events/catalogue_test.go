package events_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// fill sets every field of v (recursively) to a non-zero value derived from
// its path, so a field the encoding drops shows up as a difference.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("v:" + path)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(len(path)) + 7)
	case reflect.Uint64:
		v.SetUint(42)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 3, 4, 5, 6, 7, 891_000_000, time.UTC).Add(time.Duration(len(path)) * time.Second)))
			return
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				t.Fatalf("%s.%s: unexported field in a payload is never encoded", path, f.Name)
			}
			if !f.Anonymous && f.Tag.Get("json") == "" {
				t.Fatalf("%s.%s has no json tag: wire names are part of the contract", path, f.Name)
			}
			fill(t, v.Field(i), path+"."+f.Name)
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(t, s.Index(0), path+"[0]")
		fill(t, s.Index(1), path+"[1]")
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, path+"{k}")
		fill(t, e, path+"{v}")
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), path+"*")
		v.Set(p)
	default:
		t.Fatalf("%s: fill does not know kind %s; teach it", path, v.Kind())
	}
}

func recorded(e events.EventData) events.RecordedEvent {
	return events.RecordedEvent{ID: e.ID, Stream: "job-1", Type: e.Type, Data: e.Data, Meta: e.Meta}
}

func TestEveryCatalogueTypeRoundTrips(t *testing.T) {
	types := events.Types()
	if len(types) < 31 {
		t.Fatalf("catalogue lists %d types", len(types))
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			// Decode of an empty payload gives the zero value of the right type.
			zero, err := events.Decode(events.RecordedEvent{Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			if zero.EventType() != typ {
				t.Fatalf("Decode gave %T (type %q)", zero, zero.EventType())
			}
			if reflect.TypeOf(zero).Kind() != reflect.Struct {
				t.Fatalf("Decode gave %T, want a value, not a pointer", zero)
			}
			full := reflect.New(reflect.TypeOf(zero)).Elem()
			fill(t, full, typ)
			in := full.Interface().(events.Payload)

			ed := events.New(in, events.Metadata{Actor: "alice"})
			if ed.Type != typ || ed.ID == "" || ed.Meta.Time.IsZero() || ed.Meta.Schema != events.SchemaVersion {
				t.Fatalf("New: %+v", ed)
			}
			if err := events.ValidateAppend("job-1", []events.EventData{ed}); err != nil {
				t.Fatalf("New made an invalid event: %v", err)
			}
			out, err := events.Decode(recorded(ed))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip changed the payload:\n in %+v\nout %+v\njson %s", in, out, ed.Data)
			}
			// Field names are snake_case JSON, never Go names.
			var m map[string]any
			if err := json.Unmarshal(ed.Data, &m); err != nil {
				t.Fatal(err)
			}
			for k := range m {
				if k != strings.ToLower(k) {
					t.Fatalf("wire field %q is not snake_case", k)
				}
			}
		})
	}
}

func TestDecodeUnknownType(t *testing.T) {
	ev := events.RecordedEvent{Type: "SlotTeleported", Data: json.RawMessage(`{"slot":"a","to":"mars"}`)}
	p, err := events.Decode(ev)
	if err != nil {
		t.Fatalf("unknown type: %v", err)
	}
	u, ok := p.(events.Unknown)
	if !ok || u.Type != "SlotTeleported" || string(u.Data) != string(ev.Data) || u.EventType() != "SlotTeleported" {
		t.Fatalf("unknown type decoded to %#v", p)
	}
	// Even malformed data of an unknown type is not this binary's problem.
	if _, err := events.Decode(events.RecordedEvent{Type: "Future", Data: json.RawMessage(`{`)}); err != nil {
		t.Fatalf("unknown type with odd data: %v", err)
	}
}

func TestDecodeIgnoresUnknownFields(t *testing.T) {
	data := `{"job_id":"j1","kind":"reset","slot":"s1","steps":["delete_db"],"added_in_v9":{"x":[1,2]},"priority":3}`
	p, err := events.Decode(events.RecordedEvent{Type: "JobQueued", Data: json.RawMessage(data)})
	if err != nil {
		t.Fatalf("unknown fields: %v", err)
	}
	q := p.(events.JobQueued)
	if q.JobID != "j1" || q.Kind != "reset" || q.Slot != "s1" || len(q.Steps) != 1 {
		t.Fatalf("known fields lost: %+v", q)
	}
}

func TestDecodeOldPayloadMissingNewFields(t *testing.T) {
	// A SlotRegistered written before Branch existed, a StepStarted before
	// Resource/Verify/ExpectedSHA.
	p, err := events.Decode(events.RecordedEvent{Type: "SlotRegistered", Data: json.RawMessage(`{"slot":"s1","app_uuid":"a1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if r := p.(events.SlotRegistered); r.Slot != "s1" || r.AppUUID != "a1" || r.Branch != "" || r.Repo != (events.RepoRef{}) {
		t.Fatalf("old SlotRegistered: %+v", r)
	}
	p, err = events.Decode(events.RecordedEvent{Type: "StepStarted", Data: json.RawMessage(`{"job_id":"j","step":"delete_db","attempt":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(events.StepStarted); s.Attempt != 2 || s.Resource != nil || s.Verify {
		t.Fatalf("old StepStarted: %+v", s)
	}
	// null is an absent payload, not an error.
	if _, err := events.Decode(events.RecordedEvent{Type: "JobSucceeded", Data: json.RawMessage(`null`)}); err != nil {
		t.Fatalf("null payload: %v", err)
	}
}

func TestDecodeMalformedKnownType(t *testing.T) {
	for _, data := range []string{`{`, `[]`, `{"job_id":5}`, `"text"`} {
		_, err := events.Decode(events.RecordedEvent{Type: "JobQueued", Stream: "job-1", Revision: 3, Data: json.RawMessage(data)})
		if err == nil {
			t.Fatalf("%s decoded as a JobQueued", data)
		}
		if !strings.Contains(err.Error(), "job-1@3") {
			t.Fatalf("error %q does not say where", err)
		}
	}
}

func TestMetadataEncoding(t *testing.T) {
	m := events.Metadata{Actor: "worker:h:1", CorrelationID: "c", CausationID: "z", Time: time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC), Schema: 2}
	got, err := events.DecodeMeta(events.EncodeMeta(m))
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	got, err = events.DecodeMeta([]byte(`{"actor":"a","tenant":"future","time":"2026-01-01T00:00:00Z"}`))
	if err != nil || got.Actor != "a" {
		t.Fatalf("unknown metadata field: %+v %v", got, err)
	}
	if got, err := events.DecodeMeta(nil); err != nil || got != (events.Metadata{}) {
		t.Fatalf("empty metadata: %+v %v", got, err)
	}
	if _, err := events.DecodeMeta([]byte(`{`)); err == nil {
		t.Fatal("malformed metadata decoded")
	}
}

func TestStreamNames(t *testing.T) {
	if events.SlotStream("a") != "slot-a" || events.JobStream("1") != "job-1" || events.NotifyStream("1") != "notify-1" {
		t.Fatal("stream name helpers changed: they are part of the contract")
	}
	if (events.RepoRef{Project: "P", Slug: "s"}).String() != "P/s" {
		t.Fatal("RepoRef.String")
	}
}

func ExampleDecode() {
	ed := events.New(events.JobClaimed{JobID: "j1", Worker: "w1", Attempt: 2}, events.Metadata{Actor: "w1"})
	p, _ := events.Decode(events.RecordedEvent{Type: ed.Type, Data: ed.Data})
	switch e := p.(type) {
	case events.JobClaimed:
		fmt.Println("claimed by", e.Worker, "attempt", e.Attempt)
	case events.Unknown:
		fmt.Println("skipping", e.Type)
	}
	// Output: claimed by w1 attempt 2
}
