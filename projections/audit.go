package projections

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// AuditOf is the audit entry of any event, known type or not. slot is the
// slot the event belongs to when the caller knows it (a job event's slot
// comes from the job's view); otherwise it is taken from the stream name or
// the payload.
func AuditOf(ev events.RecordedEvent, p events.Payload, slot string) AuditEntry {
	a := AuditEntry{
		Position: ev.Position, Stream: ev.Stream, Type: ev.Type, Slot: slot,
		Actor: ev.Meta.Actor, ActorID: ev.Meta.ActorID, ActorKind: ActorKind(ev.Meta),
		CorrelationID: ev.Meta.CorrelationID, Time: ev.Meta.Time, Plumbing: IsPlumbing(ev.Type, p),
	}
	switch {
	case strings.HasPrefix(ev.Stream, events.SlotStreamPrefix):
		a.Slot = ev.Stream[len(events.SlotStreamPrefix):]
	case strings.HasPrefix(ev.Stream, events.JobStreamPrefix):
		a.JobID = ev.Stream[len(events.JobStreamPrefix):]
	case strings.HasPrefix(ev.Stream, events.NotifyStreamPrefix):
		a.JobID = ev.Stream[len(events.NotifyStreamPrefix):]
	}
	if id := PayloadJobID(p); id != "" && a.JobID == "" {
		a.JobID = id
	}
	if a.Slot == "" {
		a.Slot = PayloadSlot(p)
	}
	a.Summary = summary(ev.Type, p)
	a.Args = AuditArgs(p)
	return a
}

// ActorKind says who an event's actor is: "user" or "token" (a subject,
// from its id), "system" or "worker" (the server's own, from the name), or
// "" for a name recorded without an id.
func ActorKind(m events.Metadata) string {
	for _, k := range []string{"user", "token"} {
		if strings.HasPrefix(m.ActorID, k+":") {
			return k
		}
	}
	for _, k := range []string{"system", "worker"} {
		if strings.HasPrefix(m.Actor, k+":") {
			return k
		}
	}
	return ""
}

