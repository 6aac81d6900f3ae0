// Package kvstate is edictkv's replicated state: the state machine the
// log (edictlog.Node) drives, on the MVCC store (internal/mvcc). It applies
// log entries with etcd's semantics, answers reads at any revision the
// store keeps, keeps a system namespace of its own beside the user
// keyspace, and keeps itself durable: it is an fsm.DiskFSM.
//
// # Requests
//
// A log entry's Data is a Request in its envelope (request.go): a version
// byte, the request's id, the authenticated user (empty until edictkv
// authenticates), and one request — etcd's PutRequest, DeleteRangeRequest,
// TxnRequest, CompactionRequest or AlarmRequest in their own protobuf
// encoding, or a member directory record (MemberPut, MemberDelete).
// DecodeRequest refuses anything else, naming what is wrong.
//
// # Apply
//
// Apply is etcd's apply (server/etcdserver/txn and apply):
//
//   - Revisions are etcd's: the empty state is at revision 1, each request
//     that changes a key moves it to the next one, without gaps, and a
//     request that changes nothing (a delete of no key, a txn of reads, a
//     refusal, a system request, the log's own entries) makes none. A
//     Txn is one revision whatever it writes; its reads see its earlier
//     writes. The header revision of a write is the store's revision
//     after it.
//   - Put with prev_kv, ignore_value and ignore_lease (ErrKeyNotFound
//     when the key does not exist) and the lease ID kept in the pair;
//     DeleteRange with prev_kv; Txn with compares on every target over a
//     key or a range (every key of it must satisfy the compare; a VALUE
//     compare on no key fails), nested txns, and etcd's checks of the
//     chosen path (a range at a compacted or future revision, a put that
//     keeps the value of a missing key) before anything changes.
//   - Compaction: ErrCompacted at or below the compaction revision,
//     ErrFutureRev above the current one. The key index is compacted at
//     once; the removal from the store (etcd's physical compaction) is
//     done by the store's background compactor in a server (mvcc's
//     Options.Background), or by CompactStep in the simulator, and
//     Result.Physical is closed once it is done and committed: the
//     process that proposed the compaction waits on it for a physical
//     one (kvservice.Compact).
//   - Alarms are etcd's AlarmRequest: with NOSPACE active a Put, and a
//     Txn with a put among its ops, are refused with ErrNoSpace (etcd's
//     capped applier), while deletes and compactions go on; with CORRUPT
//     active every KV request is refused with ErrCorrupt.
//   - Every refusal is a value in Result.Err, the same on every replica;
//     the entry's index is recorded all the same. Entries with empty Data
//     (the log's own) record their index only.
//
// # The system namespace
//
// The member directory's records (MemberPut, MemberDelete: named
// attributes per member id) and the active alarms live in the store's
// application records (mvcc's records, system.go), outside the user
// keyspace: a user request cannot name them (any byte string is a user
// key, a NUL first byte included), a range of every key never sees them,
// and they make no revision. They are written with the entry that changes
// them and carried by snapshots, like everything else. The state also
// keeps there, per revision, the log index and edict stamp of the entry
// that made it, so that an answer can carry the stamp of each key's
// mod_revision; the first entry after a compaction removes those that no
// read can name any more.
//
// # Durability
//
// The store commits in batches, each carrying the index of its last
// entry; after a crash the state reopens at the last committed batch
// (DurableIndex) and the log hands it the entries after it again. Sync
// commits what is pending. Snapshot captures the store's file, streamed
// by Persist while entries go on, its size known up front
// (fsm.SizedSnapshot: the log streams it to a peer with no copy on this
// side); Restore installs a streamed copy only once it is read whole and
// checked, and reads the system namespace from it. A snapshot sent by a
// leader is staged instead (fsm.StagingFSM): the stream is written once,
// into the file that becomes the state's when InstallStaged renames it
// over the store's, after the log has recorded the snapshot; it is
// checked in full before Stage returns. See fsm.DiskFSM and
// fsm.StagingFSM for what the log does with each.
//
// # Reads
//
// Range reads the applied state directly, at any revision from
// CompactRev to Rev, with every option of etcd's RangeRequest. It does
// not decide when a read may be served: the log's read barrier does
// (edictlog.Node.Read with the empty query, which Query answers); the state
// answers once it returns.
package kvstate
