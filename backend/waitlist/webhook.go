package waitlist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// Webhook posts deadline warnings to a Slack-compatible incoming webhook.
// It is the Service's OnWarning: the consumer calls it only after its own
// DeadlineWarning append won (the append is the claim), so across processes
// and restarts a warning is posted at most once. It stays apart from
// backend/notify on purpose (that package's delivery is being reworked);
// moving it there later only changes who calls Send.
type Webhook struct {
	URL     string
	BaseURL string // links: <BaseURL>/?extend=<slot>#/waitlist (the dashboard; wouter keeps a hash route's query in location.search)
	// ExtendBy is what the link's extend adds (shown in the message).
	ExtendBy time.Duration
	HTTP     *http.Client
	Logger   *slog.Logger
	// Attempts for 5xx/429/transport errors (default 3), 1 s apart.
	Attempts int
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
	client := h.HTTP
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	attempts := h.Attempts
	if attempts <= 0 {
		attempts = 3
	}
	body, _ := json.Marshal(h.Message(w))
	for i := 0; i < attempts; i++ {
		if i > 0 {
			t := time.NewTimer(time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
		if err != nil {
			log.Warn("waitlist: warning webhook", "err", err)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return
			}
			if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
				log.Warn("waitlist: warning webhook refused", "status", resp.StatusCode, "slot", w.Slot)
				return
			}
		}
		log.Warn("waitlist: warning webhook failed", "attempt", i+1, "err", err, "slot", w.Slot)
	}
}
