package sim

import (
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/replog"
)

// A membership change that keeps the leader, or removes it, leaves the
// cluster leaderless only for a few round trips (docs/protocol.md,
// "Membership changes that keep the leader"): from the moment the old
// epoch's leader gives its lease up to end its epoch until a reign of the
// next epoch is ready. With LogScenario.GapBound set, a run fails if that
// stretch lasts longer than the bound while no fault befell the cluster:
// none in effect when it began (a process down or frozen, a link blocked
// or slowed), and none since (a crash, restart, suspend, starvation, or a
// change of the network's links). A fault excuses it: the change then
// waits for the fault like anything else.

// gapReason is the reason a leader gives for stepping down when it ends
// its epoch after a stop edict (replog.Core's succeed).
const gapReason = "the next epoch holds the stop edict; wedging"

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
// BecameLeader in a later epoch closes it.
func (r *lrun) gapEvent(p *lproc, ev replog.Event) {
	bound := r.sc.GapBound
	if bound == 0 {
		return
	}
	g := &r.gap
	switch {
	case ev.Kind == replog.SteppedDown && ev.Reason == gapReason && g.start == 0 && !r.faulty():
		start, faults := r.w.now, r.faultCount()
		*g = logGap{start: start, epoch: ev.Epoch, faults: faults, leader: p.id, timed: g.timed, longest: g.longest}
		r.w.after(bound, func() {
			if g.start == start && r.faultCount() == faults {
				r.fail("%v ended epoch %d for a membership change at t=%v, and no reign of a later epoch was ready %v later, with no fault meanwhile: a change that keeps the leader, or hands it over, must cost a few round trips",
					g.leader, g.epoch, time.Duration(start), bound)
			}
		})
	case ev.Kind == replog.BecameLeader && g.start != 0 && ev.Epoch > g.epoch:
		if r.faultCount() == g.faults {
			g.timed++
			g.longest = max(g.longest, time.Duration(r.w.now-g.start))
		}
		g.start = 0
	}
}
