package jobs

import (
	"time"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/events"
)

// SetIndexCheckpoints makes e's index write a checkpoint after every
// `every` events folded, at most one per gap (tests; call before Run).
func SetIndexCheckpoints(e *Engine, every int, gap time.Duration) {
	e.idx.setSave(consumer.SavePolicy{Every: every, Gap: gap})
}

// IndexStartedFrom is the position e's index subscribed after: its
// checkpoint's, or 0.
func IndexStartedFrom(e *Engine) events.Position {
	from, _, _ := e.idx.r.Started()
	return from
}

// ForgetCreatedURL drops what this process kept of database db's create
// answer, as another process (or a restart) would not have it.
func ForgetCreatedURL(db string) { createdURLs.Delete(db) }
