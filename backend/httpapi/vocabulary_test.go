package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/english"
	"github.com/slotkeeper/slotkeeper/projections"
)

// The vocabulary files are generated, and checked here in make test.
// Regenerate both after adding a kind, step, state, code or reason:
//
//	UPDATE_VOCABULARY=1 go test -run TestVocabulary ./backend/httpapi/
//
// vocabularyFile is every server value the dashboard translates. The
// dashboard's i18n test renders each one in Korean; this test proves the
// file is the Go source's list, so a new event type, step, state, error
// code or reason cannot reach the dashboard untranslated. Regenerate it with
// UPDATE_VOCABULARY=1 go test -run TestVocabulary ./backend/httpapi/.
const vocabularyFile = "../../frontend/src/i18n/vocabulary.json"

type vocabulary struct {
	EventTypes    []string `json:"event_types"`
	JobKinds      []string `json:"job_kinds"`
	StepNames     []string `json:"step_names"`
	ResourceKinds []string `json:"resource_kinds"`
	Lifecycles    []string `json:"lifecycles"`
	JobStates     []string `json:"job_states"`
	StepStates    []string `json:"step_states"`
	ErrorCodes    []string `json:"error_codes"`
	Roles         []string `json:"roles"`
	Permissions   []string `json:"permissions"`
	// StateReasonCodes are the codes of the slot state reasons the read
	// model writes (the dashboard words them; issue 26).
	StateReasonCodes []string `json:"state_reason_codes"`
	// DetailCodes and NameCodes: the codes of the server's own step details
	// and described resource names.
	DetailCodes []string `json:"detail_codes"`
	NameCodes   []string `json:"name_codes"`
	// WaitReasonCodes: the codes of the waitlist's offer and hold reasons.
	WaitReasonCodes []string `json:"wait_reason_codes"`
	// Reasons: the refusal reasons (apperr.Reasons); the dashboard words
	// each as refusal.<reason>, the server's English is events/english.
	Reasons []string `json:"reasons"`
	// SentenceCodes: every code of the server's English table
	// (events/english, without its English-only variants); each is a key
	// of both of the dashboard's dictionaries (i18n.test.ts).
	SentenceCodes []string `json:"sentence_codes"`
	// StepResultTypes: the event types whose audit line is the shared
	// audit.ev.step_done (projections.AuditLine).
	StepResultTypes []string `json:"step_result_types"`
	// DeliveryReasonCodes: why a Bitbucket delivery was refused, ignored
	// or changed nothing (pullrequests.Why*, the admin page's list).
	DeliveryReasonCodes []string `json:"delivery_reason_codes"`
	// FailureCodes: the codes of a step's failure (events.Failure*), and
	// FailureProblems the provider's error codes (providers.Code) a
	// provider failure names: the dashboard words a failure from them,
	// the provider's own text beside it.
	FailureCodes    []string `json:"failure_codes"`
	FailureProblems []string `json:"failure_problems"`
}

// stringConsts reads the string constants whose names start with prefix
// (and whose type, if any, is typ) from a Go source file.
func stringConsts(t *testing.T, file, prefix, typ string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if typ != "" {
				id, ok := vs.Type.(*ast.Ident)
				if !ok || id.Name != typ {
					continue
				}
			}
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, prefix) || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					out = append(out, v)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants in %s", prefix, file)
	}
	return out
}

// stateReasons drives the slot reducer through every job kind and outcome
// and collects the codes of the reasons it writes.
func stateReasons(t *testing.T, kinds, outcomes []string) []string {
	t.Helper()
	seen := map[string]bool{}
	n := 0
	apply := func(v projections.SlotView, p events.Payload) projections.SlotView {
		n++
		data, _ := json.Marshal(p)
		ev := events.RecordedEvent{Stream: "slot-s", Revision: events.Revision(n), Position: events.Position(n), Type: p.EventType(), Data: data,
			Meta: events.Metadata{Time: time.Unix(int64(n), 0)}}
		v = projections.ApplySlot(v, ev, p)
		if v.StateReasonCode != "" {
			seen[v.StateReasonCode] = true
		}
		return v
	}
	base := apply(projections.SlotView{}, events.SlotRegistered{Slot: "s", ProjectUUID: "p", AppUUID: "a", DBUUID: "d"})
	for _, k := range kinds {
		for _, resumed := range []bool{false, true} {
			v := apply(base, events.JobAccepted{Slot: "s", JobID: "J1", Kind: k, Resumed: resumed})
			for _, o := range outcomes {
				apply(v, events.JobReleased{Slot: "s", JobID: "J1", Outcome: o})
			}
		}
	}
	apply(base, events.TeardownIncomplete{Slot: "s", JobID: "J1", Remaining: []events.Resource{{Kind: "database", ID: "d"}}})
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	return out
}

