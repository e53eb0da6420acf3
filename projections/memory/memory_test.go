package memory_test

import (
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/projections"
	"github.com/slotkeeper/slotkeeper/projections/memory"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

func TestConformance(t *testing.T) {
	projtest.Run(t,
		func(t *testing.T, log events.Store) projections.Target { return memory.New(log) },
		func(log events.Store) projections.Target { return memory.New(log) })
}
