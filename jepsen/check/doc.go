// Package check decides whether a history recorded by package history shows
// the consistency edictkv promises.
//
// Register checks that a register workload (reads, writes and
// compare-and-sets on independent keys) is linearizable, key by key, with
// the porcupine checker. Set checks that a set workload (adds, then one
// final read per node) lost nothing that was acknowledged and invented
// nothing that was never attempted. Watch checks that every watcher was
// sent exactly the committed history of its keys, in revision order and
// across its reconnects, and that history against the writers and the
// final read. Availability checks that the cluster
// had a leader again within a bound after every fault ended, and that
// every member was ready soon after the final heal: a run that stays safe
// by never electing a leader again is "unavailable", not valid.
//
// What the checkers guarantee:
//
//   - An operation that completed OK took effect exactly once, between its
//     invocation and its completion.
//   - An operation that completed Fail did not take effect: it is left out
//     of the linearizability check, and a failed add that shows up in a
//     final read is reported as an anomaly.
//   - An operation with an unknown outcome (Info, or an invocation the test
//     ended before completing) may have taken effect at any time after its
//     invocation, or never: it is never counted against the system.
//
// A verdict is "true", "false" or "unknown" (the check ran out of time, or
// there was nothing to judge); only "true" is a pass.
package check
