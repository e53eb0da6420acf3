package events

// SettingsStream holds the settings that decide what a command may do
// (which projects a slot may name, the release grace, the demo): every
// process sharing a store must decide alike, so the first process records
// them and the others compare theirs with the newest record
// (backend/cmd/slotkeeper/settings.go, docs/server.md "Shared settings").
const SettingsStream = "slotkeeper-settings"

// SettingsRecorded is the shared settings as one process started with
// them: flag name → value in a canonical form (lists sorted, durations as
// Go prints them), so that equal settings compare equal as strings.
type SettingsRecorded struct {
	Settings map[string]string `json:"settings"`
}

func (SettingsRecorded) EventType() string { return "SettingsRecorded" }

func init() {
	constructors["SettingsRecorded"] = decodeAs[SettingsRecorded]
}
