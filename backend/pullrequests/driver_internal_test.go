package pullrequests

import (
	"context"
	"fmt"
	"testing"

	"github.com/slotkeeper/slotkeeper/backend/consumer"
	"github.com/slotkeeper/slotkeeper/backend/consumer/consumertest"
	"github.com/slotkeeper/slotkeeper/events"
)

// plainFold is the driver's fold without its Marker: consumertest checks
// the checkpointed state (any cut, a crash across the write, unusable
// checkpoints, bounded memory); what Mark holds back is the flow tests'
// (TestPRDriverRestartsFromItsCheckpoint, the crash cells of
// TestPRFaultMatrix), which sync what it holds.
type plainFold struct{ f *driverFold }

func (p plainFold) Name() string                        { return p.f.Name() }
func (p plainFold) Version() int                        { return p.f.Version() }
func (p plainFold) Wants(ev events.RecordedEvent) bool  { return p.f.Wants(ev) }
func (p plainFold) Apply(ev events.RecordedEvent) error { return p.f.Apply(ev) }
func (p plainFold) Snapshot() (any, error)              { return p.f.Snapshot() }
func (p plainFold) Restore(state []byte) error          { return p.f.Restore(state) }

// prHistory appends n pull requests' lives from prefix: opened, a slot
// taken (or, every third, waiting first), a pr_deploy job queued, started
// and ended, the slot's lock released; all but the last open ones closed
// and their slot released.
func prHistory(t testing.TB, store events.Store, prefix string, n, open int) {
	ctx := context.Background()
	add := func(stream string, meta events.Metadata, ps ...events.Payload) {
		t.Helper()
		var evs []events.EventData
		for _, p := range ps {
			evs = append(evs, events.New(p, meta))
		}
		if _, err := store.Append(ctx, stream, events.Any(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	repo := events.RepoRef{Project: "APPS", Slug: "shop"}
	for i := range n {
		id := int64(i + 1)
		stream := events.PRStream(events.RepoRef{Project: "APPS", Slug: prefix + "shop"}, id)
		slot, job := fmt.Sprintf("%s-s%d", prefix, i), fmt.Sprintf("%s-j%d", prefix, i)
		pr := events.PullRequest{Repo: repo, ID: id, State: events.PRStateOpen, Branch: "b", Head: fmt.Sprintf("%040x", i), Source: repo}
		add(stream, events.Metadata{}, events.PRChanged{RequestID: job, EventKey: "pr:opened", PR: pr})
		if i%3 == 0 {
			add(stream, events.Metadata{}, events.PRWaiting{Reason: "full"})
		}
		add(stream, events.Metadata{}, events.PRSlotTaken{Slot: slot})
		add(events.JobStream(job), events.Metadata{CorrelationID: stream},
			events.JobQueued{JobID: job, Kind: events.KindPRDeploy, Slot: slot},
			events.StepStarted{JobID: job, Step: events.StepPushPRHead, Attempt: 1},
			events.JobSucceeded{JobID: job, Attempt: 1})
		add(events.SlotStream(slot), events.Metadata{}, events.JobReleased{Slot: slot, JobID: job, Outcome: "succeeded"})
		add(stream, events.Metadata{}, events.PRDeployQueued{Slot: slot, JobID: job, Head: pr.Head})
		if i < n-open {
			pr.State = events.PRStateMerged
			add(stream, events.Metadata{}, events.PRChanged{RequestID: job + "-m", EventKey: "pr:merged", PR: pr}, events.PRSlotReleased{Slot: slot})
		}
	}
}

// TestDriverConsumer: the consumer runtime's properties hold for the
// driver's fold, and closed pull requests and ended jobs leave it.
func TestDriverConsumer(t *testing.T) {
	consumertest.Run(t, consumertest.Case{
		New: func(events.Store) consumer.Fold { f := &driverFold{}; f.reset(); return plainFold{f} },
		Log: func(t testing.TB, store events.Store) { prHistory(t, store, "l", 12, 2) },
		Grow: func(t testing.TB, store events.Store, rounds int) {
			for r := range rounds {
				prHistory(t, store, fmt.Sprintf("g%d", r), 3, 0)
			}
		},
		Size: func(f consumer.Fold) int {
			d := f.(plainFold).f
			return len(d.BySlot) + len(d.Waiting) + len(d.Jobs)
		},
	})
}
