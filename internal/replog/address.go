package replog

import (
	"fmt"
	"maps"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// A member's address is replicated state. The cluster learns it from the
// log: the config edict that added the process (AddLearner), the config
// edicts that changed it since (ChangeAddress), or, for a process that
// installs a snapshot instead of those edicts, the snapshot's header
// (wire.SnapshotHeader.Addrs). Each process keeps the newest it applied
// under peers/ in its store, which a restart reads back over the address
// Config.Peers gives (Recover). A changed address is a config edict of the
// current epoch naming the same members and learners: no new epoch, no
// wedge, no change of leader, and no write or read waits for it.

// ChangeAddress proposes addr as the transport address of member or
// learner id: a config edict of the current epoch with the same members
// and learners (docs/protocol.md, "Epochs and wedging"). Once it commits,
// every process reaches id at addr and keeps it (Node.SetAddress). Only
// the leader proposes it; like every membership change it is refused
// while another is in flight (ErrChangeInProgress), and with ErrNotMember
// or ErrBadAddress in a *MembershipError.
func (c *Core) ChangeAddress(now edict.Time, id edict.ProcessID, addr string) (wire.Entry, error) {
	c.advanceClock(now)
	const op = "change address"
	cfg, err := c.currentConfig(op, id)
	if err != nil {
		return wire.Entry{}, err
	}
	if !slices.Contains(cfg.Members, id) && !slices.Contains(cfg.Learners, id) {
		return wire.Entry{}, &MembershipError{Op: op, Process: id, Epoch: cfg.Epoch, Err: ErrNotMember}
	}
	if err := wire.CheckAddr(addr); err != nil {
		return wire.Entry{}, &MembershipError{Op: op, Process: id, Epoch: cfg.Epoch, Err: fmt.Errorf("%w: %w", ErrBadAddress, err)}
	}
	return c.proposeMembership(now, wire.EntryConfig, cfg, map[edict.ProcessID]string{id: addr})
}

// inConfig reports whether id is a member or learner of the newest
// configuration this process knows.
func (c *Core) inConfig(id edict.ProcessID) bool {
	cfg := c.epochs[slices.Max(slices.Collect(maps.Keys(c.epochs)))]
	return slices.Contains(cfg.Members, id) || slices.Contains(cfg.Learners, id)
}
