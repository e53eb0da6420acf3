package projections

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
	"github.com/slotkeeper/slotkeeper/events/english"
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
	_, a.Args, a.Summary = AuditLine(p)
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

// auditLine is an event's audit sentence as data: the English table's
// code is "audit.ev.<type>" (events/english; the dashboard's key too), an
// English variant of it when one says more, and the values it names. args go on the wire
// (AuditEntry.Args: names and ids as written, times as RFC 3339,
// durations in seconds, flags as "true", never a secret), from which the
// dashboard words the line by the event's type; local values only the
// English names (ids the entry carries already, the job page's English
// detail of a step).
type auditLine struct {
	variant     string
	args, local []string // name, value pairs
}

// say is a line naming kv (name, value pairs) on the wire.
func say(kv ...string) auditLine { return auditLine{args: kv} }

// also adds values only the English line names.
func (l auditLine) also(kv ...string) auditLine { l.local = append(l.local, kv...); return l }

// as picks the English variant v when cond holds.
func (l auditLine) as(cond bool, v string) auditLine {
	if cond {
		l.variant = v
	}
	return l
}

// auditLines is the one declaration of every event type's audit line, by
// type; a step result (events.StepResultOf) without one of its own is
// "audit.ev.step_done". TestEveryEventTypeHasAnAuditLine holds every type to
// an entry with English.
var auditLines = declare(
	on(func(e events.SlotRegistered) auditLine { return say("repo", e.Repo.String()).also("slot", e.Slot) }),
	on(func(e events.SlotDatabaseChanged) auditLine {
		return say().also("db", e.DBUUID, "job", e.JobID, "previous", e.Previous)
	}),
	on(func(e events.SlotClaimed) auditLine { return say("repo", e.Repo.String()).also("slot", e.Slot) }),
	on(func(e events.SlotOccupied) auditLine { return say("by", e.By, "until", stamp(e.Until)) }),
	on(func(e events.OccupancyExtended) auditLine {
		return say("by", e.By, "until", stamp(e.Until)).as(e.Earlier, "earlier")
	}),
	on(func(e events.JobAccepted) auditLine {
		return say("kind", e.Kind, "resumed", flag(e.Resumed)).also("job", e.JobID).as(e.Resumed, "resumed")
	}),
	on(func(e events.JobReleased) auditLine { return say("outcome", e.Outcome).also("job", e.JobID) }),
	on(func(events.SlotVacated) auditLine { return say() }),
	on(func(e events.TeardownIncomplete) auditLine { return say("count", strconv.Itoa(len(e.Remaining))) }),
	on(func(events.SlotRetired) auditLine { return say() }),
	on(func(e events.SlotPromoted) auditLine { return say("repo", e.NewRepo.String()) }),
	on(func(e events.JobQueued) auditLine { return say("kind", e.Kind, "by", e.RequestedBy) }),
	on(func(e events.JobClaimed) auditLine {
		return say("attempt", strconv.Itoa(e.Attempt), "worker", e.Worker)
	}),
	on(func(e events.LeaseRenewed) auditLine { return say("attempt", strconv.Itoa(e.Attempt)) }),
	on(func(e events.StepStarted) auditLine {
		return say("step", e.Step, "verify", flag(e.Verify)).as(e.Verify, "verify")
	}),
	on(func(e events.ResourcesListed) auditLine {
		return say("step", e.Step, "count", strconv.Itoa(len(e.Resources))).also("detail", listedDetail(e.Resources))
	}),
	on(func(e events.DeleteAccepted) auditLine {
		return say("step", e.Step, "resource_kind", e.Resource.Kind, "resource_id", e.Resource.ID)
	}),
	on(func(e events.DeploymentStarted) auditLine {
		return say("step", e.Step, "id", e.DeploymentUUID).also("app", e.AppUUID, "how", e.How)
	}),
	// A known phase has its own English (the English table's variants).
	on(func(e events.WaitPhase) auditLine {
		return say("step", e.Step, "state", e.Phase, "count", strconv.Itoa(e.Ahead)).also("coolify", e.Status).as(true, e.Phase)
	}),
	on(func(e events.StepFailed) auditLine {
		return say(append([]string{"step", e.Step, "status", status(e.HTTPStatus), "uncertain", flag(e.Uncertain), "error", e.Error},
			failure(e.ErrorCode, e.ErrorArgs)...)...)
	}),
	on(func(e events.JobTimedOut) auditLine {
		return say("attempt", strconv.Itoa(e.Attempt), "deadline", e.Deadline)
	}),
	on(func(e events.JobCancelled) auditLine { return say("by", e.By) }),
	on(func(e events.JobAbandoned) auditLine {
		return say("attempt", strconv.Itoa(e.Attempt), "worker", e.Worker)
	}),
	on(func(events.JobSucceeded) auditLine { return say() }),
	on(func(e events.JobFailed) auditLine {
		return say(append([]string{"reason", e.Reason}, failure(e.ReasonCode, e.ReasonArgs)...)...)
	}),
	on(func(e events.JobResumed) auditLine { return say("by", e.By, "step", e.FromStep) }),
	on(func(e events.NotificationSent) auditLine {
		return say("outcome", e.Outcome, "status", status(e.Status))
	}),
	on(func(e events.NotificationAttempted) auditLine {
		return say("attempt", strconv.Itoa(e.Attempt), "outcome", e.Outcome)
	}),
	on(func(e events.NotificationDelivered) auditLine {
		return say("attempt", strconv.Itoa(e.Attempt), "status", status(e.Status))
	}),
	on(func(e events.NotificationFailed) auditLine {
		return say(append([]string{"attempt", strconv.Itoa(e.Attempt), "status", status(e.Status), "error", e.Error, "final", flag(e.Final)},
			failure(e.ErrorCode, e.ErrorArgs)...)...).as(e.Final, "final")
	}),
	on(func(e events.ReconcileStarted) auditLine { return say("count", strconv.Itoa(len(e.Scope))) }),
	on(func(e events.ReconcileSnapshot) auditLine { return say("count", strconv.Itoa(len(e.Findings))) }),
	on(func(e events.ReconcileFinding) auditLine {
		return say(append([]string{"class", e.Class, "provider", e.Provider, "resource_kind", e.Kind, "resource_id", e.ID}, failure(e.ErrorCode, e.ErrorArgs)...)...)
	}),
	on(func(e events.ReconcileFinished) auditLine {
		return say(append([]string{"state", e.State, "error", e.Error}, failure(e.ErrorCode, e.ErrorArgs)...)...)
	}),
	on(func(e events.PRRepoLinked) auditLine { return say("repo", e.Repo.String(), "by", e.By) }),
	on(func(e events.PRRepoUnlinked) auditLine { return say("repo", e.Repo.String(), "by", e.By) }),
	on(func(e events.PRChanged) auditLine {
		return say("repo", e.PR.Repo.String(), "pr", strconv.FormatInt(e.PR.ID, 10), "state", e.PR.State, "head", e.PR.Head, "event_key", e.EventKey)
	}),
	on(func(e events.PRSlotTaken) auditLine { return say("slot", e.Slot) }),
	on(func(e events.PRWaiting) auditLine { return say().also("reason", e.Reason) }),
	on(func(e events.PRDeployQueued) auditLine { return say("slot", e.Slot, "job", e.JobID, "head", e.Head) }),
	on(func(e events.PRSlotReleased) auditLine {
		return say("slot", e.Slot, "job", e.JobID).as(e.Reason == events.CodePRSourceUnreadable, "source")
	}),
	on(func(e events.PRSourceRefused) auditLine {
		return say("source", e.Source.String(), "head", e.Head, "code", e.Code, "slot", e.Slot).also("reason", e.Reason)
	}),
	on(func(e events.PRCommentPosted) auditLine {
		return say("phase", e.Phase, "state", e.BuildState).also("comment", strconv.FormatInt(e.CommentID, 10))
	}),
	on(func(e events.PRReportFailed) auditLine {
		// Code is a Bitbucket error's (providers.Code): worded as a step's
		// provider failure is, from events written before and after.
		kv := []string{"phase", e.Phase, "call", e.Call, "code", e.Code}
		if e.Code != "" {
			kv = append(kv, failure(events.FailureProvider, map[string]string{"provider": "bitbucket", "problem": e.Code})...)
		}
		return say(kv...).also("reason", e.Reason)
	}),
	on(func(e events.WaitlistJoined) auditLine {
		return say("who", e.Who, "duration", strconv.FormatInt(e.DurationSeconds, 10))
	}),
	on(func(e events.WaitlistLeft) auditLine { return say("by", e.By, "reason", e.Reason) }),
	on(func(e events.WaitlistReordered) auditLine {
		return say("position", strconv.Itoa(e.Position+1), "by", e.By, "reason", e.Reason)
	}),
	on(func(e events.OfferMade) auditLine {
		return say("who", e.Who, "until", stamp(e.ExpiresAt)).also("slot", e.Slot)
	}),
	on(func(e events.OfferAccepted) auditLine { return say().also("slot", e.Slot) }),
	on(func(e events.OfferDeclined) auditLine { return say().also("slot", e.Slot) }),
	on(func(e events.OfferExpired) auditLine { return say().also("slot", e.Slot) }),
	on(func(e events.OfferWithdrawn) auditLine {
		return say("reason", e.Reason, "reason_code", e.ReasonCode, "lifecycle", e.Lifecycle).also("slot", e.Slot)
	}),
	on(func(e events.SlotHeld) auditLine { return say("who", e.For, "until", stamp(e.Until)) }),
	on(func(e events.SlotHoldReleased) auditLine { return say("reason", e.Reason, "reason_code", e.ReasonCode) }),
	on(func(e events.DeadlineWarning) auditLine {
		return say("who", e.Occupant, "until", stamp(e.Deadline), "duration", strconv.FormatInt(e.LeadSeconds, 10))
	}),
	on(func(e events.ConsumerCheckpointed) auditLine {
		return say("name", e.Consumer, "position", strconv.FormatUint(uint64(e.Position), 10))
	}),
	on(func(e events.StoreCreated) auditLine { return say("id", e.StoreID) }),
	on(func(events.SettingsRecorded) auditLine { return say() }),
	// Accounts and tokens (backend/auth): never a hash in a line.
	on(func(e events.UserCreated) auditLine { return say("name", e.Name, "role", e.Role, "source", e.Source) }),
	on(func(e events.UserRoleGranted) auditLine { return say("user", e.UserID, "role", e.Role) }),
	on(func(e events.PasswordChanged) auditLine { return say("user", e.UserID) }),
	on(func(e events.TokenIssued) auditLine {
		return say("name", e.Name, "role", e.Role, "until", stamp(e.ExpiresAt))
	}),
	on(func(e events.TokenRevoked) auditLine { return say("token", e.TokenID) }),
	on(func(e events.SessionStarted) auditLine {
		return say("user", e.UserID, "source", e.Method).also("session", e.SessionID)
	}),
	on(func(e events.SessionActive) auditLine { return say().also("session", e.SessionID) }),
	on(func(e events.SessionEnded) auditLine { return say("reason", e.Reason).also("session", e.SessionID) }),
)

