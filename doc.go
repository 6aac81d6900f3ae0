// Package edictlog is the embedder's API of edictlog's replicated log: a
// Node runs one process of a cluster with the embedder's state machine
// (package fsm), storage (Store, SnapshotStore; package storage has
// bbolt and in-memory ones) and transport (Transport; package transport
// has TCP), and answers writes, reads at three levels, membership
// changes, snapshots and leadership transfers. Import it as
//
//	import "github.com/edictlog/edictlog"
//
// and name it edictlog: the standard library's log is a different
// package, and this one no longer shares its name.
//
// The protocol itself — the deterministic Core, the Driver that carries
// out its Ready, recovery from the stores, the mutation switches of its
// safety rules — is in internal/replog (docs/protocol.md argues its
// rules; docs/architecture.md maps the layers). The types both sides
// speak (Event, Status, ReadLevel, ApplyResult, the refusals) are
// declared again here rather than shared from a package below both, so
// that this package's documentation is the whole of what an embedder
// uses: the Node converts at its boundary, and its sentinel errors are
// the protocol's own values (errors.Is holds across it), while each typed
// error an embedder tests with errors.As (*NotLeaderError,
// *MembershipError, *QueryError, *NothingNewError) is only ever this
// package's type in what a Node returns.
//
// The interfaces an embedder implements or brings are declared where
// they are consumed, and this package imports no implementation of them
// (no bbolt, no network code), so an embedder can bring its own.
//
// What a Node promises its callers:
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
package edictlog
