package httpapi

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMapsNoProviderErrors: the web layer does not import the provider
// clients. The slots service turns every provider answer into one of its
// own codes (issue 16), so a provider error reaching a handler is a bug to
// fix there, not a status to map here.
func TestMapsNoProviderErrors(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, "/backend/providers") {
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}
