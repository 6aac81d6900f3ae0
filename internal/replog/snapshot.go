package replog

import (
	"fmt"
	"maps"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Compact tells the Core that a snapshot of the state machine covers the
// log up to index (which it has applied). The Core drops from memory all
// but trailing entries before it, so that followers slightly behind are
// caught up from the log rather than with a snapshot, and returns the
// index up to which the runtime should compact the LogStore.
func (c *Core) Compact(now edict.Time, index uint64, trailing uint64) (uint64, error) {
	c.advanceClock(now)
	if index > c.applied {
		return 0, fmt.Errorf("edictlog: snapshot at %d beyond the applied index %d", index, c.applied)
	}
	if index <= trailing {
		return 0, nil
	}
	upTo := index - trailing
	if upTo <= c.log.snap.Index {
		return c.log.snap.Index, nil
	}
	c.log.compact(upTo)
	return upTo, nil
}

// SnapshotPosition returns the index and stamp the runtime must put in the
// metadata of a snapshot taken at index, which must still be in the log.
func (c *Core) SnapshotPosition(index uint64) (wire.Position, bool) {
	st, ok := c.log.stampAt(index)
	return wire.Position{Index: index, Stamp: st}, ok
}

// SnapshotMeta is what the leader puts on a snapshot it streams to a
// follower, for the snapshot stored at pos.
func (c *Core) SnapshotMeta(pos wire.Position, size int64) (wire.SnapshotHeader, bool) {
	l := c.lead
	if l == nil || l.phase == phaseFetching {
		return wire.SnapshotHeader{}, false
	}
	cfg := c.epochs[l.epoch]
	return wire.SnapshotHeader{Epoch: l.epoch, Reign: l.reign, LastIndex: pos.Index, LastStamp: pos.Stamp,
		Members: cfg.Members, Learners: cfg.Learners, Size: size}, true
}

// SnapshotSent reports the end of a snapshot stream to peer.
func (c *Core) SnapshotSent(now edict.Time, peer edict.ProcessID, lastIndex uint64, err error) {
	c.advanceClock(now)
	if c.lead == nil {
		return
	}
	pr := c.lead.progress[peer]
	if pr == nil {
		return
	}
	pr.snapshot = false
	switch {
	case err == nil && lastIndex > pr.match:
		pr.match, pr.next, pr.inflight = lastIndex, lastIndex+1, pr.inflight[:0]
	case err != nil:
		// The stream broke, or the follower refused it, perhaps because
		// it installed this very snapshot and its answer was lost: it
		// then refuses every copy as not ahead of its commit index, and
		// asking for another at once would stream snapshots for good.
		// Probe at the snapshot's boundary instead, whose stamp the log
		// keeps, a heartbeat from now: a follower that holds the
		// snapshot matches there and says how far its log goes; one
		// that does not answers with a hint, and gets a snapshot then.
		// A probe that goes unanswered is followed by a snapshot, as
		// before (sendAppends): a follower that cannot answer may still
		// be caught up.
		pr.probing, pr.inflight, pr.snapProbe = true, pr.inflight[:0], true
		pr.next = max(pr.match, c.log.snap.Index) + 1
		pr.retryAt = now.Add(c.cfg.Heartbeat)
	}
	c.afterStep(now)
}

// AcceptSnapshot decides whether a snapshot from a peer may be installed:
// by the acceptance rule of appends, and only if it is ahead of the log.
// The runtime asks when the stream starts, so as not to receive one it
// would refuse, and SnapshotInstalled asks again when it ends: anything
// may have happened while it streamed.
func (c *Core) AcceptSnapshot(now edict.Time, from edict.ProcessID, meta wire.SnapshotHeader) error {
	c.advanceClock(now)
	return c.mayInstall(now, from, meta)
}

// mayInstallAtEnd is the check again, when the stream has arrived.
func (c *Core) mayInstallAtEnd(now edict.Time, from edict.ProcessID, meta wire.SnapshotHeader) error {
	if mutated(RuleAcceptedReignMonotone) {
		return nil
	}
	return c.mayInstall(now, from, meta)
}

func (c *Core) mayInstall(now edict.Time, from edict.ProcessID, meta wire.SnapshotHeader) error {
	if !c.mayAccept(now, from, meta.Epoch, meta.Reign) {
		return fmt.Errorf("edictlog: snapshot from %v refused: not from the process this one grants to, or of an older reign", from)
	}
	if meta.LastIndex <= c.commit {
		return fmt.Errorf("edictlog: snapshot up to %d is not ahead of the commit index %d", meta.LastIndex, c.commit)
	}
	return nil
}

// SnapshotInstalled tells the Core that a snapshot ending at meta's
// position is durable in the snapshot store and is to replace the state
// machine and the log; what follows comes by Append. It first checks the
// acceptance rule again, as of now: while the snapshot streamed, this
// process may have accepted a newer reign, begun to grant to another
// process, restarted, or committed past it. On an error nothing changed,
// and the runtime must discard the snapshot rather than restore it.
func (c *Core) SnapshotInstalled(now edict.Time, from edict.ProcessID, meta wire.SnapshotHeader) error {
	c.advanceClock(now)
	if err := c.mayInstallAtEnd(now, from, meta); err != nil {
		return err
	}
	pos := wire.Position{Index: meta.LastIndex, Stamp: meta.LastStamp}
	if c.log.matches(pos.Index, pos.Stamp) && pos.Index <= c.log.lastIndex() {
		c.log.compact(pos.Index) // keep the entries after it
	} else {
		c.log.reset(pos)
		c.unsynced(pos.Index + 1)
		c.ready.Batch.Entries = nil
		c.ready.Batch.TruncateFrom = 0
		c.ready.Batch.Reset = &pos
		// The log replaced is gone, durable or not: what is durable now is
		// the snapshot, which ends at pos. Keeping the old log's marks
		// would count entries appended after the install as durable
		// before their write, up to the old log's height.
		if !mutated(RuleResetLowersDurable) {
			c.persisted, c.stored = pos.Index, pos.Index
		} else {
			c.persisted, c.stored = max(c.persisted, pos.Index), max(c.stored, pos.Index)
		}
	}
	c.acceptReign(meta.Reign)
	cfg := wire.EpochConfig{Epoch: meta.Epoch, Members: meta.Members, Learners: meta.Learners}
	// The config edicts the snapshot spans are where this process would
	// have learned how to reach the processes they added; the snapshot
	// carries the addresses instead, announced with the configuration
	// for the runtime to keep (Node.onEvent).
	addrs := maps.Clone(meta.Addrs)
	if old, known := c.epochs[meta.Epoch]; !known || old.Heard {
		// The snapshot spans a stop edict this process never saw. Its
		// epoch was active where the snapshot was taken: it ran.
		c.epochs[cfg.Epoch] = cfg
		if b, err := wire.EncodeEpochConfig(cfg); err == nil {
			c.setStable(wire.EpochConfigKey(cfg.Epoch), b)
		}
		c.event(Event{Kind: ConfigChanged, Epoch: cfg.Epoch, Membership: &wire.Membership{Config: cfg, Addrs: addrs}})
		c.learnRanEpoch(now, cfg)
	} else if !slices.Equal(old.Learners, cfg.Learners) {
		// It spans config edicts that added or removed learners: without
		// them this process, should it lead, would not replicate to a
		// learner it never heard of.
		c.learnMembership(now, wire.Membership{Config: cfg, Addrs: addrs}, false)
	} else if len(addrs) > 0 {
		// The configuration is known, but what taught it may have named
		// no address (a stop edict names none): announce the addresses
		// with it all the same.
		c.event(Event{Kind: ConfigChanged, Epoch: old.Epoch, Membership: &wire.Membership{Config: old, Addrs: addrs}})
	}
	c.commit = max(c.commit, pos.Index)
	c.handed, c.applied, c.configDone = max(c.handed, pos.Index), max(c.applied, pos.Index), max(c.configDone, pos.Index)
	c.learnLeader(from, meta.Epoch, meta.Reign)
	c.afterStep(now)
	return nil
}
