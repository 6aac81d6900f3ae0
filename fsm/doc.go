// Package fsm defines the state machines an edictlog replicated log drives:
// [FSM], [BatchFSM], [DiskFSM], [StagingFSM], [Snapshot], [SizedSnapshot]
// and [Querier], declared where the log consumes them. The etcd-shaped
// key-value state machine that edictkv, the simulator and the log's tests
// use is package [kvfsm] (fsm/kvfsm); package [kvdisk] (fsm/kvdisk) keeps
// it in a file, a small StagingFSM; package [fsmtest] (fsm/fsmtest) is
// the conformance suite a DiskFSM (and a StagingFSM) must pass.
//
// What the log guarantees an FSM, and what it asks in return:
//
//   - Apply is called from one goroutine, in log index order — which is edict
//     order (docs/protocol.md, "The replicated log") — exactly once per committed entry. After Restore the
//     log applies only the entries after the snapshot's index.
//   - Apply must be deterministic: the new state and the response are a
//     function of the previous state and the entry alone. No clock, no
//     randomness, no map iteration order, no environment may leak into
//     either, or replicas diverge. A command the FSM refuses is still
//     committed; the refusal is returned as a value and must be the same on
//     every replica.
//   - Entries with empty Data are the log's own (a reign-start edict, an
//     epoch configuration); an FSM treats them as no-ops.
//
// An FSM lives in memory: every start restores it from the newest
// snapshot and applies the log after it, and every Config.SnapshotEvery
// entries the log writes the whole state out (Snapshot, Persist) so that
// it can compact the log behind it. A [DiskFSM] keeps its state durable in
// a store of its own, for a state too large to copy that often. What it
// promises the log:
//
//   - Durable index. The FSM's store holds, after any crash, the effects
//     of exactly the entries up to some index d, and DurableIndex reports
//     d: the effects of an entry, and the index with them, become durable
//     together, and never those of an entry without those of every entry
//     before it. d never decreases: Apply and Sync raise it, and the log
//     restores only a snapshot ahead of everything applied.
//   - Sync makes every entry applied so far durable and returns the index
//     of the last one (the one Restore carried, if none was applied since;
//     0 for an empty state). d is at least what Sync last returned and at
//     most the last index applied: entries applied since the last Sync may
//     be lost in a crash, but never half-applied. Apply may make entries
//     durable sooner (committing each batch, as a database does), which
//     shortens what a start applies again.
//   - Snapshot captures, in the Apply goroutine and quickly, a consistent
//     copy of the state after the last applied entry, and Persist writes
//     it, possibly while later entries are applied and Sync runs, in a
//     format of the FSM's choosing (for a bbolt store, the file itself,
//     tx.WriteTo) that carries the index of the last applied entry.
//     Persist writes the same bytes, or at least bytes that restore to
//     states that answer every query alike, for the same applied entries
//     on every replica.
//   - Restore replaces the whole state with a stream Persist wrote, on
//     this replica or another, atomically and durably: when it returns
//     nil the store holds exactly the stream's state and DurableIndex
//     reports the index the stream carries; when it returns an error
//     (a truncated or damaged stream, a reader that fails, even at its end
//     in place of io.EOF: snapshot stores verify their digests only
//     there), the previous state and durable index are intact, in memory
//     and in the store; a crash in the middle leaves one or the other.
//
// What the log does with it in return:
//
//   - At start it asks DurableIndex before any Apply. With d at or above
//     the index of the newest snapshot, it restores nothing and hands the
//     FSM only the entries after d (the entries up to d are committed:
//     they were applied); below it, it restores that snapshot, which then
//     holds a copy of the state (or, for a snapshot a [StagingFSM] staged,
//     has it install what it staged), and applies after it. A d beyond
//     the end of the log's own store is impossible (entries are applied
//     only once durable in that store, and an installed snapshot's
//     metadata is recorded before the FSM takes its state), and the start
//     fails naming both.
//   - Every Config.SnapshotEvery applied entries it calls Sync and records
//     a snapshot at the index Sync returned that holds no copy of the
//     state, only the log's metadata of that index (reign, stamp, epoch
//     configuration); then it compacts its log behind it, keeping
//     Config.TrailingEntries. The log is never compacted past an index
//     Sync returned.
//   - To catch up a member that lacks compacted entries, it calls
//     Snapshot on the Apply goroutine. A [SizedSnapshot] is streamed
//     straight from Persist to the member: nothing is written on this
//     side. Another is first written whole into the snapshot store (Sync
//     first, so that the copy is the newest snapshot at the durable
//     index), and that copy is streamed: a full copy of the state on
//     disk beside the FSM's own, until the snapshot store's retention
//     removes it.
//   - A snapshot received from a leader by a [StagingFSM] is written once:
//     Stage reads the stream into the FSM's own store, checked and
//     durable, not in use; only then does the log record the snapshot's
//     metadata (index, reign, stamp, epoch configuration) in its snapshot
//     store, holding no copy of the state; only then does InstallStaged
//     make the staged state the FSM's, in either order with the log's
//     reset to the snapshot. A start after a crash before the record
//     finds the old state and log, and DiscardStaged removes what was
//     staged; after the record, the FSM below the snapshot's index is
//     made to install what it staged (InstallStaged again; nothing staged
//     is an error, the stores having lost what they made durable), the
//     FSM at the index holds it already, and the log's reset is
//     completed. The FSM's state is never ahead of the metadata the log
//     holds, and never half of either state.
//   - A snapshot received by another DiskFSM is stored whole in the
//     snapshot store before the FSM is restored from it and before the
//     log is reset to it, which two may happen in either order. A start
//     after a crash at any point finds the FSM at the snapshot's index
//     (restored: nothing to do) or below it (restored again from the
//     stored snapshot), and completes the log's reset itself.
//
// [kvfsm]: https://pkg.go.dev/github.com/edictlog/edictlog/fsm/kvfsm
// [kvdisk]: https://pkg.go.dev/github.com/edictlog/edictlog/fsm/kvdisk
// [fsmtest]: https://pkg.go.dev/github.com/edictlog/edictlog/fsm/fsmtest
package fsm
