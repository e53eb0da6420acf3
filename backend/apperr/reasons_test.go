package apperr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
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
