package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
	"github.com/slotkeeper/slotkeeper/projections"
)

// TestImportRefusesEventsOutsideTheCatalogue: an export with an unknown
// event type or a payload that does not decode is refused with the line
// number and nothing is written; the same file without the bad line
// imports. Before, both were imported (exit 0) and at the next start the
// deadline scheduler stopped on the bad payload.
func TestImportRefusesEventsOutsideTheCatalogue(t *testing.T) {
	dir := t.TempDir()
	good := []string{
		`{"position":1,"stream":"slot-a","revision":0,"id":"00000000-0000-4000-8000-000000000001","type":"SlotRegistered","data":{"slot":"a"},"metadata":{"actor":"test"}}`,
		`{"position":2,"stream":"slot-a","revision":1,"id":"00000000-0000-4000-8000-000000000002","type":"SlotOccupied","data":{"slot":"a","by":"bob","until":"2030-01-01T00:00:00Z"},"metadata":{"actor":"test"}}`,
	}
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad3 := func(typ, data string) string {
		return `{"position":3,"stream":"slot-a","revision":2,"id":"00000000-0000-4000-8000-000000000003","type":"` + typ + `","data":` + data + `,"metadata":{"actor":"test"}}`
	}
	for _, tc := range []struct{ name, line, say string }{
		{"unknown type", bad3("SlotExploded", `{}`), "line 3 (slot-a@2): unknown event type \"SlotExploded\""},
		{"malformed payload", bad3("OccupancyExtended", `{"until":"not a time"}`), "line 3 (slot-a@2): the OccupancyExtended payload does not decode"},
		{"payload of the wrong shape", bad3("SlotOccupied", `[1,2]`), "line 3 (slot-a@2): the SlotOccupied payload does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			in := write(strings.ReplaceAll(tc.name, " ", "-")+".ndjson", append(append([]string(nil), good...), tc.line)...)
			code, out, errs := run(t, "import", "--data", data, "--in", in)
			if code != 1 || !strings.Contains(errs, tc.say) || !strings.Contains(errs, "nothing written") {
				t.Fatalf("exit %d, stdout %q stderr %q; want 1 naming %q", code, out, errs, tc.say)
			}
			exp := filepath.Join(t.TempDir(), "out.ndjson")
			if code, _, errs := run(t, "export", "--data", data, "--out", exp); code != 0 {
				t.Fatalf("export: %d %s", code, errs)
			}
			if b, _ := os.ReadFile(exp); len(b) != 0 {
				t.Fatalf("a refused import wrote events:\n%s", b)
			}
		})
	}
	data := filepath.Join(t.TempDir(), "data")
	if code, out, errs := run(t, "import", "--data", data, "--in", write("good.ndjson", good...)); code != 0 || !strings.Contains(out, "imported 2 events") {
		t.Fatalf("the good lines: %d %q %q", code, out, errs)
	}
}

// TestABadEventIsParkedNotFatal: a slot event whose payload does not decode
// (put in the log behind serve's back, as an unchecked import did) is
// parked at the next start by the consumers that read it: the ERROR line
// names it, GET /api/admin/consumers lists it, /readyz stays ready and shows
// the count, and no consumer stops. Before, the deadline scheduler stopped
// ("ERROR deadline scheduler stopped") with /readyz still ok, and no
// deadline triggered a reset again.
func TestABadEventIsParkedNotFatal(t *testing.T) {
	data := t.TempDir()
	s := startServe(t, data, "127.0.0.1:0", "--workers", "0")
	var list struct{ Slots []projections.SlotView }
	if code := s.call(t, "GET", "/api/slots", nil, &list); code != 200 || len(list.Slots) == 0 {
		t.Fatalf("slots: %d %d", code, len(list.Slots))
	}
	slot := list.Slots[0].Name
	if code := s.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	st, err := boltstore.Open(data, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := st.Append(context.Background(), events.SlotStream(slot), events.Any(), events.EventData{ID: "00000000-0000-4000-8000-0000000000b2",
		Type: "OccupancyExtended", Data: []byte(`{"until":"not a time"}`), Meta: events.Metadata{Actor: "test", Schema: 1}})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}

	s = startServe(t, data, "127.0.0.1:0", "--workers", "0")
	s.err.waitFor(t, "deadlines: event parked")
	var rep consumer.Report
	if code := s.call(t, "GET", "/api/admin/consumers", nil, &rep); code != 200 {
		t.Fatalf("admin consumers: %d", code)
	}
	found := false
	for _, p := range rep.Parked {
		found = found || (p.Consumer == "deadlines" && p.Position == bad.Position && p.Stream == events.SlotStream(slot))
	}
	if !found || len(rep.Stopped) != 0 {
		t.Fatalf("report %+v, want the bad event parked by deadlines and nothing stopped", rep)
	}
	var rz struct {
		Status string `json:"status"`
		Parked int    `json:"parked_events"`
	}
	if code := s.call(t, "GET", "/readyz", nil, &rz); code != 200 || rz.Parked < 1 {
		t.Fatalf("/readyz %d %+v, want ready with the parked count", code, rz)
	}
	for _, name := range []string{"deadline scheduler", "waitlist", "read model", "insights"} {
		if strings.Contains(s.err.String(), name+" stopped") {
			t.Fatalf("%s stopped:\n%s", name, s.err.String())
		}
	}
}

