// Package notify posts a message to a webhook (Slack-compatible JSON) when a
// job ends. It is driven by terminal events read from the log — never by a
// job attempt — so a slow or failing webhook can never delay or change a job.
//
// Delivery is at least once, and the log says what happened: each terminal
// job event is one delivery, whose id (the terminal event's id) is stable
// across retries and restarts and is in every body and in the
// X-Slotkeeper-Delivery header, so receivers can deduplicate. Before each
// POST the notifier appends NotificationAttempted to notify-<job id> (with
// the stream's expected revision, so only one notifier across processes
// makes an attempt), then NotificationDelivered (2xx) or NotificationFailed
// (status, attempt, final or when to retry). Retries back off exponentially
// up to a bound; a restart resumes every delivery that has no final outcome
// (an attempt cut short by a crash is retried once its Until has passed).
// POSTs go through backend/webhook, the one sender of every webhook: bodies
// are signed (X-Slotkeeper-Signature: sha256=HMAC-SHA256(secret, body));
// redirects are not followed (a 3xx is a final failure: following one would
// hand the secret URL to another host as Referer); the webhook URL never
// appears in a log line, an event or an error. See docs/jobs.md.
package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/retry"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// Headers of every POST (and webhook.HeaderSignature, when signed).
const (
	HeaderDelivery = "X-Slotkeeper-Delivery"
	HeaderAttempt  = "X-Slotkeeper-Attempt"
)

