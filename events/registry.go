package events

// SlotRegistryStream is the one stream where registrations are decided
// (backend/slots, Register). A registration is first claimed here, appended
// with the stream's expected revision, so two processes sharing one store
// cannot both claim a resource; then the slot's own stream gets the
// SlotRegistered the claim carries. A claim whose SlotRegistered is
// missing (a crash between the two appends) is completed by the next
// Register of any process: the resources are never held by a slot that
// cannot come to exist.
const SlotRegistryStream = "registry-slots"

// SlotClaimed is a registration decided: every resource it names is the
// slot's from here on (until the slot is retired). Its payload is exactly
// the SlotRegistered to be appended to the slot's stream.
type SlotClaimed struct {
	SlotRegistered
}

func (SlotClaimed) EventType() string { return "SlotClaimed" }

func init() {
	constructors["SlotClaimed"] = decodeAs[SlotClaimed]
}
