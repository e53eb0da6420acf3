package projections

// DiffSlot lets history_test.go's reference (the full fold, as SlotChanges
// was before issue 37) list changes the same way.
var DiffSlot = diffSlot
