package doctor

import (
	"context"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
)

// fakeCoolify answers the checks' GETs from fields; calls counts them.
type fakeCoolify struct {
	base     string
	version  error
	visible  map[string]bool
	canWrite bool
	calls    int
}

func (f *fakeCoolify) BaseURL() string { return f.base }
func (f *fakeCoolify) Version(context.Context) (string, error) {
	f.calls++
	return "4.3.11", f.version
}
func (f *fakeCoolify) Team(context.Context) (coolify.Team, error) {
	f.calls++
	return coolify.Team{ID: 2, Name: "Pool"}, nil
}
func (f *fakeCoolify) HasAbility(_ context.Context, a string) (bool, error) {
	f.calls++
	return a != "write" || f.canWrite, nil
}
func (f *fakeCoolify) GetProject(_ context.Context, id string) (providers.Project, providers.Lookup, error) {
	f.calls++
	if f.visible[id] {
		return providers.Project{UUID: id}, providers.Found, nil
	}
	return providers.Project{}, providers.Absent, &providers.Error{Code: providers.CodeNotFound, Status: 404}
}

func byCheck(rs []Result) map[string]Result {
	out := map[string]Result{}
	for _, r := range rs {
		out[r.Check] = r
	}
	return out
}

// TestCoolifyDefinite: what refuses serve's start and what only reports.
func TestCoolifyDefinite(t *testing.T) {
	ctx := context.Background()
	f := &fakeCoolify{base: "https://c.example/api", canWrite: true}
	rs := Coolify(f, nil)(ctx)
	if len(rs) != 1 || rs[0].OK || !rs[0].Definite || !strings.Contains(rs[0].Fix, "https://c.example/api/v1") || f.calls != 0 {
		t.Fatalf("/api base: %+v after %d calls", rs, f.calls)
	}
	f = &fakeCoolify{base: "https://c.example/api/v1", version: &providers.Error{Code: providers.CodeTransport}, canWrite: true}
	if rs := Coolify(f, nil)(ctx); len(rs) != 1 || rs[0].OK || rs[0].Definite {
		t.Fatalf("unreachable: %+v (a transport failure may pass)", rs)
	}
	f = &fakeCoolify{base: "https://c.example/api/v1", canWrite: true, visible: map[string]bool{"aaaaaaaa1": true}}
	m := byCheck(Coolify(f, []string{"aaaaaaaa1", "bbbbbbbb2"})(ctx))
	if r := m["coolify: project bbbbbbbb2"]; r.OK || r.Definite || !strings.Contains(r.Fix, "remove it from --coolify-projects") {
		t.Fatalf("one project torn down: %+v (want a failure that is not definite)", r)
	}
	if _, definite := Failed(Coolify(f, []string{"aaaaaaaa1", "bbbbbbbb2"})(ctx)); definite {
		t.Fatal("one visible project: definite")
	}
	f.visible = nil
	if failed, definite := Failed(Coolify(f, []string{"aaaaaaaa1", "bbbbbbbb2"})(ctx)); !definite || len(failed) != 2 {
		t.Fatalf("no project visible: %+v definite %v", failed, definite)
	}
	f = &fakeCoolify{base: "https://c.example/api/v1"}
	if r := byCheck(Coolify(f, nil)(ctx))["coolify: token abilities"]; r.OK || !r.Definite {
		t.Fatalf("read-only token: %+v", r)
	}
}
