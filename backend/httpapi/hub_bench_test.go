package httpapi

import (
	"io"
	"log/slog"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
)

// BenchmarkHubPublishReplay is the hub's share of a cold start: the read
// model replays the log through the hub while nobody listens yet.
func BenchmarkHubPublishReplay(b *testing.B) {
	hub := NewHub(HubOptions{}, NewMetrics(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	hub.Seed(0, nil)
	j := projections.JobView{ID: "job-1", Kind: events.KindReset, State: projections.JobRunning}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ch := slotChange(events.Position(i+1), "s"+string(rune('a'+i%8)), 0)
		ch.Job = &j
		hub.Publish(ch)
	}
}
