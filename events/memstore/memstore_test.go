package memstore_test

import (
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/events/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) events.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
