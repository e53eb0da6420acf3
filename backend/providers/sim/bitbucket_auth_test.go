package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
)

// call sends a REST request with an Authorization header as given.
func call(t *testing.T, method, url, authz, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(waitCtx(t), method, url, rd)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func basicAuth(user, pw string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pw)
	return r.Header.Get("Authorization")
}

// errBody checks Bitbucket's error shape {"errors":[{context,message,
// exceptionName}]} and returns the first exception name.
func errBody(t *testing.T, body string) (exception, message string) {
	t.Helper()
	var e struct {
		Errors []map[string]any `json:"errors"`
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || len(e.Errors) != 1 {
		t.Fatalf("not Bitbucket's error body: %s", body)
	}
	for _, k := range []string{"context", "message", "exceptionName"} {
		if _, ok := e.Errors[0][k]; !ok {
			t.Fatalf("error without %q: %s", k, body)
		}
	}
	exception, _ = e.Errors[0]["exceptionName"].(string)
	message, _ = e.Errors[0]["message"].(string)
	return exception, message
}

// TestBitbucketTokenKinds: project and repository tokens only as Bearer,
// personal tokens also as Basic with their owner; each token sees only its
// scope, and a missing permission is 401 AuthorisationException.
func TestBitbucketTokenKinds(t *testing.T) {
	s := startSim(t, sim.Options{})
	fx, err := s.SeedSlot("a")
	if err != nil {
		t.Fatal(err)
	}
	s.AddBitbucketProject("EMPTY")
	for _, tk := range []sim.BitbucketToken{
		{Token: "proj-admin", Kind: sim.TokenProject, Project: "SLOT", ProjectPerm: sim.PermAdmin},
		{Token: "proj-read", Kind: sim.TokenProject, Project: "SLOT", ProjectPerm: sim.PermRead},
		{Token: "repo-admin", Kind: sim.TokenRepository, Project: "SLOT", Repo: fx.Repo.Slug, RepoPerm: sim.PermAdmin},
		{Token: "alice-read", Kind: sim.TokenPersonal, User: "alice", ProjectPerm: sim.PermRead},
	} {
		if err := s.AddBitbucketToken(tk); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddBitbucketToken(sim.BitbucketToken{Token: "x", Kind: sim.TokenRepository, Project: "SLOT", RepoPerm: sim.PermRead}); err == nil {
		t.Fatal("repository token without a repository accepted")
	}
	api := s.BitbucketURL() + "/rest/api/1.0"
	repo := api + "/projects/SLOT/repos/" + fx.Repo.Slug
	const authFailed, noPerm = "com.atlassian.bitbucket.auth.IncorrectPasswordAuthenticationException", "com.atlassian.bitbucket.AuthorisationException"
	for _, tc := range []struct {
		name, method, url, authz, body string
		status                         int
		exception                      string
	}{
		{"project token as bearer", "GET", repo, "Bearer proj-admin", "", 200, ""},
		{"project token as basic x-token-auth", "GET", repo, basicAuth("x-token-auth", "proj-admin"), "", 401, authFailed},
		{"project token as basic any user", "GET", repo, basicAuth("slotkeeper", "proj-admin"), "", 401, authFailed},
		{"project token outside its project", "GET", api + "/projects/TPL/repos/template", "Bearer proj-admin", "", 401, noPerm},
		{"project read token cannot create", "POST", api + "/projects/SLOT/repos", "Bearer proj-read", `{"name":"n"}`, 401, noPerm},
		{"project read token cannot delete", "DELETE", repo, "Bearer proj-read", "", 401, noPerm},
		{"repository token reads its repo", "GET", repo, "Bearer repo-admin", "", 200, ""},
		{"repository token as basic", "GET", repo, basicAuth("x-token-auth", "repo-admin"), "", 401, authFailed},
		{"repository token on another repo", "GET", api + "/projects/TPL/repos/template", "Bearer repo-admin", "", 401, noPerm},
		{"repository token cannot list the project", "GET", api + "/projects/SLOT/repos", "Bearer repo-admin", "", 401, noPerm},
		{"repository token cannot create", "POST", api + "/projects/SLOT/repos", "Bearer repo-admin", `{"name":"n"}`, 401, noPerm},
		{"personal token as basic with its owner", "GET", repo, basicAuth("alice", "alice-read"), "", 200, ""},
		{"personal token as bearer", "GET", repo, "Bearer alice-read", "", 200, ""},
		{"personal token as basic with another user", "GET", repo, basicAuth("x-token-auth", "alice-read"), "", 401, authFailed},
		{"personal read token cannot create", "POST", api + "/projects/SLOT/repos", "Bearer alice-read", `{"name":"n"}`, 401, noPerm},
		{"default token as basic with its owner", "GET", repo, basicAuth(s.BitbucketUser(), s.BitbucketToken()), "", 200, ""},
		{"create in an unknown project", "POST", api + "/projects/NOPE/repos", "Bearer " + s.BitbucketToken(), `{"name":"n"}`, 404, "com.atlassian.bitbucket.project.NoSuchProjectException"},
		{"get an unknown project", "GET", api + "/projects/NOPE", "Bearer " + s.BitbucketToken(), "", 404, "com.atlassian.bitbucket.project.NoSuchProjectException"},
		{"get a project", "GET", api + "/projects/EMPTY", "Bearer " + s.BitbucketToken(), "", 200, ""},
		{"project filter unknown", "GET", api + "/projects?permission=REPO_WRITE", "Bearer " + s.BitbucketToken(), "", 400, "com.atlassian.bitbucket.validation.ArgumentValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, tc.method, tc.url, tc.authz, tc.body)
			if code != tc.status {
				t.Fatalf("%d %s; want %d", code, body, tc.status)
			}
			if tc.exception != "" {
				if ex, _ := errBody(t, body); ex != tc.exception {
					t.Fatalf("exception %q; want %q", ex, tc.exception)
				}
			}
		})
	}
	if s.HasRepo("NOPE", "n") || s.HasRepo("SLOT", "n") {
		t.Fatal("a refused create created a repository")
	}
	// ?permission=REPO_CREATE lists the projects a token may create in.
	keys := func(authz, perm string) string {
		code, body := call(t, "GET", api+"/projects?permission="+perm, authz, "")
		var page struct {
			Values []struct{ Key string } `json:"values"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &page) != nil {
			t.Fatalf("list projects: %d %s", code, body)
		}
		var ks []string
		for _, v := range page.Values {
			ks = append(ks, v.Key)
		}
		return strings.Join(ks, ",")
	}
	for _, tc := range []struct{ authz, perm, want string }{
		{"Bearer proj-admin", "REPO_CREATE", "SLOT"},
		{"Bearer proj-read", "REPO_CREATE", ""},
		{"Bearer proj-read", "PROJECT_VIEW", "SLOT"},
		{"Bearer repo-admin", "PROJECT_READ", ""},
		{"Bearer alice-read", "PROJECT_READ", "EMPTY,SLOT,TPL"},
		{"Bearer " + s.BitbucketToken(), "PROJECT_ADMIN", "EMPTY,SLOT,TPL"},
	} {
		if got := keys(tc.authz, tc.perm); got != tc.want {
			t.Errorf("%s %s: %q; want %q", tc.authz, tc.perm, got, tc.want)
		}
	}
}
