package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/slotkeeper/slotkeeper/backend/auth"

	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// TestPullRequestRoutes: linking is an admin's (a viewer is refused and
// nothing is appended); the hook takes no session or token — a valid
// signature is its authentication, a missing or wrong one is 401 and
// changes nothing, an oversized body 413; an unlinked repository 202
// ignored.
func TestPullRequestRoutes(t *testing.T) {
	b := &bundle{store: memstore.New()}
	t.Cleanup(func() { goleak.VerifyNone(t) })
	b.deps = func(d *Deps) {
		d.PullRequests = pullrequests.New(b.store, d.Commands.(*slots.Service), pullrequests.Config{Secret: "k3y"})
	}
	b.start(t, HubOptions{})

	if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "bad repo"}); a.status != http.StatusBadRequest {
		t.Fatalf("bad repo: %d %s", a.status, a.body)
	}
	viewer := b.tokenFor(t, "vic", auth.RoleViewer, time.Hour)
	before := b.head(t)
	a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "APPS/shop"}, "Authorization", "Bearer "+viewer)
	b.refused(t, "viewer link", a, before, http.StatusForbidden, "slot.register")
	if a := b.do(t, "POST", "/api/pr-repos", map[string]string{"repo": "apps/shop"}); a.status != http.StatusCreated {
		t.Fatalf("link: %d %s", a.status, a.body)
	}
	var l struct {
		Repos []struct{ Project, Slug string } `json:"repos"`
	}
	b.do(t, "GET", "/api/pr-repos", nil).decode(t, &l)
	if len(l.Repos) != 1 || l.Repos[0].Project != "APPS" || l.Repos[0].Slug != "shop" {
		t.Fatalf("links %+v", l)
	}

	body := `{"eventKey":"pr:opened","pullRequest":{"id":1,"state":"OPEN","fromRef":{"displayId":"f","latestCommit":"` +
		strings.Repeat("a", 40) + `","repository":{"slug":"other","project":{"key":"X"}}},"toRef":{"repository":{"slug":"other","project":{"key":"X"}}}}}`
	hook := func(sig string, body string) answer {
		return b.do(t, "POST", "/api/hooks/bitbucket", body, "Authorization", "", "X-Event-Key", "pr:opened", "X-Request-Id", "r-1", "X-Hub-Signature", sig)
	}
	before = b.head(t)
	for _, sig := range []string{"", "sha256=" + strings.Repeat("0", 64), webhook.Sign("wrong", []byte(body))} {
		if a := hook(sig, body); a.status != http.StatusUnauthorized {
			t.Fatalf("signature %q: %d %s", sig, a.status, a.body)
		}
	}
	if a := hook(webhook.Sign("k3y", []byte(strings.Repeat(" ", pullrequests.MaxBody+1))), strings.Repeat(" ", pullrequests.MaxBody+1)); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", a.status)
	}
	if b.head(t) != before {
		t.Fatal("refused deliveries appended events")
	}
	a = hook(webhook.Sign("k3y", []byte(body)), body)
	var out pullrequests.Outcome
	if err := json.Unmarshal(a.body, &out); err != nil || a.status != http.StatusAccepted || out.Result != "ignored" {
		t.Fatalf("unlinked: %d %s", a.status, a.body)
	}
	var rec struct {
		Deliveries []struct{ Result, Reason string } `json:"deliveries"`
	}
	b.do(t, "GET", "/api/hooks/bitbucket/deliveries", nil).decode(t, &rec)
	if len(rec.Deliveries) != 4 || rec.Deliveries[0].Result != "ignored" || rec.Deliveries[1].Result != "refused" || !strings.Contains(rec.Deliveries[1].Reason, "X-Hub-Signature") {
		t.Fatalf("deliveries %+v (the oversized one never reached Receive)", rec.Deliveries)
	}
	if a := b.do(t, "DELETE", "/api/pr-repos/APPS/shop", nil); a.status != http.StatusNoContent {
		t.Fatalf("unlink: %d %s", a.status, a.body)
	}
	if a := b.do(t, "DELETE", "/api/pr-repos/APPS/shop", nil); a.status != http.StatusNotFound {
		t.Fatalf("unlink twice: %d %s", a.status, a.body)
	}
}
