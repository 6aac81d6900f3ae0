// Package storage keeps everything an edictlog process must remember across a
// restart: the log of edicts (edictlog.LogStore), the small records the protocol
// must never forget (edictlog.StableStore: incarnation, accepted reign, per-epoch
// wedge state, epoch configurations) and FSM snapshots (edictlog.SnapshotStore).
// The interfaces are declared in package edictlog, where they are consumed; the
// values they carry (wire.Entry, wire.Batch, wire.SnapshotMeta) and the
// stable-key schema are package wire's.
//
// [WALStore] is the production store: the log and the stable records as an
// append-only series of records in preallocated segment files, so a
// wire.Batch (entries, a truncated suffix and stable changes together) is
// one record, one pwrite and one fdatasync; Open replays the records. Its
// doc comment gives the layout and what a crash leaves. [BoltStore] keeps
// the same in one bbolt file, one write transaction and one durable commit
// per batch: it writes about four pages where the WALStore writes the
// record's one or two, and stays for the data directories that use it.
// [FileSnapshotStore] keeps snapshots as files. [MemStore] and
// [MemSnapshotStore] behave the same without a disk, for tests and the
// simulator; the conformance suite in storage/storagetest runs against all
// of them.
//
// Invariants every implementation keeps:
//
//   - The log is contiguous: it holds exactly the entries FirstIndex through
//     LastIndex, and a batch that would leave a gap is refused
//     ([ErrNotContiguous]). An empty log has FirstIndex = LastIndex+1, so the
//     index the next entry must have is always LastIndex+1.
//   - A batch is atomic and durable when StoreBatch returns nil: after a crash
//     either all of it is visible or none of it, and once acknowledged it
//     survives any crash of the process (and, for the stores on disk, of
//     the machine, as far as fsync is honoured by the disk).
//   - The incarnation only grows: BumpIncarnation stores the new
//     value durably before returning it, and no other call may write it.
//   - Nothing that fails a check is skipped: a damaged file, an entry whose
//     checksum or version byte is wrong, a snapshot whose digest differs, each
//     yields an error that wraps [ErrCorrupt] and names the file and the key
//     or offset. Decoders refuse unknown versions, unknown kinds, unknown
//     fields and trailing bytes, and bound every size before allocating.
//     The exceptions are by design. A WALStore's newest record may be cut
//     short by a crash: Open clears it (it was never acknowledged) and
//     reports it in [Stats].TornBytes. BoltStore ends a commit with a single
//     fdatasync, so a power loss during it can leave the new meta page on
//     disk without some of its pages; Open then finds the newest transaction
//     damaged and, if the one before it verifies completely, rolls it back
//     (it was never acknowledged), logs it and reports it in
//     [Stats].RolledBack. bolt_rollback.go says why that is safe and what
//     it cannot tell apart.
//
// # What a crash leaves
//
// For the WALStore, see its doc comment. For the others:
//
// A crash is the process killed at any moment or, for the stores on disk,
// the machine losing power (as far as fsync is honoured by the disk).
// Wherever it comes, the store opens afterwards — a crash never leaves one
// that refuses to start — and holds the state before or after one step of
// what was running:
//
//   - StoreBatch (entries appended, a suffix truncated, the log reset to a
//     snapshot position, stable keys set and deleted, in any mix), Set,
//     Delete and BumpIncarnation are each one bbolt transaction and one
//     fdatasync: the file holds all of it or none of it, and all of it once
//     the call returned nil. A transaction whose meta page reached the disk
//     ahead of its pages is rolled back by Open (the exception above).
//   - CompactPrefix is one such transaction per CompactChunk entries; a
//     crash between two leaves the log compacted part of the way, FirstIndex
//     a whole number of chunks past its old value and at most upTo+1, with
//     the stamp of the entry before it. Calling CompactPrefix again finishes.
//   - Zero-filling ahead of the pages in use (prealloc.go) writes only past
//     them, where nothing is read: a crash during it leaves nothing to repair.
//   - Open's rollback of a torn transaction writes the previous meta page
//     over the newer one and syncs. Cut short, the next Open rolls back again
//     or finds it done, and holds the transaction before the torn one. A file
//     whose previous transaction does not verify either is refused, however
//     far the attempt got.
//   - Creating the file (OpenBolt on a path that does not exist): bbolt
//     initialises it under a temporary name, synced, a hard link publishes it
//     and the folder is fsynced. A crash leaves no file at the path (the next
//     open creates it) or the complete empty store; it may leave the
//     temporary "<name>.init-*" file behind, which nothing reads.
//   - FileSnapshotStore writes a snapshot in "<id>.tmp" and publishes it by a
//     rename once it is durable, and retires one by a durable rename to
//     "<id>.removing" before removing its files. A crash leaves each snapshot
//     complete and listed, or absent (not yet published, or retired), never
//     a partial "<id>"; the "<id>.tmp" and "<id>.removing" folders it may
//     leave are never listed, and NewFileSnapshotStore removes them. So a
//     listed snapshot that fails a check was damaged, and is reported.
//   - MemStore and MemSnapshotStore change under a lock, whole; a snapshot
//     enters the store at Close, so List holds only complete snapshots, as
//     FileSnapshotStore's does after any crash.
//
// The tests stop each of these at each step and reopen:
// TestBoltCrashAtEveryStep (every prefix of a transaction's page writes,
// and what a power loss can leave of them, for each kind of write and each
// compaction chunk), TestBoltCreateCrash, TestBoltRollbackCrash and
// TestSnapshotCrashAtEveryStep; TestCrashKill kills a real process at random
// moments (for both stores) and TestPowerLoss and TestWALPowerLoss crash
// random histories.
//
// The on-disk layout of BoltStore is described in bolt.go; the entry encoding
// in package wire (wire/entry_codec.go).
package storage
