// Package pullrequests is the pull-request front door (issue 34,
// docs/pull-requests.md): the repositories linked to the pool, Bitbucket
// Data Center's webhook deliveries about their pull requests, and the
// driver that turns each pull request's state into slot commands — occupy a
// free ready slot, queue a pr_deploy job for each new head (cancelling an
// older one), release the slot when the PR closes — and reports back on the
// PR (report.go).
//
// A delivery is answered at once: Receive verifies it, checks it against
// the PR's stream and appends PRChanged. Everything else is the driver's
// (Run), which follows the log, so a delivery's effect survives a restart
// and a repeated delivery has none.
package pullrequests

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// Config configures the Service.
type Config struct {
	// Secret is the Bitbucket webhook secret; without one every delivery
	// is refused (nothing can be verified).
	Secret string
	// Occupancy is how long a PR holds its slot at most (the occupancy
	// deadline; the PR closing releases it earlier). Default 14 days.
	Occupancy time.Duration
	// Reporter posts the comment and build status on the PR; nil posts
	// nothing.
	Reporter Reporter
	// JobURL makes the link to a job's page in the comment ("" when no
	// public URL is configured).
	JobURL func(jobID string) string
	// CallTimeout bounds one report on the PR (the comment's look-up,
	// post or edit, and the build status together): a hung Bitbucket
	// ends there, and the post is tried again. Default 30 s.
	CallTimeout time.Duration
	// Retry is the first delay before a sync that failed for a reason
	// that may pass is tried again; it doubles on each failure, up to 32
	// times it. Default 30 s.
	Retry time.Duration
	// MaxDeliveryAge is how far a signed delivery's payload date may be
	// from this server's clock, either way (default 15 min). The signature
	// covers the body, not the X-Request-Id, and a body this server never
	// received is not in its replay record (BodySHA256): one captured
	// elsewhere (a proxy's log, another environment sharing the secret)
	// would be taken, however old. Bitbucket Data Center sends an event
	// when it happens and documents no later redelivery (Manage webhooks,
	// confluence.atlassian.com/bitbucketserver0812/manage-webhooks-1272382316.html,
	// "circuit breaking": a webhook failing five times is skipped, for 10 s
	// growing to 10 h, and beyond 250 requests in flight further ones are
	// skipped — dropped, not queued; Bitbucket Cloud's retries, two at
	// once on a 5xx, would carry the same date seconds later). So a real
	// delivery is dated within its 10 s timeout plus the two clocks' skew
	// of now; the window is wide for the skew. docs/attacks.md, sixth pass.
	MaxDeliveryAge time.Duration
	// Save is the driver's checkpoint policy (backend/consumer); default
	// every 1,000 events at most every 10 s, or after 5 min, and at stop.
	Save consumer.SavePolicy
	// Health parks events the driver cannot apply (nil: logged only).
	Health *consumer.Health
	Clock  clock.Clock
	Logger *slog.Logger
}

// DefaultMaxDeliveryAge is Config.MaxDeliveryAge's default.
const DefaultMaxDeliveryAge = 15 * time.Minute

// Actor is the audited actor of everything the flow does.
var Actor = slots.Actor{Name: "bitbucket", ID: "system:pull-requests"}

// Service is the flow on one store.
type Service struct {
	store events.Store
	slots *slots.Service
	cfg   Config
	log   *slog.Logger

	mu     sync.Mutex // serialises the driver's decisions
	runner atomic.Pointer[consumer.Runner]

	recentMu   sync.Mutex
	recent     []DeliveryRecord // the last recentMax deliveries, newest last
	unverified int              // how many of them are not verified
	received   uint64           // deliveries recorded since start
	// onDelivery, when set (OnDelivery), is told each time one is recorded.
	onDelivery func(received uint64)
}

// OnDelivery has f told the number of deliveries recorded since start each
// time one is, after it is in Recent (the server tells the dashboard's
// streams, so the admin page's list follows; docs/pull-requests.md). Set
// it before deliveries arrive; f must not block.
func (s *Service) OnDelivery(f func(received uint64)) {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	s.onDelivery = f
}

