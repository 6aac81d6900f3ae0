package edictlog

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// EventKind names what changed. A Node delivers every kind to its
// observers (Node.Observe); those marked "Node only" come from the Node
// itself, the others from the protocol.
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
	// one of the protocol's leader events (its lease lapsed before a tick
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

// eventFromCore is the Node's event for one of the protocol's.
func eventFromCore(ev replog.Event) Event {
	out := Event{Leader: ev.Leader, Epoch: ev.Epoch, Reign: ev.Reign, Index: ev.Index, Reason: ev.Reason, Membership: ev.Membership}
	switch ev.Kind {
	case replog.BecameLeader:
		out.Kind = BecameLeader
	case replog.SteppedDown:
		out.Kind = SteppedDown
	case replog.LeaderChanged:
		out.Kind = LeaderChanged
	case replog.EpochChanged:
		out.Kind = EpochChanged
	case replog.ConfigChanged:
		out.Kind = ConfigChanged
	case replog.Removed:
		out.Kind = Removed
	}
	return out
}
