package sim

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/elect"
	"github.com/edictlog/edictlog/wire"
)

// The Figure 8 adversary (LogScenario.Figure8) plays, before GST, the
// schedule of crashes and lost appends of Figure 8 of the Raft paper
// against five processes: the case "commit only the current reign's
// entries" (internal/replog/leader.go maybeCommit) is for. Random faults
// (log-figure8) almost never line its four reigns up; this adversary does
// it on purpose, each step timed by what it sees on the wire. The faults
// are ones a deployment sees: crash-restarts that keep the stores, log
// connections that break while lease connections hold (as
// ConnectionCuts), and appends lost on the way — chosen by the adversary.
//
// A round, the processes named by their role in it:
//
//  1. tail: the leader L keeps leading, but its appends reach only one
//     follower B: its log connections to the three others break. Once B
//     acknowledges an entry past where L's log stood when the round
//     began (the tail, on L and B: a minority, so uncommitted), L and B
//     crash.
//  2. hidden reign: the three others elect one of them, N, whose quorum
//     is all three and lacks the tail. N appends its reign-start edict
//     at hiddenIndex, at or below the tail's first index, with a higher
//     stamp than the tail's. N's log connections break as its reign
//     begins, and it crashes once the edict is stored: the edict is on N
//     alone.
//  3. return: L restarts and, as the lowest live id, leads again with the
//     two survivors S. Its log is the best of that quorum, so it appends
//     its reign-start edict after the tail, then backs up and replicates
//     the tail to S one entry per append (MaxAppendEntries 1). Every
//     append that carries the new reign-start edict is lost. Once L has
//     received both survivors' acknowledgements up to hiddenIndex — the
//     tail from there is on L and S, a quorum, the reign-start edict
//     only on L — L crashes.
//  4. overwrite: N restarts. The only quorum left is N and S, and N's
//     log, ending in the hidden reign-start edict, is the best of it by
//     stamp: that reign overwrites the tail on S from hiddenIndex.
//
// With the rule in force nothing is wrong: the tail was never committed.
// Without it, L commits the tail in step 3 on the survivors' acks, and
// step 4 overwrites a committed index, which the checkers see (a
// committed index taken by another stamp, or a follower's core asserting
// that it truncates a committed index). The schedule is the same either
// way: nothing in it looks at commit indexes.
//
// Each step waits for the protocol event it needs and gives the round up
// after a deadline (a leader that did not come, a quorum that formed
// otherwise, an acknowledgement lost for good); ending a round restarts
// what it crashed. The roles are picked so that LowestLive brings L back
// in step 3: L must be lower than both survivors, so B is drawn among the
// followers that leave such survivors. A process the adversary restarts
// learns from the failure detector who is down, as a member rejoining a
// real cluster learns it from gossip; without that, a restarted process
// names a crashed lower id weak leader and waits for it until GST.
type figure8 struct {
	r     *lrun
	stage figure8Stage
	// moving: the step's event was seen and the move to the next stage
	// is scheduled; the stage's losses stay in force until then.
	moving   bool
	deadline int64 // real time at which the round is given up
	nextArm  int64 // no new round before this real time

	old, tail, rival *lproc
	// armIndex is L's last index when the round began: the entries above
	// it are the tail.
	armIndex uint64
	// hiddenIndex is the index of the hidden reign-start edict (step 2):
	// the overwrite truncates the survivors' logs from there.
	hiddenIndex uint64
	// returning is the leader of step 3 and reign its reign-start
	// edict's stamp; acked are the followers that acknowledged, in that
	// reign, entries up to hiddenIndex at least.
	returning *lproc
	reign     edict.Stamp
	acked     map[edict.ProcessID]bool
	// down are the processes the round crashed and has not restarted.
	down []*lproc
}

type figure8Stage uint8

const (
	figure8Idle figure8Stage = iota
	figure8Tail
	figure8Hidden
	figure8Return
	figure8Overwrite
)

// figure8StageTime bounds each step of a round: a lease to lapse, a
// restart quarantine, a campaign, with room for a back-off.
const figure8StageTime = 2 * time.Second

