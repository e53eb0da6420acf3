package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/backend/waitlist"
	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
)

// failingWaitlist answers every command with err (and an empty queue).
type failingWaitlist struct{ err error }

func (f *failingWaitlist) Join(context.Context, slots.Actor, waitlist.JoinCmd) (string, events.Position, error) {
	return "", 0, f.err
}
func (f *failingWaitlist) Leave(context.Context, slots.Actor, string, bool) (events.Position, error) {
	return 0, f.err
}
func (f *failingWaitlist) Reorder(context.Context, slots.Actor, string, int, string) (events.Position, error) {
	return 0, f.err
}
func (f *failingWaitlist) Accept(context.Context, slots.Actor, string) (string, events.Position, error) {
	return "", 0, f.err
}
func (f *failingWaitlist) Decline(context.Context, slots.Actor, string) (events.Position, error) {
	return 0, f.err
}
func (f *failingWaitlist) View(context.Context) waitlist.View             { return waitlist.View{} }
func (f *failingWaitlist) Warnings() []events.DeadlineWarning             { return nil }
func (f *failingWaitlist) WaitFor(context.Context, events.Position) error { return nil }

// Every code a waitlist command can return reaches the client with the
// status statusOf gives it, its reason and args, through every waitlist
// route — also wrapped. (Each handler used to translate the waitlist's own
// error type by hand; one that forgot turned a 409 into a 500.)
func TestWaitlistErrorsThroughEveryRoute(t *testing.T) {
	wl := &failingWaitlist{}
	b := &bundle{store: memstore.New(), deps: func(d *Deps) { d.Waitlist = wl }}
	b.start(t, HubOptions{})
	entry := "/api/waitlist/4f9c3c1e-1111-4c3e-9c1e-111111111111"
	routes := []struct{ method, path, body string }{
		{"POST", "/api/waitlist", `{"duration":"1h"}`},
		{"DELETE", entry, ""},
		{"POST", entry + "/reorder", `{"position":1,"reason":"x"}`},
		{"POST", entry + "/accept", ""},
		{"POST", entry + "/decline", ""},
	}
	for code, status := range statusOf {
		for _, wrap := range []bool{false, true} {
			var err error = apperr.New(code, "refused as %s", code).Because(apperr.ReasonNoOpenOffer, "entry_id", "e1")
			if wrap {
				err = fmt.Errorf("waitlist: %w", err)
			}
			wl.err = err
			for _, r := range routes {
				var body any
				if r.body != "" {
					body = r.body
				}
				a := b.do(t, r.method, r.path, body)
				if a.status != status {
					t.Errorf("%s %s answering %s (wrapped %v): %d, want %d: %s", r.method, r.path, code, wrap, a.status, status, a.body)
					continue
				}
				e := a.apiError(t)
				want := errorPayload{Code: code, Reason: apperr.ReasonNoOpenOffer, Args: map[string]string{"entry_id": "e1"}, Message: "refused as " + string(code)}
				if !reflect.DeepEqual(e, want) {
					t.Errorf("%s %s answering %s: %+v, want %+v", r.method, r.path, code, e, want)
				}
			}
		}
	}
}

// The refusals the dashboard shows people carry a reason and its args
// (docs/api.md "Reasons") beside the unchanged English message.
func TestErrorReasons(t *testing.T) {
	b := setup(t, HubOptions{})
	b.register(t, "s1")
	b.register(t, "s2")
	b.occupy(t, "s2")
	b.register(t, "s3")
	b.occupy(t, "s3")
	a := b.do(t, http.MethodPost, "/api/slots/s3/release", nil)
	var queued slots.JobAcceptedResult
	a.decode(t, &queued)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		reason             apperr.Reason
		args               map[string]string
		message            string
	}{
		{"occupy occupied", "POST", "/api/slots/s2/occupy", map[string]any{"until": future}, 409,
			apperr.ReasonSlotOccupied, map[string]string{"slot": "s2", "occupant": "alice", "state": "occupied"}, "slot s2 is occupied"},
		{"occupy locked", "POST", "/api/slots/s3/occupy", map[string]any{"until": future}, 409,
			apperr.ReasonSlotLocked, map[string]string{"slot": "s3", "job": queued.JobID, "kind": "reset", "state": "resetting"}, "slot s3 is locked by reset job " + queued.JobID},
		{"extend vacant", "POST", "/api/slots/s1/extend", map[string]any{"until": future}, 409,
			apperr.ReasonSlotNotOccupied, map[string]string{"slot": "s1"}, "slot s1 is not occupied"},
		{"occupy unknown", "POST", "/api/slots/nope/occupy", map[string]any{"until": future}, 404,
			apperr.ReasonSlotNotFound, map[string]string{"slot": "nope"}, "slot nope is not registered"},
		{"register twice", "POST", "/api/slots", registerCmd("s1"), 409,
			apperr.ReasonSlotRegistered, map[string]string{"slot": "s1", "state": "vacant"}, "slot s1 is already registered"},
		{"register a taken app", "POST", "/api/slots", func() slots.RegisterCmd { c := registerCmd("s4"); c.AppUUID = "a-s1"; return c }(), 409,
			apperr.ReasonResourceOwned, map[string]string{"field": "app_uuid", "value": "a-s1", "owner": "s1"}, "app_uuid a-s1 is already the application of slot s1"},
		{"deadline unconfirmed", "POST", "/api/slots/s2/deadline", map[string]any{"deadline": future}, 400,
			apperr.ReasonConfirmEarlier, map[string]string{"field": "confirm_earlier"}, "confirm_earlier must be true to move a deadline earlier"},
		{"cancel unknown", "POST", "/api/jobs/4f9c3c1e-1111-4c3e-9c1e-111111111111/cancel", nil, 404,
			apperr.ReasonJobNotFound, map[string]string{"job": "4f9c3c1e-1111-4c3e-9c1e-111111111111"}, "job 4f9c3c1e-1111-4c3e-9c1e-111111111111 does not exist"},
		{"resume queued", "POST", "/api/jobs/" + queued.JobID + "/resume", nil, 409,
			apperr.ReasonJobNotResumable, map[string]string{"job": queued.JobID, "state": "queued"}, ""},
		{"waitlist off", "POST", "/api/waitlist", `{"duration":"1h"}`, 404,
			apperr.ReasonWaitlistOff, map[string]string{}, "the waitlist is not enabled on this server"},
		{"no reason of its own", "GET", "/api/nope", nil, 404, "not_found", map[string]string{}, "no such route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := b.do(t, tc.method, tc.path, tc.body)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			e := a.apiError(t)
			if e.Reason != tc.reason || !reflect.DeepEqual(e.Args, tc.args) {
				t.Fatalf("reason %q args %v, want %q %v: %s", e.Reason, e.Args, tc.reason, tc.args, a.body)
			}
			if tc.message != "" && e.Message != tc.message {
				t.Fatalf("message %q, want it unchanged: %q", e.Message, tc.message)
			}
		})
	}
}
