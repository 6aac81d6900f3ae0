package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/internal/replog"
	"github.com/edictlog/edictlog/wire"
)

// The epoch-gap adversary (LogScenario.EpochGap): a member X of three
// consecutive epochs E, G = E+1 and N = E+2 misses G entirely, hears of N
// while G's leader still holds its lease, and completes E's wedging (the
// rule elect/no-epoch-skip; TestLog's log-replacements-faults found the
// bug it guards against at seed 501 of 2,000).
//
// X runs in E. News of N (a lease message's Newest) teaches it N as
// Heard; it wedges E, and E's other members, which wedged E when G began,
// answer at once: X knows E TERMINATED. G is unknown to X. Skipping it —
// running in N because N is the lowest known epoch not known terminated —
// is wrong: G may still have a leader L. X's messages then say N runs
// (NewestRan), which tells every member of N that G terminated; and a
// grant request in N tells its recipient the same (onGrantRequest). With
// the log's committed fetch (learn.go) bringing X the stop edicts that
// began G and N, X knows N from its log and campaigns in it; N's members
// grant, and X leads N while L leads G. With the rule, X stays in E,
// granting in none, until the log brings G: then it runs in G, wedges it,
// and waits for L's lease to end like everyone else.
//
// The adversary plays it on a cluster that replaces members (Membership,
// Replacements 2): G begins with a stop edict that removes a member, N
// with one that promotes a learner, so that N has one member more than G
// and the quorum of G that commits N's stop edict is no quorum of N — the
// case in which L keeps its lease after the commit, not renewing it,
// until it lapses (learnMembership) — and the adversary keeps the new
// member's acknowledgement away.
//
//  1. cut: when a leader of E sends the first append that carries the
//     stop edict beginning G, the adversary picks X among G's members,
//     not the lowest (whom the detectors will name G's leader). From now
//     on every message to or from X is lost: G begins, and elects L,
//     without X.
//  2. stop: when L sends the first append that carries the stop edict
//     beginning N, the adversary picks its holders: Q_G−1 followers of G
//     other than X (Q_G is G's quorum). L's appends to everyone else —
//     X, G's other members, the learner N promotes — are lost; its
//     appends to the holders are held until L's next renewal has
//     completed (ground truth: its lease expiry moves), so that the
//     commit comes as early in a lease as it can and L's lease outlasts
//     the plan. Lease messages to X now arrive if their news names N (or
//     later): X can hear of N, never of G. X's lease messages arrive
//     anywhere but at L.
//  3. spread: the holders acknowledge; L commits N's stop edict, stops
//     renewing, and keeps leading G. A holder learns the commit and
//     wedges G; its request to X carries the news of N. X wedges E, which
//     its other members complete at once.
//  4. learn: once X knows E TERMINATED (its EpochChanged event), its log
//     messages flow again (L's appends to it excepted), and its committed
//     fetch brings the stop edicts of G and N; its detector wrongly
//     suspects every other process (X has heard nothing from L for a
//     whole epoch), so it is its own weak leader, and its runtime ticks
//     its core every d meanwhile; and lease messages to L are lost, every
//     one — L needs none to keep the lease it no longer renews, and news
//     that N runs would make it drop the lease.
//  5. end: when L's lease has ended (or after a deadline), the network
//     carries everything again and X's detector learns the truth.
//
// With the rule, X is in G when its log catches up, G is not TERMINATED
// (L's grantees refuse to wedge while they grant to it), and X does not
// campaign; when L's lease lapses G ends and N elects. Without it, X
// leads N while L leads G: the simulator's leader uniqueness check fires.
//
// Random faults rarely reach it: it needs a member of N cut off from the
// first append of G's stop edict until after N's stop edict committed —
// two membership changes, a second or more — and then reached by the
// news of N before any message of G's or its log reaches it; N's stop
// edict committed on a quorum of G that is no quorum of N; and X's
// wedging, catch-up and campaign, and the others' grants, all within the
// rest of the lease L held when the commit stopped its renewals (about
// d + i). log-replacements-faults found it once in 2,000 seeds (p3 heard
// of epoch 2 while it knew only epoch 0), and the mutation runner's 40
// seeds per scenario never. Everything here is a loss, a delay or a
// detector mistake before GST.
type epochGap struct {
	r     *lrun
	gap   uint64 // G, the epoch X misses
	phase egPhase

	x       *lproc            // X
	old     *lproc            // L, G's leader
	prev    []edict.ProcessID // E's members
	members []edict.ProcessID // G's members
	next    []edict.ProcessID // N's members
	holders []edict.ProcessID // followers of G that get N's stop edict from L
	held    []wire.Message
	expiry  edict.Time // L's lease expiry when N's stop edict was first sent
	tickAt  int64      // X's core's next tick from the adversary (learn)

	// Real times of the phases, for the failure report.
	cutAt, stopAt, spreadAt, learnAt, endAt int64
	note                                    string
}

type egPhase int

