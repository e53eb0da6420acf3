package consumer

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
)

// TestHealth: Park records and swallows an apply error (nil passes
// through), keeps the newest 100 while counting all; Stop makes Err name
// the consumer; a nil Health only logs.
func TestHealth(t *testing.T) {
	h := NewHealth(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := h.Park("c", events.RecordedEvent{Position: 1}, nil); err != nil || h.Report().ParkedTotal != 0 {
		t.Fatalf("a nil error parked something: %v %+v", err, h.Report())
	}
	for i := 1; i <= 150; i++ {
		if err := h.Park("c", events.RecordedEvent{Position: events.Position(i), Stream: "slot-x", Type: "T"}, errors.New("bad")); err != nil {
			t.Fatalf("Park returned %v, want nil (go on)", err)
		}
	}
	r := h.Report()
	if r.ParkedTotal != 150 || len(r.Parked) != 100 || r.Parked[0].Position != 51 || r.Parked[99].Position != 150 || r.Parked[0].Error != "bad" {
		t.Fatalf("report: total %d, %d kept, first %+v", r.ParkedTotal, len(r.Parked), r.Parked[0])
	}
	if h.Err() != nil {
		t.Fatal("parked events failed readiness")
	}
	h.Stop("waitlist", nil) // a normal end
	h.Stop("deadline scheduler", errors.New("subscription: boom"))
	if err := h.Err(); err == nil || !strings.Contains(err.Error(), "deadline scheduler stopped: subscription: boom") || strings.Contains(err.Error(), "waitlist") {
		t.Fatalf("Err = %v", err)
	}
	var none *Health
	if err := none.Park("c", events.RecordedEvent{}, errors.New("x")); err != nil || none.Err() != nil || none.Report().Parked == nil {
		t.Fatal("a nil Health is not usable")
	}
}
