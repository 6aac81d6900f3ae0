// Package mvcc is edictkv's multi-version key-value store: etcd's revision
// semantics, its history kept in a [backend.Backend] (a bbolt file in
// production, memory in the simulator) and its key index in memory, as
// etcd's server/storage/mvcc does. The replicated state machine applies
// log entries to it; it knows nothing of the log beyond the index each
// change comes with.
//
// # Revisions
//
// An empty store is at revision 1 (as etcd's: the first write gets 2).
// Each write transaction that changes something ([Store.Write],
// [TxnWrite.End]) moves the store to the next revision, without gaps; one
// that changes nothing leaves it. Its changes get sub revisions 0, 1, … in
// order. A key's create_revision, mod_revision and version are etcd's:
// a put of a key that does not exist starts a generation (create_revision
// the put's revision, version 1); each later put adds 1 to the version; a
// delete writes a tombstone that ends the generation. Reads at any revision
// from [Store.CompactRev] to [Store.Rev] see the keys as they were
// (ErrCompacted below, ErrFutureRev above). Ranges take every etcd option
// (limit, count, keys only, sorts, revision filters) and apply it while
// walking the index; see [Store.Range] and [RangeOptions].
//
// # Log indexes
//
// Every change comes with the log index of the entry that makes it, above
// the last one ([ErrIndexApplied] otherwise): [Store.Write],
// [Store.Compact], and [Store.SetConsistentIndex] for entries that change
// nothing. The store keeps the index of the last entry applied (the
// consistent index, etcd's name) in its meta bucket with the changes, and
// maps each revision to the index of the entry that made it
// ([Store.RevisionIndex]).
//
// # Durability
//
// Changes are buffered in memory and committed to the backend in batches,
// each one atomic (one bbolt transaction, fsynced): when BatchLimit
// changes are pending, every BatchInterval with [Options.Background], and
// on [Store.Commit], [Store.Snapshot] and [Store.Close]. A batch always
// ends between two entries, and carries the consistent index of the last.
// After a crash the store reopens exactly at the last committed batch:
// [Store.ConsistentIndex] tells which entries to apply again from the log;
// nothing later survives, nothing earlier is lost. [Store.DurableIndex]
// and Commit's result say how far the backend holds.
//
// # Compaction
//
// [Store.Compact] at rev compacts the index at once: per key, the newest
// revision at or below rev is kept, unless it is a tombstone that ended its
// generation before rev; older revisions, and keys with nothing left,
// go. The scheduled compaction is recorded with the entry; the revisions
// it drops leave the backend in batches ([Store.CompactStep]), each
// interleaved with writes, and the last records it finished. A crash in
// between resumes it at the next Open. The revision bucket keeps the
// entries from the compaction revision on.
//
// # Concurrency
//
// Reads ([Store.Range], [Store.Read], [Store.HashByRev]) are safe for
// concurrent use with each other and with writes, compaction, commits,
// snapshots, Restore and InstallStaged, and never see half a write
// transaction: they read at the revision of the last completed one,
// through the buffered changes and a backend view. A long range lets
// writes in between chunks of its index walk. Write transactions,
// Compact, CompactStep, Restore, InstallStaged and Close run one at a
// time; Stage runs beside all of them (it touches only what is staged).
// Only index compaction and the final swap of Restore and InstallStaged
// wait for reads in progress.
//
// # Determinism
//
// With a [backend.Memory] and without Options.Background, nothing in the
// store depends on time, goroutine scheduling or map iteration order: the
// same calls give the same state, results and backend commits. That is how
// the simulator runs it, calling Commit and CompactStep itself.
package mvcc
