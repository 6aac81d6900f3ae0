package sim

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/wire"
)

// The replay adversary: acknowledgements that arrive again, late, in a
// later reign of the leader they were sent to.
//
// A network that duplicates and delays (a retransmission over a
// connection that was thought lost, a proxy's queue, a reordering
// switch) can hand a leader an AppendReply long after it was sent: after
// its leader lost its lease and led again. The reply still says "I hold
// everything up to LastIndex", but it speaks of the log of the reign it
// answered. If the new reign's log is shorter there — another reign
// overwrote the old tail, or the leader crashed before its own fsync and
// lost it — counting the reply commits the new reign-start edict with a
// quorum that does not hold it. That is what the rule "a leader counts
// only replies to its own reign's requests" (log/reply-reign) is for.
//
// Random delays (LongDelay, SpanDelay) produce such replies, but seldom
// when they matter: the shortened log and the reply's arrival in the
// window after the new reign-start edict is stored and before a quorum
// holds it. The adversary aims at that window with ground truth:
//
//   - it keeps a copy of every successful AppendReply, per recipient and
//     sender, the furthest-reaching one of each reign;
//   - when a process sends the first append of a reign it leads, and a
//     follower's kept reply from an earlier reign reaches at least the
//     new reign-start edict's index (which that follower does not hold),
//     the copy is delivered at once, right after the leader stored its
//     edict — always during a lost-tail plan, with the scenario's
//     StaleReplies chance otherwise;
//   - a lost-tail plan (LostTailEvery) makes the shortened log: the next
//     batch a leader appends after the plan is armed reaches only enough
//     followers to make a quorum with the leader (the holders), the
//     leader crashes after its appends left but before its own store
//     (as CrashInReady's crashBeforeStore), and the holders are cut off
//     from everyone until the leader leads again, after its quarantine,
//     with the others: its new reign-start edict takes an index of the
//     tail it lost, and the holders' acknowledgements of that tail are
//     the replies replayed into it.
//
// Everything here is a delay, a loss, a duplicate or a crash that a real
// deployment sees before GST; nothing forges a message, and nothing
// touches a core.

// replayAdversary is one run's replay adversary.
type replayAdversary struct {
	// kept[to][from] are copies of the successful AppendReplies from sent
	// to to, one per reign (the furthest-reaching), oldest first.
	kept map[edict.ProcessID]map[edict.ProcessID][]wire.Message
	// reigns is the reign each process last sent appends in: an append of
	// another reign is the first of a new one.
	reigns map[edict.ProcessID]edict.Stamp
	armed  bool // the next tail a leader appends is lost
	plan   *lostTail
}

// keptPerFollower bounds the replies kept per (leader, follower).
const keptPerFollower = 8

// lostTail is one lost-tail plan under way.
type lostTail struct {
	leader *lproc
	inc    uint64 // the leader's incarnation that lost the tail
	at     int64  // the event in which the tail's appends left
	want   int    // holders needed to make a quorum with the leader
	// holders stored the tail; they are cut off from everyone while the
	// plan lasts.
	holders []edict.ProcessID
	until   int64
}

// scheduleReplay sets up the replay adversary if the scenario asks for it.
func (r *lrun) scheduleReplay() {
	if r.sc.LostTailEvery == 0 && r.sc.StaleReplies == 0 {
		return
	}
	r.replay = &replayAdversary{kept: map[edict.ProcessID]map[edict.ProcessID][]wire.Message{},
		reigns: map[edict.ProcessID]edict.Stamp{}}
	if r.sc.LostTailEvery > 0 {
		// A plan lasts up to lostTailSpan; none starts so late that it
		// would still cut the holders off at GST.
		r.every(r.sc.LostTailEvery, r.gst-int64(lostTailSpan), func() {
			if r.replay.plan == nil {
				r.replay.armed = true
			}
		})
	}
}

// lostTailSpan bounds a lost-tail plan: the leader's downtime and
// quarantine (MaxLease), its campaign, and slack.
const lostTailSpan = 2 * time.Second

// replayIntercept sees every message a process sends, before the network
// does. It keeps copies of acknowledgements, replays them into new reigns,
// and carries out the lost-tail plan; it reports whether it dropped m.
func (r *lrun) replayIntercept(m wire.Message) bool {
	a := r.replay
	if a == nil || r.w.now >= r.gst {
		return false
	}
	if rep := m.AppendReply; rep != nil && rep.Success {
		a.keep(m)
	}
	if ap := m.Append; ap != nil {
		if prev, ok := a.reigns[m.From]; !ok || !prev.Equal(ap.Reign) {
			a.reigns[m.From] = ap.Reign
			r.replayIntoReign(m)
		}
	}
	if a.plan != nil {
		return r.lostTailFilter(m)
	}
	if a.armed && m.Append != nil {
		r.maybeLoseTail(m)
		if a.plan != nil {
			return r.lostTailFilter(m)
		}
	}
	return false
}

