package pullrequests

import (
	"context"
	"net/http"

	"github.com/slotkeeper/slotkeeper/backend/webhook"
)

// DeliverSimulated takes a delivery the simulated Bitbucket answered
// (POST /api/sim/pull-requests and its merge, decline and push) as the real
// Bitbucket would send it: signed here, under the configured secret, and
// received like any other (Receive verifies the signature it was just
// given). The server offers it only while the simulators run (the
// Simulator page's "open a pull request"): the browser never holds the
// secret, and a server with real providers has no such route.
func (s *Service) DeliverSimulated(ctx context.Context, eventKey, requestID string, body []byte) (Outcome, error) {
	h := http.Header{}
	h.Set(HeaderEventKey, eventKey)
	h.Set(HeaderRequestID, requestID)
	if s.cfg.Secret != "" {
		h.Set(HeaderSignature, webhook.Sign(s.cfg.Secret, body))
	}
	return s.Receive(ctx, h, body)
}
