package replog

import (
	"errors"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// ErrNoLeader is a read or write's answer when no leader is known.
var ErrNoLeader = errors.New("edictlog: no leader known")

// followerRead is a follower read waiting for the leader's index: queued
// until the next ReadIndexRequest is sent, then carried by it.
type followerRead struct {
	id    uint64
	start edict.Time // the reading at which the read started
}

// readBatch is a ReadIndexRequest in flight and the reads its reply
// answers, every one of which started at or before sent. Its id counts
// up within one life of this process; sent, a reading, tells lives apart.
// resent are the readings of the copies sent again, after sent, when no
// reply came (checkReads): a reply to any copy answers the reads, each
// copy having left after they all started.
type readBatch struct {
	id     uint64
	leader edict.ProcessID
	sent   edict.Time
	resent []edict.Time
	reads  []followerRead
}

// lastSent is the reading of the batch's newest copy.
func (b *readBatch) lastSent() edict.Time {
	if n := len(b.resent); n > 0 {
		return b.resent[n-1]
	}
	return b.sent
}

// answeredBy reports whether a reply stamped with the reading sent
// answers b.
func (b *readBatch) answeredBy(sent edict.Time) bool {
	return b.sent == sent || slices.Contains(b.resent, sent)
}

// Read starts a read with the caller's id at the given level. The answer
// comes as a ReadState in a later Ready (for lease and stale reads, the
// next one): serve the read once the state machine has applied its Index.
// A lease read must then also pass CanServeLease at the moment of the
// answer (C_p < E_p when it answers, docs/protocol.md, "The replicated log").
//
// Follower reads share requests (etcd's linearizable read loop): at most
// one ReadIndexRequest is in flight to a leader at a time, and a read
// that starts while one is waits for the next, which carries every read
// queued when it is sent — never for the one in flight, which may have
// reached the leader before a write acknowledged before this read started
// was committed.
func (c *Core) Read(now edict.Time, id uint64, level ReadLevel) {
	c.Reads(now, []ReadStart{{ID: id, Level: level}})
}

// ReadStart is a read for Reads: the caller's id and the level.
type ReadStart struct {
	ID    uint64
	Level ReadLevel
}

// Reads starts reads as Read does, all at the reading now, which must be
// no earlier than any of them started. The follower reads among them
// queue together before a request leaves, so that one request carries
// them all.
func (c *Core) Reads(now edict.Time, rs []ReadStart) {
	c.advanceClock(now)
	for _, r := range rs {
		c.read(now, r.ID, r.Level)
	}
	c.sendReads(now)
}

func (c *Core) read(now edict.Time, id uint64, level ReadLevel) {
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
		r := followerRead{id: id, start: now}
		if mutated(RuleFollowerReadSentAfterStart) {
			if i := c.readBatchTo(c.leaderHint); i >= 0 {
				c.readBatches[i].reads = append(c.readBatches[i].reads, r)
				return
			}
		}
		c.readQueue = append(c.readQueue, r)
	}
}

// FollowerReadsWaiting reports whether follower reads started here wait
// for a leader's read index: queued for the next request, or carried by
// one in flight. While they do, a runtime may hold the reads that arrive
// and start them together once none waits: they would wait for the next
// request anyway, which leaves no earlier than the reply to this one.
func (c *Core) FollowerReadsWaiting() bool {
	return len(c.readQueue) > 0 || len(c.readBatches) > 0
}

// readBatchTo returns the index in readBatches of the request in flight
// to leader, or -1.
func (c *Core) readBatchTo(leader edict.ProcessID) int {
	return slices.IndexFunc(c.readBatches, func(b readBatch) bool { return b.leader == leader })
}

