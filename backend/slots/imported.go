package slots

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/slotkeeper/slotkeeper/events"
)

// importedStreams are the streams with fixed names Slotkeeper writes; the
// others are slot-<name>, job-<id>, notify-<job id>, pr-<project>-<slug>-<id>
// and checkpoint-<consumer>.
var importedStreams = map[string]bool{
	events.AuthUsersStream: true, events.AuthTokensStream: true, events.AuthSessionsStream: true,
	events.WaitlistStream: true, events.IdentityStream: true, events.ReconcileStream: true,
	events.SettingsStream: true, events.SlotRegistryStream: true,
	events.PRReposStream: true,
}

// prStreamRe is a pull request's stream, events.PRStream: pr-, the
// project key (upper case), the repository slug, the PR's id.
var prStreamRe = regexp.MustCompile(`^pr-([A-Z][A-Z0-9_]{0,127})-([a-z0-9][a-z0-9._-]{0,127})-([0-9]{1,18})$`)

// consumerNameRe is a checkpoint stream's consumer name.
var consumerNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateImported checks an event an import would write (issue 33: an
// event of stream slot-../../etc imported, and the dashboard listed a slot
// "../../etc"): its stream is one Slotkeeper writes, named as the command
// side names it, and the payload's names and ids (slot, job_id, the
// provider ids, repositories, refs) pass the command side's rules; a slot
// or job stream's payload names that slot or job. The type and payload
// shape are events.Validate's.
func ValidateImported(stream, typ string, data []byte) error {
	var slot, job string
	switch {
	case importedStreams[stream]:
	case strings.HasPrefix(stream, events.SlotStreamPrefix):
		slot = strings.TrimPrefix(stream, events.SlotStreamPrefix)
		if err := ValidateSlotName(slot); err != nil {
			return fmt.Errorf("stream %q: %w", stream, err)
		}
	case strings.HasPrefix(stream, events.JobStreamPrefix), strings.HasPrefix(stream, events.NotifyStreamPrefix):
		_, job, _ = strings.Cut(stream, "-")
		if err := ValidateJobID(job); err != nil {
			return fmt.Errorf("stream %q: %w", stream, err)
		}
	case strings.HasPrefix(stream, events.PRStreamPrefix):
		if !prStreamRe.MatchString(stream) || strings.Contains(stream, "..") {
			return fmt.Errorf("stream %q: not a pull request's stream", stream)
		}
	case strings.HasPrefix(stream, events.CheckpointStreamPrefix):
		if c := strings.TrimPrefix(stream, events.CheckpointStreamPrefix); !consumerNameRe.MatchString(c) || strings.Contains(c, "..") {
			return fmt.Errorf("stream %q: not a consumer's checkpoint stream", stream)
		}
	default:
		return fmt.Errorf("stream %q is not one Slotkeeper writes", stream)
	}
	var p struct {
		Slot         *string         `json:"slot"`
		JobID        *string         `json:"job_id"`
		ProjectUUID  *string         `json:"project_uuid"`
		AppUUID      *string         `json:"app_uuid"`
		DBUUID       *string         `json:"db_uuid"`
		Repo         *events.RepoRef `json:"repo"`
		TemplateRepo *events.RepoRef `json:"template_repo"`
		TemplateRef  *string         `json:"template_ref"`
		Branch       *string         `json:"branch"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		// Not an object of these fields' types: events.Validate says
		// whether the type's payload decodes; nothing here to check.
		return nil
	}
	if p.Slot != nil && *p.Slot != "" {
		if err := ValidateSlotName(*p.Slot); err != nil {
			return fmt.Errorf("%s: slot %q: %w", typ, *p.Slot, err)
		}
		if slot != "" && *p.Slot != slot {
			return fmt.Errorf("%s: slot %q in stream %s", typ, *p.Slot, stream)
		}
	}
	if p.JobID != nil && *p.JobID != "" {
		if err := ValidateJobID(*p.JobID); err != nil {
			return fmt.Errorf("%s: job_id %q: %w", typ, *p.JobID, err)
		}
		if job != "" && *p.JobID != job {
			return fmt.Errorf("%s: job_id %q in stream %s", typ, *p.JobID, stream)
		}
	}
	for _, f := range []struct {
		n string
		v *string
	}{{"project_uuid", p.ProjectUUID}, {"app_uuid", p.AppUUID}, {"db_uuid", p.DBUUID}} {
		if f.v != nil && *f.v != "" {
			if err := validateProviderID(f.n, *f.v); err != nil {
				return fmt.Errorf("%s: %w", typ, err)
			}
		}
	}
	for _, f := range []struct {
		n string
		v *events.RepoRef
	}{{"repo", p.Repo}, {"template_repo", p.TemplateRepo}} {
		if f.v != nil && *f.v != (events.RepoRef{}) {
			if err := validateRepo(f.n, *f.v); err != nil {
				return fmt.Errorf("%s: %w", typ, err)
			}
		}
	}
	for _, f := range []struct {
		n string
		v *string
	}{{"template_ref", p.TemplateRef}, {"branch", p.Branch}} {
		if f.v != nil && *f.v != "" {
			if err := validateRef(f.n, *f.v); err != nil {
				return fmt.Errorf("%s: %w", typ, err)
			}
		}
	}
	return nil
}
