package replog

import (
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// Catching up on committed entries from any peer.
//
// A process that knows its newest epoch E only as Heard may not campaign
// in it: the first reign of E must hold everything E−1 committed, and
// only a log that holds the stop edict that began E surely does. Its log
// gets the stop edict from a leader of E — but if no member of a quorum
// of E holds the edict (the old leader lost its lease right after it
// committed), no leader of E can ever exist to bring it, and E−1 is
// wedged: nobody leads again. Committed entries never change, so anyone
// may supply them, leader or not. A Heard process therefore:
//
//   - commits the stop edict at once if its own log holds it: the news
//     names its position (wire.EpochConfig.StopIndex), which only a
//     process that knew it committed can have put there, and every entry
//     before a committed one is committed (Log Matching);
//   - otherwise asks its peers in turn, one at a time, for committed
//     entries after its commit index (a Committed Fetch). A peer answers
//     with entries up to its own commit index, or up to the named stop
//     edict if its log holds that entry.
//
// Why taking them is safe: every entry taken is committed, so it equals
// whatever any correct process holds or will hold at that index; an entry
// it replaces in this log (only above the commit index) conflicts with a
// committed one and can never commit. No acknowledgement is sent, so no
// leader counts the entries, and the acceptance rule, which guards what
// this process promises to leaders, is not involved: acceptedReign does
// not move. A candidate that chose this log as its quorum's best from a
// position reported before may find it changed; everything committed
// that the old log held lies below the first replaced entry, and a fetch
// that no longer finds the reported position releases the lease.
//
// A peer that compacted the entries after the asker's commit index
// answers Compacted, and the asker tries the next. No snapshot is sent:
// liveness needs none (docs/protocol.md's election argument: some member
// of the talking quorum holds the stop edict itself, and commits it from
// the news), and a leader of the epoch sends one to whoever still lacks
// entries.
//
// Late, duplicated and reordered replies, and replies from an earlier
// life of either side, carry only committed entries, facts for good: each
// is checked against this log (the first entry must follow the commit
// index, committed entries must match) and taken or dropped on its own.

// heardNewest reports whether this process knows its newest epoch only as
// Heard.
func (c *Core) heardNewest() bool {
	var top uint64
	for e := range c.epochs {
		top = max(top, e)
	}
	return c.epochs[top].Heard
}

// learning reports whether learnCommitted has work: a follower whose
// newest epoch is Heard.
func (c *Core) learning() bool { return c.lead == nil && c.heardNewest() }

// learnCommitted runs after every input.
func (c *Core) learnCommitted(now edict.Time) {
	if mutated(RuleHeardLearns) || !c.learning() {
		return
	}
	if p := c.stopProof; p.Index > c.commit && p.Index <= c.log.lastIndex() && c.log.matches(p.Index, p.Stamp) {
		c.commit = p.Index // processCommitted follows and learns the epoch from its own log
		return
	}
	if now.Before(c.learnAt) {
		return
	}
	c.learnAt = now.Add(2 * c.el.RoundTrip())
	peers := c.learnPeers()
	if len(peers) == 0 {
		return
	}
	if !c.learnProgress {
		c.learnPeer++ // no answer that helped: try the next peer
	}
	c.learnProgress = false
	to := peers[c.learnPeer%len(peers)]
	st, _ := c.log.stampAt(c.commit)
	c.learnID++
	f := &wire.Fetch{Epoch: c.el.ActiveEpoch(), ID: c.learnID, PrevIndex: c.commit, PrevStamp: st,
		Max: uint32(c.cfg.MaxAppendEntries), Committed: true}
	if c.stopProof.Index > c.commit {
		f.UpToIndex, f.UpToStamp = c.stopProof.Index, c.stopProof.Stamp
	}
	c.send(wire.Message{To: to, Fetch: f}, true)
}

// learnPeers is every other process of every known epoch, members and
// learners, in a fixed order: the ones that hold the stop edict may be
// in the old epoch only.
func (c *Core) learnPeers() []edict.ProcessID {
	var ps []edict.ProcessID
	for _, cfg := range c.epochs {
		ps = append(ps, cfg.Members...)
		ps = append(ps, cfg.Learners...)
	}
	slices.Sort(ps)
	ps = slices.Compact(ps)
	return slices.DeleteFunc(ps, func(p edict.ProcessID) bool { return p == c.id })
}

// onCommittedFetch answers a Committed Fetch with entries this process
// knows committed, after the asker's commit index.
func (c *Core) onCommittedFetch(from edict.ProcessID, f *wire.Fetch) {
	hi := c.commit
	if f.UpToIndex > hi && f.UpToIndex <= c.log.lastIndex() && c.log.matches(f.UpToIndex, f.UpToStamp) {
		// The asker's news says this entry committed; our log holds it.
		hi = f.UpToIndex
		if c.lead == nil {
			c.commit = hi
		}
	}
	if mutated(RuleLearnCommittedOnly) {
		hi = c.log.lastIndex()
	}
	last := c.log.last()
	r := &wire.FetchReply{Epoch: f.Epoch, ID: f.ID, LastIndex: last.Index, LastStamp: last.Stamp, Committed: true, Commit: hi}
	if f.PrevIndex >= c.log.snap.Index && f.PrevIndex >= hi {
		r.OK = true // nothing committed here that the asker lacks
	} else {
		c.answerFetch(r, f, hi)
	}
	c.send(wire.Message{To: from, FetchReply: r}, true)
}

// onCommittedFetchReply takes the committed entries a peer sent.
func (c *Core) onCommittedFetchReply(now edict.Time, from edict.ProcessID, r *wire.FetchReply) {
	if c.lead != nil {
		return // a leader holds every committed entry already
	}
	progress := false
	defer func() {
		if progress {
			c.learnProgress, c.learnAt = true, now // ask the same peer for more at once
		}
	}()
	es := r.Entries
	if !r.OK || len(es) == 0 || es[0].Index > c.commit+1 {
		return
	}
	for _, we := range es {
		if we.Index <= c.log.snap.Index {
			continue
		}
		cur := c.log.entry(we.Index)
		if we.Index <= c.commit {
			if cur != nil && !cur.Stamp.Equal(we.Stamp) {
				return // two committed entries at one index: the peer is wrong; take nothing more
			}
			continue
		}
		if cur != nil {
			if cur.Stamp.Equal(we.Stamp) {
				c.commit, progress = we.Index, true
				continue
			}
			c.truncateFrom(we.Index) // above the commit index: never committed
		}
		if we.Index != c.log.lastIndex()+1 {
			return
		}
		c.appendEntries(we)
		c.commit, progress = we.Index, true
	}
}
