package wire

import "github.com/edictlog/edictlog/edict"

// Position names a log entry by index and stamp, as log matching does: the
// reset point of a Batch, or where a granter's durable log stood when it
// granted a lease (elect.Event.Positions).
type Position struct {
	Index uint64
	Stamp edict.Stamp
}

// Batch is one atomic, durable change to a log store (edictlog.Store): what a follower persists
// before it acknowledges an append, with the stable state that must move with
// it. The steps apply in this order, all in one transaction:
//
//  1. Reset, if set, discards the whole log: it restarts empty after
//     Reset.Index, as after installing a snapshot that ends there.
//  2. TruncateFrom, if not 0, removes the entries with index ≥ TruncateFrom
//     (a conflicting suffix). It must lie in [FirstIndex, LastIndex+1].
//  3. Entries are appended; the first must have index LastIndex+1 (as left
//     by steps 1 and 2) and each next one the index after.
//  4. Stable keys are set and Delete keys removed.
//
// An empty batch is a no-op and costs no fsync.
type Batch struct {
	Reset        *Position
	TruncateFrom uint64
	Entries      []Entry
	Stable       map[string][]byte
	Delete       []string
}

// AppendsOnly reports whether b only appends and sets or removes stable
// keys, so that it may join the transaction of the batches handed over
// before it (a store's group commit). A reset or a truncation keeps its
// own transaction.
func (b *Batch) AppendsOnly() bool { return b.Reset == nil && b.TruncateFrom == 0 }

// Empty reports whether b changes nothing.
func (b *Batch) Empty() bool {
	return b.Reset == nil && b.TruncateFrom == 0 && len(b.Entries) == 0 && len(b.Stable) == 0 && len(b.Delete) == 0
}
