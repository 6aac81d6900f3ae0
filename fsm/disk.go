package fsm

import "io"

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

// StagingFSM is a DiskFSM that takes a snapshot received from a leader
// into its own store, so that the receiver writes the state once: Stage
// writes the stream beside the current state, checked and durable but
// not in use (for a database file, a new file in the same directory),
// and InstallStaged makes it the state (for a file, a rename over the
// database). The log records the snapshot's metadata between the two, so
// that a start after a crash at any point finds the old state, or the
// old state and a staged one the log installs, or the new state (the
// package documentation states the order). A DiskFSM without it is sent
// its snapshots through the log's snapshot store and Restore.
//
// The log stages one snapshot at a time: Stage, then InstallStaged or
// DiscardStaged, never two of the three at once. InstallStaged runs on
// the Apply goroutine (or at start, before any Apply); Stage and
// DiscardStaged may run concurrently with Apply and the other methods.
type StagingFSM interface {
	DiskFSM
	// Stage discards what is staged, then reads r, a stream Persist
	// wrote, to its end (io.EOF: the snapshot stores and transports
	// verify digests there) and keeps the state it carries, which must be
	// that of the entries up to index, durably beside the current state.
	// When it returns nil, the staged state survives crashes until
	// InstallStaged or DiscardStaged; when it returns an error (a damaged
	// or truncated stream, one of another index, a failing reader),
	// nothing is staged. The current state is untouched either way.
	Stage(index uint64, r io.Reader) error
	// InstallStaged replaces the whole state with the one staged for
	// index, atomically and durably, as Restore does: when it returns nil
	// the store holds the staged state, DurableIndex reports index, and
	// nothing is staged any more; on an error the state is as it was. A
	// crash in the middle leaves one state or the other, and in the old
	// state's case the staged one as it was. Nothing staged for index is
	// an error naming it.
	InstallStaged(index uint64) error
	// DiscardStaged removes what is staged, if anything.
	DiscardStaged() error
}
