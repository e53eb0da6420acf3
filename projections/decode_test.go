package projections_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/memstore"
	"github.com/slotkeeper/slotkeeper/projections/projtest"
)

// events.Decode (a faster decoder, see events/catalogue.go) gives exactly
// what encoding/json gives for every event of a generated history, of every
// type the generator writes.
func TestDecodeAgreesWithEncodingJSON(t *testing.T) {
	ctx := projtest.Ctx(t)
	log := memstore.New()
	projtest.Must(t, projtest.NewGen(log, 11).Random(ctx, 6, 3000))
	head, err := log.Head(ctx)
	projtest.Must(t, err)
	types := map[string]bool{}
	subCtx, stop := context.WithCancel(ctx)
	defer stop()
	_ = log.SubscribeAll(subCtx, 0, events.Filter{}, func(_ context.Context, ev events.RecordedEvent) error {
		defer func() {
			if ev.Position >= head {
				stop()
			}
		}()
		p, err := events.Decode(ev)
		if err != nil {
			t.Errorf("%s at %d: %v", ev.Type, ev.Position, err)
			return nil
		}
		if _, unknown := p.(events.Unknown); unknown {
			return nil
		}
		want := reflect.New(reflect.TypeOf(p))
		if err := json.Unmarshal(ev.Data, want.Interface()); err != nil {
			t.Errorf("%s at %d: encoding/json: %v", ev.Type, ev.Position, err)
			return nil
		}
		if !reflect.DeepEqual(p, want.Elem().Interface()) {
			t.Errorf("%s at %d: Decode %+v, encoding/json %+v", ev.Type, ev.Position, p, want.Elem().Interface())
		}
		types[ev.Type] = true
		return nil
	})
	if len(types) < 15 {
		t.Fatalf("the history had only %d event types: %v", len(types), types)
	}
}
