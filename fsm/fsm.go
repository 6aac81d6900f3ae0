package fsm

import (
	"io"

	"github.com/edictlog/edictlog/edict"
)

// Entry is a committed log entry as an FSM sees it.
type Entry struct {
	// Index is the entry's position in the log, from 1. It strictly
	// increases from one Apply to the next.
	Index uint64
	// Stamp is the entry's edict stamp. Stamps increase with Index: apply
	// order is edict order.
	Stamp edict.Stamp
	// Data is the command. It is empty for the log's own entries (reign
	// starts, epoch configurations), which an FSM treats as no-ops. The log
	// may reuse Data's memory once Apply returns: copy what you keep.
	Data []byte
}

// FSM is a replicated state machine. The log calls Apply, Snapshot and
// Restore from a single goroutine, never two at once.
type FSM interface {
	// Apply applies one committed entry and returns the response that the
	// log hands to the writer of the entry. It is called in index order,
	// exactly once per committed entry, and must be deterministic (see the
	// package documentation). A refused command is reported in the returned
	// value, not by panicking: the entry is committed either way.
	Apply(e Entry) any
	// Snapshot captures the state after the last applied entry. It must
	// return quickly — Applies wait for it — so it captures, and the
	// returned Snapshot's Persist writes, possibly while later entries are
	// applied. Persist must write the state as of the Snapshot call.
	Snapshot() (Snapshot, error)
	// Restore replaces all state with a snapshot written by Persist. The
	// stream may be larger than memory allows to buffer, so read it as a
	// stream. On error the FSM must keep its previous state intact; the
	// stream must be read to its end (io.EOF) before it is trusted, since
	// snapshot stores verify their digests only there.
	Restore(r io.Reader) error
}

// Snapshot is a captured state being written out.
type Snapshot interface {
	// Persist writes the captured state to w. The log calls it at most
	// once, possibly concurrently with Apply.
	Persist(w io.Writer) error
	// Release frees the captured state. The log calls it exactly once,
	// after Persist returns or instead of calling Persist.
	Release()
}

// BatchFSM is an FSM that applies several entries at once to amortize
// per-call work (locking, decoding). The log prefers ApplyBatch when an FSM
// has it.
type BatchFSM interface {
	FSM
	// ApplyBatch applies consecutive committed entries in order, exactly as
	// calling Apply on each would, and returns one response per entry:
	// result i belongs to es[i].
	ApplyBatch(es []Entry) []any
}

// Querier is an FSM that answers read-only queries against its applied
// state, for the log's reads (docs/protocol.md, "The replicated log"): the log decides when answering
// is linearizable, the FSM answers.
//
// Query must be safe for concurrent use with Apply, ApplyBatch, Restore and
// other Query calls, and must answer from the state between two entries,
// never from the middle of one. The log calls it once everything the read
// must observe has been applied; the answer may also reflect entries
// applied since, which are committed and so do not break linearizability.
// This lets reads run off the apply goroutine.
type Querier interface {
	Query(q []byte) ([]byte, error)
}

// SizedSnapshot is a Snapshot that knows, before Persist runs, how many
// bytes Persist writes (a bbolt read transaction's Size, a file's
// length). A snapshot stream declares its length first, so the log
// streams such a snapshot of a DiskFSM straight from Persist to a peer
// that needs it, with no copy in the snapshot store; another is first
// written there.
type SizedSnapshot interface {
	Snapshot
	// Size is the exact number of bytes Persist writes.
	Size() int64
}
