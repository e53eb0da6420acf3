package httpapi

import (
	"context"
	"io"
	"log/slog"

	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
)

// benchPipeline is what the server benchmarks stand on: an in-memory log,
// its read model fed by a running projections runner, and a hub following
// them, all stopped by ctx; the logger discards.
type benchPipeline struct {
	log    *slog.Logger
	store  *memstore.Store
	rm     *memory.Store
	runner *projections.Runner
	hub    *Hub
}

func newBenchPipeline(ctx context.Context) benchPipeline {
	p := benchPipeline{log: slog.New(slog.NewTextHandler(io.Discard, nil)), store: memstore.New()}
	p.rm = memory.New(p.store)
	p.runner = projections.NewRunner(p.store, p.rm, projections.RunnerOptions{})
	p.hub = NewHub(HubOptions{}, NewMetrics(), p.log)
	started := make(chan struct{})
	go func() { _ = p.hub.Follow(ctx, p.runner, p.rm, started) }()
	<-started
	go func() { _ = p.runner.Run(ctx) }()
	return p
}
