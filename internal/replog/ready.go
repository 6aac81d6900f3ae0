package replog

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

// ReadLevel is the consistency of a read (edictlog.ReadLevel documents
// each; docs/protocol.md, "The replicated log").
type ReadLevel uint8

const (
	ReadLease ReadLevel = iota
	ReadFollower
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

// EventKind names what changed in the protocol. A Node turns each into
// the edictlog.EventKind of the same name, whose doc says what it promises.
type EventKind uint8

const (
	// BecameLeader: this process's reign-start edict is committed.
	BecameLeader EventKind = iota + 1
	// SteppedDown: this process no longer leads.
	SteppedDown
	// LeaderChanged: this process learned of a different leader.
	LeaderChanged
	// EpochChanged: the process moved to a new epoch.
	EpochChanged
	// ConfigChanged: learners changed within the epoch, or a
	// configuration (and its addresses) became known otherwise.
	ConfigChanged
	// Removed: a committed membership edict took this process out of
	// the configuration.
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
	case Removed:
		return "removed"
	}
	return "unknown"
}

// Event reports a change of role or membership (edictlog.Event).
type Event struct {
	Kind   EventKind
	Leader edict.ProcessID
	Epoch  uint64
	Reign  edict.Stamp
	Index  uint64
	// Reason says why a SteppedDown happened.
	Reason string
	// Membership is the configuration a ConfigChanged event makes known,
	// with the addresses that came with it.
	Membership *wire.Membership
}