// DeliveryRecord is one delivery as received, for the admin page: what it
// said and what was made of it. Refused deliveries append nothing to the
// log (a forger must not be able to fill it), so these are kept in memory
// only, the last recentMax of this process.
type DeliveryRecord struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id,omitempty"`
	EventKey  string    `json:"event_key,omitempty"`
	Repo      string    `json:"repo,omitempty"`
	PR        int64     `json:"pr,omitempty"`
	Result    string    `json:"result"`
	Reason    string    `json:"reason,omitempty"`
	// ReasonCode and ReasonArgs are Reason as a code (Why*) and its
	// parts, which the dashboard words in the reader's language.
	ReasonCode string            `json:"reason_code,omitempty"`
	ReasonArgs map[string]string `json:"reason_args,omitempty"`
}

// recentMax deliveries are listed, of which at most unverifiedMax
// unverified ones (unsigned, badly signed, or no secret to check with).
const (
	recentMax     = 200
	unverifiedMax = 50
)

// Recent lists the last deliveries this process received, newest first.
func (s *Service) Recent() []DeliveryRecord {
	s.recentMu.Lock()
	defer s.recentMu.Unlock()
	out := make([]DeliveryRecord, len(s.recent))
	for i, r := range s.recent {
		out[len(s.recent)-1-i] = r
	}
	return out
}

func (s *Service) remember(h http.Header, d Delivery, out Outcome) {
	r := DeliveryRecord{Time: s.cfg.Clock.Now().UTC(), EventKey: eventKeyOf(h), Result: out.Result, Reason: out.Reason, ReasonCode: out.Code, ReasonArgs: out.Args}
	if id := h.Get(HeaderRequestID); requestIDRe.MatchString(id) {
		r.RequestID = id
	}
	if d.PR.ID != 0 {
		r.Repo, r.PR = d.PR.Repo.String(), d.PR.ID
	}
	s.recentMu.Lock()
	// Anyone can post an unverified delivery: those keep at most
	// unverifiedMax places, so a flood of them pushes out only its own
	// kind, never what Bitbucket really sent (fifth attack pass).
	drop := -1
	if !verified(r) && s.unverified == unverifiedMax {
		drop = slices.IndexFunc(s.recent, func(o DeliveryRecord) bool { return !verified(o) })
	} else if len(s.recent) == recentMax {
		drop = 0
	}
	if drop >= 0 {
		if !verified(s.recent[drop]) {
			s.unverified--
		}
		s.recent = slices.Delete(s.recent, drop, drop+1)
	}
	if !verified(r) {
		s.unverified++
	}
	s.recent = append(s.recent, r)
	s.received++
	n, f := s.received, s.onDelivery
	s.recentMu.Unlock()
	if f != nil {
		f(n)
	}
}

// eventKeyOf is the delivery's X-Event-Key for the list, when it has the
// form of one (anyone can post any header; the admin page shows it).
func eventKeyOf(h http.Header) string {
	if k := h.Get(HeaderEventKey); eventKeyRe.MatchString(k) {
		return k
	}
	return ""
}

var eventKeyRe = regexp.MustCompile(`^[a-z_]{1,30}(:[a-z_]{1,30}){1,2}$`)

// verified: the delivery's signature held and it is fresh (what was made
// of it is then Bitbucket's doing, not any poster's). A stale one is what
// a replayer sends, as often as they like from one captured body, so it
// keeps to the unverified places too.
func verified(r DeliveryRecord) bool {
	return r.ReasonCode != WhyBadSignature && r.ReasonCode != WhyNoSecret && r.ReasonCode != WhyStale
}

// New returns the flow.
func New(store events.Store, svc *slots.Service, cfg Config) *Service {
	if cfg.MaxDeliveryAge <= 0 {
		cfg.MaxDeliveryAge = DefaultMaxDeliveryAge
	}
	if cfg.Occupancy == 0 {
		cfg.Occupancy = 14 * 24 * time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 30 * time.Second
	}
	if cfg.Save == (consumer.SavePolicy{}) {
		cfg.Save = consumer.SavePolicy{Every: 1000, Gap: 10 * time.Second, After: 5 * time.Minute}
	}
	return &Service{store: store, slots: svc, cfg: cfg, log: cfg.Logger}
}

