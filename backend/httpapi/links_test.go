package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// TestMeCarriesProviderLinksOnlyWhenSignedIn: the dashboard links resource
// ids to the providers' pages from /api/auth/me; an anonymous caller learns
// nothing about where the providers are.
func TestMeCarriesProviderLinksOnlyWhenSignedIn(t *testing.T) {
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.Links = ProviderLinks{Coolify: "https://coolify.example", Bitbucket: "https://bitbucket.example"}
	}
	b.start(t, HubOptions{})
	viewer := b.tokenFor(t, "vera", auth.RoleViewer, time.Hour)

	a := b.do(t, "GET", "/api/auth/me", nil, "Authorization", "Bearer "+viewer)
	var me subjectAnswer
	a.decode(t, &me)
	if a.status != 200 || me.Links == nil || me.Links.Coolify != "https://coolify.example" || me.Links.Bitbucket != "https://bitbucket.example" {
		t.Fatalf("a viewer's me: %d %s", a.status, a.body)
	}
	a = b.do(t, "GET", "/api/auth/me", nil, "Authorization", "")
	if a.status != 200 || !strings.Contains(string(a.body), `"signed_in":false`) || strings.Contains(string(a.body), "coolify.example") {
		t.Fatalf("anonymous me: %d %s", a.status, a.body)
	}
}

// TestMeCarriesJobLimits: the job page says when a hanging step times out
// from the engine's timeouts in the signed-in answer (issue 35); an
// anonymous caller does not get them.
func TestMeCarriesJobLimits(t *testing.T) {
	b := &bundle{store: memstore.New()}
	b.deps = func(d *Deps) {
		d.Limits = JobLimits{StepTimeoutMS: 120_000, JobTimeoutMS: 900_000}
	}
	b.start(t, HubOptions{})
	viewer := b.tokenFor(t, "vera", auth.RoleViewer, time.Hour)
	a := b.do(t, "GET", "/api/auth/me", nil, "Authorization", "Bearer "+viewer)
	var me subjectAnswer
	a.decode(t, &me)
	if a.status != 200 || me.Limits == nil || *me.Limits != (JobLimits{StepTimeoutMS: 120_000, JobTimeoutMS: 900_000}) {
		t.Fatalf("a viewer's me: %d %s", a.status, a.body)
	}
	a = b.do(t, "GET", "/api/auth/me", nil, "Authorization", "")
	if a.status != 200 || strings.Contains(string(a.body), "step_timeout_ms") {
		t.Fatalf("anonymous me: %d %s", a.status, a.body)
	}
}
