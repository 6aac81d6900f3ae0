// Package etcdapi serves etcd's v3 gRPC API (go.etcd.io/etcd/api/v3) for
// edictkv, so that etcdctl, clientv3 and etcd's benchmark tool work
// against it unchanged. It is an adapter, laid out as etcd's own v3rpc
// package: one file per etcd service (kv.go, cluster.go, maintenance.go,
// watch.go; Lease and Auth will get theirs), each decoding nothing itself —
// gRPC hands it etcd's messages — and calling what does the work: the KV
// service (internal/kvservice) for KV, the edictlog.Node and the member
// directory (internal/directory) for Cluster and Maintenance. A call that
// needs the leader goes through the router (internal/route), which serves
// it here under the handover gate or forwards it, by its full method name,
// to the leader's gRPC address (a Put over the forwarding stream, which
// stream.go serves at the leader). errors.go maps the KV service's errors to
// etcd's (rpctypes), so clientv3's error values match.
//
// What is served, and how it maps:
//
//   - KV.Range: single key, range and prefix, limit, count_only, keys_only,
//     sorting and the min/max revision filters, at any revision from the
//     compaction revision on (etcd's "compacted" below it, "future
//     revision" above the current one), answered by the process asked,
//     never forwarded: serializable reads the state as it is applied here,
//     asking the log nothing (the log's stale level, as etcd's
//     serializable read reads its store); anything else the log's follower
//     level, linearizable — a lease read at the leader,
//     and elsewhere the leader's commit index (one round trip, answered
//     under its lease) applied here first, as etcd's followers confirm a
//     read index.
//   - KV.Put (prev_kv, ignore_value, ignore_lease), KV.DeleteRange
//     (prev_kv) and KV.Txn (compares on value, version, create and mod
//     revision and lease with =, !=, <, >, over a key or a range; branches
//     of puts, ranges at any revision, deletes and nested txns) are one
//     log entry each, applied atomically at one revision, with etcd's
//     semantics (internal/kvstate). A txn whose every op is a range is a
//     read, answered like a Range (serializable if all its ranges are).
//     KV.Compact compacts, and with physical answers once the compacted
//     revisions are removed.
//   - A call with clientv3.WithRequireLeader's metadata is answered "no
//     leader" at once while no leader is known, as etcd's interceptor
//     does.
//   - Revisions are etcd's: the empty state is at revision 1, each write
//     that changes a key makes the next one, without gaps; the log's own
//     entries make none. A write's header revision is the state's revision
//     after it; every other header's is the state's current revision.
//   - The header's raft_term is edictlog.Node.ReignIndex: the index of the
//     current reign's start edict, a number that grows with each reign.
//     member_id is the process id; cluster_id the FNV-1a hash of the
//     cluster's name.
//   - Cluster.MemberUpdate: one peer URL, the member's new log transport
//     address, through the log at the leader (edictlog.Node.SetAddress: a
//     config edict that keeps the leader and the epoch); etcd's "member
//     not found" and "given member URLs are invalid".
//   - Cluster.MemberList; Maintenance.Status (etcdctl's endpoint status:
//     raft_index and raft_applied_index are the log's commit and applied
//     indexes here, db_size and db_size_in_use the state's file,
//     db_size_quota the space quota, errors "no leader" and every active
//     alarm), Maintenance.HashKV (the state's history hashed up to a
//     revision, mvcc.Store.HashByRev) and Maintenance.Defragment (the
//     state's file rewritten to give back what compaction freed), each
//     answered by the process asked, as etcd's; Maintenance.Alarm (list,
//     activate, deactivate, through the log at the leader: an active
//     NOSPACE refuses puts, CORRUPT every KV request; the KV service
//     raises NOSPACE itself when a write would take the state over its
//     space quota) and Maintenance.MoveLeader, which hands leadership
//     over through the handover gate.
//   - Watch: every option of etcd's (key, range, prefix, from-key, start
//     revision, prev_kv, the NOPUT and NODELETE filters, progress_notify,
//     fragment, client-chosen watch_id), cancel, progress requests, and
//     etcd's answers (created, cancelled with cancel_reason, compaction's
//     cancel with compact_revision), over the state's watch streams
//     (mvcc.WatchStream), which send each watcher every change of its keys
//     from its start revision on, in revision order, each once. Every
//     member serves watches from its own applied state, nothing is
//     forwarded: a header's revision is this member's, and a progress
//     notification promises only what it applied. A start revision above
//     it waits for it, so that a client resuming on a member behind the
//     one it left neither misses nor repeats an event. A slow client
//     never holds up applying (see watch.go and mvcc's "Watches").
//   - Everything else — Lease, Auth, adding and removing members (edictkv's
//     admin API does), snapshots,
//     Maintenance.Hash (of the whole file, which holds more than the
//     replicated state), and a Put with a lease (none can be granted) —
//     answers codes.Unimplemented naming the call.
//
// Errors are etcd's where etcd has one: "no leader" when none is known
// within the router's wait (nothing was written); "request timed out"
// when a write's outcome is unknown (it may still commit); "leader
// changed" when a new reign's edict took a pending write's index (no
// effect); "duplicate key", "too many operations", "key is not
// provided", "request is too large", "compacted", "future revision",
// "database space exceeded" (a put over the space quota, or while the
// NOSPACE alarm is active).
package etcdapi
