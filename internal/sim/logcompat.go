package sim

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/transport"
)

// The log core changes under this simulator while issue 13 is fixed: on
// main, SnapshotInstalled re-checks the acceptance rule and returns an
// error, and suspends are handled through Core.LeaseSince and
// Core.ClockSuspended before every input (log.Node.now). This branch's log
// has neither. The driver asks the core, by interface, which it has, and
// does what log.Node does with it, so the same simulator runs both; once
// the fix is merged the fallbacks below can go.

// suspendAPI is main's suspend interface.
type suspendAPI interface {
	LeaseSince(now edict.Time) (edict.Time, bool)
	ClockSuspended(now edict.Time)
}

// checkedInstall is main's SnapshotInstalled; uncheckedInstall this
// branch's.
type checkedInstall interface {
	SnapshotInstalled(now edict.Time, from edict.ProcessID, meta transport.SnapshotMeta) error
}
type uncheckedInstall interface {
	SnapshotInstalled(now edict.Time, from edict.ProcessID, meta transport.SnapshotMeta)
}

// ignoreSuspend: the driver does not ask its clock about suspends (a
// negative control, or the sim mutation).
func (r *lrun) ignoreSuspend() bool { return r.sc.IgnoreSuspend || simMutated(SimRuleSuspendCheck) }

// checkSuspend gives up a lease that a host suspend may have outlived,
// before p's core takes an input at reading now (log.Node.now on main):
// measured from the reign's first lease attempt. With this branch's log,
// as its log.Node.checkSuspend: measured from when the driver saw the
// reign ready (leaderSince); the core's release is not exported there, and
// Resign releases the same way (it also hands over to the best follower,
// which only makes that one campaign at once).
func (r *lrun) checkSuspend(p *lproc, now edict.Time) {
	if r.ignoreSuspend() {
		return
	}
	if c, ok := any(p.core).(suspendAPI); ok {
		if since, ok := c.LeaseSince(now); ok && p.clock.Suspended(since) {
			c.ClockSuspended(now)
		}
		return
	}
	if p.leading && p.clock.Suspended(p.leaderSince) {
		p.leading = false
		p.core.Resign(now)
	}
}

// leaseSuspended reports whether a lease read at p must not be answered
// because a suspend may have outlived the lease (log.Node.serveReads).
func (r *lrun) leaseSuspended(p *lproc, now edict.Time) bool {
	if r.ignoreSuspend() {
		return false
	}
	if c, ok := any(p.core).(suspendAPI); ok {
		since, ok := c.LeaseSince(now)
		return ok && p.clock.Suspended(since)
	}
	return p.clock.Suspended(p.leaderSince)
}

// snapshotInstalled tells p's core that the snapshot in is complete, and
// returns the core's refusal, if its log can refuse.
func (r *lrun) snapshotInstalled(p *lproc, now edict.Time, in *pendingInstall) error {
	switch c := any(p.core).(type) {
	case checkedInstall:
		return c.SnapshotInstalled(now, in.from, in.meta)
	case uncheckedInstall:
		c.SnapshotInstalled(now, in.from, in.meta)
	}
	return nil
}

// believesLeader reports whether p believes C_p < E_p now. This branch's
// log tells only whether p leads a ready reign (CanServeLease); main's
// tells of any lease (LeaseSince), also one whose reign has not started.
func (r *lrun) believesLeader(p *lproc) bool {
	now := p.now(r.w.now)
	if c, ok := any(p.core).(suspendAPI); ok {
		_, held := c.LeaseSince(now)
		return held
	}
	return p.core.CanServeLease(now)
}
