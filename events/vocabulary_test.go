package events

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// packageConsts reads this package's string constants named prefix+Upper…
// from every non-test file (a kind or step declared in a new file counts).
func packageConsts(t *testing.T, prefix string) map[string]string {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						rest, ok := strings.CutPrefix(n.Name, prefix)
						if !ok || rest == "" || rest[0] < 'A' || rest[0] > 'Z' || i >= len(vs.Values) {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							out[n.Name] = v
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s constants", prefix)
	}
	return out
}

// TestEveryKindAndStepIsInATable: the lists everything else derives from
// (JobKinds, StepOrder) are the step tables; a Kind* or Step* constant that
// no table holds would be missing from every one of them — the dashboard's
// step and kind names, the insights' durations, the vocabulary files.
func TestEveryKindAndStepIsInATable(t *testing.T) {
	kinds, steps := JobKinds(), StepOrder()
	for name, v := range packageConsts(t, "Kind") {
		if !slices.Contains(kinds, v) {
			t.Errorf("%s = %q has no step table (events/jobs.go kindTable)", name, v)
		}
	}
	for name, v := range packageConsts(t, "Step") {
		if !slices.Contains(steps, v) {
			t.Errorf("%s = %q is in no job kind's step table", name, v)
		}
	}
	// Each list holds each value once, and every table's steps.
	if len(slices.Compact(slices.Sorted(slices.Values(kinds)))) != len(kinds) || len(slices.Compact(slices.Sorted(slices.Values(steps)))) != len(steps) {
		t.Fatalf("repeats: kinds %v steps %v", kinds, steps)
	}
	for _, k := range kinds {
		for _, template := range []bool{false, true} {
			for _, s := range StepNames(k, template) {
				if !slices.Contains(steps, s) {
					t.Errorf("%s's step %s is not in StepOrder", k, s)
				}
			}
		}
	}
	if got := kinds[:3]; !slices.Equal(got, []string{KindReset, KindTeardown, KindPromote}) {
		t.Errorf("display order %v", kinds)
	}
}

// The statuses: every ended one is a terminal event's, Statuses holds each
// once, and the resumable ones are Resumable's.
func TestStatusLists(t *testing.T) {
	ended := EndedStatuses()
	if len(ended) != len(TerminalTypes()) {
		t.Fatalf("ended %v, terminal types %v", ended, TerminalTypes())
	}
	for _, typ := range TerminalTypes() {
		if !slices.Contains(ended, TerminalStatus(typ)) || !Ended(TerminalStatus(typ)) {
			t.Errorf("%s's status %q", typ, TerminalStatus(typ))
		}
	}
	all := Statuses()
	for name, v := range packageConsts(t, "Status") {
		if !slices.Contains(all, v) {
			t.Errorf("%s = %q is not in Statuses", name, v)
		}
	}
	if got := ResumableStatuses(); !slices.Equal(got, []string{StatusFailed, StatusTimedOut, StatusAbandoned}) {
		t.Errorf("resumable %v", got)
	}
}
