package events

import "time"

// ReconcileStream is the one stream of reconciliation runs: each run is a
// ReconcileStarted, its findings, and a ReconcileFinished. A run marked
// ChangesOnly records only what changed since the previous run (a finding
// that appeared or changed class, and "resolved" for one that went); now and
// then a run also records the whole current list (ReconcileSnapshot events,
// then a ReconcileFinished with Snapshot set), so reading the current list
// never has to go further back than the newest snapshot. Appending
// ReconcileStarted with the stream's expected revision makes a run
// exclusive across processes.
const ReconcileStream = "reconcile"

// Finding classes.
const (
	FindingOrphan   = "orphan"   // at the provider, tracked by no slot or promote
	FindingDrift    = "drift"    // tracked, but the provider says it is gone
	FindingUnknown  = "unknown"  // a list or lookup failed: could not check
	FindingResolved = "resolved" // a finding of the previous run that no longer holds
)

// Adopting an orphan (issue 15) is a job of kind KindAdopt on the slot that
// takes it in: lookup_resource checks the provider still holds it (a lookup
// that is only "absent" in the provider's own words fails the job), then
// adopt_resource records it as the slot's (ResourcesListed, fenced like
// every step), so the slot tracks it from then on.
//
// Deleting an orphan is a job of kind KindDeleteOrphan on the slot an
// operator charges it to: the same lookup and adopt (so that, while it is
// being deleted, the resource is tracked and can never be lost), then
// delete_resource, whose result (AppDeleted, DBDeleted, RepoDeleted,
// ProjectDeleted) is recorded only once the provider's own 404 confirms it.
const (
	KindAdopt          = "adopt"
	KindDeleteOrphan   = "delete_orphan"
	StepLookupResource = "lookup_resource"
	StepAdoptResource  = "adopt_resource"
	StepDeleteResource = "delete_resource"
)

// ReconcileStarted opens a run.
type ReconcileStarted struct {
	RunID string `json:"run_id"`
	// Scope lists what the run compares: "coolify:<project uuid>" and
	// "bitbucket:<project key>".
	Scope     []string  `json:"scope"`
	StartedAt time.Time `json:"started_at"`
	// ChangesOnly is set by runs that record only changes (issue 15). A run
	// without it (older logs) recorded every current finding.
	ChangesOnly bool `json:"changes_only,omitempty"`
}

// ReconcileFinding is one finding of a run.
type ReconcileFinding struct {
	RunID    string `json:"run_id"`
	Class    string `json:"class"`    // orphan | drift | unknown | resolved
	Provider string `json:"provider"` // coolify | bitbucket
	Kind     string `json:"kind"`     // project | application | database | repository
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	// Scope is the scope entry it was found under ("coolify:<uuid>").
	Scope string `json:"scope"`
	// Slot names the slot that tracks it (drift), if any.
	Slot string `json:"slot,omitempty"`
	// Detail says why (for unknown: what failed; for resolved: what it was).
	Detail string `json:"detail,omitempty"`
	// ErrorCode and ErrorArgs: an unknown finding's failure as a code
	// (FailureProvider, args provider, problem, status) when a provider
	// answered it, as StepFailed's; Detail is then the secondary detail.
	// Empty otherwise and in events written before the codes.
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
	// Since is when this finding was first seen (carried across runs).
	Since time.Time `json:"since"`
}

// ReconcileFinished closes a run.
type ReconcileFinished struct {
	RunID   string         `json:"run_id"`
	State   string         `json:"state"` // done | failed
	EndedAt time.Time      `json:"ended_at"`
	Counts  map[string]int `json:"counts"`
	Error   string         `json:"error,omitempty"`
	// ErrorCode (FailureReconcile*) and ErrorArgs are Error as a code and
	// its parts, as StepFailed's. Empty in events written before the codes.
	ErrorCode string            `json:"error_code,omitempty"`
	ErrorArgs map[string]string `json:"error_args,omitempty"`
	// Snapshot is true when the run recorded the whole current list in
	// ReconcileSnapshot events just before this one.
	Snapshot bool `json:"snapshot,omitempty"`
}

// ReconcileSnapshot is part of the whole current list of findings after a
// run (written in chunks; a list of thousands does not fit one event).
type ReconcileSnapshot struct {
	RunID    string             `json:"run_id"`
	Findings []ReconcileFinding `json:"findings"`
}

func (ReconcileStarted) EventType() string  { return "ReconcileStarted" }
func (ReconcileFinding) EventType() string  { return "ReconcileFinding" }
func (ReconcileFinished) EventType() string { return "ReconcileFinished" }
func (ReconcileSnapshot) EventType() string { return "ReconcileSnapshot" }

func init() {
	constructors["ReconcileStarted"] = decodeAs[ReconcileStarted]
	constructors["ReconcileFinding"] = decodeAs[ReconcileFinding]
	constructors["ReconcileFinished"] = decodeAs[ReconcileFinished]
	constructors["ReconcileSnapshot"] = decodeAs[ReconcileSnapshot]
}
