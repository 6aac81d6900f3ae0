package omegasim

import (
	"fmt"
	"slices"
	"time"

	"github.com/edictlog/edictlog/edict"
	"github.com/edictlog/edictlog/internal/sim"
)

// point is who was leader (§3.1: the process every alive process names)
// after the events at one instant; None if there was none.
type point struct {
	at     time.Duration
	leader edict.ProcessID
	alive  map[edict.ProcessID]bool
}

// replay rebuilds the leader over time from the simulator's Changes and
// the crashes and recoveries. The paper's crashes are permanent (§2); a
// recovered process is a new one, and until its opinion first matches the
// leader of the others it is "joining" and not counted — otherwise a
// process that had just restarted and not yet heard anyone would count as
// demoting the leader, which §3.3 does not mean. Every change at one
// instant is applied before the leader is read.
func replay(members []edict.ProcessID, changes []sim.Change, life []lifeEvent) []point {
	alive := map[edict.ProcessID]bool{}
	joining := map[edict.ProcessID]bool{}
	opinion := map[edict.ProcessID]edict.ProcessID{}
	for _, m := range members {
		alive[m] = true
	}
	var out []point
	ci, li := 0, 0
	for ci < len(changes) || li < len(life) {
		t := time.Duration(1<<63 - 1)
		if ci < len(changes) {
			t = changes[ci].At
		}
		if li < len(life) && life[li].at < t {
			t = life[li].at
		}
		for ; li < len(life) && life[li].at == t; li++ {
			e := life[li]
			alive[e.p], joining[e.p] = e.up, e.up
		}
		for ; ci < len(changes) && changes[ci].At == t; ci++ {
			opinion[changes[ci].Process] = changes[ci].To
		}
		lead := common(members, alive, joining, opinion)
		for p := range joining {
			if joining[p] && lead != edict.None && opinion[p] == lead {
				joining[p] = false
			}
		}
		out = append(out, point{at: t, leader: lead, alive: clone(alive)})
	}
	return out
}

// common is the process every alive, non-joining process names, if it is
// alive; None otherwise.
func common(members []edict.ProcessID, alive, joining map[edict.ProcessID]bool, opinion map[edict.ProcessID]edict.ProcessID) edict.ProcessID {
	counted := func(p edict.ProcessID) bool { return alive[p] && !joining[p] }
	if !slices.ContainsFunc(members, counted) {
		counted = func(p edict.ProcessID) bool { return alive[p] }
	}
	lead, first := edict.None, true
	for _, p := range members {
		if !counted(p) {
			continue
		}
		if first {
			lead, first = opinion[p], false
		} else if opinion[p] != lead {
			return edict.None
		}
	}
	if lead == edict.None || !alive[lead] {
		return edict.None
	}
	return lead
}

func clone(m map[edict.ProcessID]bool) map[edict.ProcessID]bool {
	c := make(map[edict.ProcessID]bool, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// stabilityViolations lists every instant t at which a leader ℓ stopped
// being leader although it was alive and accessible during [t−kδ, t]
// (§3.3). ℓ is accessible from max(gst, goodFrom[ℓ], its last start).
func stabilityViolations(pts []point, life []lifeEvent, gst time.Duration, goodFrom map[edict.ProcessID]time.Duration, kDelta time.Duration) []string {
	var out []string
	prev := edict.None
	for _, pt := range pts {
		if prev != edict.None && pt.leader != prev && pt.alive[prev] {
			since := max(gst, goodFrom[prev])
			for _, e := range life {
				if e.p == prev && e.up && e.at <= pt.at {
					since = max(since, e.at)
				}
			}
			if since <= pt.at-kDelta {
				out = append(out, fmt.Sprintf("t=%v: %v demoted (to %v), accessible since %v", pt.at, prev, pt.leader, since))
			}
		}
		prev = pt.leader
	}
	return out
}

// omegaHolds checks §3.1 from a stabilization time on: one process was
// leader at from and at every later point up to end.
func omegaHolds(pts []point, from, end time.Duration) error {
	lead := edict.None
	for _, pt := range pts {
		if pt.at <= from {
			lead = pt.leader
			continue
		}
		if pt.at > end {
			break
		}
		if pt.leader != lead || lead == edict.None {
			return fmt.Errorf("Ω: leader %v at %v, %v at %v", lead, from, pt.leader, pt.at)
		}
	}
	if lead == edict.None {
		return fmt.Errorf("Ω: no leader at %v", from)
	}
	return nil
}

// linksUsed checks communication efficiency (§3.2) on counts taken after
// ResetCounts: at most n−1 directed links carried messages, all from the
// leader.
func linksUsed(sent map[[2]edict.ProcessID]int, leader edict.ProcessID, n int) (links int, err error) {
	var foreign []string
	for l, c := range sent {
		if c == 0 {
			continue
		}
		links++
		if l[0] != leader {
			foreign = append(foreign, fmt.Sprintf("%v→%v", l[0], l[1]))
		}
	}
	slices.Sort(foreign)
	if links > n-1 || len(foreign) > 0 {
		return links, fmt.Errorf("%d links used (n−1 = %d); not from leader %v: %v", links, n-1, leader, foreign)
	}
	return links, nil
}
