package log

import (
	"errors"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// ErrNoLeader is a read or write's answer when no leader is known.
var ErrNoLeader = errors.New("log: no leader known")

type pendingRead struct {
	id     uint64
	leader edict.ProcessID
	sent   edict.Time
}

// Read starts a read with the caller's id at the given level. The answer
// comes as a ReadState in a later Ready (for lease and stale reads, the
// next one): serve the read once the state machine has applied its Index.
// A lease read must then also pass CanServeLease at the moment of the
// answer (C_p < E_p when it answers, DESIGN §6).
func (c *Core) Read(now edict.Time, id uint64, level ReadLevel) {
	c.advanceClock(now)
	switch level {
	case ReadStale:
		c.ready.Reads = append(c.ready.Reads, ReadState{ID: id, Index: c.applied, Leader: c.leaderHint})
	case ReadLease:
		c.ready.Reads = append(c.ready.Reads, c.leaseRead(now, id))
	case ReadFollower:
		if c.lead != nil {
			c.ready.Reads = append(c.ready.Reads, c.leaseRead(now, id))
			return
		}
		if c.leaderHint == edict.None {
			c.ready.Reads = append(c.ready.Reads, ReadState{ID: id, Err: ErrNoLeader})
			return
		}
		c.reads = append(c.reads, pendingRead{id: id, leader: c.leaderHint, sent: now})
		c.send(wire.Message{To: c.leaderHint, ReadIndex: &wire.ReadIndexRequest{Epoch: c.el.ActiveEpoch(), ID: id, Sent: now}}, true)
	}
}

// leaseRead is the zero-round-trip read: the commit index now, if this
// process leads a ready reign.
func (c *Core) leaseRead(now edict.Time, id uint64) ReadState {
	l := c.lead
	switch {
	case l == nil:
		return ReadState{ID: id, Leader: c.leaderHint, Err: ErrNotLeader}
	case l.phase != phaseReady && !mutated(RuleReignStartBeforeReads) || !c.el.IsLeader(now):
		return ReadState{ID: id, Leader: c.id, Err: ErrNotReady}
	}
	return ReadState{ID: id, Index: c.commit, Leader: c.id}
}

// LeaseSince returns the reading since which this process's lease was
// measured, if it holds one: the runtime asks its clock whether the host
// was suspended since then (edict.Clock.Suspended) before every input, and
// calls ClockSuspended if so.
func (c *Core) LeaseSince(now edict.Time) (edict.Time, bool) { return c.el.LeaseSince(now) }

// ClockSuspended tells the Core that its clock may have stopped while the
// host was suspended, after the reading LeaseSince returned: the lease may
// have ended in real time, so it is given up at once.
func (c *Core) ClockSuspended(now edict.Time) {
	c.advanceClock(now)
	if c.lead == nil && !c.el.IsLeader(now) {
		return
	}
	c.el.ReleaseSuspended(now, c.el.MaxLease())
	c.stepDown(now, "the clock was suspended while leading")
	c.drainElect(now)
}

// CanServeLease reports, at the moment a lease read is answered, that this
// process still leads a ready reign with C_p < E_p. The runtime checks its
// clock's Suspended too.
func (c *Core) CanServeLease(now edict.Time) bool {
	return c.lead != nil && c.lead.phase == phaseReady && c.el.IsLeader(now)
}

// onReadIndex answers a follower read under the lease, with no quorum
// round: the commit index now is at least every write acknowledged before
// the request arrived, because the reign-start edict, committed before
// any read is answered, follows every earlier reign's entries.
func (c *Core) onReadIndex(now edict.Time, from edict.ProcessID, r *wire.ReadIndexRequest) {
	rep := &wire.ReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: r.Sent, Leader: c.leaderHint}
	if c.lead != nil && (c.lead.phase == phaseReady || mutated(RuleReignStartBeforeReads)) && c.el.IsLeader(now) && r.Epoch == c.lead.epoch {
		rep.OK, rep.Index, rep.Reign, rep.Leader = true, c.commit, c.lead.reign, c.id
	}
	c.send(wire.Message{To: from, ReadIndexReply: rep}, true)
}

// onReadIndexReply answers the follower read the reply names by its id
// and the reading at which it was asked: ids restart with every life of
// this process, readings do not (their incarnation), so a reply to an
// earlier life's read — which would carry an older index — answers nothing.
func (c *Core) onReadIndexReply(now edict.Time, from edict.ProcessID, r *wire.ReadIndexReply) {
	for i, p := range c.reads {
		if p.id != r.ID || p.leader != from || p.sent != r.Sent && !mutated(RuleReplyReign) {
			continue
		}
		c.reads = append(c.reads[:i], c.reads[i+1:]...)
		rs := ReadState{ID: r.ID, Index: r.Index, Leader: from}
		if mutated(RuleFollowerReadIndex) {
			rs.Index = c.applied // serve what is applied here, not the leader's commit
		}
		if !r.OK {
			rs.Err, rs.Leader = ErrNotLeader, r.Leader
		}
		c.ready.Reads = append(c.ready.Reads, rs)
		return
	}
}

// checkReads fails follower reads whose leader did not answer in time.
func (c *Core) checkReads(now edict.Time) {
	timeout := c.el.MaxLease()
	keep := c.reads[:0]
	for _, p := range c.reads {
		if now.Before(p.sent.Add(timeout)) {
			keep = append(keep, p)
			continue
		}
		c.ready.Reads = append(c.ready.Reads, ReadState{ID: p.id, Leader: p.leader, Err: ErrNoLeader})
	}
	c.reads = keep
}
