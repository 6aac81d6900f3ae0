// Package edict defines the values that order a Nerio leader's edicts: clock
// readings ([Time]), quorum timestamps ([QT]) and edict stamps ([Stamp]), with
// their order, validation and wire encoding. It does no I/O apart from
// reading the real clock (clock_linux.go; the incarnation is the log store's,
// edictlog.StableStore.BumpIncarnation), and it can be used on its own by any
// process that receives edicts and wants to fence stale leaders.
//
// Equation numbers refer to van Renesse, Schneider and Gehrke, "Nerio: Leader
// Election and Edict Ordering" (Cornell University).
//
// Invariants this package relies on and preserves:
//
//   - A process's clock readings strictly increase, across restarts too: a
//     [Time] is (incarnation, nanoseconds) ordered lexicographically and the
//     incarnation is bumped durably before a process sends anything (eq. 8;
//     Lemma 7.1 depends on it).
//   - A [QT] names each process at most once, in increasing process order,
//     and is only compared after it has been checked to cover a quorum of its
//     epoch (eq. 7 makes any two such QTs share a process, so eq. 21 decides).
//   - Two QTs whose shared processes disagree on the direction of their order
//     cannot both come from a correct run; comparing them is an error
//     ([ErrInconsistent]), never a silent guess.
package edict
