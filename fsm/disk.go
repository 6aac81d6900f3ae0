package fsm

// DiskFSM is an FSM that keeps its state durable in a store of its own
// (a bbolt file, a directory of files), so that a start opens the state
// where it is instead of rebuilding it from a snapshot and the log, and
// the log's periodic snapshots need not copy it. The package documentation
// states the contract between it and the log.
//
// The log calls every method, DurableIndex included, from one goroutine,
// never two at once, except Persist, which may run concurrently with any
// of them (see Snapshot).
type DiskFSM interface {
	FSM
	// DurableIndex returns the index of the last entry whose effects are
	// durable in the FSM's store: 0 for an empty state, the index a
	// Restore carried after one. The log calls it once at start, before
	// any Apply, and after every Restore.
	DurableIndex() (uint64, error)
	// Sync makes the effects of every entry applied (or restored) so far
	// durable and returns the index of the last one. The log compacts its
	// log only behind an index Sync returned.
	Sync() (uint64, error)
}
