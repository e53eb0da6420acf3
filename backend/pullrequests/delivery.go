package pullrequests

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/slotkeeper/slotkeeper/events"
)

// Bitbucket Data Center's webhook deliveries, as its "Event payload" page
// describes them (confluence.atlassian.com/bitbucketserver/event-payload,
// the 8.9 and 8.15 editions): headers X-Request-Id ("a unique UUID for each
// webhook request"), X-Event-Key (e.g. pr:opened) and X-Hub-Signature
// (webhook secrets: "sha256=" and the hex HMAC-SHA256 of the body); the
// body {"eventKey", "date", "actor", "pullRequest"} with the page's Pull
// Request entity (id, title, state, author.user, fromRef, toRef, links).
//
// A PR from a fork: fromRef.repository is the fork (its project another
// team's, or a personal project "~user"), toRef.repository the linked
// repository; the PR's stream, comment and build status are the target's,
// its head is fetched from the fork (sourceOK, docs/pull-requests.md).

// Header names.
const (
	HeaderEventKey  = "X-Event-Key"
	HeaderRequestID = "X-Request-Id"
	HeaderSignature = "X-Hub-Signature"
)

// The event keys the flow acts on.
const (
	KeyOpened         = "pr:opened"
	KeyFromRefUpdated = "pr:from_ref_updated"
	KeyMerged         = "pr:merged"
	KeyDeclined       = "pr:declined"
	KeyDeleted        = "pr:deleted"
)

var handled = map[string]bool{KeyOpened: true, KeyFromRefUpdated: true, KeyMerged: true, KeyDeclined: true, KeyDeleted: true}

// MaxBody bounds a delivery's body: a PR payload is a few kilobytes.
const MaxBody = 1 << 20

// payload is the part of a pull-request event the flow reads.
type payload struct {
	EventKey string `json:"eventKey"`
	// Date is when Bitbucket made the event, ISO 8601 with the server's
	// offset ("2017-09-19T09:45:32+1000" in every example of the Event
	// payload page, from the 5.x editions through 8.15; e.g.
	// confluence.atlassian.com/bitbucketserver089/event-payload-1236435931.html).
	// It is inside the signed body, so it dates the signature: parseDate,
	// and Config.MaxDeliveryAge for why it is checked.
	Date        string `json:"date"`
	PullRequest struct {
		ID     int64  `json:"id"`
		Title  string `json:"title"`
		State  string `json:"state"`
		Author struct {
			User user `json:"user"`
		} `json:"author"`
		FromRef ref `json:"fromRef"`
		ToRef   ref `json:"toRef"`
		Links   struct {
			Self []struct {
				Href string `json:"href"`
			} `json:"self"`
		} `json:"links"`
	} `json:"pullRequest"`
}

type user struct {
	Name        string `json:"name"`
	Slug        string `json:"slug"`
	DisplayName string `json:"displayName"`
}

type ref struct {
	ID           string `json:"id"`
	DisplayID    string `json:"displayId"`
	LatestCommit string `json:"latestCommit"`
	Repository   struct {
		Slug    string `json:"slug"`
		Project struct {
			Key string `json:"key"`
		} `json:"project"`
	} `json:"repository"`
}

var (
	requestIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	fullSHARe   = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)
	branchRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
	userSlugRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)
)

// Delivery is one delivery read and checked.
type Delivery struct {
	RequestID string
	EventKey  string
	PR        events.PullRequest
	// BodySHA256 is the hex SHA-256 of the signed body (bodySum).
	BodySHA256 string
	// Date is the payload's date (when Bitbucket made the event).
	Date time.Time
}

// bodySum names a signed body: the part of a delivery a replay cannot
// change without the secret.
func bodySum(body []byte) string {
	s := sha256.Sum256(body)
	return hex.EncodeToString(s[:])
}