// sendReads sends the queued follower reads to the leader in one request,
// unless one is in flight to it already; a process that now leads a ready
// reign answers them itself, as lease reads.
func (c *Core) sendReads(now edict.Time) {
	if len(c.readQueue) == 0 {
		return
	}
	if c.lead != nil {
		if !c.lead.serves() && !mutated(RuleReignStartBeforeReads) {
			return // until the reign is ready, or the reads time out
		}
		for _, r := range c.readQueue {
			c.ready.Reads = append(c.ready.Reads, c.leaseRead(now, r.id))
		}
		c.readQueue = c.readQueue[:0]
		return
	}
	to := c.leaderHint
	if to == edict.None || to == c.id || c.readBatchTo(to) >= 0 {
		return
	}
	c.readBatchID++
	b := readBatch{id: c.readBatchID, leader: to, sent: now, reads: c.readQueue}
	c.readQueue = nil
	c.readBatches = append(c.readBatches, b)
	c.send(wire.Message{To: to, ReadIndex: &wire.ReadIndexRequest{Epoch: c.el.ActiveEpoch(), ID: b.id, Sent: now}}, true)
}

// leaseRead is the zero-round-trip read: the commit index now, if this
// process leads a ready reign.
func (c *Core) leaseRead(now edict.Time, id uint64) ReadState {
	l := c.lead
	switch {
	case l == nil:
		return ReadState{ID: id, Leader: c.leaderHint, Err: ErrNotLeader}
	case !l.serves() && !mutated(RuleReignStartBeforeReads) || !c.el.IsLeader(now):
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
	return c.lead != nil && c.lead.serves() && c.el.IsLeader(now)
}

// onReadIndex answers a follower's ReadIndexRequest, for every read it
// carries, under the lease, with no quorum round: the commit index now is
// at least every write acknowledged before the request arrived, because the reign-start edict, committed before
// any read is answered, follows every earlier reign's entries.
func (c *Core) onReadIndex(now edict.Time, from edict.ProcessID, r *wire.ReadIndexRequest) {
	rep := &wire.ReadIndexReply{Epoch: r.Epoch, ID: r.ID, Sent: r.Sent, Leader: c.leaderHint}
	if l := c.lead; l != nil && (l.serves() || mutated(RuleReignStartBeforeReads)) && c.el.IsLeader(now) && asksOf(l, r.Epoch) {
		rep.OK, rep.Index, rep.Reign, rep.Leader = true, c.commit, c.lead.reign, c.id
		if pr := c.lead.progress[from]; pr != nil {
			// The follower serves its reads once it has applied Index,
			// which it may not know committed yet: sendAppends tells
			// it as soon as its log is known to hold Index.
			pr.readIndex = max(pr.readIndex, c.commit)
		}
	}
	c.send(wire.Message{To: from, ReadIndexReply: rep}, true)
}

// asksOf reports whether a read index request of a follower running in
// epoch is one leader l answers: its own epoch's, or, across a membership
// change this process leads through, the next epoch's while it carries
// its lease (the follower learned first that the old one terminated), or
// the epoch before its heir reign's (the follower has not learned it yet).
// Either way l is the only leader of both epochs.
func asksOf(l *leader, epoch uint64) bool {
	return epoch == l.epoch || l.carrying && epoch == l.epoch+1 || l.heir && epoch+1 == l.epoch
}

// TellCommitted asks this leader to tell process to that index committed
// as soon as it has and to's log is known to hold it, rather than with
// the next append or heartbeat: to waits on it — a write it forwarded
// here, which it answers once it has applied it too (Node.ApplyForwarded).
// While appends to it are in flight, or entries wait to commit, the next
// append carries the news; once neither is left, an empty append tells it. That
// append is a heartbeat's, vouching for no more than to is known to hold,
// so this serves liveness only. A process that does not lead, or a to it
// has no progress for, ignores it.
func (c *Core) TellCommitted(to edict.ProcessID, index uint64) {
	if c.lead == nil {
		return
	}
	if pr := c.lead.progress[to]; pr != nil {
		pr.tellIndex = max(pr.tellIndex, index)
	}
}

// onReadIndexReply answers the follower reads of the request the reply
// names by its id and the reading at which it was sent: ids restart with
// every life of this process, readings do not (their incarnation), so a
// reply to an earlier life's request — which would carry an older index —
// answers nothing, and neither does a late or duplicated reply to a
// request already answered or timed out. The next request, if reads
// wait for one, leaves in afterStep.
func (c *Core) onReadIndexReply(now edict.Time, from edict.ProcessID, r *wire.ReadIndexReply) {
	i := slices.IndexFunc(c.readBatches, func(b readBatch) bool {
		return b.id == r.ID && b.leader == from && (b.answeredBy(r.Sent) || mutated(RuleReplyReign))
	})
	if i < 0 {
		return
	}
	b := c.readBatches[i]
	c.readBatches = slices.Delete(c.readBatches, i, i+1)
	for _, p := range b.reads {
		rs := ReadState{ID: p.id, Index: r.Index, Leader: from}
		if mutated(RuleFollowerReadIndex) {
			rs.Index = c.applied // serve what is applied here, not the leader's commit
		}
		if !r.OK {
			rs.Err, rs.Leader = ErrNotLeader, r.Leader
		}
		c.ready.Reads = append(c.ready.Reads, rs)
	}
}

// checkReads fails the follower reads whose leader did not answer within
// MaxLease of their start, forgets a request none of whose reads still
// waits (its reply, if it comes, answers nothing), asks again for a
// request unanswered for readResend, and sends the queued reads once no
// request is in flight to the leader.
func (c *Core) checkReads(now edict.Time) {
	if len(c.readQueue) == 0 && len(c.readBatches) == 0 {
		return
	}
	timeout := c.el.MaxLease()
	expire := func(reads []followerRead, leader edict.ProcessID) []followerRead {
		keep := reads[:0]
		for _, p := range reads {
			if now.Before(p.start.Add(timeout)) {
				keep = append(keep, p)
				continue
			}
			c.ready.Reads = append(c.ready.Reads, ReadState{ID: p.id, Leader: leader, Err: ErrNoLeader})
		}
		clear(reads[len(keep):])
		return keep
	}
	c.readQueue = expire(c.readQueue, c.leaderHint)
	for i := range c.readBatches {
		c.readBatches[i].reads = expire(c.readBatches[i].reads, c.readBatches[i].leader)
	}
	c.readBatches = slices.DeleteFunc(c.readBatches, func(b readBatch) bool { return len(b.reads) == 0 })
	// A request, or its reply, lost on the way would hold its reads, and
	// the reads queued behind it, until they time out. Unanswered after
	// readResend, it goes again: to its leader, as a copy whose reply
	// answers it as the first's would; to the leader now known if that
	// changed, as the reads of a new request. Every copy leaves after
	// the reads started, so the index any reply carries covers every write
	// acknowledged before they did.
	for i := 0; i < len(c.readBatches); i++ {
		b := &c.readBatches[i]
		if now.Before(b.lastSent().Add(c.readResend())) {
			continue
		}
		if b.leader != c.leaderHint {
			c.readQueue = append(b.reads, c.readQueue...)
			c.readBatches = slices.Delete(c.readBatches, i, i+1)
			i--
			continue
		}
		b.resent = append(b.resent, now)
		c.send(wire.Message{To: b.leader, ReadIndex: &wire.ReadIndexRequest{Epoch: c.el.ActiveEpoch(), ID: b.id, Sent: now}}, true)
	}
	c.sendReads(now)
}

// readResend is how long a ReadIndexRequest waits for its reply before it
// is sent again: 4·RoundTrip, the silence after which a leader probes a
// follower again.
func (c *Core) readResend() time.Duration { return 4 * c.el.RoundTrip() }

// nextReadResend is when checkReads next sends a request again, if one
// is in flight.
func (c *Core) nextReadResend() (edict.Time, bool) {
	var next edict.Time
	for i := range c.readBatches {
		if at := c.readBatches[i].lastSent().Add(c.readResend()); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next, !next.IsZero()
}