func (s *Service) meta() events.Metadata {
	return events.Metadata{Actor: Actor.Name, ActorID: Actor.ID, Time: s.cfg.Clock.Now().UTC()}
}

// ---- linked repositories ----

// Links lists the linked repositories, sorted.
func (s *Service) Links(ctx context.Context) ([]events.RepoRef, error) {
	m, _, err := s.links(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]events.RepoRef, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b events.RepoRef) int { return strings.Compare(a.String(), b.String()) })
	return out, nil
}

func (s *Service) links(ctx context.Context) (map[string]events.RepoRef, events.ExpectedRevision, error) {
	m := map[string]events.RepoRef{}
	evs, err := s.store.ReadStream(ctx, events.PRReposStream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return m, events.NoStream(), nil
	}
	if err != nil {
		return nil, events.ExpectedRevision{}, apperr.Internalf(err, "read the linked repositories")
	}
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		switch e := p.(type) {
		case events.PRRepoLinked:
			m[e.Repo.String()] = e.Repo
		case events.PRRepoUnlinked:
			delete(m, e.Repo.String())
		}
	}
	return m, events.Exact(evs[len(evs)-1].Revision), nil
}

// Link links repo (PROJECT/slug) to the pool; linking one already linked
// changes nothing.
func (s *Service) Link(ctx context.Context, a slots.Actor, repo string) (events.RepoRef, error) {
	return s.setLink(ctx, a, repo, true)
}

// Unlink ends a link (404 when repo is not linked).
func (s *Service) Unlink(ctx context.Context, a slots.Actor, repo string) (events.RepoRef, error) {
	return s.setLink(ctx, a, repo, false)
}

func (s *Service) setLink(ctx context.Context, a slots.Actor, repo string, link bool) (events.RepoRef, error) {
	r, err := ParseRepo(repo)
	if err != nil {
		return r, apperr.InvalidField("repo", err.Error())
	}
	_, err = events.Decide(ctx, s.store, events.PRReposStream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		m, exp, err := s.links(ctx)
		if err != nil {
			return exp, nil, err
		}
		_, linked := m[r.String()]
		meta := s.meta()
		meta.Actor, meta.ActorID = a.Name, a.ID
		switch {
		case link && !linked:
			return exp, []events.EventData{events.New(events.PRRepoLinked{Repo: r, By: a.Name}, meta)}, nil
		case !link && linked:
			return exp, []events.EventData{events.New(events.PRRepoUnlinked{Repo: r, By: a.Name}, meta)}, nil
		case !link:
			return exp, nil, apperr.New(apperr.NotFound, "repository %s is not linked", r)
		}
		return exp, nil, nil
	})
	if err != nil {
		return r, apperr.Decided(err, "linked repositories")
	}
	return r, nil
}

// ---- deliveries ----

// Outcome is what Receive made of a delivery: the status to answer and
// why.
type Outcome struct {
	Status int    `json:"-"`
	Result string `json:"result"` // accepted | ignored | duplicate | refused
	Reason string `json:"reason,omitempty"`
	// Code and Args are Reason as a code (Why*) and its parts.
	Code string            `json:"reason_code,omitempty"`
	Args map[string]string `json:"reason_args,omitempty"`
}

// The codes of why a delivery was refused, ignored or changed nothing
// (Outcome.Code), for the admin page's list of deliveries.
const (
	WhyNoSecret     = "no_secret"     // no webhook secret is configured
	WhyBadSignature = "bad_signature" // unsigned, or signed under another secret
	WhyNotHandled   = "event_ignored" // args key: an event the flow does not act on
	WhyMalformed    = "malformed"     // args field: the payload's field that is wrong
	WhyNotLinked    = "repo_unlinked" // args repo
	WhySeen         = "request_seen"  // args request: that X-Request-Id was received already
	WhyClosed       = "pr_closed"     // args state: the PR is closed already
	WhyAtHead       = "pr_at_head"    // args head: the PR is open at that head already
	// WhyStale: args date (the payload's), max_age (Config.MaxDeliveryAge).
	WhyStale = "stale_delivery" // signed, but dated too far from this server's clock: a replay, or a clock off
)

