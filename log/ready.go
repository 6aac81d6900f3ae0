package log

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Ready is what the caller must do after driving the Core, in this order
// (etcd-raft's Ready with AsyncStorageWrites, the leader's own write in
// parallel, docs/protocol.md, "The replicated log"):
//
//  1. send Immediate — the leader's appends, and lease messages, need not
//     wait for any disk;
//  2. if Sync is not 0: hand Batch to the store, to be made durable in one
//     transaction after every earlier Ready's batch, and then Messages to
//     be sent — replies that promise durability, grants that depend on
//     persisted wedge state — and then call Core.Synced(Sync). This may
//     happen off the caller's goroutine, while the Core goes on stepping;
//  3. hand Apply to the state machine in order, serve Reads once applied,
//     stream Snapshots, act on Events;
//  4. call Core.Advance(ready).
type Ready struct {
	Immediate []wire.Message
	Batch     wire.Batch
	Messages  []wire.Message
	// Sync names this Ready's batch and Messages for Core.Synced; 0 when
	// there are neither.
	Sync uint64
	// Apply are committed entries, in index order, not yet handed out.
	Apply []wire.Entry
	// Reads are read requests whose index is now known.
	Reads []ReadState
	// Snapshots are peers that need a snapshot: the log they lack is
	// compacted away.
	Snapshots []edict.ProcessID
	Events    []Event
}

// IsEmpty reports whether there is nothing to do.
func (r *Ready) IsEmpty() bool {
	return len(r.Immediate) == 0 && r.Batch.Empty() && len(r.Messages) == 0 && len(r.Apply) == 0 &&
		len(r.Reads) == 0 && len(r.Snapshots) == 0 && len(r.Events) == 0
}

// ReadLevel is the consistency of a read (docs/protocol.md, "The replicated log").
type ReadLevel uint8

const (
	// ReadLease is linearizable: the leader answers from applied state
	// under its lease, with no network round trip. The default.
	ReadLease ReadLevel = iota
	// ReadFollower is linearizable: a follower asks the leader for its
	// commit index (answered under the lease, no quorum round), waits to
	// apply it, and answers.
	ReadFollower
	// ReadStale answers from local applied state at once; the result says
	// how stale it may be.
	ReadStale
)

func (l ReadLevel) String() string {
	switch l {
	case ReadLease:
		return "lease"
	case ReadFollower:
		return "follower"
	case ReadStale:
		return "stale"
	}
	return "unknown"
}

// ReadState tells the runtime at which index a read may be served: once
// the state machine has applied Index. Err is set when the read cannot be
// served (no leader, the leader refused).
type ReadState struct {
	ID     uint64
	Index  uint64
	Leader edict.ProcessID
	Err    error
}

// EventKind names what changed. The Core emits the first five and
// Removed in Ready.Events; the Node adds the rest, and delivers them all
// to its observers (Node.Observe).
type EventKind uint8

const (
	// BecameLeader: this process's reign is ready: its reign-start edict
	// is committed.
	BecameLeader EventKind = iota + 1
	// SteppedDown: this process no longer leads. Proposals it accepted and
	// did not see committed have an unknown outcome.
	SteppedDown
	// LeaderChanged: this process learned of a different leader. A Node
	// also reports it when Status's Leader or IsLeader changed without
	// one of the Core's leader events (its lease lapsed before a tick
	// noticed; it began a reign).
	LeaderChanged
	// EpochChanged: the process moved to a new epoch (membership changed).
	EpochChanged
	// ConfigChanged: learners changed within the epoch, or a
	// configuration (and the addresses of its processes) became known
	// otherwise: from a snapshot installed, or an epoch begun.
	ConfigChanged

	// SnapshotTaken (Node only): a snapshot of this process's state
	// machine up to Index is durable; the log behind it, but for
	// Config.TrailingEntries, is let go.
	SnapshotTaken
	// SnapshotInstalled (Node only): a snapshot up to Index, streamed from
	// the leader, replaced the state machine.
	SnapshotInstalled
	// Applied (Node only): the state machine has applied every entry up
	// to Index. Reported once per step of the Node, not per entry.
	Applied
	// Stopped (Node only): the Node stopped; Reason says why. It is the
	// last event an observer is sent.
	Stopped
	// Removed: a committed membership edict took this process out of the
	// configuration; Epoch is the configuration's. It is reported once
	// per removal (again after a restart, when the log brings the edict
	// again). A removed process campaigns no more and is sent nothing
	// by the leaders of later epochs; it may be stopped. A process added
	// again later is a member or learner again, and a later removal is
	// reported again.
	Removed
)

func (k EventKind) String() string {
	switch k {
	case BecameLeader:
		return "became-leader"
	case SteppedDown:
		return "stepped-down"
	case LeaderChanged:
		return "leader-changed"
	case EpochChanged:
		return "epoch-changed"
	case ConfigChanged:
		return "config-changed"
	case SnapshotTaken:
		return "snapshot-taken"
	case SnapshotInstalled:
		return "snapshot-installed"
	case Applied:
		return "applied"
	case Stopped:
		return "stopped"
	case Removed:
		return "removed"
	}
	return "unknown"
}

// Event reports a change of role, membership, snapshots or the applied
// index.
type Event struct {
	Kind   EventKind
	Leader edict.ProcessID
	Epoch  uint64
	Reign  edict.Stamp
	// Index is the log index a SnapshotTaken, SnapshotInstalled or
	// Applied event names.
	Index uint64
	// Reason says why a SteppedDown or a Stopped happened.
	Reason string
	// Membership is the configuration a ConfigChanged event makes known,
	// with the addresses that came with it: a config edict's, of the
	// processes it adds; an installed snapshot's, of the processes it
	// names, as its sender knew them.
	Membership *wire.Membership
}
