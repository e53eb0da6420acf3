package coolify

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/slotkeeper/slotkeeper/backend/providers"
)

// Minimum Coolify versions for what this client uses: the storages
// endpoints with storage uuids since v4.0.0-beta.470 (AC:4546-4575,
// migration 2026_03_23_101720_add_uuid_to_local_persistent_volumes_table),
// GET /projects/{uuid}/environments since v4.0.0-beta.420.7 (PC:541-560).
// Before them the catch-all 404 answers those paths.
const (
	MinVersion             = "4.0.0-beta.470"
	MinVersionEnvironments = "4.0.0-beta.420.7"
)

// Team is the team a token belongs to. Every Coolify lookup is filtered by
// it (Application::ownedByCurrentTeamAPI, app/Models/Application.php:480-483).
type Team struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// BaseURL is the API base the client sends to.
func (c *Client) BaseURL() string { return c.c.Base }

// Version returns the installed Coolify version (GET /version answers the
// bare version text, OtherController.php:47-50, routes/api.php:66). A 404
// here means the base URL is not Coolify's /api/v1: CodeForeign, with the
// fix in the message.
func (c *Client) Version(ctx context.Context) (string, error) {
	const op = "coolify.Version"
	h := c.on(msgNoneIsOwned)
	resp, perr := h.Do(ctx, op, "version", http.MethodGet, "/version", nil, nil, false)
	if perr != nil {
		return "", perr
	}
	if resp.Status != http.StatusOK {
		e := fail(h, op, "version", resp, false)
		if resp.Status == http.StatusNotFound {
			e.Message = BaseURLHint(h.Base) + "; " + e.Message
		}
		return "", e
	}
	v := strings.Trim(strings.TrimSpace(string(resp.Body)), `"`)
	if _, ok := parseVersion(v); !ok {
		return "", &providers.Error{Op: op, Resource: "version", Status: resp.Status, Code: providers.CodeForeign,
			Message: fmt.Sprintf("GET %s/version answered %q, not a Coolify version: %s", h.Base, trimBody(v), BaseURLHint(h.Base))}
	}
	return v, nil
}

// BaseURLHint says what a base URL should look like, naming the likely
// mistake. A URL ending in /api instead of /api/v1 reaches Coolify's
// catch-all (routes/api.php:431-433), which answers every path with a JSON
// 404 that looks like a resource's own.
func BaseURLHint(base string) string {
	b := strings.TrimRight(base, "/")
	switch {
	case strings.HasSuffix(b, "/api"):
		return "the Coolify URL " + b + " ends in /api; it must end in /api/v1 (" + b + "/v1)"
	case !strings.HasSuffix(b, "/api/v1"):
		return "the Coolify URL " + b + " does not end in /api/v1 (e.g. https://coolify.example/api/v1)"
	}
	return "the Coolify URL " + b + " does not answer as Coolify's API (a proxy in front of it, or not Coolify)"
}

// Team returns the token's team (GET /team, TeamController::current_team,
// routes/api.php:70; alias /teams/current).
func (c *Client) Team(ctx context.Context) (Team, error) {
	var t Team
	err := c.getJSON(ctx, "coolify.Team", "team", "/team", msgNoneIsOwned, &t)
	return t, err
}

// HasAbility tells whether the token has a Sanctum ability ("write" or
// "deploy") without changing anything: Coolify keeps GET routes behind
// those abilities that only answer 405 "This endpoint has changed to a POST
// request." (GET /enable behind api.ability:write, GET /deploy behind
// api.ability:deploy; routes/api.php:54, 144; OtherController.php:13-18).
// A missing ability is 403 "Missing required permissions: …"
// (ApiAbility.php:59-61). Any other answer is an error.
func (c *Client) HasAbility(ctx context.Context, ability string) (bool, error) {
	const op = "coolify.HasAbility"
	path := map[string]string{"write": "/enable", "deploy": "/deploy"}[ability]
	if path == "" {
		return false, &providers.Error{Op: op, Resource: ability, Code: providers.CodeInvalid, Message: "no read-only probe for this ability"}
	}
	h := c.on(msgNoneIsOwned)
	resp, perr := h.Do(ctx, op, ability, http.MethodGet, path, nil, nil, false)
	if perr != nil {
		return false, perr
	}
	switch {
	case resp.Status == http.StatusMethodNotAllowed:
		return true, nil
	case resp.Status == http.StatusForbidden && strings.HasPrefix(message(resp.Body), "Missing required permissions"):
		return false, nil
	}
	return false, fail(h, op, ability, resp, false)
}

// VersionAtLeast reports whether Coolify version v is min or later. A
// release is later than its betas ("4.0.0" > "4.0.0-beta.470"); beta
// numbers compare part by part ("beta.420.7" > "beta.420").
func VersionAtLeast(v, min string) (bool, error) {
	a, ok := parseVersion(v)
	if !ok {
		return false, fmt.Errorf("%q is not a Coolify version", v)
	}
	b, ok := parseVersion(min)
	if !ok {
		return false, fmt.Errorf("%q is not a Coolify version", min)
	}
	return compareVersions(a, b) >= 0, nil
}

// version is major.minor.patch, then the pre-release numbers (nil for a
// release).
type version struct {
	main [3]int
	pre  []int
}

func parseVersion(s string) (version, bool) {
	var v version
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	mainPart, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(mainPart, ".")
	if len(parts) != 3 {
		return v, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v.main[i] = n
	}
	if !hasPre {
		return v, true
	}
	tag, nums, _ := strings.Cut(pre, ".")
	if tag != "beta" && tag != "alpha" && tag != "rc" {
		return v, false
	}
	v.pre = []int{map[string]int{"alpha": 0, "beta": 1, "rc": 2}[tag]}
	for _, p := range strings.Split(nums, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return v, false
		}
		v.pre = append(v.pre, n)
	}
	return v, true
}

func compareVersions(a, b version) int {
	for i := range a.main {
		if a.main[i] != b.main[i] {
			return a.main[i] - b.main[i]
		}
	}
	switch {
	case a.pre == nil && b.pre == nil:
		return 0
	case a.pre == nil:
		return 1
	case b.pre == nil:
		return -1
	}
	for i := 0; i < len(a.pre) || i < len(b.pre); i++ {
		x, y := -1, -1
		if i < len(a.pre) {
			x = a.pre[i]
		}
		if i < len(b.pre) {
			y = b.pre[i]
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

func trimBody(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}