// Receive takes one delivery. A refused one (unsigned, badly signed,
// malformed) appends nothing; an accepted one appends PRChanged, and the
// driver does the rest.
func (s *Service) Receive(ctx context.Context, h http.Header, body []byte) (Outcome, error) {
	d, out, err := s.receive(ctx, h, body)
	if err == nil {
		s.remember(h, d, out)
	}
	return out, err
}

func (s *Service) receive(ctx context.Context, h http.Header, body []byte) (Delivery, Outcome, error) {
	if !webhook.Verify(s.cfg.Secret, body, h.Get(HeaderSignature)) {
		why, code := "the X-Hub-Signature does not match the body under the configured webhook secret", WhyBadSignature
		if s.cfg.Secret == "" {
			why, code = "no Bitbucket webhook secret is configured (--bitbucket-webhook-secret)", WhyNoSecret
		}
		return Delivery{}, Outcome{Status: http.StatusUnauthorized, Result: "refused", Reason: why, Code: code}, nil
	}
	key := h.Get(HeaderEventKey)
	if !handled[key] {
		return Delivery{}, Outcome{Status: http.StatusAccepted, Result: "ignored", Reason: fmt.Sprintf("event %q is not one the pull-request flow acts on", clip(key, 64)),
			Code: WhyNotHandled, Args: map[string]string{"key": clip(key, 64)}}, nil
	}
	d, err := parse(h, body)
	if err != nil {
		return d, Outcome{Status: http.StatusBadRequest, Result: "refused", Reason: err.Error(), Code: WhyMalformed, Args: map[string]string{"field": fieldOf(err)}}, nil
	}
	if out, stale := s.stale(d); stale {
		return d, out, nil
	}
	m, _, err := s.links(ctx)
	if err != nil {
		return d, Outcome{}, err
	}
	if _, ok := m[d.PR.Repo.String()]; !ok {
		return d, Outcome{Status: http.StatusAccepted, Result: "ignored", Reason: "repository " + d.PR.Repo.String() + " is not linked",
			Code: WhyNotLinked, Args: map[string]string{"repo": d.PR.Repo.String()}}, nil
	}
	stream := events.PRStream(d.PR.Repo, d.PR.ID)
	d.BodySHA256 = bodySum(body)
	out := Outcome{Status: http.StatusAccepted, Result: "accepted"}
	_, err = events.Decide(ctx, s.store, stream, func(ctx context.Context) (events.ExpectedRevision, []events.EventData, error) {
		st, err := load(ctx, s.store, stream)
		if err != nil {
			return st.expected(), nil, err
		}
		if why, code, args := st.already(d); why != "" {
			out = Outcome{Status: http.StatusOK, Result: "duplicate", Reason: why, Code: code, Args: args}
			return st.expected(), nil, nil
		}
		meta := s.meta()
		meta.CorrelationID = d.RequestID
		return st.expected(), []events.EventData{events.New(events.PRChanged{RequestID: d.RequestID, EventKey: d.EventKey, PR: d.PR, BodySHA256: d.BodySHA256}, meta)}, nil
	})
	if err != nil {
		return d, Outcome{}, apperr.Decided(err, "pull request")
	}
	return d, out, nil
}

// stale refuses a signed delivery dated more than MaxDeliveryAge from this
// server's clock, either way (400, nothing appended; docs/attacks.md,
// sixth pass): a body captured elsewhere and sent here later. Within the
// window a replay is caught by the PR's record of bodies and request ids
// only if this server saw the body.
func (s *Service) stale(d Delivery) (Outcome, bool) {
	off := s.cfg.Clock.Now().Sub(d.Date)
	if off <= s.cfg.MaxDeliveryAge && off >= -s.cfg.MaxDeliveryAge {
		return Outcome{}, false
	}
	way := "old"
	if off < 0 {
		off, way = -off, "ahead of this server's clock"
	}
	date, max := d.Date.Format(time.RFC3339), s.cfg.MaxDeliveryAge.String()
	return Outcome{Status: http.StatusBadRequest, Result: "refused", Code: WhyStale, Args: map[string]string{"date": date, "max_age": max},
		Reason: fmt.Sprintf("the delivery is dated %s, %s %s; a signed delivery more than %s from this server's clock is refused as a replay (if Bitbucket sent it now, check both servers' clocks)",
			date, off.Round(time.Second), way, max)}, true
}

