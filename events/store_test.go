package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

func TestValidateStream(t *testing.T) {
	valid := []string{
		"slot-a", "job-0b6d0f0e-1c1a-4a51-9a55-1f1b2d1f0c3e", "x", "with space", "ünïcødé/流",
		`quote"d'`, "a/b/../c", "trailing-$", strings.Repeat("s", events.MaxStreamNameLen),
	}
	for _, s := range valid {
		if err := events.ValidateStream(s); err != nil {
			t.Errorf("ValidateStream(%q) = %v, want ok", s, err)
		}
	}
	invalid := []string{
		"", "$all", "$$slot-a", "$ce-slot", strings.Repeat("s", events.MaxStreamNameLen+1),
		"bad\xffutf8", "new\nline", "tab\tbed", "nul\x00", "del\x7f", "c1\u0085control",
		strings.Repeat("é", events.MaxStreamNameLen/2+1), // 202 bytes: the limit is bytes, not runes
	}
	for _, s := range invalid {
		err := events.ValidateStream(s)
		if !errors.Is(err, events.ErrInvalidStream) {
			t.Errorf("ValidateStream(%q) = %v, want ErrInvalidStream", s, err)
		}
	}
}

func TestValidateEventType(t *testing.T) {
	for _, typ := range append(events.Types(), "A", "a1", "Ns.Type_v2-beta", strings.Repeat("T", events.MaxEventTypeLen)) {
		if err := events.ValidateEventType(typ); err != nil {
			t.Errorf("ValidateEventType(%q) = %v, want ok", typ, err)
		}
	}
	for _, typ := range []string{
		"", "1Type", "_Type", ".Type", "-Type", "Has Space", "Slash/Type", "Ünicode", "Tÿpe", "$Type",
		"Type\n", "Type:x", strings.Repeat("T", events.MaxEventTypeLen+1),
	} {
		if err := events.ValidateEventType(typ); !errors.Is(err, events.ErrInvalidEventType) {
			t.Errorf("ValidateEventType(%q) = %v, want ErrInvalidEventType", typ, err)
		}
	}
}

func TestValidateAppend(t *testing.T) {
	ok := events.EventData{ID: "id", Type: "A", Data: []byte(`{}`)}
	big := func(n int) []byte { b := []byte(strings.Repeat("x", n)); b[0], b[n-1] = '"', '"'; return b }
	cases := []struct {
		name   string
		stream string
		evs    []events.EventData
		want   error
	}{
		{"fine", "slot-a", []events.EventData{ok, ok}, nil},
		{"no events", "slot-a", nil, nil},
		{"empty data", "slot-a", []events.EventData{{Type: "A"}}, nil},
		{"bad stream", "$x", []events.EventData{ok}, events.ErrInvalidStream},
		{"bad type second", "slot-a", []events.EventData{ok, {Type: "9"}}, events.ErrInvalidEventType},
		{"bad json", "slot-a", []events.EventData{ok, {Type: "A", Data: []byte(`{"a":}`)}}, events.ErrInvalidData},
		{"at the size limit", "slot-a", []events.EventData{{Type: "A", Data: big(events.MaxEventSize - 512)}}, nil},
		{"over the size limit", "slot-a", []events.EventData{{Type: "A", Data: big(events.MaxEventSize - 511)}}, events.ErrEventTooLarge},
		{"metadata counts", "slot-a", []events.EventData{{Type: "A", Data: big(events.MaxEventSize - 600), Meta: events.Metadata{Actor: strings.Repeat("a", 100)}}}, events.ErrEventTooLarge},
		{"too many events", "slot-a", make([]events.EventData, events.MaxAppendEvents+1), events.ErrEventTooLarge},
		{"append at the total limit", "slot-a", sized(events.MaxAppendSize / (events.MaxEventSize / 2)), nil},
		{"append over the total limit", "slot-a", sized(events.MaxAppendSize/(events.MaxEventSize/2) + 1), events.ErrEventTooLarge},
		{"size checked before JSON", "slot-a", []events.EventData{{Type: "A", Data: []byte("{" + strings.Repeat(" ", events.MaxEventSize))}}, events.ErrEventTooLarge},
	}
	for _, c := range cases {
		err := events.ValidateAppend(c.stream, c.evs)
		if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: ValidateAppend = %v, want %v", c.name, err, c.want)
		}
	}
}

