package clock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/clock"
)

// TestExpireWhen: the context's deadline passes when expire is called
// (twice is harmless), not before, and it reports no deadline.
func TestExpireWhen(t *testing.T) {
	ctx, expire := clock.ExpireWhen(context.WithValue(context.Background(), struct{}{}, "v"))
	if _, ok := ctx.Deadline(); ok {
		t.Fatal("reports a deadline")
	}
	if ctx.Err() != nil || ctx.Value(struct{}{}) != "v" {
		t.Fatalf("before expire: err %v, value %v", ctx.Err(), ctx.Value(struct{}{}))
	}
	select {
	case <-ctx.Done():
		t.Fatal("done before expire")
	default:
	}
	expire()
	expire()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("err %v, want context.DeadlineExceeded", ctx.Err())
	}
}
