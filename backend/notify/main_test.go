package notify_test

import (
	"testing"

	"go.uber.org/goleak"
)

// No test may leave a goroutine behind (schedulers, subscriptions, sends).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