func TestVocabularyMatchesTheGoSource(t *testing.T) {
	want := vocabulary{
		EventTypes: events.Types(),
		// The kinds and steps of the step tables, wherever their constants
		// are declared (events.TestEveryKindAndStepIsInATable holds every
		// Kind* and Step* constant to a table).
		JobKinds:      events.JobKinds(),
		StepNames:     events.StepOrder(),
		ResourceKinds: stringConsts(t, "../../events/catalogue.go", "Res", ""),
		Lifecycles:    stringConsts(t, "../../projections/views.go", "Lifecycle", ""),
		// The statuses live beside the events; the read model adds "uncertain".
		JobStates:   append(stringConsts(t, "../../events/jobs.go", "Status", ""), stringConsts(t, "../../projections/views.go", "Job", "")...),
		StepStates:  stringConsts(t, "../../projections/views.go", "Step", ""),
		Permissions: stringConsts(t, "../auth/roles.go", "Perm", "Permission"),
	}
	for c := range statusOf {
		want.ErrorCodes = append(want.ErrorCodes, string(c))
	}
	for _, r := range auth.Roles() {
		want.Roles = append(want.Roles, r.String())
	}
	outcomes := slices.DeleteFunc(slices.Clone(want.JobStates), func(s string) bool { return s == projections.JobQueued || s == projections.JobRunning })
	want.StateReasonCodes = stateReasons(t, want.JobKinds, outcomes)
	want.DetailCodes = stringConsts(t, "../../events/catalogue.go", "Detail", "")
	want.NameCodes = stringConsts(t, "../../events/catalogue.go", "Name", "")
	want.WaitReasonCodes = stringConsts(t, "../../events/waitlist.go", "WaitReason", "")
	want.DeliveryReasonCodes = stringConsts(t, "../pullrequests/service.go", "Why", "")
	want.FailureCodes = stringConsts(t, "../../events/catalogue.go", "Failure", "")
	want.FailureProblems = stringConsts(t, "../providers/providers.go", "Code", "Code")
	for _, r := range apperr.Reasons {
		want.Reasons = append(want.Reasons, string(r))
	}
	for _, c := range english.Codes() {
		if c == english.Base(c) {
			want.SentenceCodes = append(want.SentenceCodes, c)
		}
	}
	for _, typ := range want.EventTypes {
		p, err := events.Decode(events.RecordedEvent{Type: typ, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := projections.AuditLine(p); code == "audit.ev.step_done" {
			want.StepResultTypes = append(want.StepResultTypes, typ)
		}
	}
	for _, l := range [][]string{want.EventTypes, want.JobKinds, want.StepNames, want.ResourceKinds, want.Lifecycles, want.JobStates,
		want.StepStates, want.ErrorCodes, want.Roles, want.Permissions, want.StateReasonCodes, want.DetailCodes, want.NameCodes, want.WaitReasonCodes, want.Reasons, want.SentenceCodes, want.StepResultTypes, want.DeliveryReasonCodes, want.FailureCodes, want.FailureProblems} {
		slices.Sort(l)
	}
	body, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	body = append(body, '\n')
	path := filepath.FromSlash(vocabularyFile)
	if os.Getenv("UPDATE_VOCABULARY") != "" {
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("%s is not the Go source's vocabulary; run UPDATE_VOCABULARY=1 go test -run TestVocabulary ./backend/httpapi/ and translate what is new.\nwant:\n%s", vocabularyFile, body)
	}
}

// vocabularyTSFile holds the dashboard's ordered lists of the job
// vocabulary as TypeScript constants (literal types), generated from the
// Go lists (events/vocabulary.go, projections/views.go): the SPA writes
// none of them out by hand (issue 36 item 3).
const vocabularyTSFile = "../../frontend/src/generated/vocabulary.ts"

// vocabularyTS renders vocabularyTSFile.
func vocabularyTS(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString(`// Code generated by TestVocabularyTSIsGenerated (backend/httpapi/vocabulary_test.go)
// from the Go vocabulary; DO NOT EDIT. make test fails when it differs.
// Regenerate: UPDATE_VOCABULARY=1 go test -run TestVocabulary ./backend/httpapi/
`)
	list := func(doc, name string, vs []string) {
		q := make([]string, len(vs))
		for i, v := range vs {
			q[i] = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "\n/** %s */\nexport const %s = [%s] as const;\n", doc, name, strings.Join(q, ", "))
	}
	ended := events.EndedStatuses()
	unsuccessful := slices.DeleteFunc(slices.Clone(ended), func(s string) bool { return s == events.StatusSucceeded })
	list("Job kinds, in display order (events.JobKinds: the kinds with a step table).", "JOB_KINDS", events.JobKinds())
	list("Step names, kind by kind, each kind's in the order it runs them (events.StepOrder).", "STEP_NAMES", events.StepOrder())
	list("Job states (events.Statuses).", "JOB_STATES", events.Statuses())
	list("Terminal job states: nothing changes them except a resume (events.EndedStatuses).", "ENDED_STATES", ended)
	list("Job states that ended without success.", "UNSUCCESSFUL_STATES", unsuccessful)
	list("Ended states a job of any kind may be resumed from (events.ResumableStatuses; a cancelled teardown that had started may be too).", "RESUMABLE_STATES", events.ResumableStatuses())
	list("Step states (projections.Step*).", "STEP_STATES", stringConsts(t, "../../projections/views.go", "Step", ""))
	return b.Bytes()
}

// TestVocabularyTSIsGenerated: the SPA's job vocabulary is the Go one, so
// a kind, step or state added on the server reaches the dashboard's lists
// (the jobs filter, the insights' step order, terminal and resumable
// states) without anyone writing it out again.
func TestVocabularyTSIsGenerated(t *testing.T) {
	body := vocabularyTS(t)
	path := filepath.FromSlash(vocabularyTSFile)
	if os.Getenv("UPDATE_VOCABULARY") != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Fatalf("%s is not the Go vocabulary; run UPDATE_VOCABULARY=1 go test -run TestVocabulary ./backend/httpapi/\nwant:\n%s", vocabularyTSFile, body)
	}
}