// Issue 33 item 5: import checked types, not names: an event of stream
// slot-../../etc imported and the dashboard listed a slot "../../etc".
// Every stream name and every id field the command side constrains (slot
// names, job ids, provider ids, repositories, refs) is checked as the
// command side checks it, before anything is written.
func TestImportRefusesNamesTheCommandSideRefuses(t *testing.T) {
	dir := t.TempDir()
	line := func(stream, typ, data string) string {
		return `{"position":1,"stream":"` + stream + `","revision":0,"id":"00000000-0000-4000-8000-000000000001","type":"` + typ + `","data":` + data + `,"metadata":{"actor":"test"}}`
	}
	reg := func(slot, extra string) string {
		return `{"slot":"` + slot + `","project_uuid":"p-1234567","app_uuid":"a-1234567","db_uuid":"d-1234567","repo":{"project":"SLOT","slug":"slot-a"},"template_repo":{"project":"TPL","slug":"template"},"template_ref":"main"` + extra + `}`
	}
	for _, tc := range []struct{ name, line, say string }{
		{"traversal in the stream", line("slot-../../etc", "SlotRegistered", reg("../../etc", "")), `stream "slot-../../etc"`},
		{"traversal in the payload", line("slot-a", "SlotRegistered", reg("../../etc", "")), `slot "../../etc"`},
		{"payload of another slot", line("slot-a", "SlotRegistered", reg("b", "")), `slot "b" in stream slot-a`},
		{"upper case slot", line("slot-A", "SlotRegistered", reg("A", "")), `stream "slot-A"`},
		{"job id", line("job-../x", "JobQueued", `{"job_id":"../x","slot":"a","kind":"reset"}`), `stream "job-../x"`},
		{"job id in the payload", line("job-abc", "JobQueued", `{"job_id":"../x","slot":"a","kind":"reset"}`), `job_id "../x"`},
		{"repository slug", line("slot-a", "SlotRegistered", `{"slot":"a","project_uuid":"p-1234567","app_uuid":"a-1234567","db_uuid":"d-1234567","repo":{"project":"SLOT","slug":"../prod"},"template_repo":{"project":"TPL","slug":"template"},"template_ref":"main"}`), `repo.slug "../prod"`},
		{"provider id", line("slot-a", "SlotRegistered", `{"slot":"a","project_uuid":"p/../x","app_uuid":"a-1234567","db_uuid":"d-1234567","repo":{"project":"SLOT","slug":"slot-a"},"template_repo":{"project":"TPL","slug":"template"},"template_ref":"main"}`), `project_uuid "p/../x"`},
		{"branch", line("slot-a", "SlotRegistered", reg("a", `,"branch":"../../x"`)), `branch "../../x"`},
		{"unknown stream", line("../../etc", "SlotRegistered", reg("a", "")), `stream "../../etc" is not one Slotkeeper writes`},
		{"pull request stream", line("pr-APPS-../x-1", "PRChanged", `{}`), `stream "pr-APPS-../x-1": not a pull request's stream`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".ndjson")
			if err := os.WriteFile(in, []byte(tc.line+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(t.TempDir(), "data")
			code, out, errs := run(t, "import", "--data", data, "--in", in)
			if code != 1 || !strings.Contains(errs, "line 1") || !strings.Contains(errs, tc.say) || !strings.Contains(errs, "nothing written") {
				t.Fatalf("exit %d, stdout %q stderr %q; want 1 naming %q", code, out, errs, tc.say)
			}
			exp := filepath.Join(t.TempDir(), "out.ndjson")
			if code, _, errs := run(t, "export", "--data", data, "--out", exp); code != 0 {
				t.Fatalf("export: %d %s", code, errs)
			}
			if b, _ := os.ReadFile(exp); len(b) != 0 {
				t.Fatalf("a refused import wrote events:\n%s", b)
			}
		})
	}
}
