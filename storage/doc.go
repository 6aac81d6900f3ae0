// Package storage keeps everything an edictlog process must remember across a
// restart: the log of edicts (log.LogStore), the small records the protocol
// must never forget (log.StableStore: incarnation, accepted reign, per-epoch
// wedge state, epoch configurations) and FSM snapshots (log.SnapshotStore).
// The interfaces are declared in package log, where they are consumed; the
// values they carry (wire.Entry, wire.Batch, wire.SnapshotMeta) and the
// stable-key schema are package wire's.
//
// [BoltStore] is the production store: one bbolt file holds the log and the
// stable records, so a wire.Batch (entries, a truncated suffix and stable changes
// together) is one write transaction and one durable commit. [FileSnapshotStore]
// keeps snapshots as files. [MemStore] and [MemSnapshotStore] behave the same
// without a disk, for tests and the simulator; the conformance suite in
// storage/storagetest runs against all of them.
//
// Invariants every implementation keeps:
//
//   - The log is contiguous: it holds exactly the entries FirstIndex through
//     LastIndex, and a batch that would leave a gap is refused
//     ([ErrNotContiguous]). An empty log has FirstIndex = LastIndex+1, so the
//     index the next entry must have is always LastIndex+1.
//   - A batch is atomic and durable when StoreBatch returns nil: after a crash
//     either all of it is visible or none of it, and once acknowledged it
//     survives any crash of the process (and, for BoltStore, of the machine,
//     as far as fsync is honoured by the disk).
//   - The incarnation only grows: BumpIncarnation stores the new
//     value durably before returning it, and no other call may write it.
//   - Nothing that fails a check is skipped: a damaged file, an entry whose
//     checksum or version byte is wrong, a snapshot whose digest differs, each
//     yields an error that wraps [ErrCorrupt] and names the file and the key
//     or offset. Decoders refuse unknown versions, unknown kinds, unknown
//     fields and trailing bytes, and bound every size before allocating.
//     The one exception is by design: BoltStore ends a commit with a single
//     fdatasync, so a power loss during it can leave the new meta page on
//     disk without some of its pages; Open then finds the newest transaction
//     damaged and, if the one before it verifies completely, rolls it back
//     (it was never acknowledged), logs it and reports it in
//     [Stats].RolledBack. bolt_rollback.go says why that is safe and what
//     it cannot tell apart.
//
// The on-disk layout of BoltStore is described in bolt.go; the entry encoding
// in entry_codec.go.
package storage
