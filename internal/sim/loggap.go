package sim

import (
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
)

// A membership change leaves the cluster leaderless not at all if the
// leader is a member of the next epoch, and for a few round trips if it
// removed itself (docs/protocol.md, "Membership changes that keep the
// leader"). With LogScenario.GapBound set, a run fails on either count
// while no fault befell the cluster: none in effect when the change's
// stop edict committed or the leader stepped down (a process down or
// frozen, a link blocked or slowed), and none since (a crash, restart,
// suspend, starvation, or a change of the network's links). A fault
// excuses it: the change then waits for the fault like anything else.
//
//   - A change that keeps the leader: from the moment its leader learns
//     the stop edict committed until a reign of the next epoch is ready,
//     some process that is up serves lease reads at every event
//     (keepWatch, checked by checkKept).
//   - A change that removes the leader: from the leader's stepping down
//     to end its epoch (with Force) or to transfer leadership (retiring)
//     until a reign of a later epoch, or of the same one after a
//     retirement's transfer, is ready: at most GapBound.

// gapReason is the reason a leader gives for stepping down when it ends
// its epoch after a stop edict (replog.Core's succeed).
const gapReason = "the next epoch holds the stop edict; wedging"

// transferReason is the reason a leader gives for stepping down when it
// transfers leadership; one that is retiring opens a gap as well.
const transferReason = "leadership transferred"

// logGap is the stretch being timed: its start, the epoch that ends, the
// faults counted when it began, and the leader that ended the epoch.
type logGap struct {
	start  int64
	epoch  uint64
	faults int
	leader edict.ProcessID
	// timed counts the stretches timed in the run, and longest is the
	// longest, for the report (LogResult).
	timed   int
	longest time.Duration
	total   time.Duration
	// retire: the stretch is a retiring leader's transfer, which a reign
	// of the same epoch ends.
	retire bool
	// keep is the change that keeps the leader being watched.
	keep keepWatch
	// kept counts the changes that kept a leader throughout.
	kept int
}

// keepWatch is a change that keeps the leader: the epoch it begins, the
// leader, and the faults counted when the leader learned its stop edict
// committed. Zero epoch: none.
type keepWatch struct {
	epoch  uint64
	leader edict.ProcessID
	faults int
	since  int64
}

func (r *lrun) faultCount() int { return r.faults + r.net.changes }

// faulty reports whether a fault is in effect now: a link blocked or
// slowed, a started process down or frozen.
func (r *lrun) faulty() bool {
	for _, tos := range r.net.blocked {
		for _, b := range tos {
			if b {
				return true
			}
		}
	}
	for _, tos := range r.net.slow {
		for _, until := range tos {
			if until > r.w.now {
				return true
			}
		}
	}
	for _, p := range r.procs {
		if p.started && (!p.up || p.frozenUntil > r.w.now) {
			return true
		}
	}
	return false
}

// gapEvent times the stretches: a SteppedDown with gapReason opens one, a
// BecameLeader in a later epoch closes it. It also opens the watch of a
// change that keeps the leader (a ConfigChanged at a process that serves
// lease reads, naming a new epoch of which it is a member) and closes it
// (that epoch's BecameLeader).
func (r *lrun) gapEvent(p *lproc, ev replog.Event) {
	bound := r.sc.GapBound
	if bound == 0 {
		return
	}
	g := &r.gap
	if k := &g.keep; ev.Kind == replog.ConfigChanged && ev.Membership != nil && ev.Membership.Config.Epoch > k.epoch &&
		slices.Contains(ev.Membership.Config.Members, p.id) && p.core.CanServeLease(p.now(r.w.now)) &&
		p.core.Status(p.now(r.w.now)).Reign.Epoch+1 == ev.Membership.Config.Epoch && !r.faulty() {
		*k = keepWatch{epoch: ev.Membership.Config.Epoch, leader: p.id, faults: r.faultCount(), since: r.w.now}
	}
	if k := &g.keep; ev.Kind == replog.BecameLeader && k.epoch != 0 && ev.Epoch >= k.epoch {
		if r.faultCount() == k.faults {
			g.kept++
		}
		k.epoch = 0
	}
	switch {
	case ev.Kind == replog.SteppedDown && g.start == 0 && !r.faulty() &&
		(ev.Reason == gapReason || ev.Reason == transferReason && p.core.Status(p.now(r.w.now)).Retiring == p.id):
		start, faults := r.w.now, r.faultCount()
		g.start, g.epoch, g.faults, g.leader, g.retire = start, ev.Epoch, faults, p.id, ev.Reason == transferReason
		r.w.after(bound, func() {
			if g.start == start && r.faultCount() == faults {
				r.fail("%v ended epoch %d for a membership change at t=%v, and no reign of a later epoch was ready %v later, with no fault meanwhile: a change that keeps the leader, or hands it over, must cost a few round trips",
					g.leader, g.epoch, time.Duration(start), bound)
			}
		})
	case ev.Kind == replog.BecameLeader && g.start != 0 && (ev.Epoch > g.epoch || g.retire && ev.Epoch == g.epoch):
		if r.faultCount() == g.faults {
			g.timed++
			g.longest = max(g.longest, time.Duration(r.w.now-g.start))
			g.total += time.Duration(r.w.now - g.start)
		}
		g.start = 0
	}
}

// checkKept fails the run if, during a change that keeps the leader and
// with no fault since it began, no process that is up serves lease reads.
func (r *lrun) checkKept() {
	k := &r.gap.keep
	if r.sc.GapBound == 0 || k.epoch == 0 || r.faultCount() != k.faults {
		return
	}
	for _, id := range r.ids {
		if q := r.procs[id]; q.up && q.frozenUntil <= r.w.now && q.core.CanServeLease(q.now(r.w.now)) {
			return
		}
	}
	r.fail("%v learned at t=%v that its stop edict for epoch %d committed, and at t=%v, with no fault meanwhile and no reign of epoch %d ready, no process serves lease reads: a change that keeps the leader must keep it throughout",
		k.leader, time.Duration(k.since), k.epoch, time.Duration(r.w.now), k.epoch)
}