// keep stores a copy of a successful AppendReply: the one reaching
// furthest of its reign, for each (leader, follower).
func (a *replayAdversary) keep(m wire.Message) {
	byFrom := a.kept[m.To]
	if byFrom == nil {
		byFrom = map[edict.ProcessID][]wire.Message{}
		a.kept[m.To] = byFrom
	}
	list := byFrom[m.From]
	for i, k := range list {
		if k.AppendReply.Reign.Equal(m.AppendReply.Reign) {
			if m.AppendReply.LastIndex > k.AppendReply.LastIndex {
				list[i] = copyReply(m)
			}
			return
		}
	}
	list = append(list, copyReply(m))
	if len(list) > keptPerFollower {
		list = slices.Delete(list, 0, 1)
	}
	byFrom[m.From] = list
}

func copyReply(m wire.Message) wire.Message {
	rep := *m.AppendReply
	m.AppendReply = &rep
	return m
}

// replayIntoReign runs on the first append a process sends in a reign it
// leads: each follower's furthest-reaching kept reply from an earlier
// reign of this leader, if it reaches the new reign-start edict's index
// and the follower does not hold that edict, arrives right after the
// leader has stored the edict (the next event: the Ready cycle under way
// stores it).
func (r *lrun) replayIntoReign(m wire.Message) {
	a := r.replay
	p := r.procs[m.From]
	inPlan := a.plan != nil && a.plan.leader == p && p.inc > a.plan.inc
	if !inPlan && !r.w.chance(r.sc.StaleReplies) {
		return
	}
	reign := m.Append.Reign
	start := p.core.Status(p.now(r.w.now)).LastIndex // the reign-start edict is its last entry yet
	for _, e := range m.Append.Entries {
		if e.Stamp.Equal(reign) {
			start = e.Index
		}
	}
	var replays []wire.Message
	for _, from := range r.ids {
		var best *wire.Message
		for _, k := range a.kept[p.id][from] {
			if k.AppendReply.Reign.Equal(reign) || k.AppendReply.LastIndex < start {
				continue
			}
			if best == nil || k.AppendReply.LastIndex > best.AppendReply.LastIndex {
				best = &k
			}
		}
		if best != nil && !r.procs[from].holdsDurably(start, reign) {
			replays = append(replays, copyReply(*best))
		}
	}
	for _, rep := range replays {
		r.w.after(0, func() { r.deliver(rep) })
	}
	if inPlan {
		// The tail's acknowledgements are spent: the holders rejoin once
		// they have arrived.
		r.w.after(0, func() { a.plan = nil })
	}
}

// maybeLoseTail starts a lost-tail plan on an append that carries entries
// its leader has not stored yet: the leader crashes before it stores them,
// after this append left. The leader must be the lowest id of its epoch's
// members, so that once back it is every remaining process's weak leader
// (LowestLive) and leads the next reign.
func (r *lrun) maybeLoseTail(m wire.Message) {
	a := r.replay
	p := r.procs[m.From]
	if len(m.Append.Entries) == 0 || !p.up || p.frozenUntil > r.w.now || !p.core.CanServeLease(p.now(r.w.now)) {
		return
	}
	stored, err := p.store.LastIndex()
	last := m.Append.Entries[len(m.Append.Entries)-1].Index
	if err != nil || last <= stored {
		return // a retransmission of what the leader holds already
	}
	st := p.core.Status(p.now(r.w.now))
	if slices.Min(st.Members) != p.id || !slices.Contains(st.Members, m.To) {
		return
	}
	for _, id := range st.Members {
		if q := r.procs[id]; !q.up || q.frozenUntil > r.w.now {
			return // every member up: the others can elect the leader again
		}
	}
	a.armed = false
	// The epoch's quorums are majorities: the leader and len/2 holders.
	a.plan = &lostTail{leader: p, inc: p.inc, at: r.w.now, want: len(st.Members) / 2,
		until: min(r.w.now+int64(lostTailSpan), r.gst)}
	p.crashAt, p.crashFor = crashBeforeStore, r.w.between(time.Millisecond, 20*time.Millisecond)
}

// lostTailFilter carries out the plan on m: the tail reaches the holders
// only, and the holders are cut off from everyone afterwards. It reports
// whether m is dropped.
func (r *lrun) lostTailFilter(m wire.Message) bool {
	pl := r.replay.plan
	if r.w.now >= pl.until {
		r.replay.plan = nil
		return false
	}
	holder := func(id edict.ProcessID) bool { return slices.Contains(pl.holders, id) }
	if r.w.now == pl.at && m.From == pl.leader.id {
		if m.Append == nil || holder(m.To) {
			return false
		}
		if len(pl.holders) < pl.want {
			pl.holders = append(pl.holders, m.To)
			return false
		}
		r.net.lost++
		return true // the others never see the tail
	}
	if holder(m.From) || holder(m.To) {
		r.net.lost++
		return true
	}
	return false
}