// Config tunes a Notifier. Zero values pick the defaults noted.
type Config struct {
	// WebhookURL receives the POSTs. Empty disables the notifier. It is a
	// secret (for Slack the URL is the credential): it is never logged.
	WebhookURL string
	// Secret signs every body (HMAC-SHA256, hex, in X-Slotkeeper-Signature
	// as "sha256=<hex>"). Empty: bodies are not signed.
	Secret string
	// BaseURL is the dashboard's address; messages link to
	// <BaseURL>/jobs/<id>.
	BaseURL string
	// HTTP is the client; default one with a 10 s timeout per request.
	// Redirects are never followed, whatever the client says.
	HTTP *http.Client
	// MaxAge skips terminal events older than this (a notifier that starts
	// on an old log does not flood the channel). Default 24 h.
	MaxAge time.Duration
	// Retry: first wait, longest wait and number of attempts for a failing
	// webhook (5xx, 408, 429, transport errors). Defaults 1 s, 1 min, 8.
	RetryInitial time.Duration
	RetryMax     time.Duration
	Attempts     int
	// CheckpointEvery is the least time between two of the notifier's
	// checkpoints of how far every delivery is settled (the consumer
	// Runner's SavePolicy.Gap, with Every 100 events). Default 10 s.
	CheckpointEvery time.Duration
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Notifier follows the log and delivers one message per terminal job event.
// It is a consumer.Fold run by a consumer.Runner (docs/events.md): Prepare
// reads what a terminal event's delivery needs and starts it, Apply has
// nothing left to fold, and Mark holds the checkpoint below the oldest
// delivery not settled.
type Notifier struct {
	store   events.Store
	cfg     Config
	log     *slog.Logger
	sends   sync.WaitGroup
	timeout time.Duration // bound of one POST
	hook    *webhook.Sender
	r       *consumer.Runner
	// pending holds the positions of the terminal events whose delivery
	// is not settled; under the Runner's lock.
	pending map[events.Position]struct{}
	// ctx is Run's, for the deliveries Prepare starts (they outlive the
	// subscription's handler).
	ctx context.Context
}

// Checkpoints of the notifier (backend/consumer): a position at or before
// which every terminal event's delivery is settled (delivered, failed for
// good, or too old to send). A restart subscribes from there, so finished
// history is not read again; deliveries after it are looked up in their
// notify streams as before (the log, not the checkpoint, says what was
// sent). The state is empty: the position is all there is.
const (
	notifyConsumer = "notify"
	notifyVersion  = 1
	// notifySaveEvery is how many events must have been folded since the
	// last checkpoint for a periodic one (a quiet pool's log is not
	// filled with checkpoints); at shutdown any progress is written.
	notifySaveEvery = 100
)

// New returns a notifier on store.
func New(store events.Store, cfg Config) *Notifier {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	timeout := cfg.HTTP.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 24 * time.Hour
	}
	if cfg.RetryInitial <= 0 {
		cfg.RetryInitial = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Minute
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 8
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	n := &Notifier{store: store, cfg: cfg, log: cfg.Logger, timeout: timeout, hook: webhook.New(cfg.WebhookURL, cfg.Secret, cfg.HTTP),
		pending: map[events.Position]struct{}{}, ctx: context.Background()}
	n.r = consumer.NewRunner(store, n, consumer.Options{
		Save:     consumer.SavePolicy{Every: notifySaveEvery, Gap: cfg.CheckpointEvery},
		Stopping: n.sends.Wait, // the last checkpoint says how far the deliveries got
		Logger:   cfg.Logger,
	})
	return n
}

// Run follows terminal job events until ctx is done (returns nil) or the
// store fails. Deliveries in progress end with ctx: an interrupted attempt
// is recorded as failed (not final) and the next Run resumes it.
//
// Delivery is at least once: an attempt is recorded before its POST and its
// outcome after, so a crash in between sends that message again (after the
// attempt's deadline). Checkpoints never lose one: a delivery not settled
// keeps the checkpoint below its event (Mark).
func (n *Notifier) Run(ctx context.Context) error {
	if n.cfg.WebhookURL == "" {
		<-ctx.Done()
		return nil
	}
	n.ctx = ctx
	return n.r.Run(ctx)
}

// Name, Version, Wants, Apply, Snapshot, Restore and Mark make the
// notifier a consumer.Fold and a consumer.Marker.
func (n *Notifier) Name() string { return notifyConsumer }
func (n *Notifier) Version() int { return notifyVersion }
func (n *Notifier) Wants(ev events.RecordedEvent) bool {
	return strings.HasPrefix(ev.Stream, events.JobStreamPrefix) && events.IsTerminal(ev.Type)
}
func (n *Notifier) Apply(events.RecordedEvent) error { return nil } // Prepare did the work
func (n *Notifier) Snapshot() (any, error)           { return struct{}{}, nil }
func (n *Notifier) Restore([]byte) error             { return nil } // the state is empty

// Mark is the checkpoint's position: below the oldest delivery not
// settled, else everything applied. Under the Runner's lock.
func (n *Notifier) Mark(applied events.Position) events.Position {
	m := applied
	for q := range n.pending {
		m = min(m, q-1)
	}
	return m
}

// Prepare reads what ev's delivery needs, and unless it is settled (or too
// old) marks it pending and starts it. It runs before the Runner moves
// its position past ev, so no checkpoint can claim ev before it is
// pending.
func (n *Notifier) Prepare(ctx context.Context, ev events.RecordedEvent) error {
	if n.cfg.Now().Sub(ev.Meta.Time) > n.cfg.MaxAge {
		return nil
	}
	jobID := strings.TrimPrefix(ev.Stream, events.JobStreamPrefix)
	hist, err := n.store.ReadStream(ctx, ev.Stream, 0, int(ev.Revision)+1, events.Forward)
	if err != nil {
		return err
	}
	var queued events.JobQueued
	k := 0 // this is the job's k-th terminal event
	for _, h := range hist {
		switch {
		case h.Is(events.JobQueued{}):
			_ = json.Unmarshal(h.Data, &queued)
		case events.IsTerminal(h.Type):
			k++
		}
	}
	d := delivery{jobID: jobID, id: ev.ID, k: k, outcome: decodeOutcome(ev), corr: ev.Meta.CorrelationID, cause: ev.ID}
	d.msg = n.message(jobID, queued, d.outcome)
	st, _, err := n.load(ctx, d)
	if err != nil {
		return err
	}
	if st.done {
		return nil
	}
	n.r.Update(func() { n.pending[ev.Position] = struct{}{} })
	n.sends.Add(1)
	go func() {
		defer n.sends.Done()
		if n.deliver(n.ctx, d) {
			n.r.Update(func() { delete(n.pending, ev.Position) })
		}
	}()
	return nil
}

// Message is the webhook body: Slack's incoming-webhook shape, plus the
// delivery id and attempt (Slack ignores them).
type Message struct {
	Text       string  `json:"text"`
	Blocks     []Block `json:"blocks,omitempty"`
	DeliveryID string  `json:"delivery_id,omitempty"`
	Attempt    int     `json:"attempt,omitempty"`
}

// Block is a Slack section block with mrkdwn text.
type Block struct {
	Type string    `json:"type"`
	Text *TextObj  `json:"text,omitempty"`
	Elem []TextObj `json:"elements,omitempty"`
}

// TextObj is Slack's text object.
type TextObj struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// outcome is what a terminal event says, in one shape.
type outcome struct {
	Outcome        string
	Reason         string
	FailedStep     string
	UncertainStep  string
	CompletedSteps []string
	Remaining      []events.Resource
}

// delivery is one terminal event's message.
type delivery struct {
	jobID, id   string
	k           int // the job's k-th terminal event (legacy NotificationSent count)
	outcome     outcome
	msg         Message
	corr, cause string
}

// deliveryState is the fold of notify-<job> for one delivery.
type deliveryState struct {
	done      bool
	attempts  int       // attempts made so far
	openUntil time.Time // an attempt without an outcome, retried after this
	retryAt   time.Time // the last failure's next attempt
}

// load folds the job's notify stream for d, returning the stream's
// expected revision for the next append.
func (n *Notifier) load(ctx context.Context, d delivery) (deliveryState, events.ExpectedRevision, error) {
	var st deliveryState
	evs, err := n.store.ReadStream(ctx, events.NotifyStream(d.jobID), 0, 0, events.Forward)
	if errors.Is(err, events.ErrStreamNotFound) {
		return st, events.NoStream(), nil
	}
	if err != nil {
		return st, events.ExpectedRevision{}, err
	}
	legacy := 0
	for _, ev := range evs {
		p, err := events.Decode(ev)
		if err != nil {
			continue
		}
		switch e := p.(type) {
		case events.NotificationSent:
			if legacy++; legacy == d.k {
				st.done = true // the old notifier claimed it: at most once
			}
		case events.NotificationAttempted:
			if e.DeliveryID == d.id {
				st.attempts = max(st.attempts, e.Attempt)
				st.openUntil = e.Until
			}
		case events.NotificationDelivered:
			if e.DeliveryID == d.id {
				st.done = true
			}
		case events.NotificationFailed:
			if e.DeliveryID == d.id {
				st.openUntil = time.Time{}
				st.retryAt = e.RetryAt
				st.done = st.done || e.Final
			}
		}
	}
	return st, events.Exact(evs[len(evs)-1].Revision), nil
}

// deliver makes attempts until the delivery has a final outcome or ctx
// ends. Every attempt is in the log before its POST, and its outcome
// after. It reports whether the log shows the delivery settled.
func (n *Notifier) deliver(ctx context.Context, d delivery) bool {
	log := n.log.With("job", d.jobID, "delivery", d.id, "correlation_id", d.corr)
	for ctx.Err() == nil {
		st, exp, err := n.load(ctx, d)
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "notification: cannot read its log; giving up until restart", "err", err)
			}
			return false
		}
		if st.done {
			return true
		}
		now := n.cfg.Now()
		// Another notifier's attempt (or one cut short by a crash) is open
		// until its Until; a failed one waits for its backoff.
		if wait := max(st.openUntil.Sub(now), st.retryAt.Sub(now)); wait > 0 {
			if !sleep(ctx, wait) {
				return false
			}
			continue
		}
		attempt := st.attempts + 1
		meta := events.Metadata{Actor: "system:notifier", CorrelationID: d.corr, CausationID: d.cause, Time: now.UTC()}
		res, err := n.store.Append(ctx, events.NotifyStream(d.jobID), exp, events.New(events.NotificationAttempted{
			JobID: d.jobID, DeliveryID: d.id, Outcome: d.outcome.Outcome, Attempt: attempt, Until: now.Add(n.timeout + time.Second).UTC(),
		}, meta))
		if errors.Is(err, events.ErrWrongRevision) {
			continue // another notifier moved: look again
		}
		if err != nil {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "notification: cannot record the attempt; not sending", "err", err)
			}
			return false
		}
		status, perr := n.post(ctx, d, attempt)
		after := events.Exact(res.NextExpected)
		meta.Time = n.cfg.Now().UTC()
		var out events.Payload
		switch {
		case perr == nil && status/100 == 2:
			out = events.NotificationDelivered{JobID: d.jobID, DeliveryID: d.id, Attempt: attempt, Status: status}
			log.InfoContext(ctx, "notification delivered", "status", status, "attempt", attempt)
		default:
			f := events.NotificationFailed{JobID: d.jobID, DeliveryID: d.id, Attempt: attempt, Status: status}
			// An unusable URL stays unusable until someone changes the
			// setting: not retried.
			retryable := (perr != nil && !errors.Is(perr, webhook.ErrURL)) || status/100 == 5 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
			f.ErrorCode, f.ErrorArgs = n.failureCode(perr, status, retryable)
			switch {
			case perr != nil:
				f.Error = perr.Error()
			case status/100 == 3:
				f.Error = fmt.Sprintf("HTTP %d: redirect not followed", status)
			default:
				f.Error = fmt.Sprintf("HTTP %d", status)
			}
			f.Final = !retryable || attempt >= n.cfg.Attempts
			if !f.Final {
				f.RetryAt = meta.Time.Add(n.backoff(attempt))
			}
			out = f
			log.WarnContext(ctx, "notification not delivered", "status", status, "err", f.Error, "attempt", attempt, "final", f.Final)
		}
		// The outcome is recorded even when shutdown cut the POST short, so
		// the log does not claim an attempt is still open.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, err = n.store.Append(actx, events.NotifyStream(d.jobID), after, events.New(out, meta))
		cancel()
		if err != nil {
			log.WarnContext(ctx, "notification: cannot record the outcome (the attempt is retried after its deadline)", "err", err)
			continue
		}
		if f, failed := out.(events.NotificationFailed); !failed || f.Final {
			return true // settled, even if ctx ended meanwhile
		}
	}
	return false
}