const (
	egWatch   egPhase = iota // waiting for the stop edict that begins G
	egCut                    // X is cut off from everyone
	egStop                   // L sent N's stop edict; its appends to the holders wait for its renewal
	egSpread                 // the holders have N's stop edict; X may hear of N
	egLearn                  // X knows E terminated: its log catches up; lease messages to L are lost
	egDone                   // the network carries everything again
	egGivenUp                // the plan could not be carried out
)

// epochGapSpan bounds the plan from G's stop edict to the end: two
// membership steps of the plan (400 ms apart, jittered) and a lease, with
// slack. No plan starts so late that it would still be under way at GST.
const epochGapSpan = 3 * time.Second

// scheduleEpochGap sets up the adversary if the scenario asks for it. G
// is epoch 2: the membership plan's first removal begins it, its second
// promotion begins epoch 3.
func (r *lrun) scheduleEpochGap() {
	if !r.sc.EpochGap {
		return
	}
	r.epochGap = &epochGap{r: r, gap: 2}
}

// intercept carries out the plan on m as it is sent; it reports whether
// it dropped or held m.
func (a *epochGap) intercept(m wire.Message) bool {
	if a == nil {
		return false
	}
	r := a.r
	if r.w.now >= r.gst {
		if a.phase < egDone {
			a.end("GST came first")
		}
		return false
	}
	if m.Append != nil && (a.phase == egWatch || a.phase == egCut) {
		a.watch(m)
	}
	if a.phase == egDone || a.phase == egGivenUp || a.x == nil {
		return false
	}
	x := a.x.id
	if a.phase == egCut {
		if m.From == x || m.To == x {
			r.net.lost++
			return true
		}
		return false
	}
	lost := false
	switch {
	case m.From == a.old.id && m.Append != nil && !slices.Contains(a.holders, m.To):
		lost = true // L's appends reach the holders only
	case m.From == a.old.id && m.Append != nil && a.phase == egStop:
		a.held = append(a.held, m)
		return true
	case m.To == a.old.id && m.Lease != nil && (m.From == x || a.phase == egLearn):
		lost = true
	case m.To == x && m.Lease != nil:
		lost = m.Lease.Newest <= a.gap || len(m.Lease.NewestMembers) == 0 // news of G, or none
	case m.To == x || m.From == x:
		lost = m.Lease == nil && a.phase != egLearn
	}
	if lost {
		r.net.lost++
	}
	return lost
}

// watch looks for the stop edicts that begin G and N in a leader's
// append.
func (a *epochGap) watch(m wire.Message) {
	r := a.r
	p := r.procs[m.From]
	for _, e := range m.Append.Entries {
		if wire.EntryKind(e.Kind) != wire.EntryStop {
			continue
		}
		mem, err := wire.DecodeMembership(e.Data)
		if err != nil {
			a.giveUp(fmt.Sprintf("stop edict %d does not decode: %v", e.Index, err))
			return
		}
		switch {
		case a.phase == egWatch && mem.Config.Epoch == a.gap:
			a.cut(p, mem.Config.Members)
			return
		case a.phase == egCut && mem.Config.Epoch == a.gap+1:
			a.stop(p, mem.Config.Members)
			return
		}
	}
}