// parse reads a signed delivery's headers and body. An error is a
// malformed delivery (400).
func parse(h http.Header, body []byte) (Delivery, error) {
	d := Delivery{RequestID: h.Get(HeaderRequestID), EventKey: h.Get(HeaderEventKey)}
	if !requestIDRe.MatchString(d.RequestID) {
		return d, badField(HeaderRequestID, "%s is missing or not a request id", HeaderRequestID)
	}
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return d, badField("body", "the body is not a Bitbucket event payload: %v", err)
	}
	if p.EventKey != "" && p.EventKey != d.EventKey {
		return d, badField("eventKey", "%s %q and the body's eventKey %q differ", HeaderEventKey, d.EventKey, p.EventKey)
	}
	var err error
	if d.Date, err = parseDate(p.Date); err != nil {
		return d, err
	}
	pr := p.PullRequest
	to, from := pr.ToRef.Repository, pr.FromRef.Repository
	out := events.PullRequest{
		Repo: events.RepoRef{Project: to.Project.Key, Slug: to.Slug}, ID: pr.ID, Title: cleanText(pr.Title, 200),
		State: pr.State, Branch: pr.FromRef.DisplayID, Head: pr.FromRef.LatestCommit,
		Source: events.RepoRef{Project: from.Project.Key, Slug: from.Slug},
		Author: cleanText(pr.Author.User.DisplayName, 100), AuthorSlug: pr.Author.User.Slug,
	}
	if len(pr.Links.Self) > 0 && strings.HasPrefix(pr.Links.Self[0].Href, "http") {
		out.Link = clip(pr.Links.Self[0].Href, 500)
	}
	if d.EventKey == KeyDeleted {
		out.State = events.PRStateDeleted
	}
	switch {
	case pr.ID <= 0:
		return d, badField("pullRequest.id", "pullRequest.id is missing")
	case !repoOK(out.Repo):
		return d, badField("pullRequest.toRef.repository", "pullRequest.toRef.repository %q is not PROJECT/slug", clip(out.Repo.String(), 100))
	case !sourceOK(out.Source):
		return d, badField("pullRequest.fromRef.repository", "pullRequest.fromRef.repository %q is not PROJECT/slug or ~user/slug", clip(out.Source.String(), 100))
	case !fullSHARe.MatchString(out.Head):
		return d, badField("pullRequest.fromRef.latestCommit", "pullRequest.fromRef.latestCommit %q is not a commit", out.Head)
	case !branchOK(out.Branch):
		return d, badField("pullRequest.fromRef.displayId", "pullRequest.fromRef.displayId %q is not a branch name", out.Branch)
	case out.AuthorSlug != "" && !userSlugRe.MatchString(out.AuthorSlug):
		return d, badField("pullRequest.author.user.slug", "pullRequest.author.user.slug %q is not a user slug", out.AuthorSlug)
	}
	switch out.State {
	case events.PRStateOpen, events.PRStateMerged, events.PRStateDeclined, events.PRStateDeleted:
	default:
		return d, badField("pullRequest.state", "pullRequest.state %q is not OPEN, MERGED or DECLINED", out.State)
	}
	d.PR = out
	return d, nil
}

// dateLayouts are the forms a payload's date is read in: Bitbucket's own
// (the offset without a colon; "Z0700" also takes "Z"), and RFC 3339 (an
// offset with a colon). Fractional seconds are taken by either (Go reads
// them after the seconds whether or not the layout names them).
var dateLayouts = []string{"2006-01-02T15:04:05Z0700", time.RFC3339}

// parseDate reads a payload's date. Every delivery Bitbucket sends is
// dated, so a missing date is a malformed delivery, like a garbled one:
// a signed body without one cannot be told fresh from captured (Config.
// MaxDeliveryAge), and refusing it costs a real Bitbucket nothing.
func parseDate(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, badField("date", "date is missing: Bitbucket dates every delivery")
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badField("date", "date %q is not an ISO 8601 time with an offset", clip(v, 64))
}

var (
	projectRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
	slugRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
)

func repoOK(r events.RepoRef) bool {
	return projectRe.MatchString(r.Project) && slugRe.MatchString(r.Slug) && !strings.Contains(r.Slug, "..")
}

// sourceOK checks the repository a PR's branch lives in. For a PR from a
// fork it is the fork, not the target: the Event payload page's Pull
// Request entity has fromRef and toRef each with its own repository, and
// the 9.4 OpenAPI's RestPullRequestRef.repository carries the fork's
// origin. A fork may be in another project or in its owner's personal
// project, whose key is "~" and the user's slug (events.IsPersonalProject).
// Both parts end up in a git URL, so anything else — "..", '/', '%', a
// query, a user part — is refused here, before anything is recorded.
func sourceOK(r events.RepoRef) bool {
	if events.IsPersonalProject(r.Project) {
		return slugRe.MatchString(r.Slug) && !strings.Contains(r.Slug, "..")
	}
	return repoOK(r)
}

// ParseRepo reads PROJECT/slug (the --pr-repos form).
func ParseRepo(s string) (events.RepoRef, error) {
	p, sl, _ := strings.Cut(strings.TrimSpace(s), "/")
	r := events.RepoRef{Project: strings.ToUpper(p), Slug: sl}
	if !repoOK(r) {
		return r, fmt.Errorf("repository %q: PROJECT/slug (a project key, then a lowercase repository slug)", s)
	}
	return r, nil
}

// fieldError is a malformed delivery's error with the field it is about.
type fieldError struct {
	field string
	error
}

func badField(field, format string, a ...any) error {
	return fieldError{field, fmt.Errorf(format, a...)}
}

// fieldOf is the field a parse error is about.
func fieldOf(err error) string {
	var f fieldError
	if errors.As(err, &f) {
		return f.field
	}
	return ""
}

// branchOK: a branch name git takes (check-ref-format: no "..", "//",
// component starting with ".", trailing "/" or ".", ".lock" suffix) in
// the characters the flow allows, as the slot service checks it
// (slots.validateRef) before it reaches a git command line.
func branchOK(b string) bool {
	return branchRe.MatchString(b) && !strings.Contains(b, "..") && !strings.Contains(b, "//") && !strings.Contains(b, "/.") &&
		!strings.HasSuffix(b, "/") && !strings.HasSuffix(b, ".") && !strings.HasSuffix(b, ".lock")
}

// cleanText is a display text from a delivery (a title, a display name),
// typed by whoever opens a PR: without control characters (a tab made the
// slot service refuse the occupant's name) or bidirectional controls
// (U+202E turns what follows it around on the board), invalid UTF-8
// dropped, spaces trimmed, and clipped to at most n bytes of whole
// characters.
func cleanText(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > n {
			break
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