// failureCode is a failed attempt's code (events.FailureWebhook*) and its
// parts, which the dashboard words in the reader's language; the status
// is NotificationFailed.Status.
func (n *Notifier) failureCode(perr error, status int, retryable bool) (string, map[string]string) {
	var te *webhook.TransportError
	switch {
	case errors.Is(perr, webhook.ErrURL):
		return events.FailureWebhookURL, nil
	case errors.As(perr, &te) && te.Timeout:
		return events.FailureWebhookTimeout, map[string]string{"bound": n.timeout.String()}
	case perr != nil:
		return events.FailureWebhookNoAnswer, nil
	case status/100 == 3:
		return events.FailureWebhookRedirect, nil
	case retryable:
		return events.FailureWebhookReceiver, nil
	}
	return events.FailureWebhookRefused, nil
}

// backoff is the wait after the attempt-th failure.
func (n *Notifier) backoff(attempt int) time.Duration {
	return retry.Backoff{Initial: n.cfg.RetryInitial, Max: n.cfg.RetryMax}.Delay(attempt)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func decodeOutcome(ev events.RecordedEvent) outcome {
	p, _ := events.Decode(ev)
	switch e := p.(type) {
	case events.JobSucceeded:
		return outcome{Outcome: events.StatusSucceeded}
	case events.JobFailed:
		return outcome{Outcome: events.StatusFailed, Reason: e.Reason, FailedStep: e.FailedStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobTimedOut:
		return outcome{Outcome: events.StatusTimedOut, Reason: "the " + e.Deadline + " deadline passed", UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobCancelled:
		return outcome{Outcome: events.StatusCancelled, Reason: "cancelled by " + e.By, UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobAbandoned:
		return outcome{Outcome: events.StatusAbandoned, Reason: "worker " + e.Worker + " stopped renewing its lease", UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	}
	return outcome{Outcome: "unknown"}
}

// message renders the Slack text: outcome, link, and on failure what was
// done, what is uncertain and what remains.
func (n *Notifier) message(jobID string, q events.JobQueued, o outcome) Message {
	link := strings.TrimRight(n.cfg.BaseURL, "/") + "/jobs/" + jobID
	kind, slot := q.Kind, q.Slot
	if kind == "" {
		kind = "job"
	}
	var b strings.Builder
	if o.Outcome == events.StatusSucceeded {
		fmt.Fprintf(&b, "%s of slot %s succeeded.", kind, slot)
	} else {
		fmt.Fprintf(&b, "%s of slot %s %s", kind, slot, strings.ReplaceAll(o.Outcome, "_", " "))
		if o.FailedStep != "" {
			fmt.Fprintf(&b, " at step %s", o.FailedStep)
		}
		if o.Reason != "" {
			fmt.Fprintf(&b, ": %s", o.Reason)
		}
		b.WriteString(".")
		fmt.Fprintf(&b, "\nCompleted steps: %s.", listOrNone(o.CompletedSteps))
		if o.UncertainStep != "" {
			fmt.Fprintf(&b, "\nUncertain step: %s (a resume verifies it first).", o.UncertainStep)
		}
		var rem []string
		for _, r := range o.Remaining {
			s := r.Kind + " " + r.ID
			if r.Name != "" {
				s += " (" + r.Name + ")"
			}
			rem = append(rem, s)
		}
		fmt.Fprintf(&b, "\nRemaining resources: %s.", listOrNone(rem))
	}
	body := b.String()
	return Message{
		Text: body + "\n" + link,
		Blocks: []Block{
			{Type: "section", Text: &TextObj{Type: "mrkdwn", Text: body}},
			{Type: "context", Elem: []TextObj{{Type: "mrkdwn", Text: "<" + link + "|Open job " + jobID + ">"}}},
		},
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// post sends one attempt of d. The error never holds the webhook URL.
func (n *Notifier) post(ctx context.Context, d delivery, attempt int) (int, error) {
	msg := d.msg
	msg.DeliveryID, msg.Attempt = d.id, attempt
	body, _ := json.Marshal(msg)
	return n.hook.Post(ctx, body, http.Header{HeaderDelivery: {d.id}, HeaderAttempt: {strconv.Itoa(attempt)}})
}
