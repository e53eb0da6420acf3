package events

// CheckpointStreamPrefix starts the stream where a consumer of the log
// records how far it got: "checkpoint-<consumer>" (backend/checkpoint).
const CheckpointStreamPrefix = "checkpoint-"

// CheckpointStream names the checkpoint stream of a consumer.
func CheckpointStream(consumer string) string { return CheckpointStreamPrefix + consumer }

// ConsumerCheckpointed records that a consumer of the log (the deadline
// scheduler, the notifier) has dealt with every event up to Position, with
// the small state it needs to go on from there (JSON, the consumer's own
// shape; Version says which). A consumer starts from its newest checkpoint
// instead of from the beginning of the log. Checkpoints are a cache of what
// the log says: a consumer that cannot use one (a newer format, a position
// past the log's head) folds the log from the start as before.
type ConsumerCheckpointed struct {
	Consumer string   `json:"consumer"`
	Position Position `json:"position"`
	Version  int      `json:"version"`
	State    string   `json:"state,omitempty"`
}

func (ConsumerCheckpointed) EventType() string { return "ConsumerCheckpointed" }

func init() {
	constructors["ConsumerCheckpointed"] = decodeAs[ConsumerCheckpointed]
}