// lineOf is one type's entry of auditLines: its code and its line.
type lineOf struct {
	typ, code string
	line      func(events.Payload) auditLine
}

// on declares the audit line of payload type P.
func on[P events.Payload](f func(P) auditLine) lineOf {
	var zero P
	typ := zero.EventType()
	return lineOf{typ, "audit.ev." + typ, func(p events.Payload) auditLine { return f(p.(P)) }}
}

func declare(ls ...lineOf) map[string]lineOf {
	m := make(map[string]lineOf, len(ls))
	for _, l := range ls {
		if m[l.typ].line != nil {
			panic("projections: two audit lines for " + l.typ)
		}
		m[l.typ] = l
	}
	return m
}

// AuditLine is an event's audit line: its code (the English table's and
// the dashboard's, without the English variant), its wire args (nil when
// the line names nothing beyond the entry's own slot, job and actor) and
// its English summary. An event type without a line (one from a newer
// server) is summed up by its name.
func AuditLine(p events.Payload) (code string, args map[string]string, summary string) {
	typ := p.EventType()
	if _, ok := p.(events.Unknown); ok {
		// A known type whose data did not decode (damaged, or a newer
		// schema): named, never read as the type it claims.
		return typ, nil, typ
	}
	var l auditLine
	if d, ok := auditLines[typ]; ok {
		code, l = d.code, d.line(p)
	} else if r, ok := events.StepResultOf(p); ok {
		code, l = "audit.ev.step_done", say("step", r.Step, "absent", flag(r.AlreadyAbsent)).also("detail", resultDetail(p, events.StepResult{}))
	} else {
		return typ, nil, typ
	}
	return code, pairs(l.args), english.SayPairs(english.Variant(code, l.variant), l.args, l.local)
}

// failure is a failure's code (events.Failure*) and its parts as audit
// args: "error_code" and each part under its own name (none is an audit
// arg of the failure's events otherwise), in name order. The dashboard
// words the failure from them; the English line names error or reason.
func failure(code string, args map[string]string) []string {
	if code == "" {
		return nil
	}
	kv := []string{"error_code", code}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		kv = append(kv, k, args[k])
	}
	return kv
}

// pairs builds a map from key, value pairs, leaving out empty values.
func pairs(kv []string) map[string]string {
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
