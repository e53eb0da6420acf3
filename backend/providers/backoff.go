package providers

import "time"

// Backoff bounds the polling that confirms an asynchronous delete (Coolify
// queues deletes, Bitbucket schedules them): wait Initial, doubling up to
// Max between checks, and give up after Total with CodeNotConfirmed.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Total   time.Duration
}
