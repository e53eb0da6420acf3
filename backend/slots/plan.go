package slots

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/slotkeeper/slotkeeper/backend/apperr"
	"github.com/slotkeeper/slotkeeper/events"
)

// stepsForSlot is kind's plan for slot s, from the step table
// (events.Steps): a reset of a slot registered with a template brings it
// back to that template; one without keeps the old steps (and the slot is
// shown as not ready).
func stepsForSlot(s *SlotState, kind string) []string {
	return events.StepNames(kind, s.Reg.Template != nil)
}

// planResources is what a job of kind will act on: the plans of its steps'
// rows (events.PlanResources), so a step and its planned resource are
// declared once, together.
func planResources(s *SlotState, kind string) []events.Resource {
	return events.PlanResources(kind, s.Reg)
}

// Input rules. They are strict on purpose: every name ends up in a URL path,
// a git ref or a stream name.
var (
	slotNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	// Coolify uuids are short lowercase/alphanumeric ids (cuid2 or UUID).
	providerIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
	// Bitbucket project keys: a letter, then letters, digits or '_'.
	projectKeyRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,127}$`)
	// Repository slugs; promote names must be slugs so the lookup before
	// creation asks for the same repository the create makes.
	slugRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)
	refRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)
)

// dbEngines are the types Coolify's POST /databases/<engine> accepts
// (routes/api.php:295-302 at 379abb25).
var dbEngines = []string{"postgresql", "mysql", "mariadb", "mongodb", "redis", "clickhouse", "dragonfly", "keydb"}

var (
	envKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
	imageRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]{0,199}$`)
	// mountRe is Coolify's DIRECTORY_PATH_PATTERN (app/Support/ValidationPatterns.php:30).
	mountRe = regexp.MustCompile(`^/[a-zA-Z0-9._\-/~@+]{0,255}$`)
)

// validateTemplate checks a slot template (nil: none).
func validateTemplate(t *events.SlotTemplate) error {
	if t == nil {
		return nil
	}
	if t.DBEngine != "" && !slices.Contains(dbEngines, t.DBEngine) {
		return invalidField("template.db_engine", fmt.Sprintf("template.db_engine %q: one of %s, or empty for the same engine as the deleted database", t.DBEngine, strings.Join(dbEngines, ", ")))
	}
	if t.DBImage != "" && !imageRe.MatchString(t.DBImage) {
		return invalidField("template.db_image", fmt.Sprintf("template.db_image %q is not an image reference", t.DBImage))
	}
	if err := validateProviderID("template.server_uuid", t.ServerUUID); err != nil {
		return err
	}
	if t.EnvFromApp != "" {
		if err := validateProviderID("template.env_from_app", t.EnvFromApp); err != nil {
			return err
		}
	}
	if t.DBURLKey != "" && !envKeyRe.MatchString(t.DBURLKey) {
		return invalidField("template.db_url_key", fmt.Sprintf("template.db_url_key %q: letters, digits and '_', not starting with a digit", t.DBURLKey))
	}
	for _, m := range t.Volumes {
		if !mountRe.MatchString(m) || strings.Contains(m, "..") {
			return invalidField("template.volumes", fmt.Sprintf("template.volumes: %q is not an absolute mount path", m))
		}
	}
	if t.DeployTimeout < 0 || t.DeployTimeout > 86400 {
		return invalidField("template.deploy_timeout", fmt.Sprintf("template.deploy_timeout %d: seconds, 1 to 86400 (0 or absent: Coolify's own deployment timeout, 3600)", t.DeployTimeout))
	}
	if t.EnvironmentName != "" && !slugRe.MatchString(t.EnvironmentName) {
		return invalidField("template.environment_name", fmt.Sprintf("template.environment_name %q is not a Coolify environment name", t.EnvironmentName))
	}
	return nil
}

func invalid(format string, args ...any) *Error { return apperr.New(CodeInvalid, format, args...) }

// invalidField is invalid with details.field naming the offending field.
func invalidField(field, msg string) *Error { return apperr.InvalidField(field, msg) }

// badField is invalid naming the field in its reason only (these answers
// have never carried details.field).
func badField(field, format string, args ...any) *Error {
	return invalid(format, args...).Because(apperr.ReasonInvalidField, "field", field)
}

// ValidateSlotName checks a slot name against ^[a-z0-9][a-z0-9-]{0,62}$.
func ValidateSlotName(name string) error {
	if !slotNameRe.MatchString(name) {
		return invalid("slot name %q: use 1-63 characters a-z, 0-9 and '-', starting with a letter or digit", name)
	}
	return nil
}

// ValidateJobID checks a job id (a UUID as the service makes them).
func ValidateJobID(id string) error {
	if !providerIDRe.MatchString(id) {
		return invalid("job id %q is not a valid id", id)
	}
	return nil
}

func validateProviderID(field, v string) error {
	if !providerIDRe.MatchString(v) {
		return badField(field, "%s %q: use 1-64 characters A-Z, a-z, 0-9 and '-'", field, v)
	}
	return nil
}

func validateRepo(field string, r events.RepoRef) error {
	if !projectKeyRe.MatchString(r.Project) {
		return badField(field+".project", "%s.project %q: a letter, then letters, digits or '_'", field, r.Project)
	}
	return validateSlug(field+".slug", r.Slug)
}

func validateSlug(field, s string) error {
	if !slugRe.MatchString(s) || strings.Contains(s, "..") {
		return badField(field, "%s %q: 1-128 characters a-z, 0-9, '.', '_', '-', starting with a letter or digit, no '..'", field, s)
	}
	return nil
}

func validateRef(field, ref string) error {
	if !refRe.MatchString(ref) || strings.Contains(ref, "..") || strings.Contains(ref, "//") ||
		strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".lock") || strings.HasSuffix(ref, ".") {
		return badField(field, "%s %q is not a valid git ref name", field, ref)
	}
	return nil
}

func validateActor(a Actor) error {
	if a.Name == "" || len(a.Name) > 100 {
		return invalid("actor name must be 1-100 characters")
	}
	for _, r := range a.Name {
		if unicode.IsControl(r) {
			return invalid("actor name contains a control character")
		}
	}
	return nil
}

func validatePerson(field, by string) error {
	if err := validateActor(Actor{Name: by}); err != nil {
		return badField(field, "%s must be 1-100 characters without control characters", field)
	}
	return nil
}

// validateUntil checks an occupancy deadline: in the future, and not further
// away than max.
func validateUntil(now, until time.Time, max time.Duration) *Error {
	if until.IsZero() {
		return apperr.Refuse(CodeInvalid, apperr.ReasonUntilRequired, "field", "until")
	}
	if !until.After(now) {
		return apperr.Refuse(CodeInvalid, apperr.ReasonUntilNotFuture, "field", "until", "until", rfc3339(until))
	}
	if max > 0 && until.Sub(now) > max {
		return apperr.Refuse(CodeInvalid, apperr.ReasonUntilTooFar, "field", "until", "until", rfc3339(until), "max", max.String())
	}
	return nil
}
