package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/providers/coolify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/boltstore"
)

func startSim(t *testing.T) *sim.Sim {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := sim.Start(ctx, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// realArgs configure serve/doctor with real providers pointed at s. Real
// providers need an explicit scope: "*" (any) unless extra names one.
func realArgs(s *sim.Sim, coolifyURL, coolifyToken string, extra ...string) []string {
	args := append([]string{"--allow-insecure-http", "--coolify-url", coolifyURL, "--coolify-token", coolifyToken,
		"--bitbucket-url", s.BitbucketURL(), "--bitbucket-token", s.BitbucketToken()}, extra...)
	for _, f := range []string{"--coolify-projects", "--bitbucket-projects"} {
		if !slices.Contains(extra, f) {
			args = append(args, f, "*")
		}
	}
	return args
}

// TestReadinessSurvivesTeardown: the Coolify readiness probe used to look
// up the scope's first project, which a normal teardown deletes; /readyz
// then answered 503 "project … does not exist" for good (issue 22 item 7).
func TestReadinessSurvivesTeardown(t *testing.T) {
	s := startSim(t)
	ctx := context.Background()
	project := s.AddProject("slot-gone")
	paas := coolify.New(coolify.Options{BaseURL: s.CoolifyURL(), Token: s.CoolifyToken()})
	if out, err := paas.DeleteProject(ctx, project); err != nil || out != providers.Deleted {
		t.Fatalf("teardown of the project: %v %v", out, err)
	}
	git := bitbucket.New(bitbucket.Options{BaseURL: s.BitbucketURL(), Token: s.BitbucketToken()})
	probes := providerProbes(paas, git, slots.Scope{CoolifyProjects: []string{project}})
	if err := probes[0].check(ctx); err != nil {
		t.Fatalf("coolify probe after a teardown of the scope's first project: %v", err)
	}
	// It still notices a refused token.
	s.AddFault(sim.Fault{Endpoint: sim.EndpointVersion, Status: 401})
	if err := probes[0].check(ctx); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("coolify probe with the token refused: %v", err)
	}
}

// TestDoctorCommand: `slotkeeper doctor` prints each check with its fix
// and exits 1 on a failure: a base URL ending in /api, a token of another
// team (not one configured project visible).
func TestDoctorCommand(t *testing.T) {
	s := startSim(t)
	project := s.AddProject("pool")
	run := func(args ...string) (int, string) {
		var out, errb strings.Builder
		code := runWith(context.Background(), append([]string{"doctor"}, args...), noEnv, &out, &errb, nil)
		return code, out.String() + errb.String()
	}
	code, out := run(realArgs(s, s.CoolifyURL(), s.CoolifyToken(), "--coolify-projects", project)...)
	if code != 0 {
		t.Fatalf("doctor on a good configuration: exit %d\n%s", code, out)
	}
	for _, want := range []string{"PASS coolify: base URL", "PASS coolify: version", `PASS coolify: team: the token belongs to team "Root Team" (#0)`,
		"PASS coolify: token abilities: read, write, deploy", "PASS coolify: project " + project} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	api := strings.TrimSuffix(s.CoolifyURL(), "/v1")
	code, out = run(realArgs(s, api, s.CoolifyToken(), "--coolify-projects", project)...)
	if code != exitFailed || !strings.Contains(out, "FAIL coolify: base URL") || !strings.Contains(out, "fix: set --coolify-url to "+api+"/v1") {
		t.Fatalf("doctor with /api: exit %d\n%s", code, out)
	}
	other := s.AddCoolifyToken(5, "Elsewhere", "read", "write")
	code, out = run(realArgs(s, s.CoolifyURL(), other, "--coolify-projects", project)...)
	if code != exitFailed || !strings.Contains(out, "FAIL coolify: project "+project) || !strings.Contains(out, `team "Elsewhere" (#5)`) {
		t.Fatalf("doctor with another team's token: exit %d\n%s", code, out)
	}
	ro := s.AddCoolifyToken(sim.RootTeam, "", "read")
	code, out = run(realArgs(s, s.CoolifyURL(), ro)...)
	if code != exitFailed || !strings.Contains(out, "FAIL coolify: token abilities: read only") {
		t.Fatalf("doctor with a read-only token: exit %d\n%s", code, out)
	}
}

// TestServeRefusesDefiniteMisconfiguration: serve with real providers runs
// the doctor's checks first and refuses to start on a definite failure,
// naming it.
func TestServeRefusesDefiniteMisconfiguration(t *testing.T) {
	s := startSim(t)
	project := s.AddProject("pool")
	other := s.AddCoolifyToken(5, "Elsewhere", "root")
	for name, args := range map[string][]string{
		"base URL ending in /api": realArgs(s, strings.TrimSuffix(s.CoolifyURL(), "/v1"), s.CoolifyToken(), "--coolify-projects", project),
		"token of another team":   realArgs(s, s.CoolifyURL(), other, "--coolify-projects", project),
	} {
		t.Run(name, func(t *testing.T) {
			var out, errb strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data", t.TempDir(), "--log-level", "error"}, args...)
			code := runWith(ctx, args, noEnv, &out, &errb, nil)
			if code != exitFailed || !strings.Contains(errb.String(), "refusing to start on a definite misconfiguration") || !strings.Contains(errb.String(), "coolify: ") {
				t.Fatalf("serve: exit %d\n%s", code, errb.String())
			}
			if strings.Contains(errb.String(), s.CoolifyToken()) || strings.Contains(errb.String(), other) {
				t.Fatal("a token in the output")
			}
		})
	}
}

// TestDoctorChecksGitOnEveryTemplate: the doctor reads the registered
// templates from the log and runs git's ls-remote on each through the
// pusher (the same auth as every push), beside the Bitbucket project check.
func TestDoctorChecksGitOnEveryTemplate(t *testing.T) {
	s := startSim(t)
	project := s.AddProject("pool")
	tpl, err := s.AddRepo("TPL", "template")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CommitFile("TPL", tpl.Slug, sim.DefaultBranch, "README", "template"); err != nil {
		t.Fatal(err)
	}
	slotRepo, err := s.AddRepo("SLOT", "one")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	st, err := boltstore.Open(data, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := func(slot, tplSlug string) {
		_, err := st.Append(context.Background(), "slot-"+slot, events.NoStream(), events.New(events.SlotRegistered{
			Slot: slot, ProjectUUID: project, Repo: events.RepoRef{Project: "SLOT", Slug: slotRepo.Slug},
			TemplateRepo: events.RepoRef{Project: "TPL", Slug: tplSlug}, TemplateRef: sim.DefaultBranch,
		}, events.Metadata{Actor: "test"}))
		if err != nil {
			t.Fatal(err)
		}
	}
	reg("one", tpl.Slug)
	reg("two", "missing")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	code := runWith(context.Background(), append([]string{"doctor", "--data", data},
		realArgs(s, s.CoolifyURL(), s.CoolifyToken(), "--coolify-projects", project, "--bitbucket-projects", "SLOT,TPL")...), noEnv, &out, &errb, nil)
	got := out.String() + errb.String()
	for _, want := range []string{"PASS git: auth: token sent as bearer", "PASS git: template TPL/" + tpl.Slug, "FAIL git: template TPL/missing", "PASS bitbucket: project SLOT"} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, got)
		}
	}
	if code != exitFailed {
		t.Errorf("doctor with a missing template: exit %d, want %d", code, exitFailed)
	}
	if strings.Contains(got, s.BitbucketToken()) {
		t.Error("the Bitbucket token in the doctor's output")
	}
}