// sized is n events of exactly MaxEventSize/2 bytes as ValidateAppend counts.
func sized(n int) []events.EventData {
	data := []byte(strings.Repeat("1", events.MaxEventSize/2-512))
	evs := make([]events.EventData, n)
	for i := range evs {
		evs[i] = events.EventData{Type: "A", Data: data}
	}
	return evs
}

func TestExpectedRevisionSatisfied(t *testing.T) {
	cases := []struct {
		exp    events.ExpectedRevision
		last   uint64
		exists bool
		want   bool
	}{
		{events.Any(), 0, false, true},
		{events.Any(), 7, true, true},
		{events.NoStream(), 0, false, true},
		{events.NoStream(), 0, true, false},
		{events.StreamExists(), 0, false, false},
		{events.StreamExists(), 0, true, true},
		{events.Exact(0), 0, false, false}, // exact 0 means "one event", not "empty"
		{events.Exact(0), 0, true, true},
		{events.Exact(3), 3, true, true},
		{events.Exact(3), 2, true, false},
		{events.Exact(3), 4, true, false},
		{events.ExpectedRevision{}, 9, true, true}, // the zero value is Any
	}
	for _, c := range cases {
		if got := c.exp.Satisfied(c.last, c.exists); got != c.want {
			t.Errorf("%s.Satisfied(%d, %v) = %v, want %v", c.exp, c.last, c.exists, got, c.want)
		}
	}
	if r, ok := events.Exact(5).ExactRevision(); !ok || r != 5 {
		t.Error("ExactRevision")
	}
	if _, ok := events.Any().ExactRevision(); ok {
		t.Error("Any has an exact revision")
	}
	if !events.Any().IsAny() || !events.NoStream().IsNoStream() || !events.StreamExists().IsStreamExists() {
		t.Error("Is* accessors")
	}
	for exp, s := range map[events.ExpectedRevision]string{events.Any(): "any", events.NoStream(): "no-stream", events.StreamExists(): "stream-exists", events.Exact(4): "revision 4"} {
		if exp.String() != s {
			t.Errorf("String() = %q, want %q", exp.String(), s)
		}
	}
}

func TestWrongRevisionError(t *testing.T) {
	var err error = &events.WrongRevisionError{Stream: "slot-a", Expected: events.Exact(2), Actual: 4, Exists: true}
	if !errors.Is(err, events.ErrWrongRevision) {
		t.Fatal("WrongRevisionError does not wrap ErrWrongRevision")
	}
	if !strings.Contains(err.Error(), `"slot-a" expected revision 2, stream is at revision 4`) {
		t.Fatalf("message %q", err)
	}
	err = &events.WrongRevisionError{Stream: "slot-a", Expected: events.StreamExists()}
	if !strings.Contains(err.Error(), "stream is at no stream") {
		t.Fatalf("message %q", err)
	}
}

func TestFilterMatch(t *testing.T) {
	cases := []struct {
		f           events.Filter
		stream, typ string
		want        bool
	}{
		{events.Filter{}, "anything", "Any", true},
		{events.Filter{StreamPrefixes: []string{"slot-"}}, "slot-a", "X", true},
		{events.Filter{StreamPrefixes: []string{"slot-"}}, "job-a", "X", false},
		{events.Filter{StreamPrefixes: []string{"slot-", "job-"}}, "job-a", "X", true},
		{events.Filter{EventTypes: []string{"JobQueued"}}, "job-a", "JobQueued", true},
		{events.Filter{EventTypes: []string{"JobQueued"}}, "job-a", "JobQueuedX", false},
		{events.Filter{StreamPrefixes: []string{"job-"}, EventTypes: []string{"A"}}, "slot-a", "A", false},
		{events.Filter{StreamPrefixes: []string{"job-"}, EventTypes: []string{"A"}}, "job-a", "B", false},
		{events.Filter{StreamPrefixes: []string{"job-"}, EventTypes: []string{"B", "A"}}, "job-a", "A", true},
	}
	for _, c := range cases {
		if got := c.f.Match(c.stream, c.typ); got != c.want {
			t.Errorf("%+v.Match(%q, %q) = %v, want %v", c.f, c.stream, c.typ, got, c.want)
		}
	}
}
