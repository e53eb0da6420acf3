package main

import (
	"context"
	"crypto/rand"
	"log/slog"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/demo"
	"github.com/slotkeeper/slotkeeper/backend/lifecycle"
	"github.com/slotkeeper/slotkeeper/backend/providers/bitbucket"
	"github.com/slotkeeper/slotkeeper/backend/pullrequests"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// validatePRRepos checks --pr-repos (never quoting more than the entry
// number: a token pasted into the wrong setting must not be echoed).
func (c *Config) validatePRRepos() error {
	for i, r := range splitList(c.PRRepos) {
		if _, err := pullrequests.ParseRepo(r); err != nil {
			return cfgErr("pr-repos", "entry %d is not PROJECT/slug (a Bitbucket project key, then a lowercase repository slug)", i+1)
		}
	}
	return nil
}

// newPullRequests builds the pull-request driver (docs/pull-requests.md)
// and the service that links --pr-repos at its start and runs it. The
// reporter is the Bitbucket client the jobs use (the simulator's when
// simulated).
//
// The demo (simulators, --demo) works out of the box: without
// --bitbucket-webhook-secret it makes a random secret for this run, which
// only the server knows (the Simulator page's deliveries are signed with it
// by POST /api/hooks/bitbucket/simulated), and when it seeds its pool it
// links demo.PRRepo.
func newPullRequests(c Config, store events.Store, svc *slots.Service, git any, base string, demoRun, seedDemo bool, log *slog.Logger, health *consumer.Health) (*pullrequests.Service, lifecycle.Service) {
	if demoRun && c.BitbucketWebhookSecret == "" {
		c.BitbucketWebhookSecret = rand.Text()
		log.Info("demo: the simulated Bitbucket's deliveries are signed with a random webhook secret made for this run (--bitbucket-webhook-secret sets one)")
	}
	if seedDemo && c.PRRepos == "" {
		c.PRRepos = demo.PRRepo
	}
	cfg := pullrequests.Config{Secret: c.BitbucketWebhookSecret, MaxDeliveryAge: c.BitbucketWebhookMaxAge, Logger: log, Health: health,
		JobURL: func(id string) string { return base + "/jobs/" + id }}
	if bb, ok := git.(*bitbucket.Client); ok {
		cfg.Reporter = pullrequests.BitbucketReporter{Client: bb}
	}
	prs := pullrequests.New(store, svc, cfg)
	link := func(ctx context.Context) error {
		for _, r := range splitList(c.PRRepos) {
			if _, err := prs.Link(ctx, pullrequests.Actor, r); err != nil {
				log.Warn("pull requests: --pr-repos entry not linked", "repo", r, "err", err)
			}
		}
		if c.BitbucketWebhookSecret == "" {
			log.Warn("pull requests: no --bitbucket-webhook-secret; every Bitbucket delivery is refused")
		}
		return nil
	}
	return prs, &lifecycle.Loop{Init: link, Run: prs.Run}
}
