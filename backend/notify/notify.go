// Package notify posts a message to a webhook (Slack-compatible JSON) when a
// job ends. It is driven by terminal events read from the log — never by a
// job attempt — so a slow or failing webhook can never delay or change a job.
//
// Delivery is at most once per terminal event: before posting, the notifier
// appends NotificationSent to notify-<job id> with the expected revision that
// only the first notifier to get there can satisfy (NoStream for a job's
// first terminal event). A crash between that append and the POST loses the
// message; it never sends it twice, also with several processes running
// notifiers on one store. A resumed job that ends again gets one more
// message. See docs/jobs.md.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Config tunes a Notifier. Zero values pick the defaults noted.
type Config struct {
	// WebhookURL receives the POSTs. Empty disables the notifier.
	WebhookURL string
	// BaseURL is the dashboard's address; messages link to
	// <BaseURL>/jobs/<id>.
	BaseURL string
	// HTTP is the client; default one with a 10 s timeout per request.
	HTTP *http.Client
	// MaxAge skips terminal events older than this (a notifier that starts
	// on an old log does not flood the channel). Default 24 h.
	MaxAge time.Duration
	// Retry: first wait, longest wait and number of attempts for a failing
	// webhook (5xx, 429, transport errors). Defaults 1 s, 1 min, 8.
	RetryInitial time.Duration
	RetryMax     time.Duration
	Attempts     int
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Notifier follows the log and posts one message per terminal job event.
type Notifier struct {
	store events.Store
	cfg   Config
	log   *slog.Logger
	sends sync.WaitGroup
}

// New returns a notifier on store.
func New(store events.Store, cfg Config) *Notifier {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 10 * time.Second}
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Notifier{store: store, cfg: cfg, log: cfg.Logger}
}

var terminalTypes = []string{"JobSucceeded", "JobFailed", "JobTimedOut", "JobCancelled", "JobAbandoned"}

// Run follows terminal job events until ctx is done (returns nil) or the
// store fails. Sends in progress get until their retries end or ctx is done.
func (n *Notifier) Run(ctx context.Context) error {
	if n.cfg.WebhookURL == "" {
		<-ctx.Done()
		return nil
	}
	err := n.store.SubscribeAll(ctx, 0, events.Filter{StreamPrefixes: []string{events.JobStreamPrefix}, EventTypes: terminalTypes}, n.handle)
	n.sends.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Message is the webhook body: Slack's incoming-webhook shape.
type Message struct {
	Text   string  `json:"text"`
	Blocks []Block `json:"blocks,omitempty"`
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

func (n *Notifier) handle(ctx context.Context, ev events.RecordedEvent) error {
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
		case h.Type == "JobQueued":
			_ = json.Unmarshal(h.Data, &queued)
		case isTerminal(h.Type):
			k++
		}
	}
	o := decodeOutcome(ev)
	expected := events.NoStream()
	if k > 1 {
		expected = events.Exact(events.Revision(k - 2))
	}
	meta := events.Metadata{Actor: "system:notifier", CorrelationID: ev.Meta.CorrelationID, CausationID: ev.ID, Time: n.cfg.Now().UTC()}
	_, err = n.store.Append(ctx, events.NotifyStream(jobID), expected,
		events.New(events.NotificationSent{JobID: jobID, Outcome: o.Outcome}, meta))
	if errors.Is(err, events.ErrWrongRevision) {
		return nil // already notified (or being notified by another process)
	}
	if err != nil {
		return err
	}
	msg := n.message(jobID, queued, o)
	n.sends.Add(1)
	go func() {
		defer n.sends.Done()
		n.send(ctx, jobID, msg, ev.Meta.CorrelationID)
	}()
	return nil
}

func isTerminal(t string) bool {
	for _, x := range terminalTypes {
		if x == t {
			return true
		}
	}
	return false
}

func decodeOutcome(ev events.RecordedEvent) outcome {
	p, _ := events.Decode(ev)
	switch e := p.(type) {
	case events.JobSucceeded:
		return outcome{Outcome: "succeeded"}
	case events.JobFailed:
		return outcome{Outcome: "failed", Reason: e.Reason, FailedStep: e.FailedStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobTimedOut:
		return outcome{Outcome: "timed_out", Reason: "the " + e.Deadline + " deadline passed", UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobCancelled:
		return outcome{Outcome: "cancelled", Reason: "cancelled by " + e.By, UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
	case events.JobAbandoned:
		return outcome{Outcome: "abandoned", Reason: "worker " + e.Worker + " stopped renewing its lease", UncertainStep: e.UncertainStep, CompletedSteps: e.CompletedSteps, Remaining: e.Remaining}
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
	if o.Outcome == "succeeded" {
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

// send posts msg, retrying 5xx, 429 and transport errors with exponential
// backoff; other 4xx answers are final.
func (n *Notifier) send(ctx context.Context, jobID string, msg Message, corr string) {
	body, _ := json.Marshal(msg)
	wait := n.cfg.RetryInitial
	for attempt := 1; ; attempt++ {
		status, err := n.post(ctx, body)
		if err == nil && status/100 == 2 {
			n.log.InfoContext(ctx, "notification sent", "job", jobID, "status", status, "correlation_id", corr)
			return
		}
		final := err == nil && status/100 == 4 && status != http.StatusTooManyRequests
		if final || attempt >= n.cfg.Attempts || ctx.Err() != nil {
			n.log.WarnContext(ctx, "notification not delivered", "job", jobID, "status", status, "err", err, "attempts", attempt, "correlation_id", corr)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(wait*2, n.cfg.RetryMax)
	}
}

func (n *Notifier) post(ctx context.Context, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.cfg.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
