package git_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves goroutines behind: hung
// handlers, timers of queued deletes or git waiters must all end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