// ---- a pull request's stream ----

// prState is a PR's stream folded.
type prState struct {
	stream   string
	rev      events.Revision
	exists   bool
	pr       events.PullRequest
	requests map[string]bool
	bodies   map[string]string // BodySHA256 → the request id it came under
	slot     string
	released bool
	waiting  bool
	job      string
	jobHead  string
	comment  events.PRCommentPosted
	failed   events.PRReportFailed
	// refused is the newest PRSourceRefused: the head it names cannot be
	// fetched, so the PR holds no slot until a new head arrives.
	refused events.PRSourceRefused
	// read is the job this Sync read last (sourceRefused), which
	// reportState takes rather than fold its stream a second time; nil
	// once anything was appended to the PR's stream since.
	read *events.JobState
}

func load(ctx context.Context, store events.Store, stream string) (*prState, error) {
	st := &prState{stream: stream, requests: map[string]bool{}, bodies: map[string]string{}}
	evs, err := store.ReadStream(ctx, stream, 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return st, nil
	}
	if err != nil {
		return st, apperr.Internalf(err, "read pull request")
	}
	for _, ev := range evs {
		st.rev, st.exists = ev.Revision, true
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		switch e := p.(type) {
		case events.PRChanged:
			st.requests[e.RequestID] = true
			if e.BodySHA256 != "" {
				st.bodies[e.BodySHA256] = e.RequestID
			}
			st.pr = e.PR
		case events.PRSlotTaken:
			st.slot, st.waiting = e.Slot, false
		case events.PRWaiting:
			st.waiting = true
		case events.PRDeployQueued:
			st.job, st.jobHead = e.JobID, e.Head
		case events.PRSlotReleased:
			if e.Reason != "" {
				// Given back while open (its head cannot be fetched): a
				// new head takes a slot again.
				st.slot = ""
			} else {
				st.released = true
			}
		case events.PRSourceRefused:
			st.refused = e
		case events.PRCommentPosted:
			st.comment = e
		case events.PRReportFailed:
			st.failed = e
		}
	}
	return st, nil
}

func (st *prState) expected() events.ExpectedRevision {
	if !st.exists {
		return events.NoStream()
	}
	return events.Exact(st.rev)
}

func (st *prState) open() bool { return st.pr.State == events.PRStateOpen }

// headRefused: the PR's current head is one its source repository would not
// give (PRSourceRefused).
func (st *prState) headRefused() bool { return st.refused.Head != "" && st.refused.Head == st.pr.Head }

// already says why d changes nothing ("" when it does): the same request
// id, the same signed body under another request id (a replay: the
// request id is not signed), or a state the PR has reached (a closed PR
// stays closed; an open one at the same head is where it is).
func (st *prState) already(d Delivery) (string, string, map[string]string) {
	first, replayed := st.bodies[d.BodySHA256]
	switch {
	case st.requests[d.RequestID]:
		return "request " + d.RequestID + " was received already", WhySeen, map[string]string{"request": d.RequestID}
	case replayed:
		return "this body was received already, as request " + first, WhySeen, map[string]string{"request": first}
	case st.exists && !st.open():
		return "the pull request is " + strings.ToLower(st.pr.State) + " already", WhyClosed, map[string]string{"state": st.pr.State}
	case st.exists && d.PR.State == events.PRStateOpen && d.PR.Head == st.pr.Head:
		return "the pull request is open at " + d.PR.Head + " already", WhyAtHead, map[string]string{"head": d.PR.Head}
	}
	return "", "", nil
}

// appendPR records what the driver did (a slot occupied, a job accepted, a
// comment posted): facts already decided against the slot's own stream or
// done at Bitbucket, so they are appended whatever came in meanwhile (a
// delivery's PRChanged may land between the driver's read and its append).
// The driver's decisions are serialised by s.mu.
func (s *Service) appendPR(ctx context.Context, st *prState, p events.Payload) error {
	res, err := s.store.Append(ctx, st.stream, events.Any(), events.New(p, s.meta()))
	if err != nil {
		return err
	}
	st.rev, st.exists = res.NextExpected, true
	st.read = nil
	return nil
}