// figure8RoundTime is about what a round takes: three leases to lapse
// or quarantines to pass, each about MaxLease, and the campaigns.
const figure8RoundTime = 2 * time.Second

// startFigure8 installs the adversary and checks, now and then, whether a
// round can begin or the one under way is overdue.
func (r *lrun) startFigure8() {
	// The first round begins at a random point of the leader's first
	// reign, with more or less of its log committed.
	r.fig8 = &figure8{r: r, nextArm: int64(r.w.between(0, 600*time.Millisecond))}
	r.every(50*time.Millisecond, r.gst, r.fig8.tick)
}

func (a *figure8) tick() {
	r := a.r
	if a.moving {
		return
	}
	if a.stage != figure8Idle {
		switch {
		case r.w.now >= a.deadline:
			a.endRound()
		case a.stage == figure8Overwrite && a.readyLeader() != nil:
			// The overwriting reign started: the round is over.
			a.endRound()
		}
		return
	}
	// A round takes three lease lapses or quarantines: begin it only if
	// it can end before GST.
	if r.w.now < a.nextArm || r.w.now+int64(figure8RoundTime) > r.gst {
		return
	}
	a.arm()
}

// arm begins a round if the cluster looks as the round needs: five
// members, all up, and a leader whose reign has started.
func (a *figure8) arm() {
	r := a.r
	l := a.readyLeader()
	if l == nil || len(r.upProcs()) != len(r.ids) {
		return
	}
	st := l.core.Status(l.now(r.w.now))
	if len(st.Members) != 5 {
		return
	}
	var tails []*lproc
	for _, b := range st.Members {
		if b == l.id {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(st.Members), func(p edict.ProcessID) bool { return p == l.id || p == b })
		slices.Sort(rest)
		// rest[0] will lead step 2 (the lowest live id); L returns in
		// step 3 only if it is lower than the other two.
		if l.id < rest[1] {
			tails = append(tails, r.procs[b])
		}
	}
	if len(tails) == 0 {
		return
	}
	*a = figure8{r: r, stage: figure8Tail, deadline: r.w.now + int64(figure8StageTime),
		old: l, tail: tails[r.w.rng.IntN(len(tails))], armIndex: st.LastIndex}
}

// lose is the adversary's view of every message sent: it reports whether
// the message is lost, and moves the round on when a message shows that
// its step is done.
func (a *figure8) lose(m wire.Message) bool {
	if a == nil || a.stage == figure8Idle || a.r.w.now >= a.r.gst {
		return false
	}
	r := a.r
	switch a.stage {
	case figure8Tail:
		if m.From == a.old.id && m.Append != nil && m.To != a.tail.id {
			return true
		}
		if rep := m.AppendReply; !a.moving && rep != nil && m.From == a.tail.id && m.To == a.old.id && rep.Success && rep.LastIndex > a.armIndex {
			// B holds part of the tail durably (the reply leaves after
			// its batch). Let a few more tail entries reach it first.
			a.moveAfter(r.w.between(0, 10*time.Millisecond), func() {
				a.crash(a.old)
				a.crash(a.tail)
				a.stage = figure8Hidden
			})
		}
	case figure8Hidden:
		if m.Append == nil {
			return false
		}
		if a.rival == nil && a.carriesReignStart(m.Append) {
			// The hidden reign began; its reign-start edict is stored
			// in the batch this append left ahead of. Crash N before
			// anything of its reign gets out.
			a.rival, a.hiddenIndex = r.procs[m.From], a.reignStartIndex(m.Append)
			a.moveAfter(r.w.between(time.Millisecond, 5*time.Millisecond), func() {
				a.crash(a.rival)
				a.restart(a.old)
				a.stage = figure8Return
			})
		}
		return a.rival != nil && m.From == a.rival.id
	case figure8Return:
		ap := m.Append
		if ap == nil || !a.carriesReignStart(ap) {
			return false
		}
		if cmp, err := ap.Reign.Compare(a.reign); err == nil && cmp > 0 {
			// A reign began (or began again, its first lease lost):
			// the step is about the newest.
			a.returning, a.reign, a.acked = r.procs[m.From], ap.Reign, map[edict.ProcessID]bool{}
		}
		return ap.Reign.Equal(a.reign)
	}
	return false
}

