package jobs_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/slotkeeper/slotkeeper/backend/notify"
	"github.com/slotkeeper/slotkeeper/backend/providers/sim"
	"github.com/slotkeeper/slotkeeper/events"
)

// TestFailureIsNotifiedFromTheLog: a teardown fails at delete_repo (403);
// the notifier, following the log, posts one message that links to the job
// and lists the completed steps and the remaining resources.
func TestFailureIsNotifiedFromTheLog(t *testing.T) {
	t.Parallel()
	got := make(chan notify.Message, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m notify.Message
		if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
			t.Errorf("webhook body: %v", err)
		}
		got <- m
	}))
	defer hook.Close()
	w := newWorld(t, nil)
	w.startEngine(w.engineConfig())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := notify.New(w.store, notify.Config{WebhookURL: hook.URL, BaseURL: "http://slots.test", Logger: testLogger()})
	go n.Run(ctx)
	fx := w.seed("doomed")
	w.sim.AddFault(sim.Fault{Endpoint: sim.EndpointDeleteRepo, Status: 403})
	res, err := w.svc.Teardown(ctx, bob, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	j := w.waitEnded(res.JobID)
	assertEq(t, "status", j.Status, events.StatusFailed)
	var m notify.Message
	select {
	case m = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	for _, want := range []string{
		"teardown of slot doomed failed at step delete_repo",
		"Completed steps: delete_db, delete_app.",
		"repository " + fx.Repo.Project + "/" + fx.Repo.Slug,
		"project " + fx.ProjectUUID,
		"http://slots.test/jobs/" + res.JobID,
	} {
		if !strings.Contains(m.Text, want) {
			t.Errorf("message lacks %q:\n%s", want, m.Text)
		}
	}
}
