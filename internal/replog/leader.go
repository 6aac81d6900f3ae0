package replog

import (
	"fmt"
	"slices"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

type phase uint8

const (
	// phaseFetching: the reign's first lease completed and this process
	// fetches what the most up-to-date log of its granting quorum has and
	// it lacks.
	phaseFetching phase = iota + 1
	// phaseStarting: the reign-start edict is appended, not yet committed;
	// nothing else commits and no read is served (docs/protocol.md, "The replicated log").
	phaseStarting
	// phaseReady: the reign-start edict is committed.
	phaseReady
)

// leader is the state of a reign this process leads.
type leader struct {
	epoch uint64
	phase phase

	best      edict.ProcessID // whom to fetch from
	bestPos   wire.Position
	fetchFrom uint64 // the logs match up to here
	// attempt is Start_p of the lease instance that began this reign; with
	// fetchID it names a fetch, so that no reply to another reign's fetch
	// counts (fetch IDs start at 1 every reign).
	attempt   edict.Time
	fetchID   uint64
	fetchSent edict.Time

	reign      edict.Stamp // the reign-start edict's stamp: the reign's id
	reignIndex uint64
	progress   map[edict.ProcessID]*progress

	transfer         edict.ProcessID
	transferDeadline edict.Time
	stopped          bool              // a stop edict is appended: no more proposals
	next             []edict.ProcessID // the next epoch's members, once the stop edict committed
	// carrying: the stop edict committed, and this process keeps its
	// lease while it wedges the epoch and campaigns in the next
	// (elect.Core.WedgeKeeping): it serves reads, refuses writes with
	// ErrStopped, and leads until its next reign begins (heir) or the
	// succession fails (checkSuccession gives the lease up).
	carrying bool
	// heir: this reign follows this process's own reign of the epoch
	// before, whose lease it carried until this reign's lease began, and
	// its log was the most up to date of its granters'. Its commit index
	// is that reign's, exact: everything the epoch before committed is at
	// or below it and nothing else is committed. So it serves reads and
	// takes proposals before its reign-start edict commits, which a reign
	// that follows another process's cannot (its commit index may lag the
	// entries that reign committed).
	heir bool
	// leaving are learners a committed config edict removed, still sent
	// appends until told it committed (farewell).
	leaving map[edict.ProcessID]leaving
}

// matches is Status.Match: each follower's highest replicated index and
// self's persisted one; prev itself if it holds just that.
func (l *leader) matches(self edict.ProcessID, persisted uint64, prev map[edict.ProcessID]uint64) map[edict.ProcessID]uint64 {
	same := prev != nil && len(prev) == len(l.progress)+1 && prev[self] == persisted
	for p, pr := range l.progress {
		if !same {
			break
		}
		m, ok := prev[p]
		same = ok && m == pr.match
	}
	if same {
		return prev
	}
	m := make(map[edict.ProcessID]uint64, len(l.progress)+1)
	m[self] = persisted
	for p, pr := range l.progress {
		m[p] = pr.match
	}
	return m
}

// leaving is a removed learner the leader still tells of its removal: the
// edict's index, and when to give up.
type leaving struct {
	index uint64
	until edict.Time
}

// progress is what the leader knows of one follower's log.
type progress struct {
	match uint64
	next  uint64
	// inflight holds the last index of each append in flight to it that
	// carries entries, or is a probe, in the order sent. A reply frees
	// those it covers (its LastIndex), so that a reply to a heartbeat, or
	// a late or duplicated one, never frees an append still on its way:
	// counting replies instead let heartbeats' replies empty the window
	// under load, which then read as lost appends and were all sent again.
	inflight []uint64
	// flightStart is when the oldest of the appends in flight was sent
	// (when inflight last went from empty to not).
	flightStart edict.Time
	lastSend    edict.Time
	lastReply   edict.Time
	snapshot    bool // a snapshot is being streamed to it
	// snapProbe: a snapshot stream to it failed, and it is probed at the
	// snapshot's boundary (Core.SnapshotSent) until it answers.
	snapProbe bool
	probing   bool // its log is not known to match ours yet
	// reprobe: a probe, or the appends in flight, went unanswered; the
	// next probe is empty, at match.
	reprobe bool
	// refused: its last reply refused our appends (it is wedged in our
	// epoch, grants to another process, or is in its restart quarantine):
	// until it accepts one, this leader cannot bring it the log.
	refused bool
	// retryAt: it refused our appends (it grants to another process, or is
	// in its restart quarantine); probe it again no sooner than this.
	// Probing at once would ping-pong refusals as fast as the network
	// carries them, for as long as the quarantine lasts.
	retryAt edict.Time
	// sentCommit is the highest commit index an append told it, and
	// readIndex the highest index a read index reply told it to wait for
	// (onReadIndex): while readIndex is ahead, it learns each advance of
	// the commit index at once rather than at the next heartbeat.
	sentCommit, readIndex uint64
	// tellIndex is the highest index of a write it forwarded
	// (TellCommitted): once no append is in flight to it that the next
	// one would follow, it learns the commit of it at once.
	tellIndex uint64
}

// startReign runs when a lease completes that starts a reign (docs/protocol.md, "The replicated log"):
// take the most up-to-date log among the granting quorum's durable
// positions and this process's own, fetch what is missing, then append the
// reign-start edict.
func (c *Core) startReign(now edict.Time, ev elect.Event) {
	l := &leader{epoch: ev.Epoch, best: c.id, bestPos: c.log.last(), attempt: ev.Start}
	for _, r := range ev.QT {
		if r.Process == c.id {
			continue
		}
		g, ok := ev.Positions[r.Process]
		if !ok {
			panic(fmt.Sprintf("edictlog: lease of %v completed without the position of granter %v", c.id, r.Process))
		}
		cmp, err := g.Stamp.Compare(l.bestPos.Stamp)
		if err != nil {
			c.el.Release(now, c.el.MaxLease())
			c.drainElect(now)
			return
		}
		if cmp > 0 || cmp == 0 && g.Index > l.bestPos.Index {
			l.best, l.bestPos = r.Process, wire.Position{Index: g.Index, Stamp: g.Stamp}
		}
	}
	if old := c.lead; old != nil && old.carrying && old.epoch+1 == l.epoch && l.best == c.id && !mutated(RuleHeirServes) {
		l.heir = true
	}
	c.lead = l
	c.leaderHint = c.id
	c.succession = nil
	if l.best == c.id {
		c.appendReignStart(now)
		return
	}
	l.phase = phaseFetching
	l.fetchFrom = max(c.commit, c.log.snap.Index)
	c.sendFetch(now)
}

// sendFetch asks the best log's holder for the entries after fetchFrom.
// It starts at the commit index, which every log of the quorum shares
// (Log Matching), and moves up as replies arrive.
func (c *Core) sendFetch(now edict.Time) {
	l := c.lead
	st, _ := c.log.stampAt(l.fetchFrom)
	l.fetchID++
	l.fetchSent = now
	c.send(wire.Message{To: l.best, Fetch: &wire.Fetch{Epoch: l.epoch, ID: l.fetchID, Attempt: l.attempt, PrevIndex: l.fetchFrom, PrevStamp: st, Max: uint32(c.cfg.MaxAppendEntries)}}, true)
}

// onFetch answers a new leader's fetch with entries after (PrevIndex,
// PrevStamp), if the logs match there.
func (c *Core) onFetch(now edict.Time, from edict.ProcessID, f *wire.Fetch) {
	r := &wire.FetchReply{Epoch: f.Epoch, ID: f.ID, Attempt: f.Attempt}
	last := c.log.last()
	r.LastIndex, r.LastStamp = last.Index, last.Stamp
	c.answerFetch(r, f, c.log.lastIndex())
	c.send(wire.Message{To: from, FetchReply: r}, true)
}

// answerFetch fills r with the durable entries after f's (PrevIndex,
// PrevStamp), up to index upTo and f.Max of them: Compacted if they are
// only in a snapshot now, OK if the logs match at PrevIndex.
func (c *Core) answerFetch(r *wire.FetchReply, f *wire.Fetch, upTo uint64) {
	switch {
	case f.PrevIndex < c.log.snap.Index:
		r.Compacted = true
	case c.log.matches(f.PrevIndex, f.PrevStamp):
		r.OK = true
		end := min(upTo, c.persisted, c.log.lastIndex()) + 1 // durable entries only
		if f.PrevIndex+1 < end {
			n := int(f.Max)
			if n <= 0 || n > wire.MaxAppendEntries {
				n = c.cfg.MaxAppendEntries
			}
			r.Entries = slices.Clone(c.log.sliceBytes(f.PrevIndex+1, end, n, c.cfg.MaxAppendBytes))
		}
	}
}

func (c *Core) onFetchReply(now edict.Time, from edict.ProcessID, r *wire.FetchReply) {
	l := c.lead
	if l == nil || l.phase != phaseFetching || from != l.best || r.ID != l.fetchID || r.Epoch != l.epoch {
		return
	}
	if r.Attempt != l.attempt && !mutated(RuleReplyReign) {
		return // an earlier reign's fetch, answered late
	}
	if r.Compacted || !r.OK {
		// The best log's holder compacted what we lack, or the logs do
		// not match where every log should: let it lead instead.
		st, err := c.el.Issue(now)
		c.release(now, "the best log holder compacted or diverged; handing over")
		if err == nil {
			c.handOver(l.best, l.epoch, st)
		}
		return
	}
	for _, we := range r.Entries {
		e := we
		if cur := c.log.entry(e.Index); cur != nil {
			if cur.Stamp.Equal(e.Stamp) {
				continue
			}
			c.truncateFrom(e.Index)
		}
		if e.Index != c.log.lastIndex()+1 {
			break
		}
		c.appendEntries(e)
	}
	if c.log.lastIndex() == l.bestPos.Index && c.log.matches(l.bestPos.Index, l.bestPos.Stamp) {
		c.appendReignStart(now)
		return
	}
	if len(r.Entries) == 0 {
		c.release(now, "the best log holder no longer has what it reported") // the holder no longer has what it reported
		return
	}
	l.fetchFrom = c.log.lastIndex()
	c.sendFetch(now)
}

// appendReignStart appends the edict that starts the reign and begins
// replicating.
func (c *Core) appendReignStart(now edict.Time) {
	l := c.lead
	stamp, err := c.el.Issue(now)
	if err != nil {
		c.stepDown(now, "lease lost before the reign-start edict")
		return
	}
	e := wire.Entry{Index: c.log.lastIndex() + 1, Reign: stamp, Stamp: stamp, Kind: wire.EntryReignStart}
	l.reign, l.reignIndex, l.phase = stamp, e.Index, phaseStarting
	c.acceptReign(stamp)
	c.appendEntries(e)
	l.progress = map[edict.ProcessID]*progress{}
	for _, p := range c.peers(l.epoch) {
		l.progress[p] = &progress{next: l.reignIndex, probing: true}
	}
	c.sendAppends(now)
}

// peers are the processes the leader replicates to: the epoch's members
// and learners other than itself.
func (c *Core) peers(epoch uint64) []edict.ProcessID {
	cfg := c.epochs[epoch]
	var ps []edict.ProcessID
	for _, p := range append(slices.Clone(cfg.Members), cfg.Learners...) {
		if p != c.id && !slices.Contains(ps, p) {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

// sendAppends sends what each follower lacks. A follower is probed (one
// append at a time, from next, moving back only on a rejection) until an
// append succeeds; then appends are pipelined within the window
// (etcd-raft's probe and replicate states), only full ones once
// EagerInflight are in flight. Idle followers get heartbeats, which carry
// the commit index.
func (c *Core) sendAppends(now edict.Time) {
	l := c.lead
	if l == nil || l.phase == phaseFetching {
		return
	}
	silence := 4 * c.el.RoundTrip()
	peers := c.peers(l.epoch)
	for p, lv := range l.leaving {
		if pr := l.progress[p]; pr != nil && pr.sentCommit >= lv.index || !now.Before(lv.until) {
			delete(l.leaving, p)
		} else if !slices.Contains(peers, p) {
			peers = append(peers, p)
		}
	}
	for _, p := range peers {
		pr := l.progress[p]
		if pr == nil {
			// A process that joined the epoch (a learner): nothing is
			// known of its log, so probe from the beginning; log
			// matching or a snapshot takes it from there.
			pr = &progress{next: 1, probing: true}
			l.progress[p] = pr
		}
		if pr.snapshot || now.Before(pr.retryAt) {
			continue
		}
		switch {
		case pr.probing && len(pr.inflight) > 0 && !now.Before(pr.lastSend.Add(silence)) && !now.Before(pr.lastReply.Add(silence)):
			// The probe, or its answer, was lost: probe again, empty, at
			// what the follower is known to hold (a snapshot if the log
			// no longer holds that). Not on from the unanswered probe's
			// entries: behind a link that holds what it is sent, each
			// such probe carried the log on, and a follower cut off
			// while its leader compacted was caught up by the chain
			// once the kernel delivered it, seconds later, rather than
			// by a snapshot at once.
			pr.inflight, pr.next, pr.snapProbe, pr.reprobe = pr.inflight[:0], pr.match+1, false, true
		case !pr.probing && len(pr.inflight) > 0 && !now.Before(pr.flightStart.Add(silence)) && !now.Before(pr.lastReply.Add(silence)):
			// Appends in flight and nothing heard for 4·RoundTrip: probe
			// afresh from what the follower is known to hold, one append
			// at a time, and send a snapshot, on a stream of its own, if
			// the log no longer holds that. A lost append is also
			// found by the next heartbeat, which matches at the last
			// index sent (below), but a heartbeat rides the same
			// connection as the appends, and one that silently drops
			// packets (a cut link) holds both until the kernel
			// retransmits, seconds later. The cost: a follower whose
			// disk answers later than that is sent one append again.
			pr.inflight, pr.probing, pr.next, pr.reprobe = pr.inflight[:0], true, pr.match+1, true
		}
		window := c.cfg.MaxInflight
		if pr.probing {
			window = 1
		}
		sent := false
		if pr.reprobe {
			pr.reprobe = false
			sent = c.sendAppend(now, p, pr, pr.match, false)
		}
		for len(pr.inflight) < window && pr.next <= c.log.lastIndex() && !pr.snapshot {
			if len(pr.inflight) >= c.cfg.EagerInflight && c.log.lastIndex()+1-pr.next < uint64(c.cfg.MaxAppendEntries) &&
				!c.log.holdsBytes(pr.next, c.cfg.MaxAppendBytes) {
				break // held back for a fuller append (CoreConfig.EagerInflight)
			}
			if !c.sendAppend(now, p, pr, pr.next-1, true) {
				break
			}
			sent = true
		}
		switch {
		case sent || pr.snapshot:
		case pr.probing && len(pr.inflight) == 0:
			c.sendAppend(now, p, pr, pr.next-1, false) // an empty probe
		case !pr.probing && pr.readIndex > pr.sentCommit && min(c.commit, pr.match) > pr.sentCommit:
			// A follower read waits there for a commit index it has
			// not been told: tell it now.
			c.sendAppend(now, p, pr, pr.match, false)
		case !pr.probing && len(pr.inflight) == 0 && c.commit == c.log.lastIndex() &&
			pr.tellIndex > pr.sentCommit && min(c.commit, pr.match) > pr.sentCommit:
			// A write it forwarded committed, and it waits to apply it
			// before it answers: tell it now, if nothing else will. An
			// append in flight, or an entry not committed yet, means
			// another append follows soon and carries the news at no
			// extra message: under load, always.
			c.sendAppend(now, p, pr, pr.match, false)
		case !pr.probing && !now.Before(pr.lastSend.Add(c.cfg.Heartbeat)):
			// A heartbeat matches at the last index sent: it follows
			// every append in flight on the same ordered stream, so it
			// fails only if one of them was lost (a dropped frame, a
			// follower that shed it, or restarted without it), and the
			// follower's hint then says where to resume. Its answer
			// leaves after everything the follower received before it is
			// durable, so it acknowledges all of it.
			c.sendAppend(now, p, pr, pr.next-1, false)
		}
	}
}

// sendAppend sends one Append after prev, with entries or empty. It asks
// for a snapshot instead when prev is compacted away.
func (c *Core) sendAppend(now edict.Time, p edict.ProcessID, pr *progress, prev uint64, entries bool) bool {
	l := c.lead
	prevStamp, ok := c.log.stampAt(prev)
	if !ok {
		pr.snapshot = true
		c.ready.Snapshots = append(c.ready.Snapshots, p)
		return false
	}
	a := &wire.Append{Epoch: l.epoch, Reign: l.reign, LeaderCommit: c.commit, PrevIndex: prev, PrevStamp: prevStamp}
	if entries {
		es := c.log.sliceBytes(prev+1, c.log.lastIndex()+1, c.cfg.MaxAppendEntries, c.cfg.MaxAppendBytes)
		a.Entries = slices.Clone(es)
		if len(pr.inflight) == 0 {
			pr.flightStart = now
		}
		pr.next = prev + 1 + uint64(len(es))
		pr.inflight = append(pr.inflight, pr.next-1)
	} else if pr.probing {
		if len(pr.inflight) == 0 {
			pr.flightStart = now
		}
		pr.inflight = append(pr.inflight, prev)
	}
	if !pr.probing {
		// A heartbeat may only vouch for the commit index as far as the
		// follower's log is known to match ours.
		a.LeaderCommit = min(c.commit, max(pr.match, prev+uint64(len(a.Entries))))
	}
	c.send(wire.Message{To: p, Append: a}, true)
	pr.lastSend = now
	pr.sentCommit = max(pr.sentCommit, a.LeaderCommit)
	return true
}

func (c *Core) onAppendReply(now edict.Time, from edict.ProcessID, r *wire.AppendReply) {
	l := c.lead
	if l == nil || l.phase == phaseFetching || r.Epoch != l.epoch {
		return
	}
	pr := l.progress[from]
	if pr == nil {
		return
	}
	if cmp, err := r.Accepted.Compare(l.reign); err == nil && cmp > 0 {
		// A newer reign exists: ours is over whatever our lease says. This
		// holds however late the reply is: reigns only grow.
		c.release(now, "a follower accepted a newer reign")
		return
	}
	if !r.Reign.Equal(l.reign) && !mutated(RuleReplyReign) {
		// A reply to an earlier reign of ours, delivered late. What it
		// acknowledged may have been overwritten since by another reign;
		// counting it could commit an index the quorum does not hold.
		return
	}
	pr.lastReply, pr.snapProbe, pr.refused = now, false, r.Refused
	if !r.Success {
		if r.Refused {
			// It does not grant to us (yet): probe again later, from where
			// we were; a refusal says nothing about its log.
			pr.probing, pr.inflight, pr.retryAt = true, pr.inflight[:0], now.Add(c.cfg.Heartbeat)
			return
		}
		var next uint64
		switch {
		case c.log.matches(r.HintIndex, r.HintStamp):
			next = r.HintIndex + 1
		case r.HintIndex < c.log.snap.Index && r.LastIndex > c.log.snap.Index:
			// The hint is in our compacted prefix, where we cannot check
			// it: probe at the snapshot's boundary, whose stamp we know.
			// Only a mismatch there needs a snapshot.
			next = c.log.snap.Index + 1
		default:
			next = min(r.HintIndex+1, r.LastIndex)
		}
		pr.next, pr.inflight, pr.probing = max(pr.match+1, next), pr.inflight[:0], true
		c.sendAppends(now)
		return
	}
	if r.LastIndex > pr.match {
		pr.match = r.LastIndex
	}
	pr.next = max(pr.next, pr.match+1)
	pr.probing = false
	pr.inflight = slices.DeleteFunc(pr.inflight, func(last uint64) bool { return last <= r.LastIndex })
	if len(pr.inflight) == 0 && pr.next > pr.match+1 {
		// Nothing in flight, yet the follower has less than was sent. A
		// success acknowledges its whole append, so this is a defence,
		// not a path: resend from what it has.
		pr.next = pr.match + 1
	}
	c.maybeCommit(now)
	if l.transfer == from && pr.match == c.log.lastIndex() {
		c.finishTransfer(now)
		return
	}
	c.sendAppends(now)
}

// maybeCommit advances the commit index to the highest index of the
// current reign that a quorum of the epoch holds durably — the leader
// counting itself only after its own fsync — and only while C_p < E_p
// (docs/protocol.md, "The replicated log").
func (c *Core) maybeCommit(now edict.Time) {
	l := c.lead
	if l == nil || l.phase == phaseFetching || !c.el.IsLeader(now) {
		return
	}
	cfg := c.epochs[l.epoch]
	q, err := cfg.Quorum()
	if err != nil {
		return
	}
	match := func(p edict.ProcessID) uint64 {
		if p == c.id {
			if mutated(RuleLeaderCountsDurable) {
				return c.log.lastIndex()
			}
			return min(c.persisted, c.log.lastIndex())
		}
		if pr := l.progress[p]; pr != nil {
			return pr.match
		}
		return 0
	}
	cands := make([]uint64, 0, len(cfg.Members))
	for _, p := range cfg.Members {
		cands = append(cands, match(p))
	}
	slices.Sort(cands)
	slices.Reverse(cands)
	for _, n := range cands {
		if n <= c.commit || n < l.reignIndex && !mutated(RuleCurrentReignCommit) {
			break
		}
		var have []edict.ProcessID
		for _, p := range cfg.Members {
			if match(p) >= n {
				have = append(have, p)
			}
		}
		if q.IsQuorum(have) {
			c.commit = n
			break
		}
	}
	if l.phase == phaseStarting && (c.commit >= l.reignIndex || mutated(RuleReignStartBeforeReads)) {
		l.phase = phaseReady
		c.event(Event{Kind: BecameLeader, Leader: c.id, Epoch: l.epoch, Reign: l.reign})
	}
}

// serves reports whether the reign serves reads and takes proposals: once
// its reign-start edict committed, or at once for an heir.
func (l *leader) serves() bool {
	return l.phase == phaseReady || l.heir && l.phase == phaseStarting
}

// leaderTick: heartbeats, transfer timeouts, fetch retries, commit.
func (c *Core) leaderTick(now edict.Time) {
	l := c.lead
	if !c.el.IsLeader(now) {
		c.stepDown(now, "lease lost")
		return
	}
	switch l.phase {
	case phaseFetching:
		if !now.Before(l.fetchSent.Add(2 * c.el.RoundTrip())) {
			c.sendFetch(now)
		}
		return
	}
	if l.transfer != edict.None && !now.Before(l.transferDeadline) {
		l.transfer = edict.None // the target did not catch up: keep leading
	}
	c.maybeCommit(now)
	c.sendAppends(now)
	if l.next != nil && !l.carrying {
		if c.nextEpochHoldsStop() {
			c.succeed(now)
		} else {
			c.el.RenewWhileEnding(c.nextEpochLive(now) && !mutated(RuleRenewWhileEnding))
		}
	}
}

// stepDown ends this process's reign, saying why.
func (c *Core) stepDown(now edict.Time, why string) {
	if c.lead == nil {
		return
	}
	c.lead = nil
	if c.leaderHint == c.id {
		c.leaderHint = edict.None
	}
	c.event(Event{Kind: SteppedDown, Epoch: c.el.ActiveEpoch(), Reason: why})
	if c.wedgeOnStepDown {
		c.wedgeOnStepDown = false
		c.wedgePredecessors(now)
	}
}

// release gives the lease up (§6) and steps down.
func (c *Core) release(now edict.Time, why string) {
	c.el.Release(now, c.el.MaxLease())
	c.stepDown(now, why) // before the lease core's LeaseLost names a vaguer reason
	c.drainElect(now)
}

// Propose appends a command edict if this process leads a ready reign.
// The entry's index and stamp identify the write; it is committed when
// Ready.Apply hands it out.
func (c *Core) Propose(now edict.Time, kind wire.EntryKind, data []byte) (wire.Entry, error) {
	c.advanceClock(now)
	l := c.lead
	switch {
	case l == nil && c.successor(now):
		return wire.Entry{}, ErrNotReady // this process leads the next epoch in a moment
	case l == nil:
		return wire.Entry{}, ErrNotLeader
	case !l.serves():
		return wire.Entry{}, ErrNotReady
	case l.transfer != edict.None:
		return wire.Entry{}, ErrTransferring
	case l.stopped:
		return wire.Entry{}, ErrStopped
	}
	stamp, err := c.el.Issue(now)
	if err != nil {
		c.stepDown(now, "lease lost while proposing")
		return wire.Entry{}, ErrNotLeader
	}
	e := wire.Entry{Index: c.log.lastIndex() + 1, Reign: l.reign, Stamp: stamp, Kind: kind, Data: data}
	c.appendEntries(e)
	return e, nil
}

// Flush sends what proposals appended since the last Ready; the runtime
// calls it once per batch of proposals so they share messages.
func (c *Core) Flush(now edict.Time) {
	c.advanceClock(now)
	if c.lead != nil {
		c.sendAppends(now)
	}
}

// Issue creates a stamped edict for use outside the log (docs/protocol.md, "Clocks"): a
// fencing token valid while this process leads.
func (c *Core) Issue(now edict.Time) (edict.Stamp, error) {
	c.advanceClock(now)
	if c.lead == nil || c.lead.phase != phaseReady {
		return edict.Stamp{}, ErrNotLeader
	}
	return c.el.Issue(now)
}

// TransferLeadership hands leadership to target (docs/protocol.md, "The replicated log"): stop taking
// writes, bring target up to date, then tell it to campaign and release.
func (c *Core) TransferLeadership(now edict.Time, target edict.ProcessID) error {
	c.advanceClock(now)
	l := c.lead
	if l == nil || l.phase != phaseReady {
		return ErrNotLeader
	}
	if l.stopped {
		// The epoch ends with a stop edict appended: its leader leads the
		// next one, or hands it over, itself (succeed).
		return ErrStopped
	}
	if !slices.Contains(c.epochs[l.epoch].Members, target) || target == c.id {
		return errNotMember(target, l.epoch)
	}
	l.transfer = target
	l.transferDeadline = now.Add(c.el.MaxLease())
	if pr := l.progress[target]; pr != nil && pr.match == c.log.lastIndex() {
		c.finishTransfer(now)
		return nil
	}
	c.sendAppends(now)
	return nil
}

func (c *Core) finishTransfer(now edict.Time) {
	l := c.lead
	c.release(now, "leadership transferred")
	c.handOver(l.transfer, l.epoch, l.reign)
}

// handOver tells target to campaign at once (TimeoutNow). Call it after
// c.release: TimeoutNow goes with the messages sent after the batch, so
// the releases leave before it, and the target — and, most likely, every
// other granter — no longer grants to this process when the target's
// grant requests arrive. The other way round, the target refused itself;
// unless every other granter had seen the release, its attempt failed, it
// backed off past the old grants, its detector (told by the refusals)
// still named this process, and this process took the lease back after
// its hold-off: the transfer was lost.
func (c *Core) handOver(target edict.ProcessID, epoch uint64, reign edict.Stamp) {
	c.send(wire.Message{To: target, TimeoutNow: &wire.TimeoutNow{Epoch: epoch, Reign: reign}}, false)
}

// Resign gives leadership up for good, as a process that shuts down does
// (docs/architecture.md): it releases its lease and hands over to the member whose
// log is the most up to date as far as it knows. Without the handover no
// one would campaign until its failure detector suspected this process —
// a released grant does not lapse, so that takes longer than waiting out
// a crashed leader's lease. A leader whose epoch is ending hands over to
// no one: the next epoch's members take over once they wedged it.
func (c *Core) Resign(now edict.Time) {
	c.advanceClock(now)
	l := c.lead
	target := edict.None
	if l != nil && l.phase == phaseReady && !l.stopped {
		target = c.mostUpToDate(c.epochs[l.epoch].Members, edict.Time{})
	}
	if l == nil && !c.el.IsLeader(now) {
		return
	}
	c.release(now, "resigned")
	if target != edict.None {
		c.handOver(target, l.epoch, l.reign)
	}
}

// onTimeoutNow: the leader hands over; campaign at once. A hand-over from
// a reign older than one this process accepted comes late, from a leader
// that was superseded since: campaigning on it would only unsettle the
// newer reign.
func (c *Core) onTimeoutNow(now edict.Time, from edict.ProcessID, t *wire.TimeoutNow) {
	if cmp, err := t.Reign.Compare(c.acceptedReign); err != nil || cmp < 0 {
		return
	}
	active := c.el.ActiveEpoch()
	if t.Epoch > active+1 || t.Epoch < active {
		if t.Epoch > active {
			c.campaignLater(now, t.Epoch, from) // after an epoch this process does not know yet
		}
		return
	}
	if t.Epoch > t.Reign.Epoch && c.lead == nil {
		// A leader that ended its epoch hands the next one to this
		// process (succeed): it leads in a moment, and names itself
		// meanwhile, as its sender does (successor).
		c.succession = &succession{from: t.Epoch - 1, reign: t.Reign, to: c.id, handed: t.Epoch == active, until: now.Add(c.el.MaxLease())}
		c.leaderHint = c.id
	}
	if t.Epoch > active {
		// Ask the old epoch's members to wedge again now, rather than
		// after the back-off their refusals asked for while they granted
		// to the sender, which wedged them since. Once a blocking set
		// answers, the epoch is terminated here too, and afterStep
		// campaigns.
		c.campaignLater(now, t.Epoch, from)
		c.el.WedgeNow(now)
		c.drainElect(now)
		return
	}
	if c.epochs[t.Epoch].Heard && !mutated(RuleHandOverAwaitsEpoch) {
		// afterStep campaigns once the log brings the epoch
		// (campaignUntil); epoch 0 is never only heard of.
		c.campaignLater(now, t.Epoch, from)
		return
	}
	c.el.CampaignFor(now, from)
	c.drainElect(now)
}

// campaignLater has afterStep campaign in epoch, handed over by from,
// once it is active and known from the log, for up to MaxLease.
func (c *Core) campaignLater(now edict.Time, epoch uint64, from edict.ProcessID) {
	c.campaignIn, c.handedBy, c.campaignUntil = epoch, from, now.Add(c.el.MaxLease())
}