// cut is phase 1: X is cut off from everyone.
func (a *epochGap) cut(p *lproc, members []edict.ProcessID) {
	r := a.r
	if r.w.now > r.gst-int64(epochGapSpan) {
		a.giveUp(fmt.Sprintf("G's stop edict came at %v, too close to GST", time.Duration(r.w.now)))
		return
	}
	st := p.core.Status(p.now(r.w.now))
	a.prev, a.members = slices.Clone(st.Members), slices.Clone(members)
	// X: a member of E and G, not the lowest of G (the detectors' choice
	// for G's leader), not E's leader.
	var cands []edict.ProcessID
	for _, id := range slices.Sorted(slices.Values(members))[1:] {
		if id != p.id && slices.Contains(a.prev, id) {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		a.giveUp(fmt.Sprintf("no member of epochs %d and %d to cut off but the lowest", a.gap-1, a.gap))
		return
	}
	a.x = r.procs[cands[r.w.rng.IntN(len(cands))]]
	a.phase, a.cutAt = egCut, r.w.now
	r.w.at(min(r.w.now+int64(epochGapSpan), r.gst), func() {
		if a.phase == egCut {
			a.giveUp("N's stop edict did not come in time")
		}
	})
}

// stop is phase 2: L sent N's stop edict; the adversary picks the holders
// and holds L's appends to them until its next renewal.
func (a *epochGap) stop(p *lproc, next []edict.ProcessID) {
	r := a.r
	st := p.core.Status(p.now(r.w.now))
	a.next = slices.Clone(next)
	switch {
	case !st.IsLeader:
		a.giveUp(fmt.Sprintf("%v sent N's stop edict without leading", p.id))
		return
	case st.Epoch != a.gap:
		a.giveUp(fmt.Sprintf("%v sent N's stop edict leading epoch %d", p.id, st.Epoch))
		return
	case p == a.x || !slices.Contains(next, a.x.id) || !slices.Contains(next, p.id):
		a.giveUp(fmt.Sprintf("leader %v, X %v: not both members of N %v", p.id, a.x.id, next))
		return
	}
	qG, qN := len(st.Members)/2+1, len(next)/2+1
	if qG >= qN {
		a.giveUp(fmt.Sprintf("a quorum of G %v is a quorum of N %v", st.Members, next))
		return
	}
	var followers []edict.ProcessID
	for _, id := range st.Members {
		if id != p.id && id != a.x.id {
			followers = append(followers, id)
		}
	}
	if len(followers) < qG-1 {
		a.giveUp(fmt.Sprintf("G %v has no quorum without X", st.Members))
		return
	}
	r.w.rng.Shuffle(len(followers), func(i, j int) { followers[i], followers[j] = followers[j], followers[i] })
	a.old, a.expiry = p, st.LeaseExpiry
	a.holders = slices.Sorted(slices.Values(followers[:qG-1]))
	a.phase, a.stopAt = egStop, r.w.now
	deadline := r.w.now + int64(4*r.sc.MaxLease())
	r.w.after(r.sc.RoundTrip/10, func() { a.poll(deadline) })
}

// poll follows the plan: it releases the held appends once L renewed,
// and ends the plan once L's lease has ended.
func (a *epochGap) poll(deadline int64) {
	r := a.r
	if r.violation != "" || a.phase == egDone || a.phase == egGivenUp {
		return
	}
	l := a.old
	leads := l.up && r.believesLeader(l)
	switch {
	case a.phase == egStop && !leads:
		a.end(fmt.Sprintf("%v lost its lease before it renewed", l.id))
		return
	case a.phase == egStop:
		if st := l.core.Status(l.now(r.w.now)); st.IsLeader && st.LeaseExpiry.After(a.expiry) {
			a.phase, a.spreadAt = egSpread, r.w.now
			a.flush()
		}
	case !leads:
		a.end("")
		return
	case a.phase == egLearn && a.x.up && r.w.now >= a.tickAt:
		// The runtime ticks X's core every d (it may tick it at any
		// time), so that X acts on its detector's mistake as soon as its
		// log allows, not at its next idle tick, up to i later.
		a.tickAt = r.w.now + int64(r.sc.RoundTrip)
		r.call(a.x, (*replog.Driver).Tick)
	}
	if r.w.now >= deadline {
		a.end("deadline passed while L led")
		return
	}
	r.w.after(r.sc.RoundTrip/10, func() { a.poll(deadline) })
}

// epochChanged: p moved to another epoch, or learned one TERMINATED. For
// X, in the spread phase, that is E's wedging completed: phase 4.
func (a *epochGap) epochChanged(p *lproc) {
	if a == nil || p != a.x || a.phase != egSpread && a.phase != egStop {
		return
	}
	r := a.r
	a.flush()
	a.phase, a.learnAt = egLearn, r.w.now
	for _, id := range r.ids {
		if id != p.id {
			p.detector.Observe(elect.Observation{Kind: elect.ProcessDown, Process: id, At: p.now(r.w.now)})
		}
	}
}

// flush delivers the held appends, in the order they were sent.
func (a *epochGap) flush() {
	r := a.r
	for i, m := range a.held {
		r.w.after(r.sc.MinDelay+time.Duration(i)*time.Microsecond, func() { r.deliver(m) })
	}
	a.held = nil
}

// end is phase 5: the network carries everything again, and X's detector
// learns the truth.
func (a *epochGap) end(why string) {
	r := a.r
	learned := a.phase == egLearn
	a.phase, a.endAt = egDone, r.w.now
	if why != "" {
		a.note = why
	}
	a.flush()
	if learned && a.x.up {
		for _, q := range r.upProcs() {
			if q != a.x {
				a.x.detector.Observe(elect.Observation{Kind: elect.ProcessUp, Process: q.id, At: a.x.now(r.w.now)})
			}
		}
	}
}

func (a *epochGap) giveUp(why string) {
	a.flush()
	a.phase, a.note = egGivenUp, why
}

// summary describes the plan, for a failure message.
func (a *epochGap) summary() string {
	if a == nil {
		return ""
	}
	if a.x == nil {
		return fmt.Sprintf("\n  epoch-gap: aimed at epoch %d, not carried out (%s)", a.gap, a.note)
	}
	at := func(t int64) string {
		if t == 0 {
			return "-"
		}
		return time.Duration(t).String()
	}
	old := edict.None
	if a.old != nil {
		old = a.old.id
	}
	s := fmt.Sprintf("\n  epoch-gap: X=%v misses epoch %d %v (of %d %v, %d %v), led by %v; holders %v; cut %s, stop %s, spread %s, learn %s, end %s",
		a.x.id, a.gap, a.members, a.gap-1, a.prev, a.gap+1, a.next, old, a.holders, at(a.cutAt), at(a.stopAt), at(a.spreadAt), at(a.learnAt), at(a.endAt))
	if a.note != "" {
		s += " (" + a.note + ")"
	}
	return s
}
