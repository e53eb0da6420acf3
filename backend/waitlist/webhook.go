package waitlist

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/clock"
	"github.com/slotkeeper/slotkeeper/backend/retry"
	"github.com/slotkeeper/slotkeeper/backend/webhook"
	"github.com/slotkeeper/slotkeeper/events"
)

// Webhook posts deadline warnings to a Slack-compatible incoming webhook.
// It is the Service's OnWarning: the consumer calls it only after its own
// DeadlineWarning append won (the append is the claim), so across processes
// and restarts a warning is posted at most once. The POST itself is
// backend/webhook's, the one sender of every webhook (signed, no redirect
// followed, the URL never in a log line).
type Webhook struct {
	URL string
	// Secret signs every body (X-Slotkeeper-Signature, as job-outcome
	// notifications are); empty: unsigned.
	Secret  string
	BaseURL string // links: <BaseURL>/?extend=<slot>#/waitlist (the dashboard; wouter keeps a hash route's query in location.search)
	// ExtendBy is what the link's extend adds (shown in the message).
	ExtendBy time.Duration
	HTTP     *http.Client // redirects are never followed, whatever it says
	Logger   *slog.Logger
	// Attempts for 5xx/429/transport errors (default 3), 1 s apart.
	Attempts int
	// Clock times the waits between attempts; nil is the wall clock.
	Clock clock.Clock
}

// WarningMessage is the Slack-compatible body.
type WarningMessage struct {
	Text   string `json:"text"`
	Blocks []any  `json:"blocks,omitempty"`
}

// Message builds the warning's text and blocks at now: the time left is
// the deadline's distance from now, not the warning's lead (issue 33: a
// slot occupied 25 minutes before its deadline was told "resets in
// 1h0m0s", the 60-minute lead it fell into).
func (h *Webhook) Message(w events.DeadlineWarning, now time.Time) WarningMessage {
	link := h.BaseURL + "/?extend=" + url.QueryEscape(w.Slot) + "#/waitlist"
	left := sayDuration(w.Deadline.Sub(now))
	text := fmt.Sprintf("%s: slot %s resets in %s (deadline %s) — its database will be deleted. Extend by %s: %s",
		w.Occupant, w.Slot, left, w.Deadline.UTC().Format(time.RFC3339), sayDuration(h.ExtendBy), link)
	return WarningMessage{Text: text, Blocks: []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn",
			"text": fmt.Sprintf("*%s*, slot *%s* resets in *%s* (at %s). Its database will be deleted.", w.Occupant, w.Slot, left, w.Deadline.UTC().Format(time.RFC3339))}},
		map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button",
			"text": map[string]any{"type": "plain_text", "text": "Extend by " + sayDuration(h.ExtendBy)}, "url": link}}},
	}}
}

// sayDuration says d for people, to the nearest minute: "25 min", "1 h 25
// min", "2 h", or "less than a minute".
func sayDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	if d < time.Minute {
		return "less than a minute"
	}
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return fmt.Sprintf("%d min", m)
	case m == 0:
		return fmt.Sprintf("%d h", h)
	}
	return fmt.Sprintf("%d h %d min", h, m)
}

// Send posts one warning (retrying transient failures a few times).
func (h *Webhook) Send(ctx context.Context, w events.DeadlineWarning) {
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	attempts := h.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	sender := webhook.New(h.URL, h.Secret, h.HTTP)
	clk := h.Clock
	if clk == nil {
		clk = clock.Real()
	}
	body, _ := json.Marshal(h.Message(w, clk.Now()))
	waits := retry.Constant(time.Second).Start(clk)
	for i := 0; i < attempts; i++ {
		if i > 0 && waits.Wait(ctx) != nil {
			return
		}
		status, err := sender.Post(ctx, body, nil)
		if err == nil {
			if status < 300 {
				return
			}
			if status < 500 && status != http.StatusTooManyRequests {
				// 3xx included: a redirect is not followed (it would
				// re-post the body elsewhere with the URL as Referer).
				log.Warn("waitlist: warning webhook refused", "status", status, "slot", w.Slot)
				return
			}
		}
		log.Warn("waitlist: warning webhook failed", "attempt", i+1, "status", status, "err", err, "slot", w.Slot)
	}
}
