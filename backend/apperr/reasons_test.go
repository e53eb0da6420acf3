package apperr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/english"
)

// The reasons are a contract with the dashboard's dictionaries: every
// Reason constant is in Reasons, and docs/api.md's "Reasons" table lists
// exactly those, in the same order.
func TestReasonsAreDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []apperr.Reason
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				continue
			}
			v, err := strconv.Unquote(vs.Values[0].(*ast.BasicLit).Value)
			if err != nil {
				t.Fatal(err)
			}
			declared = append(declared, apperr.Reason(v))
		}
	}
	if !slices.Equal(declared, apperr.Reasons) {
		t.Fatalf("Reasons = %v\nconstants = %v", apperr.Reasons, declared)
	}
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "### Reasons\n")
	if !ok {
		t.Fatal(`docs/api.md has no "### Reasons" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	var listed []apperr.Reason
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(table, -1) {
		listed = append(listed, apperr.Reason(m[1]))
	}
	if !slices.Equal(listed, apperr.Reasons) {
		t.Fatalf("docs/api.md lists %v\nwant %v", listed, apperr.Reasons)
	}
}

// Because pairs its args; Decided keeps a command's own error and turns a
// spent budget into a conflict naming what kept changing.
func TestBecauseAndDecided(t *testing.T) {
	e := apperr.New(apperr.Conflict, "slot %s is retired", "a").Because(apperr.ReasonSlotRetired, "slot", "a", "odd")
	if e.Message != "slot a is retired" || e.Args["slot"] != "a" || e.Args["odd"] != "" || len(e.Args) != 2 {
		t.Fatalf("%+v", e)
	}
	if got := apperr.Decided(e, "slot a"); got != error(e) {
		t.Fatalf("own error: %v", got)
	}
	if apperr.CodeOf(os.ErrClosed) != apperr.Internal || apperr.CodeOf(e) != apperr.Conflict {
		t.Fatal("CodeOf")
	}
}

// Every reason has its English sentence in the server's one table
// (events/english "refusal.<reason>"), the table words no reason that is
// gone, and every variant a call site asks for (RefuseAs with a literal
// variant, anywhere in backend/) is in the table too: a typo would
// otherwise fall back to the reason's plain sentence unnoticed. The
// dashboard's side (refusal.<reason> in en.ts and ko.ts) is
// frontend/src/i18n/reasons.test.ts.
func TestEveryReasonHasEnglish(t *testing.T) {
	for _, r := range apperr.Reasons {
		if !english.Has("refusal." + string(r)) {
			t.Errorf("reason %s has no English (events/english refusal.%s)", r, r)
		}
	}
	for _, c := range english.Codes() {
		rest, ok := strings.CutPrefix(c, "refusal.")
		if !ok {
			continue
		}
		r := english.Base(rest)
		if !slices.Contains(apperr.Reasons, apperr.Reason(r)) {
			t.Errorf("English %s words no reason", c)
		}
	}
	calls := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 3 {
				return true
			}
			// RefuseAs and the slots package's helpers around it take
			// (…, reason, variant, …) in the same places.
			var name string
			switch f := call.Fun.(type) {
			case *ast.SelectorExpr:
				name = f.Sel.Name
			case *ast.Ident:
				name = f.Name
			}
			if name != "RefuseAs" && name != "refuseAs" && name != "refuseField" {
				return true
			}
			reason, ok1 := call.Args[1].(*ast.SelectorExpr)
			lit, ok2 := call.Args[2].(*ast.BasicLit)
			if !ok1 || !ok2 || lit.Kind != token.STRING {
				return true
			}
			variant, _ := strconv.Unquote(lit.Value)
			var r apperr.Reason
			for _, x := range apperr.Reasons {
				if "Reason"+camel(string(x)) == reason.Sel.Name {
					r = x
				}
			}
			calls++
			if r == "" || (variant != "" && !english.Has("refusal."+string(r)+"/"+variant)) {
				t.Errorf("%s: RefuseAs(%s, %q) has no English", path, reason.Sel.Name, variant)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Fatal("found no RefuseAs call with a literal variant")
	}
}

// camel is a reason's constant name after "Reason": slot_not_found →
// SlotNotFound.
func camel(s string) string {
	var b strings.Builder
	for _, w := range strings.Split(s, "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// Refuse words the reason from the English table with the reason's own
// args; RefuseAs picks a variant of it.
func TestRefuseSaysTheReason(t *testing.T) {
	e := apperr.Refuse(apperr.Conflict, apperr.ReasonSlotLocked, "slot", "dune", "job", "J1", "kind", "reset", "state", "resetting")
	if e.Code != apperr.Conflict || e.Reason != apperr.ReasonSlotLocked || e.Message != "slot dune is locked by reset job J1" || e.Args["state"] != "resetting" {
		t.Fatalf("%+v", e)
	}
	e = apperr.RefuseAs(apperr.Conflict, apperr.ReasonSlotNotOccupied, "release", "slot", "dune")
	if e.Message != "slot dune is not occupied; nothing to release" || e.Reason != apperr.ReasonSlotNotOccupied {
		t.Fatalf("%+v", e)
	}
	if e := apperr.Decided(&events.ContendedError{Attempts: 3}, "slot dune"); e.Error() != "conflict: slot dune changed concurrently 3 times; try again" {
		t.Fatalf("%v", e)
	}
}
