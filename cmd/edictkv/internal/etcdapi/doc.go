// Package etcdapi serves etcd's v3 gRPC API (go.etcd.io/etcd/api/v3) for
// edictkv, so that etcdctl, clientv3 and etcd's benchmark tool work
// against it unchanged. It is an adapter, laid out as etcd's own v3rpc
// package: one file per etcd service (kv.go, cluster.go, maintenance.go;
// Watch, Lease and Auth will get theirs), each decoding nothing itself —
// gRPC hands it etcd's messages — and calling what does the work: the KV
// service (internal/kvservice) for KV, the log.Node and the member
// directory (internal/directory) for Cluster and Maintenance. A call that
// needs the leader goes through the router (internal/route), which serves
// it here under the handover gate or forwards it, by its full method name,
// to the leader's gRPC address. errors.go maps the KV service's errors to
// etcd's (rpctypes), so clientv3's error values match.
//
// What is served, and how it maps:
//
//   - KV.Range: single key, range and prefix, limit, count_only, keys_only,
//     sorting and the min/max revision filters. serializable is the log's
//     stale level, answered by the process asked; anything else is a
//     lease read at the leader. Range at a revision the state cannot
//     answer at is refused with etcd's "compacted" or "future revision":
//     today there is no history, so every revision but the current one.
//   - KV.Put, KV.DeleteRange (with prev_kv) and KV.Txn (compares on value,
//     version, create and mod revision with =, !=, <, >; branches of puts,
//     ranges and deletes) are one log entry each, applied atomically.
//     KV.Compact answers Unimplemented: there is no history to compact.
//   - Revisions are log indexes: every key's mod_revision is the index of
//     the entry that wrote it, and the header's revision the index of the
//     last applied entry. They increase with every write, and also with the
//     log's own entries (reign starts, configurations), so they have gaps.
//   - The header's raft_term is log.Node.ReignIndex: the index of the
//     current reign's start edict, a number that grows with each reign.
//     member_id is the process id; cluster_id the FNV-1a hash of the
//     cluster's name.
//   - Cluster.MemberList and Maintenance.Status (enough for etcdctl's member
//     list and endpoint status), Maintenance.Alarm listing (never any
//     alarm) and Maintenance.MoveLeader, which hands leadership over
//     through the handover gate.
//   - Everything else — Watch, Lease, Auth, member changes, snapshots,
//     defragmentation, and options that need them (a Put with a lease,
//     ignore_value, nested Txns) — answers codes.Unimplemented naming the
//     call.
//
// Errors are etcd's where etcd has one: "no leader" when none is known
// within the router's wait (nothing was written); "request timed out"
// when a write's outcome is unknown (it may still commit); "leader
// changed" when a new reign's edict took a pending write's index (no
// effect); "duplicate key", "too many operations", "key is not
// provided", "request is too large", "compacted", "future revision".
package etcdapi
