// Package etcdapi serves etcd's v3 gRPC API (go.etcd.io/etcd/api/v3) over
// an edictlog log.Node running the kvfsm.KV state machine, so that etcdctl,
// clientv3 and etcd's benchmark tool work against edictkv unchanged.
//
// What is served, and how it maps:
//
//   - KV.Range: single key, range and prefix, limit, count_only, keys_only,
//     sorting and the min/max revision filters (done as etcd does: prune,
//     sort, then limit; count is the whole range's). serializable is the
//     log's stale level, answered by the process asked; anything else is a
//     lease read at the leader. Range at a revision other than the current
//     one is refused with etcd's "compacted" or "future revision": there is
//     no history.
//   - KV.Put, KV.DeleteRange (with prev_kv) and KV.Txn (compares on value,
//     version, create and mod revision with =, !=, <, >; branches of puts,
//     ranges and deletes) are one log entry each, applied atomically.
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
//     alarm) and Maintenance.MoveLeader.
//   - Everything else — Watch, Lease, Auth, Compact, member changes,
//     snapshots, defragmentation, and options that need them (a Put with a
//     lease, ignore_value, nested Txns) — answers codes.Unimplemented
//     naming the call.
//
// A request that needs the leader and reaches another process is forwarded
// to the leader's gRPC address, one hop at most; internal/route decides,
// for this API and edictkv's HTTP API alike, waiting on the Node's events
// while no leader is known. Errors are etcd's where
// etcd has one, so clientv3's error values match: "no leader" when none is
// known within LeaderWait (nothing was written); "request timed out" when
// a write's outcome is unknown (it may still commit); "leader changed"
// when a new reign's edict took a pending write's index (no effect);
// "duplicate key",
// "too many operations", "key is not provided". Keys under
// kvfsm.SystemPrefix belong to edictkv and are refused.
package etcdapi
