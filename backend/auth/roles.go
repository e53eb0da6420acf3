// Package auth is who may do what in Slotkeeper: local accounts and API
// tokens kept as events (secrets only as hashes), an in-memory index of them
// fed from the log, server-side sessions, sign-in rate limits, and the roles
// with their permissions. backend/httpapi holds the route policy table that
// names a permission for every route; this package says which role has it.
//
// It imports only events/ of ours.
package auth

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Role is a subject's place in viewer < member < operator < admin. Each role
// has every permission of the roles below it.
type Role int

// The roles, in order.
const (
	RoleNone Role = iota
	RoleViewer
	RoleMember
	RoleOperator
	RoleAdmin
)

var roleNames = map[Role]string{RoleViewer: "viewer", RoleMember: "member", RoleOperator: "operator", RoleAdmin: "admin"}

// Roles lists the roles lowest first.
func Roles() []Role { return []Role{RoleViewer, RoleMember, RoleOperator, RoleAdmin} }

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return "none"
}

// ParseRole reads a role name. Returns an error naming the valid ones.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == strings.TrimSpace(strings.ToLower(s)) {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("role %q: use viewer, member, operator or admin", s)
}

// MarshalJSON writes the role's name.
func (r Role) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

// UnmarshalJSON reads a role's name.
func (r *Role) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("role must be a string")
	}
	v, err := ParseRole(s)
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Permission names one thing a route needs. The names appear in 403
// answers ("missing permission slot.teardown").
type Permission string

// The permissions. Public needs no subject at all.
const (
	PermPublic Permission = "public"
	// PermSigned needs no subject either: the request carries its own
	// authentication, a signature the handler checks (Bitbucket's
	// webhook deliveries, X-Hub-Signature). No session or token is read.
	PermSigned Permission = "signed"
	// viewer
	PermRead Permission = "read" // every GET and the live stream
	// member: occupy a vacant slot for themself, extend and release their own
	PermOccupy  Permission = "slot.occupy"
	PermExtend  Permission = "slot.extend"
	PermRelease Permission = "slot.release"
	// PermWaitlist: join and leave the waitlist, accept or decline one's offer
	PermWaitlist Permission = "waitlist.join"
	// operator
	PermOccupyForOthers Permission = "slot.occupy_for_others"
	PermExtendAny       Permission = "slot.extend_any"
	PermReleaseAny      Permission = "slot.release_any" // a reason is required
	PermTeardown        Permission = "slot.teardown"
	PermPromote         Permission = "slot.promote"
	PermJobControl      Permission = "job.control" // cancel, resume
	PermReconcile       Permission = "reconcile.run"
	// PermReconcileAct: act on a finding (adopt an orphan into a slot).
	PermReconcileAct Permission = "reconcile.act"
	// admin
	PermRegister Permission = "slot.register"
	// PermSetBranch: name a slot's branch instead of the repository's
	// default one. Every reset force-pushes over that branch, so choosing
	// it is an admin's decision even if registering is ever opened to
	// lower roles (issue 16).
	PermSetBranch  Permission = "slot.branch"
	PermUsers      Permission = "admin.users"
	PermTokens     Permission = "admin.tokens"
	PermSimControl Permission = "sim.control"
	PermMetrics    Permission = "metrics"
	PermBackup     Permission = "admin.backup"
	// PermWaitlistManage: reorder the waitlist (with a reason), remove
	// anyone's entry
	PermWaitlistManage Permission = "waitlist.manage"
)

// minRole is the lowest role holding each permission.
var minRole = map[Permission]Role{
	PermRead:            RoleViewer,
	PermOccupy:          RoleMember,
	PermExtend:          RoleMember,
	PermRelease:         RoleMember,
	PermWaitlist:        RoleMember,
	PermOccupyForOthers: RoleOperator,
	PermExtendAny:       RoleOperator,
	PermReleaseAny:      RoleOperator,
	PermTeardown:        RoleOperator,
	PermPromote:         RoleOperator,
	PermJobControl:      RoleOperator,
	PermReconcile:       RoleOperator,
	PermReconcileAct:    RoleOperator,
	PermRegister:        RoleAdmin,
	PermSetBranch:       RoleAdmin,
	PermUsers:           RoleAdmin,
	PermTokens:          RoleAdmin,
	PermSimControl:      RoleAdmin,
	PermMetrics:         RoleAdmin,
	PermBackup:          RoleAdmin,
	PermWaitlistManage:  RoleAdmin,
}

// Known reports whether p is a permission of this package.
func Known(p Permission) bool {
	_, ok := minRole[p]
	return ok || p == PermPublic || p == PermSigned
}

// Has reports whether role r holds permission p. Unknown permissions are
// held by nobody.
func (r Role) Has(p Permission) bool {
	if p == PermPublic {
		return true
	}
	min, ok := minRole[p]
	return ok && r >= min
}

// MinRole returns the lowest role holding p (RoleNone for public or
// unknown permissions).
func MinRole(p Permission) Role { return minRole[p] }

// Subject is who an authenticated request comes from.
type Subject struct {
	// ID is stable: "user:<uuid>" for accounts, "token:<id>" for API tokens.
	ID   string `json:"id"`
	Name string `json:"name"`
	Role Role   `json:"role"`
}

// Kind says how the subject signed in (the part of ID before ':').
func (s Subject) Kind() string {
	k, _, _ := strings.Cut(s.ID, ":")
	return k
}
