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

// Message builds the warning's text and blocks.
func (h *Webhook) Message(w events.DeadlineWarning) WarningMessage {
	link := h.BaseURL + "/?extend=" + url.QueryEscape(w.Slot) + "#/waitlist"
	lead := (time.Duration(w.LeadSeconds) * time.Second).String()
	text := fmt.Sprintf("%s: slot %s resets in %s (deadline %s) — its database will be deleted. Extend by %s: %s",
		w.Occupant, w.Slot, lead, w.Deadline.UTC().Format(time.RFC3339), h.ExtendBy, link)
	return WarningMessage{Text: text, Blocks: []any{
		map[string]any{"type": "section", "text": map[string]any{"type": "mrkdwn",
			"text": fmt.Sprintf("*%s*, slot *%s* resets in *%s* (at %s). Its database will be deleted.", w.Occupant, w.Slot, lead, w.Deadline.UTC().Format(time.RFC3339))}},
		map[string]any{"type": "actions", "elements": []any{map[string]any{"type": "button",
			"text": map[string]any{"type": "plain_text", "text": "Extend by " + h.ExtendBy.String()}, "url": link}}},
	}}
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
	body, _ := json.Marshal(h.Message(w))
	clk := h.Clock
	if clk == nil {
		clk = clock.Real()
	}
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
