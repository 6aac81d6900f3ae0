// Package log is edictlog's replicated log, in three layers: Core, the
// protocol, deterministic and free of I/O, driven by clock readings and
// messages (docs/protocol.md); Driver, which carries out the Core's Ready
// with the I/O an Env provides and answers each write and read once; and
// Node, which runs a Driver with a real clock, storage, transport and
// state machine.
//
// The log speaks package wire's vocabulary (entries, positions, epoch
// configurations, messages) and declares what it needs of its I/O where it
// consumes it: Store and SnapshotStore (store.go), implemented by package
// storage, and Transport (transport.go), implemented by package
// transport. It imports neither, so an embedder can bring its own.
//
// What a Node promises its callers, beyond the Driver's own guarantees:
//
//   - A refusal made before anything was written — not the leader, a
//     reign not started, a leadership transfer, an ending epoch — is a
//     *NotLeaderError naming where to retry; nothing else is. Apply,
//     Barrier and the linearizable reads do not refuse for want of a
//     leader: while none is known, or this process is about to lead, they
//     wait for one within their context (and if it ends, the
//     *NotLeaderError wraps its error too); a refusal naming another
//     process comes at once. A write
//     appended and then replaced by a new reign's edict fails with
//     ErrNotCommitted (it never takes effect); one that may or may not
//     commit wraps ErrOutcomeUnknown, never a plain failure. A leader's
//     step-down does not end its pending writes: each is answered when
//     its index is applied, or when its context ends (unknown). After
//     the Node stops, calls fail with ErrShutdown.
//   - Status is a consistent snapshot of the Node's view, published after
//     every step of its loop.
//   - Observe delivers the Node's events (leadership, epoch and
//     configuration changes, snapshots taken and installed, the applied
//     index, the stop) without ever waiting for a subscriber: an event
//     that finds a channel full is dropped and counted. Each step's
//     events are sent after its Status is published, and every change of
//     the leader, the applied index or the epoch that Status shows is
//     announced, so a subscriber that re-reads Status on each event misses
//     nothing it could see by polling (see Observer).
//   - Clock and Incarnation are the clock the Node reads and the
//     incarnation it bumped at Start; Config.WrapClock and
//     Config.NewDetector let an application wrap the one and build its
//     detector from both.
package log
