package sim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// gitAs runs git against the simulator with its token (askpass), in a
// throwaway home.
func gitAs(t *testing.T, s *sim.Sim, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	askpass := filepath.Join(dir, "askpass.sh")
	if err := os.WriteFile(askpass, []byte(askpassScript), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_ASKPASS="+askpass, "SIM_TOKEN="+s.BitbucketToken(), "SIM_USER="+s.BitbucketUser(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// served is what a set of GETs answers, with the server's own base URL
// replaced, so two runs on different ports compare equal.
func served(t *testing.T, s *sim.Sim, fx sim.SlotFixture) map[string]string {
	t.Helper()
	ctx := waitCtx(t)
	out := map[string]string{}
	for name, u := range map[string]string{
		"projects":  s.CoolifyURL() + "/projects",
		"apps":      s.CoolifyURL() + "/applications",
		"dbs":       s.CoolifyURL() + "/databases",
		"app":       s.CoolifyURL() + "/applications/" + fx.AppUUID,
		"db":        s.CoolifyURL() + "/databases/" + fx.DBUUID,
		"envs":      s.CoolifyURL() + "/applications/" + fx.AppUUID + "/envs",
		"storages":  s.CoolifyURL() + "/applications/" + fx.AppUUID + "/storages",
		"project":   s.CoolifyURL() + "/projects/" + fx.ProjectUUID,
		"repo":      s.BitbucketURL() + "/rest/api/1.0/projects/SLOT/repos/" + fx.Repo.Slug,
		"slotRepos": s.BitbucketURL() + "/rest/api/1.0/projects/SLOT/repos",
		"template":  s.BitbucketURL() + "/rest/api/1.0/projects/TPL/repos/template",
	} {
		tok := s.CoolifyToken()
		if strings.HasPrefix(u, s.BitbucketURL()) {
			tok = s.BitbucketToken()
		}
		code, body := do(t, ctx, "GET", u, tok)
		out[name] = string(rune('0'+code/100)) + " " + strings.ReplaceAll(body, s.BitbucketURL(), "BB")
	}
	return out
}

// TestStateSurvivesRestart: with StateDir, a seeded and then changed world
// (an env and a database deleted over HTTP, a database delete still queued,
// a repository delete still scheduled, a repo created over HTTP, a commit)
// is served the same after Close and Start on the same directory; git
// clones the repository at the same head; a pending delete has completed;
// ids go on from where they were. A copy of the directory taken while the
// first simulator still ran (what a SIGKILL leaves) loads the same state.
func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := waitCtx(t)
	s1, err := sim.Start(context.Background(), sim.Options{StateDir: dir, DeleteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fx, err := s1.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	fxB, err := s1.SeedSlot("b")
	if err != nil {
		t.Fatal(err)
	}
	head, err := s1.CommitFile("SLOT", fx.Repo.Slug, "main", "NOTES.md", "more work\n")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := do(t, ctx, "DELETE", s1.CoolifyURL()+"/applications/"+fx.AppUUID+"/envs/"+fx.EnvUUIDs[1], s1.CoolifyToken()); code != 200 {
		t.Fatalf("delete env: %d %s", code, body)
	}
	// slot b's database: queued (an hour) — the snapshot has it "deleting".
	if code, body := do(t, ctx, "DELETE", s1.CoolifyURL()+"/databases/"+fxB.DBUUID, s1.CoolifyToken()); code != 200 {
		t.Fatalf("delete db: %d %s", code, body)
	}
	if code, body := do(t, ctx, "DELETE", s1.BitbucketURL()+"/rest/api/1.0/projects/SLOT/repos/"+fxB.Repo.Slug, s1.BitbucketToken()); code != 202 {
		t.Fatalf("delete repo: %d %s", code, body)
	}
	s1.AddBitbucketProject("EXTRA") // saved with the state: s2 has it too
	createRepo := func(s *sim.Sim, name string) int {
		t.Helper()
		req := strings.NewReader(`{"name":"` + name + `","scmId":"git"}`)
		code, body := doBody(t, ctx, "POST", s.BitbucketURL()+"/rest/api/1.0/projects/EXTRA/repos", s.BitbucketToken(), req)
		var rp struct{ ID int }
		if code != 201 || json.Unmarshal([]byte(body), &rp) != nil {
			t.Fatalf("create repo: %d %s", code, body)
		}
		return rp.ID
	}
	idX := createRepo(s1, "x")
	before := served(t, s1, fx)
	if !strings.HasPrefix(before["envs"], "2 ") || strings.Contains(before["envs"], fx.EnvUUIDs[1]) {
		t.Fatalf("env delete not served before restart: %s", before["envs"])
	}
	if !s1.HasDatabase(fxB.DBUUID) || !s1.HasRepo("SLOT", fxB.Repo.Slug) {
		t.Fatal("queued deletes finished early")
	}
	crash := t.TempDir()
	if err := os.CopyFS(crash, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	s1.Close()

	s2, err := sim.Start(context.Background(), sim.Options{StateDir: dir, DeleteDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after := served(t, s2, fx)
	for k, v := range before {
		if k == "dbs" || k == "slotRepos" {
			continue // the queued deletes have completed; checked below
		}
		if after[k] != v {
			t.Errorf("%s after restart:\n got %s\nwant %s", k, after[k], v)
		}
	}
	if s2.HasDatabase(fxB.DBUUID) || strings.Contains(after["dbs"], fxB.DBUUID) || !strings.Contains(after["dbs"], fx.DBUUID) {
		t.Errorf("queued db delete not completed on load: %s", after["dbs"])
	}
	if s2.HasRepo("SLOT", fxB.Repo.Slug) || strings.Contains(after["slotRepos"], fxB.Repo.Slug) || !strings.Contains(after["slotRepos"], fx.Repo.Slug) {
		t.Errorf("scheduled repo delete not completed on load: %s", after["slotRepos"])
	}
	if _, err := os.Stat(filepath.Join(dir, "git", "SLOT", fxB.Repo.Slug+".git")); !os.IsNotExist(err) {
		t.Errorf("deleted repo's bare repo still on disk: %v", err)
	}
	if got := gitAs(t, s2, "ls-remote", s2.CloneURL("SLOT", fx.Repo.Slug), "refs/heads/main"); !strings.HasPrefix(got, head) {
		t.Fatalf("ls-remote after restart: %q, want %s", got, head)
	}
	clone := filepath.Join(t.TempDir(), "c")
	gitAs(t, s2, "clone", "-q", s2.CloneURL("SLOT", fx.Repo.Slug), clone)
	if got := gitAs(t, s2, "-C", clone, "rev-parse", "HEAD"); got != head {
		t.Fatalf("clone head %s, want %s", got, head)
	}
	if id := createRepo(s2, "y"); id != idX+1 {
		t.Errorf("repo id after restart %d, want %d", id, idX+1)
	}
	// The template is remembered: a new slot shares it, under the new URL.
	fxC, err := s2.SeedSlot("c")
	if err != nil || fxC.TemplateHead != fx.TemplateHead || fxC.Template.CloneURL != s2.CloneURL("TPL", "template") {
		t.Fatalf("seed after restart: %v %+v", err, fxC)
	}
	// A slot's deletion over HTTP after the restart is saved too.
	if code, body := do(t, ctx, "DELETE", s2.CoolifyURL()+"/applications/"+fx.AppUUID+"/storages/"+fx.StorageUUIDs[0], s2.CoolifyToken()); code != 200 {
		t.Fatalf("delete storage: %d %s", code, body)
	}
	s2.Close()
	s3, err := sim.Start(context.Background(), sim.Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	if st := s3.Storages(fx.AppUUID); len(st) != 1 || st[0].UUID != fx.StorageUUIDs[1] {
		t.Fatalf("storages after second restart: %+v", st)
	}
	if !s3.HasApp(fxC.AppUUID) || !s3.HasRepo("SLOT", fxC.Repo.Slug) {
		t.Fatal("slot seeded after the first restart is gone")
	}
	// A delete whose delay has passed is saved when it completes (not only
	// completed on load): the file no longer names the database.
	if code, body := do(t, ctx, "DELETE", s3.CoolifyURL()+"/databases/"+fxC.DBUUID, s3.CoolifyToken()); code != 200 {
		t.Fatalf("delete db: %d %s", code, body)
	}
	if err := s3.Wait(ctx, func() bool { return !s3.HasDatabase(fxC.DBUUID) }); err != nil {
		t.Fatal(err)
	}
	if file, err := os.ReadFile(filepath.Join(dir, "state.json")); err != nil || strings.Contains(string(file), fxC.DBUUID) || !strings.Contains(string(file), fx.DBUUID) {
		t.Fatalf("snapshot after the delete completed (%v):\n%s", err, file)
	}

	// The crash image: the same state, with no Close having run.
	s4, err := sim.Start(context.Background(), sim.Options{StateDir: crash})
	if err != nil {
		t.Fatal(err)
	}
	defer s4.Close()
	if got := served(t, s4, fx); got["envs"] != before["envs"] || got["repo"] != before["repo"] || got["storages"] != before["storages"] {
		t.Fatalf("crash image serves\n%v\nwant\n%v", got, before)
	}
	if got := gitAs(t, s4, "ls-remote", s4.CloneURL("SLOT", fx.Repo.Slug), "refs/heads/main"); !strings.HasPrefix(got, head) {
		t.Fatalf("crash image ls-remote: %q, want %s", got, head)
	}
}

// TestBadStateIsAClearError: a torn snapshot, a foreign JSON file and a
// snapshot of another version make Start fail with ErrBadState naming the
// file, and change nothing; a leftover temp file of an interrupted write
// is ignored.
func TestBadStateIsAClearError(t *testing.T) {
	good := t.TempDir()
	s, err := sim.Start(context.Background(), sim.Options{StateDir: good})
	if err != nil {
		t.Fatal(err)
	}
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	valid, err := os.ReadFile(filepath.Join(good, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"torn":    string(valid[:len(valid)/2]),
		"foreign": `{"projects":[{"id":1}]}`,
		"version": strings.Replace(string(valid), `"version": 1`, `"version": 99`, 1),
		"garbage": "\x00\x01not json",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "state.json")
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := sim.Start(context.Background(), sim.Options{StateDir: dir})
			if err == nil {
				s.Close()
				t.Fatal("Start accepted a bad snapshot")
			}
			if !errors.Is(err, sim.ErrBadState) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %v: want ErrBadState naming %s", err, path)
			}
			if got, _ := os.ReadFile(path); string(got) != body {
				t.Fatal("a refused snapshot was changed")
			}
		})
	}
	// A write interrupted before its rename leaves a temp file: not read.
	if err := os.WriteFile(filepath.Join(good, "state.json.123.tmp"), valid[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = sim.Start(context.Background(), sim.Options{StateDir: good})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.HasApp(fx.AppUUID) || len(s.Envs(fx.AppUUID)) != 3 {
		t.Fatal("state not loaded beside a leftover temp file")
	}
	if _, err := os.Stat(filepath.Join(good, "state.json.123.tmp")); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file kept: %v", err)
	}
}

func doBody(t *testing.T, ctx context.Context, method, url, token string, body io.Reader) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, body)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