// IsPlumbing reports whether an event records the machinery rather than a
// decision anyone made (issue 25/27: these flooded the audit): consumer
// checkpoints, readiness probes, a session's recorded activity and the
// loopback demo's sign-ins. They stay in the log; the audit lists them
// only when asked (?plumbing=true). A password or single sign-on sign-in,
// a sign-out and every account change are audit rows.
func IsPlumbing(typ string, p events.Payload) bool {
	switch e := p.(type) {
	case events.ConsumerCheckpointed, events.SessionActive:
		return true
	case events.SessionStarted:
		return e.Method == "demo"
	}
	return typ == "ReadinessProbe"
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

// PayloadSlot is the slot a payload names, "" if none.
func PayloadSlot(p events.Payload) string {
	switch e := p.(type) {
	case events.OfferMade:
		return e.Slot
	case events.OfferAccepted:
		return e.Slot
	case events.OfferDeclined:
		return e.Slot
	case events.OfferExpired:
		return e.Slot
	case events.OfferWithdrawn:
		return e.Slot
	case events.SlotRegistered:
		return e.Slot
	case events.SlotClaimed:
		return e.Slot
	case events.SlotOccupied:
		return e.Slot
	case events.OccupancyExtended:
		return e.Slot
	case events.JobAccepted:
		return e.Slot
	case events.JobReleased:
		return e.Slot
	case events.SlotVacated:
		return e.Slot
	case events.TeardownIncomplete:
		return e.Slot
	case events.SlotRetired:
		return e.Slot
	case events.SlotPromoted:
		return e.Slot
	case events.JobQueued:
		return e.Slot
	}
	return ""
}

// PayloadJobID is the job a slot event names (JobAccepted, JobReleased, …),
// "" if none. Projecting such an event reads that job's view.
func PayloadJobID(p events.Payload) string {
	switch e := p.(type) {
	case events.JobAccepted:
		return e.JobID
	case events.JobReleased:
		return e.JobID
	case events.SlotVacated:
		return e.JobID
	case events.TeardownIncomplete:
		return e.JobID
	case events.SlotRetired:
		return e.JobID
	case events.SlotPromoted:
		return e.JobID
	case events.SlotDatabaseChanged:
		return e.JobID
	}
	return ""
}

// summary is the one line an audit feed shows for an event.
func summary(typ string, p events.Payload) string {
	if r, ok := events.StepResultOf(p); ok {
		s := r.Step + " done"
		if r.AlreadyAbsent {
			s += " (already absent)"
		}
		if d := resultDetail(p, events.StepResult{}); d != "" {
			s += ": " + d
		}
		return s
	}
	switch e := p.(type) {
	case events.SlotRegistered:
		return fmt.Sprintf("registered slot %s (repo %s)", e.Slot, e.Repo)
	case events.SlotDatabaseChanged:
		return fmt.Sprintf("the slot's database is now %s (created by job %s, replacing %s)", e.DBUUID, e.JobID, e.Previous)
	case events.SlotClaimed:
		return fmt.Sprintf("claimed the resources of slot %s (repo %s)", e.Slot, e.Repo)
	case events.SlotOccupied:
		return fmt.Sprintf("occupied by %s until %s", e.By, e.Until.UTC().Format("2006-01-02 15:04 MST"))
	case events.OccupancyExtended:
		if e.Earlier {
			return fmt.Sprintf("deadline moved earlier by %s to %s", e.By, e.Until.UTC().Format("2006-01-02 15:04 MST"))
		}
		return fmt.Sprintf("extended by %s until %s", e.By, e.Until.UTC().Format("2006-01-02 15:04 MST"))
	case events.JobAccepted:
		if e.Resumed {
			return fmt.Sprintf("%s job %s accepted again (resume)", e.Kind, e.JobID)
		}
		return e.Kind + " job " + e.JobID + " accepted"
	case events.JobReleased:
		return "job " + e.JobID + " released: " + e.Outcome
	case events.SlotVacated:
		return "slot vacated"
	case events.TeardownIncomplete:
		return fmt.Sprintf("teardown incomplete: %d resource(s) remain", len(e.Remaining))
	case events.SlotRetired:
		return "slot retired"
	case events.SlotPromoted:
		return "promoted to " + e.NewRepo.String()
	case events.JobQueued:
		return e.Kind + " job queued by " + e.RequestedBy
	case events.JobClaimed:
		return "attempt " + strconv.Itoa(e.Attempt) + " claimed by " + e.Worker
	case events.LeaseRenewed:
		return "attempt " + strconv.Itoa(e.Attempt) + " lease renewed"
	case events.StepStarted:
		if e.Verify {
			return e.Step + " verifying"
		}
		return e.Step + " started"
	case events.ResourcesListed:
		return e.Step + ": " + listedDetail(e.Resources)
	case events.DeleteAccepted:
		return fmt.Sprintf("%s: delete of %s %s accepted, not confirmed yet", e.Step, e.Resource.Kind, e.Resource.ID)
	case events.DeploymentStarted:
		return fmt.Sprintf("%s: waiting for deployment %s of %s (%s)", e.Step, e.DeploymentUUID, e.AppUUID, e.How)
	case events.WaitPhase:
		return fmt.Sprintf("%s: %s", e.Step, WaitPhaseText(e.Phase, e.Ahead, e.Status))
	case events.StepFailed:
		s := e.Step + " failed"
		if e.HTTPStatus != 0 {
			s += " (HTTP " + strconv.Itoa(e.HTTPStatus) + ")"
		}
		if e.Uncertain {
			s += ", outcome uncertain"
		}
		return s + ": " + e.Error
	case events.JobTimedOut:
		return fmt.Sprintf("attempt %d timed out (%s deadline)", e.Attempt, e.Deadline)
	case events.JobCancelled:
		return "cancelled by " + e.By
	case events.JobAbandoned:
		return fmt.Sprintf("attempt %d abandoned: lease of %s expired", e.Attempt, e.Worker)
	case events.JobSucceeded:
		return "job succeeded"
	case events.JobFailed:
		return "job failed: " + e.Reason
	case events.JobResumed:
		return fmt.Sprintf("resumed by %s from %s", e.By, e.FromStep)
	case events.NotificationSent:
		return fmt.Sprintf("notified %s (HTTP %d)", e.Outcome, e.Status)
	case events.NotificationAttempted:
		return fmt.Sprintf("webhook attempt %d for %s", e.Attempt, e.Outcome)
	case events.NotificationDelivered:
		return fmt.Sprintf("webhook delivered on attempt %d (HTTP %d)", e.Attempt, e.Status)
	case events.ReconcileStarted:
		return fmt.Sprintf("reconcile run started over %d scope entries", len(e.Scope))
	case events.ReconcileSnapshot:
		return fmt.Sprintf("reconcile: %d standing findings recorded", len(e.Findings))
	case events.ReconcileFinding:
		return fmt.Sprintf("reconcile: %s %s %s %s", e.Class, e.Provider, e.Kind, e.ID)
	case events.ReconcileFinished:
		if e.Error != "" {
			return fmt.Sprintf("reconcile run %s: %s", e.State, e.Error)
		}
		return "reconcile run " + e.State
	case events.NotificationFailed:
		if e.Final {
			return fmt.Sprintf("webhook failed for good on attempt %d: %s", e.Attempt, e.Error)
		}
		return fmt.Sprintf("webhook attempt %d failed: %s", e.Attempt, e.Error)
	case events.PRRepoLinked:
		return "linked " + e.Repo.String() + ": its pull requests get slots"
	case events.PRRepoUnlinked:
		return "unlinked " + e.Repo.String()
	case events.PRChanged:
		return fmt.Sprintf("Bitbucket: pull request %s#%d %s at %s (%s)", e.PR.Repo, e.PR.ID, strings.ToLower(e.PR.State), short(e.PR.Head), e.EventKey)
	case events.PRSlotTaken:
		return "the pull request occupies " + e.Slot
	case events.PRWaiting:
		return "the pull request waits for a slot: " + e.Reason
	case events.PRDeployQueued:
		return fmt.Sprintf("deploy of %s queued on %s", short(e.Head), e.Slot)
	case events.PRSlotReleased:
		return "the pull request closed; " + e.Slot + " released"
	case events.PRCommentPosted:
		return fmt.Sprintf("comment %d posted on the pull request (%s)", e.CommentID, e.Phase)
	case events.WaitlistJoined:
		return fmt.Sprintf("%s joined the waitlist for %s", e.Who, time.Duration(e.DurationSeconds)*time.Second)
	case events.WaitlistLeft:
		return "left the waitlist" + reasonSuffix(e.Reason)
	case events.WaitlistReordered:
		return fmt.Sprintf("waitlist entry moved to %d by %s: %s", e.Position+1, e.By, e.Reason)
	case events.OfferMade:
		return fmt.Sprintf("%s offered to %s until %s", e.Slot, e.Who, e.ExpiresAt.Format(time.RFC3339))
	case events.OfferAccepted:
		return "offer of " + e.Slot + " accepted"
	case events.OfferDeclined:
		return "offer of " + e.Slot + " declined"
	case events.OfferExpired:
		return "offer of " + e.Slot + " expired"
	case events.OfferWithdrawn:
		return "offer of " + e.Slot + " withdrawn: " + e.Reason
	case events.SlotHeld:
		return fmt.Sprintf("held for %s until %s", e.For, e.Until.Format(time.RFC3339))
	case events.SlotHoldReleased:
		return "hold released: " + e.Reason
	case events.DeadlineWarning:
		return fmt.Sprintf("%s warned: deadline %s in %s", e.Occupant, e.Deadline.Format(time.RFC3339), time.Duration(e.LeadSeconds)*time.Second)
	case events.ConsumerCheckpointed:
		return fmt.Sprintf("%s checkpoint at position %d", e.Consumer, e.Position)
	case events.StoreCreated:
		return "event store identity " + e.StoreID + " written"
	case events.SettingsRecorded:
		return "shared settings recorded"
	// Accounts and tokens (backend/auth): never a hash in a summary.
	case events.UserCreated:
		return fmt.Sprintf("account %s created (%s, %s)", e.Name, e.Role, e.Source)
	case events.UserRoleGranted:
		return "account " + e.UserID + " granted role " + e.Role
	case events.PasswordChanged:
		return "password of account " + e.UserID + " changed"
	case events.TokenIssued:
		return fmt.Sprintf("API token %s issued (%s, expires %s)", e.Name, e.Role, e.ExpiresAt.UTC().Format("2006-01-02 15:04 MST"))
	case events.TokenRevoked:
		return "API token " + e.TokenID + " revoked"
	case events.SessionStarted:
		return fmt.Sprintf("session %s of account %s started (%s)", e.SessionID, e.UserID, e.Method)
	case events.SessionActive:
		return "session " + e.SessionID + " active"
	case events.SessionEnded:
		return "session " + e.SessionID + " ended: " + e.Reason
	}
	return typ
}

// AuditArgs are the parts of an event's summary as data, keyed by a fixed
// vocabulary the dashboard's translations use: names and ids as written,
// times as RFC 3339, durations in seconds, flags as "true". Secrets (hashes)
// never appear. nil when the summary has no parts beyond the entry's own
// slot, job and actor.
func AuditArgs(p events.Payload) map[string]string {
	if r, ok := events.StepResultOf(p); ok {
		return args("step", r.Step, "absent", flag(r.AlreadyAbsent))
	}
	switch e := p.(type) {
	case events.SlotRegistered:
		return args("repo", e.Repo.String())
	case events.SlotOccupied:
		return args("by", e.By, "until", stamp(e.Until))
	case events.OccupancyExtended:
		return args("by", e.By, "until", stamp(e.Until))
	case events.JobAccepted:
		return args("kind", e.Kind, "resumed", flag(e.Resumed))
	case events.JobReleased:
		return args("outcome", e.Outcome)
	case events.TeardownIncomplete:
		return args("count", strconv.Itoa(len(e.Remaining)))
	case events.SlotPromoted:
		return args("repo", e.NewRepo.String())
	case events.JobQueued:
		return args("kind", e.Kind, "by", e.RequestedBy)
	case events.JobClaimed:
		return args("attempt", strconv.Itoa(e.Attempt), "worker", e.Worker)
	case events.LeaseRenewed:
		return args("attempt", strconv.Itoa(e.Attempt))
	case events.StepStarted:
		return args("step", e.Step, "verify", flag(e.Verify))
	case events.ResourcesListed:
		return args("step", e.Step, "count", strconv.Itoa(len(e.Resources)))
	case events.DeleteAccepted:
		return args("step", e.Step, "resource_kind", e.Resource.Kind, "resource_id", e.Resource.ID)
	case events.DeploymentStarted:
		return args("step", e.Step, "id", e.DeploymentUUID)
	case events.WaitPhase:
		return args("step", e.Step, "state", e.Phase, "count", strconv.Itoa(e.Ahead))
	case events.StepFailed:
		return args("step", e.Step, "status", status(e.HTTPStatus), "uncertain", flag(e.Uncertain), "error", e.Error)
	case events.JobTimedOut:
		return args("attempt", strconv.Itoa(e.Attempt), "deadline", e.Deadline)
	case events.JobCancelled:
		return args("by", e.By)
	case events.JobAbandoned:
		return args("attempt", strconv.Itoa(e.Attempt), "worker", e.Worker)
	case events.JobFailed:
		return args("reason", e.Reason)
	case events.JobResumed:
		return args("by", e.By, "step", e.FromStep)
	case events.NotificationSent:
		return args("outcome", e.Outcome, "status", status(e.Status))
	case events.NotificationAttempted:
		return args("attempt", strconv.Itoa(e.Attempt), "outcome", e.Outcome)
	case events.NotificationDelivered:
		return args("attempt", strconv.Itoa(e.Attempt), "status", status(e.Status))
	case events.NotificationFailed:
		return args("attempt", strconv.Itoa(e.Attempt), "error", e.Error, "final", flag(e.Final))
	case events.ReconcileStarted:
		return args("count", strconv.Itoa(len(e.Scope)))
	case events.ReconcileSnapshot:
		return args("count", strconv.Itoa(len(e.Findings)))
	case events.ReconcileFinding:
		return args("class", e.Class, "provider", e.Provider, "resource_kind", e.Kind, "resource_id", e.ID)
	case events.ReconcileFinished:
		return args("state", e.State, "error", e.Error)
	case events.PRRepoLinked:
		return args("repo", e.Repo.String(), "by", e.By)
	case events.PRRepoUnlinked:
		return args("repo", e.Repo.String(), "by", e.By)
	case events.PRChanged:
		return args("repo", e.PR.Repo.String(), "pr", strconv.FormatInt(e.PR.ID, 10), "state", e.PR.State, "head", e.PR.Head, "event_key", e.EventKey)
	case events.PRSlotTaken:
		return args("slot", e.Slot)
	case events.PRDeployQueued:
		return args("slot", e.Slot, "job", e.JobID, "head", e.Head)
	case events.PRSlotReleased:
		return args("slot", e.Slot, "job", e.JobID)
	case events.PRCommentPosted:
		return args("phase", e.Phase, "state", e.BuildState)
	case events.WaitlistJoined:
		return args("who", e.Who, "duration", strconv.FormatInt(e.DurationSeconds, 10))
	case events.WaitlistLeft:
		return args("by", e.By, "reason", e.Reason)
	case events.WaitlistReordered:
		return args("position", strconv.Itoa(e.Position+1), "by", e.By, "reason", e.Reason)
	case events.OfferMade:
		return args("who", e.Who, "until", stamp(e.ExpiresAt))
	case events.OfferWithdrawn:
		return args("reason", e.Reason, "reason_code", e.ReasonCode, "lifecycle", e.Lifecycle)
	case events.SlotHeld:
		return args("who", e.For, "until", stamp(e.Until))
	case events.SlotHoldReleased:
		return args("reason", e.Reason, "reason_code", e.ReasonCode)
	case events.DeadlineWarning:
		return args("who", e.Occupant, "until", stamp(e.Deadline), "duration", strconv.FormatInt(e.LeadSeconds, 10))
	case events.UserCreated:
		return args("name", e.Name, "role", e.Role, "source", e.Source)
	case events.UserRoleGranted:
		return args("user", e.UserID, "role", e.Role)
	case events.PasswordChanged:
		return args("user", e.UserID)
	case events.TokenIssued:
		return args("name", e.Name, "role", e.Role, "until", stamp(e.ExpiresAt))
	case events.TokenRevoked:
		return args("token", e.TokenID)
	case events.SlotClaimed:
		return args("repo", e.Repo.String())
	case events.ConsumerCheckpointed:
		return args("name", e.Consumer, "position", strconv.FormatUint(uint64(e.Position), 10))
	case events.StoreCreated:
		return args("id", e.StoreID)
	case events.SessionStarted:
		return args("user", e.UserID, "source", e.Method)
	case events.SessionEnded:
		return args("reason", e.Reason)
	}
	return nil
}

// args builds a map from key, value pairs, leaving out empty values.
func args(kv ...string) map[string]string {
	m := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			m[kv[i]] = kv[i+1]
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

func flag(b bool) string {
	if b {
		return "true"
	}
	return ""
}

func status(code int) string {
	if code == 0 {
		return ""
	}
	return strconv.Itoa(code)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// WaitPhaseText is a wait's phase in English (issue 32): what the job page
// and the audit say while a step waits on the provider.
func WaitPhaseText(phase string, ahead int, status string) string {
	switch phase {
	case events.WaitQueued:
		return fmt.Sprintf("queued in Coolify behind %d other deployment(s)", ahead)
	case events.WaitBuilding:
		return "building in Coolify"
	case events.WaitStarting:
		return "deployment finished; waiting for the application to run (Coolify: " + status + ")"
	case events.WaitHealth:
		return "waiting for the application's health (Coolify: " + status + ")"
	case events.WaitDatabase:
		return "waiting for the new database to run (Coolify: " + status + ")"
	}
	return "waiting (" + phase + ")"
}
