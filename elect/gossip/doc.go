// Package gossip is the default weak-leader detector of docs/protocol.md, "Leases": an
// elect.Detector built on hashicorp/memberlist.
//
// Memberlist's gossip tells each node which others seem alive and carries a
// little metadata about each (Meta: id, epoch, transport and API addresses,
// and a leader hint). The Detector names as weak leader, in order of
// preference: the process this node last saw holding the lease, while that
// is fresh; a process that gossips itself as the lease holder; the
// lowest-id member of the current epoch. In every case only a process that
// memberlist considers alive, that gossips the current epoch and whose
// lease to us has not lapsed unrenewed (the lease core's LeaseLapsed,
// cleared when it asks for the lease again: Campaigned) qualifies — memberlist alone needs about a second to
// declare a death; a lapse is known at once. Preferring the lease holder is
// what keeps a recovered lower id from unseating a live leader.
//
// The answer is advice only. Nothing in the lease protocol's or the log's
// safety depends on it: two processes that both think they are the weak
// leader just compete for the lease, and at most one gets it.
//
// The package also:
//
//   - re-joins its configured peers that are not live members, every
//     RejoinInterval, so that two sides of a long partition find each
//     other again (memberlist by itself stops talking to nodes it declared
//     dead);
//   - labels gossip with the cluster id and can encrypt it with a cluster
//     key, so foreign or keyless nodes are not heard;
//   - keeps memberlist's callbacks trivial: they copy into a channel, and
//     only the Detector's own goroutines call back into memberlist.
//
// Timing defaults (memberlistConfig) detect a crashed node in about a
// second on a LAN.
package gossip
