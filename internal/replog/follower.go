package replog

import (
	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// mayAccept is docs/protocol.md, "The replicated log"'s acceptance rule: appends (and snapshots) come
// from the process this one grants to — granting to p is the promise that
// makes p's catch-up complete — or from anyone while it grants to no one;
// and only for a reign no older than the highest it accepted (the analogue
// of Raft's currentTerm). An epoch newer than the active one is accepted
// on the same terms: a member that has not yet learned the epoch catches
// up from its leader. An older epoch has terminated: its leader is stale.
//
// A process in its restart quarantine accepts nothing. "Grants to no one"
// is only true of a process that remembers its grants: a restarted one may
// have granted to a candidate, reporting where its log ended, just before
// it crashed. Accepting another leader's append now would let that leader
// commit an entry the candidate's catch-up, taken from the reported
// position, never sees. The quarantine outlasts every
// grant made before the restart, as it does for grants (docs/protocol.md, "Clocks").
func (c *Core) mayAccept(now edict.Time, from edict.ProcessID, epoch uint64, reign edict.Stamp) bool {
	active := c.el.ActiveEpoch()
	if epoch < active {
		return false
	}
	if c.el.Quarantined(now) && !mutated(RuleQuarantineAppends) {
		return false
	}
	if gs, ok := c.el.Grant(active); ok {
		granting := !gs.Wedged && gs.Grantee != edict.None && now.Before(gs.Finish)
		if gs.Wedged && epoch == active {
			return false
		}
		if granting && gs.Grantee != from && !mutated(RuleAcceptGrantee) {
			return false
		}
	}
	cmp, err := reign.Compare(c.acceptedReign)
	return err == nil && (cmp >= 0 || mutated(RuleAcceptReign))
}

func (c *Core) onAppend(now edict.Time, from edict.ProcessID, a *wire.Append) {
	reply := &wire.AppendReply{Epoch: a.Epoch, Reign: a.Reign, LastIndex: a.PrevIndex}
	defer func() {
		reply.Accepted = c.acceptedReign
		// The reply promises durability: it leaves after the batch.
		c.send(wire.Message{To: from, AppendReply: reply}, mutated(RuleFsyncBeforeAck))
	}()
	if !c.mayAccept(now, from, a.Epoch, a.Reign) {
		// Not a log mismatch: the leader learns our reign from the reply
		// and, if its own is older, steps down; it does not back up.
		reply.Refused = true
		if cmp, err := a.Reign.Compare(c.acceptedReign); err == nil && cmp >= 0 && c.el.Quarantined(now) {
			// Refused only for the quarantine: its sender is still the
			// best guess at the leader, for routing requests meanwhile.
			c.learnLeader(from, a.Epoch, a.Reign)
		}
		return
	}
	if c.lead != nil && !c.lead.reign.Equal(a.Reign) && from != c.id {
		c.stepDown(now, "another reign is live") // another reign is live: ours is not
	}
	c.acceptReign(a.Reign)
	c.lastContact = now
	c.learnLeader(from, a.Epoch, a.Reign)
	c.el.LeaderHeard(now, from)

	prev, prevStamp, es := a.PrevIndex, a.PrevStamp, a.Entries
	if prev < c.log.snap.Index {
		// Entries up to the snapshot are committed here already.
		skip := c.log.snap.Index - prev
		if skip >= uint64(len(es)) {
			reply.Success, reply.LastIndex = true, prev+uint64(len(es))
			return
		}
		prev, prevStamp, es = c.log.snap.Index, es[skip-1].Stamp, es[skip:]
	}
	if !c.log.matches(prev, prevStamp) {
		reply.HintIndex, reply.HintStamp = c.conflictHint(prev)
		return
	}
	for i, we := range es {
		cur := c.log.entry(we.Index)
		if cur != nil && cur.Stamp.Equal(we.Stamp) {
			continue
		}
		if cur != nil {
			c.truncateFrom(we.Index)
		}
		batch := make([]wire.Entry, 0, len(es)-i)
		for _, w := range es[i:] {
			batch = append(batch, w)
		}
		c.appendEntries(batch...)
		break
	}
	// The leader vouches for its commit index only as far as this append
	// showed our logs to match: beyond lastNew this log may hold another
	// reign's entries, which a later append truncates. Committing no
	// further is what keeps truncation above the commit index.
	lastNew := prev + uint64(len(es))
	n := min(a.LeaderCommit, lastNew)
	if mutated(RuleNoTruncateCommitted) {
		n = min(a.LeaderCommit, c.log.lastIndex())
	}
	if n > c.commit {
		c.commit = n
	}
	reply.Success, reply.LastIndex = true, lastNew
}

// learnLeader records who leads, as far as this process knows: a hint for
// routing, never a basis for safety.
func (c *Core) learnLeader(p edict.ProcessID, epoch uint64, reign edict.Stamp) {
	if s := c.succession; s != nil && epoch <= s.from && c.successor(c.lastNow) {
		// An append of the epoch ending, sent before its leader handed
		// the next one to this process: the hint stays this process's.
		return
	}
	if c.leaderHint != p {
		c.leaderHint = p
		c.event(Event{Kind: LeaderChanged, Leader: p, Epoch: epoch, Reign: reign})
	}
}

// conflictHint guesses where the leader should resume after a mismatch at
// prev: at our log's end if we are behind; otherwise before the run of
// entries of the reign that conflicts at prev, so the leader backs up a
// reign at a time rather than an entry at a time (etcd-raft's hint). The
// leader keeps the hint only if its own log has the same stamp there.
func (c *Core) conflictHint(prev uint64) (uint64, edict.Stamp) {
	i := c.log.lastIndex()
	if prev <= i && prev > c.log.snap.Index {
		reign := c.log.entry(prev).Reign
		i = prev - 1
		for i > c.log.snap.Index && c.log.entry(i).Reign.Equal(reign) {
			i--
		}
	}
	if c.commit < prev && i < c.commit {
		// Committed entries are the leader's own: never hint below them,
		// or the leader may back up into what it has compacted.
		i = c.commit
	}
	if i >= prev {
		// A mismatch at the snapshot's own index cannot happen in a
		// correct run (snapshots hold committed entries only); hint below
		// it anyway so the leader backs up.
		i = prev - 1
	}
	st, _ := c.log.stampAt(i)
	return i, st
}
