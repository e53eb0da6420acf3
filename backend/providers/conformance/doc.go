// Package conformance is the provider conformance suite: the cases a real
// Coolify and a real Bitbucket Data Center must pass for our clients'
// reading of them to hold (which answers mean "absent", which are
// scheduled, which bodies carry which exception, how git authenticates).
// The same cases run against the simulators in every `make test` (plain
// `go test`) and, with `make test-live`, against real services named by
// environment variables, so a difference between a simulator and the real
// service fails a test instead of a slot.
//
// Each suite is a function taking a *testing.T and a target (Bitbucket:
// BitbucketTarget). It creates only scratch resources with names of its
// own (Bitbucket: repositories slotkeeper-conformance-<random> in the
// scratch project) and removes them when it ends, pass or fail; it never
// touches anything else, and everything but those creates and deletes is
// read-only.
//
// Running it before going live (docs/providers.md, "Conformance suite"):
//
//  1. In Bitbucket, create a scratch project (e.g. SKCONF) and a token as
//     Slotkeeper will use it: a project HTTP access token of the scratch
//     project with Project admin (sent as Bearer), or a personal token of a
//     user with admin there (Bearer, or Basic with --git-auth basic).
//  2. Export SLOTKEEPER_LIVE_BITBUCKET_URL (the server root),
//     SLOTKEEPER_LIVE_BITBUCKET_TOKEN, SLOTKEEPER_LIVE_BITBUCKET_PROJECT
//     (the scratch project key), and optionally
//     SLOTKEEPER_LIVE_BITBUCKET_GIT_AUTH (bearer, the default, or basic)
//     with SLOTKEEPER_LIVE_BITBUCKET_GIT_USER for basic — the same values
//     as --bitbucket-url, --bitbucket-token, --git-auth and --git-user.
//     The Coolify half reads its own SLOTKEEPER_LIVE_COOLIFY_… variables.
//  3. Run `make test-live`. A missing variable fails the run (it is never
//     skipped: a skipped live run proves nothing).
//
// The live tests are behind the `live` build tag, so `make test` never
// reaches out.
package conformance