// delivered sees every message handed to a live process, after it took
// it. In step 3 it counts the acknowledgements the returning leader
// received: one that was sent may still be lost on the way.
func (a *figure8) delivered(m wire.Message) {
	if a == nil || a.stage != figure8Return || a.moving || a.returning == nil || a.r.w.now >= a.r.gst {
		return
	}
	r := a.r
	rep := m.AppendReply
	if rep == nil || m.To != a.returning.id || !a.returning.up || !rep.Success || !rep.Reign.Equal(a.reign) || rep.LastIndex < a.hiddenIndex {
		return
	}
	a.acked[m.From] = true
	for _, p := range r.upProcs() {
		if p != a.returning && !a.acked[p.id] {
			return
		}
	}
	// With the leader, the live followers are a quorum that holds the
	// tail up to hiddenIndex, and the leader knows it; none holds its
	// reign-start edict. Crash it soon (meanwhile its heartbeats may tell
	// the followers its commit index), and bring the hidden reign's
	// leader back.
	a.moveAfter(r.w.between(0, 50*time.Millisecond), func() {
		a.crash(a.returning)
		a.restart(a.rival)
		a.stage = figure8Overwrite
	})
}

// carriesReignStart reports whether ap carries its own reign's
// reign-start edict.
func (a *figure8) carriesReignStart(ap *wire.Append) bool { return a.reignStartIndex(ap) != 0 }

// reignStartIndex is the index of ap's own reign's reign-start edict, if
// ap carries it, or 0.
func (*figure8) reignStartIndex(ap *wire.Append) uint64 {
	for _, e := range ap.Entries {
		if e.Kind == wire.EntryKind(wire.EntryReignStart) && e.Stamp.Equal(ap.Reign) {
			return e.Index
		}
	}
	return 0
}

// moveAfter runs the move to the next stage after d, unless GST comes
// first; the deadline restarts for the next step.
func (a *figure8) moveAfter(d time.Duration, move func()) {
	a.moving = true
	a.r.w.after(d, func() {
		a.moving = false
		if a.r.w.now >= a.r.gst || a.r.violation != "" || a.stage == figure8Idle {
			return
		}
		move()
		a.deadline = a.r.w.now + int64(figure8StageTime)
	})
}

// endRound ends the round, done or given up: the processes it crashed
// restart, and the next round waits a while.
func (a *figure8) endRound() {
	r := a.r
	for _, p := range slices.Clone(a.down) {
		a.restart(p)
	}
	*a = figure8{r: r, nextArm: r.w.now + int64(r.w.between(200*time.Millisecond, time.Second))}
}

// crash crashes p until the round restarts it (GST at the latest).
func (a *figure8) crash(p *lproc) {
	if !p.up {
		return
	}
	a.r.crash(p, time.Duration(a.r.gst-a.r.w.now))
	a.down = append(a.down, p)
}

// restart brings p back, told by the failure detector which processes
// are down.
func (a *figure8) restart(p *lproc) {
	r := a.r
	a.down = slices.DeleteFunc(a.down, func(q *lproc) bool { return q == p })
	if p.up || r.w.now >= r.gst {
		return
	}
	r.restart(p)
	if !p.up {
		return
	}
	for _, id := range r.ids {
		if q := r.procs[id]; q.started && !q.up {
			p.detector.Observe(elect.Observation{Kind: elect.ProcessDown, Process: id, At: p.now(r.w.now)})
		}
	}
}

// readyLeader is a live process whose reign has started (its reign-start
// edict committed), if any.
func (a *figure8) readyLeader() *lproc {
	r := a.r
	for _, p := range r.upProcs() {
		if p.frozenUntil <= r.w.now && p.core.Status(p.now(r.w.now)).IsLeader {
			return p
		}
	}
	return nil
}
